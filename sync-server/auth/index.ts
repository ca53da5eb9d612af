export { AuthService, DEFAULT_SCRYPT_N, MAX_EMAIL_LENGTH, MIN_SCRYPT_N, parse, type Session, type TokenPeers } from './auth-service.js'
export { DEFAULT_LOGIN_LIMITS, LoginThrottle, RateLimited, type LoginAttempt, type LoginThrottleLimits } from './login-throttle.js'
export { SessionEnds, type Revocations, type SessionWatch } from './session-ends.js'
export type { UserDirectory } from './types.js'
