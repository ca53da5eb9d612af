import {
  WeftError,
  tryParseNodePath,
  userPrincipal,
  type NodePath,
  type Permission,
  type PermissionSet,
  type Principal,
  type UserId,
} from '../../../shared/index.js'

/**
 * The one authority model of deferred work (DESIGN.md "Identity and access", "Who a run acts
 * as"; STYLE.md "Engines"): work that runs later, on the server, on somebody's behalf (a run of a
 * Code node, a subscription firing, an agent's round) acts as THE PRINCIPAL WHO ASKED FOR IT,
 * checked when it asked and re-checked when it acts. Never as `system`, never as whoever created
 * the node that carries the request, never with a right the requester does not hold.
 *
 *  1. When the request is made, `request(access, principal, permission, path)` checks it and
 *     returns the `Requester` that the engine keeps ON THE NODE (an activity's `StartedBy` and
 *     `CodePath`), written by `system` in the same write as the request, so a restart or another
 *     writer cannot change who asked.
 *  2. When the work acts, `actAs(access, requester)` re-checks the same permission on the same
 *     path and returns the principal every read and write of the work uses.
 *
 * A check is the access service's answer for that principal at that moment: a role taken away
 * (or a Denied assignment added) between asking and acting refuses the work.
 */

/** Who asked, and the permission they needed on which path. Persisted as plain fields on a node. */
export interface Requester {
  readonly userId: UserId
  readonly permission: Permission
  readonly path: NodePath
}

/** The access check the model needs: `NodeApi` and `AccessService` both provide it. */
export interface PermissionSource {
  permissions(principal: Principal, path: NodePath): PermissionSet
}

function refuse(userId: string, permission: Permission, path: string, when: string): never {
  throw new WeftError('forbidden', `${userId} lacks ${permission} on ${path} ${when}.`)
}

/**
 * The check when the request is made. Only a user asks: `system` work is the engine's own and
 * needs no requester, so a `system` principal here is a bug of the caller (refused).
 */
export function request(access: PermissionSource, principal: Principal, permission: Permission, path: NodePath): Requester {
  if (principal.kind !== 'user') throw new WeftError('forbidden', 'Deferred work is requested by a user; system acts on its own.')
  if (!access.permissions(principal, path).has(permission)) refuse(principal.userId, permission, path, 'to request this')
  return { userId: principal.userId, permission, path }
}

/**
 * The re-check when the work acts: the principal to use for every read and write, or `forbidden`
 * when the requester no longer holds the permission.
 */
export function actAs(access: PermissionSource, requester: Requester): Principal {
  const principal = userPrincipal(requester.userId)
  if (!access.permissions(principal, requester.path).has(requester.permission)) {
    refuse(requester.userId, requester.permission, requester.path, 'any more')
  }
  return principal
}

/**
 * A requester read back from a node's fields (e.g. `StartedBy`, `CodePath`); null when either is
 * missing or malformed, so work with nobody behind it is refused, never run as someone else.
 */
export function requesterOf(userId: unknown, permission: Permission, path: unknown): Requester | null {
  if (typeof userId !== 'string' || userId === '' || userId === 'system') return null
  const p = tryParseNodePath(path)
  return p ? { userId: userId as UserId, permission, path: p } : null
}
