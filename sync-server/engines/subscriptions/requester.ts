import { SYSTEM, principalName, type JsonObject, type MeshNode, type Permission } from '../../../shared/index.js'
import type { NodeApi, WriteRuleHook } from '../../nodes/index.js'
import { hasPermission } from './access.js'
import { ContinuationFailure } from './continuation-registry.js'

/**
 * [SUB13] The EventSubscription's write rule, for every person's write on every transport
 * (create, replace, patch, a Yjs update, a script's Mesh call): `CreatedBy` becomes the writer,
 * written by system with the write. Whoever writes a subscription is who it acts for; the
 * content cannot name anyone else (an operator could name a space's Admin, or nobody, and have
 * the engine act with that Admin's rights, or as the system).
 */
export function subscriptionWriteRule(): WriteRuleHook {
  return ({ principal, after }): JsonObject | undefined => (after.CreatedBy === principal.userId ? undefined : { CreatedBy: principal.userId })
}

/**
 * [SUB13] Whom a subscription acts for, each of whom must hold the continuation's right when it
 * fires (authorize as the caller, execute as system): `CreatedBy` (a person's write stamps it;
 * an engine writes the user it acts for), and the person who made the node, when a person did
 * (a node written before the write rule stamped it holds whatever its writer put there). Empty
 * only for a node the system made that names nobody: the system's own. "system" in `CreatedBy`
 * is a user id like any other (user ids come from email addresses), never the system.
 */
export function requestersOf(node: MeshNode): string[] {
  const out: string[] = []
  const named = node.content.CreatedBy
  if (typeof named === 'string' && named !== '') out.push(named)
  if (node.createdBy !== principalName(SYSTEM) && !out.includes(node.createdBy)) out.push(node.createdBy)
  return out
}

/** Who a firing's effect names as its author (a delivery's CreatedBy, a post's Author); null: the system. */
export function requesterOf(node: MeshNode): string | null {
  return requestersOf(node)[0] ?? null
}

/**
 * [SUB13] Every requester still holds `permission` on `path`, or the firing ends Failed with
 * `refusal`'s message: the right may have been lost between the request and the firing.
 */
export function recheckRequesters(nodes: NodeApi, node: MeshNode, path: string, permission: Permission, refusal: (by: string) => string): void {
  for (const by of requestersOf(node)) {
    if (!hasPermission(nodes, by, path, permission)) throw new ContinuationFailure(refusal(by))
  }
}
