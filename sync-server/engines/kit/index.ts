export { request, actAs, requesterOf } from './authority.js'
export type { Requester, PermissionSource } from './authority.js'
