import {
  Role,
  SYSTEM,
  permissionsOf,
  selfAndAncestors,
  topLevel,
  tryParseNodePath,
  userPrincipal,
  type NodePath,
  type Permission,
  type PermissionSet,
  type Principal,
  type UserId,
} from '../../../shared/index.js'
import type { NodeApi } from '../../nodes/types.js'

/** System queries may ask for everything: the node service pages through storage for them. */
export const ALL = Number.MAX_SAFE_INTEGER

/** The server's node service also exposes its access service's answer; NodeApi does not promise it. */
interface WithPermissions {
  permissions(principal: Principal, path: NodePath): PermissionSet
}

function authoritative(nodes: NodeApi): WithPermissions | null {
  const p = (nodes as Partial<WithPermissions>).permissions
  return typeof p === 'function' ? (nodes as unknown as WithPermissions) : null
}

/**
 * Does the user hold `permission` on `path` right now? Asks the server's access service when the
 * node API exposes it (in-memory, the same answer every transport gets); otherwise re-derives it
 * from `_Access` assignments (effectiveRole). Used to authorize invites and to re-check the
 * requester's right when a deferred effect fires (authorize as the caller, execute as system).
 */
export async function hasPermission(nodes: NodeApi, userId: string, rawPath: string, permission: Permission): Promise<boolean> {
  const path = tryParseNodePath(rawPath)
  if (!path) return false
  const server = authoritative(nodes)
  if (server) return server.permissions(userPrincipal(userId as UserId), path).has(permission)
  const role = await effectiveRole(nodes, userId, path)
  return role !== null && permissionsOf(role).has(permission)
}

export function isAdminOf(nodes: NodeApi, userId: string, path: string): Promise<boolean> {
  return hasPermission(nodes, userId, path, 'ManageAccess')
}

/**
 * A user's effective role on a path re-derived from `_Access` assignments as system, with the
 * server's rules (DESIGN.md "Identity and access"): for the user and each group they belong to,
 * the CLOSEST assignment counts and a Denied one blocks what that subject inherits; the result
 * is the highest role over subjects.
 */
export async function effectiveRole(nodes: NodeApi, userId: string, rawPath: string): Promise<Role | null> {
  const path = tryParseNodePath(rawPath)
  if (!path) return null
  if (topLevel(path) === userId) return 'Admin'
  const decided = new Set<string>()
  let best: Role | null = null
  for (const level of selfAndAncestors(path)) {
    const assignments = await nodes.query(SYSTEM, { parent: `${level}/_Access` as NodePath, nodeType: 'AccessAssignment', limit: ALL })
    for (const a of assignments) {
      const subject = typeof a.content.Subject === 'string' ? a.content.Subject : ''
      if (!subject || decided.has(subject)) continue
      if (subject !== userId && !(await isMember(nodes, userId, subject))) continue
      decided.add(subject)
      const role = a.content.Role
      if (a.content.Denied === true || !Role.isMember(role)) continue
      if (best === null || Role.number[role] > Role.number[best]) best = role
    }
  }
  return best
}

async function isMember(nodes: NodeApi, userId: string, group: string): Promise<boolean> {
  const path = tryParseNodePath(`${group}/${userId}_Membership`)
  if (!path) return false
  const node = await nodes.get(SYSTEM, path)
  return node !== null && node.nodeType === 'Membership'
}

export function higherRole(a: Role, b: Role): Role {
  return Role.number[a] >= Role.number[b] ? a : b
}
