import {
  Role,
  tryParseNodePath,
  userPrincipal,
  type Permission,
  type UserId,
} from '../../../shared/index.js'
import type { NodeApi } from '../../nodes/index.js'

/** System queries may ask for everything: the node service pages through storage for them. */
export const ALL = Number.MAX_SAFE_INTEGER

/**
 * Does the user hold `permission` on `path` right now? The server's one access check (the same
 * answer every transport gets). Used to authorize invites, and to re-check the requester's right
 * when a deferred effect fires (authorize as the caller, execute as system).
 */
export function hasPermission(nodes: NodeApi, userId: string, rawPath: string, permission: Permission): boolean {
  const path = tryParseNodePath(rawPath)
  const user = tryParseNodePath(userId)
  if (!path || !user || user.includes('/')) return false
  return nodes.permissions(userPrincipal(user as string as UserId), path).has(permission)
}

export function isAdminOf(nodes: NodeApi, userId: string, path: string): boolean {
  return hasPermission(nodes, userId, path, 'ManageAccess')
}

export function higherRole(a: Role, b: Role): Role {
  return Role.number[a] >= Role.number[b] ? a : b
}
