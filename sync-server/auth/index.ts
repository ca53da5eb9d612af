export { AuthService, parse } from './auth-service.js'
export type { UserDirectory } from './types.js'
