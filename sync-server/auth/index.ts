export { AuthService, parse, type TokenPeers } from './auth-service.js'
export { DEFAULT_LOGIN_LIMITS, LoginThrottle, RateLimited, type LoginAttempt, type LoginThrottleLimits } from './login-throttle.js'
export type { UserDirectory } from './types.js'
