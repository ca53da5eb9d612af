import {
  Role,
  SYSTEM,
  isJsonObject,
  tryParseNodePath,
  type EventDelivery,
  type EventSubscription,
  type JsonObject,
  type MeshNode,
  type NodePath,
} from '../../../shared/index.js'
import { ACCESS_SEGMENT, assignmentLabel } from '../../access/access-service.js'
import type { NodeApi } from '../../nodes/types.js'
import { higherRole, isAdminOf } from './access.js'
import { ContinuationFailure, type ContinuationInput, type ContinuationRegistry } from './continuation-registry.js'

/**
 * The platform's continuations. Each is an idempotent create-or-update at a deterministic path
 * with its re-check inside the update function, so the live and the reconcile path (or a replay
 * after kill -9) can both run it and the mesh ends the same.
 */
export function registerPlatformContinuations(registry: ContinuationRegistry): void {
  registry.claim('GrantSpaceAccess', 'platform', grantSpaceAccess)
  registry.claim('AddToGroup', 'platform', addToGroup)
  registry.claim('PostThreadMessage', 'platform', postThreadMessage)
  registry.claim('DeliverToNode', 'platform', deliverToNode)
}

function requirePath(raw: string | null | undefined, what: string): NodePath {
  const path = tryParseNodePath(raw)
  if (!path) throw new ContinuationFailure(`${what} ${JSON.stringify(raw ?? null)} is not a valid node path.`)
  return path
}

function requireSubject(input: ContinuationInput, continuation: string): string {
  const subject = input.subjectId
  if (!subject || !tryParseNodePath(subject) || subject.includes('/')) {
    throw new ContinuationFailure(`${continuation} needs a user as subject (got ${JSON.stringify(subject)}).`)
  }
  return subject
}

function requireRole(raw: string | null | undefined, fallback: Role | null): Role | null {
  if (raw === null || raw === undefined || raw === '') return fallback
  if (!Role.isMember(raw)) throw new ContinuationFailure(`Unknown Role ${JSON.stringify(raw)}.`)
  return raw
}

/**
 * Authorize as the caller, execute as system: the invite was checked when it was made, and is
 * checked again now, because the inviter may have lost the right in between.
 */
async function recheckRequester(nodes: NodeApi, sub: EventSubscription, scope: string): Promise<void> {
  const by = sub.CreatedBy
  if (!by || by === 'system') return
  if (!isAdminOf(nodes, by, scope)) {
    throw new ContinuationFailure(`${by} is no longer Admin of ${scope}, so the invite was not honoured.`)
  }
}

async function requireExisting(nodes: NodeApi, path: NodePath, what: string): Promise<MeshNode> {
  const node = await nodes.get(SYSTEM, path)
  if (!node) throw new ContinuationFailure(`${what} ${path} does not exist.`)
  return node
}

/** The subject's assignment on `scope` ([ACC0]): what a grant writes, and what its warm-up loads. */
function assignmentPath(scope: string, subject: string): string {
  return `${scope}/${ACCESS_SEGMENT}/${assignmentLabel(subject)}`
}

/** `{scope}/_Access/{subject}_Access`; never lowers a role the subject already holds there. */
export async function grantAccess(nodes: NodeApi, scope: string, subject: string, role: Role): Promise<void> {
  const path = requirePath(assignmentPath(scope, subject), 'Assignment')
  await nodes.update(SYSTEM, path, (current) => {
    const held = current?.content.Role
    const denied = current?.content.Denied === true
    const next = !denied && Role.isMember(held) ? higherRole(held, role) : role
    if (current && !denied && held === next && current.content.Subject === subject) return undefined
    return {
      nodeType: 'AccessAssignment',
      name: current?.name ?? `${subject} access`,
      content: { ...(current?.content ?? {}), Subject: subject, Role: next, Denied: false },
    }
  }, 'engine')
}

/** Adds `path` to the user's PinnedPaths (the app syncs the User node, so navigation updates live). */
export async function pinForUser(nodes: NodeApi, userId: string, path: string): Promise<void> {
  let missing = false
  await nodes.update(SYSTEM, requirePath(userId, 'User'), (current) => {
    if (!current) {
      missing = true
      return undefined
    }
    const pinned = Array.isArray(current.content.PinnedPaths) ? current.content.PinnedPaths : []
    if (pinned.includes(path)) return undefined
    return { nodeType: current.nodeType, name: current.name, content: { ...current.content, PinnedPaths: [...pinned, path] } }
  }, 'engine')
  if (missing) throw new ContinuationFailure(`User ${userId} does not exist, so ${path} could not be pinned.`)
}

export async function addMembership(nodes: NodeApi, group: string, userId: string): Promise<void> {
  const path = requirePath(`${group}/${userId}_Membership`, 'Membership')
  await nodes.update(SYSTEM, path, (current) => {
    if (current && current.nodeType === 'Membership') return undefined
    return { nodeType: 'Membership', name: `${userId} in ${group}`, content: { Subject: userId, Group: group } }
  }, 'engine')
}

async function grantSpaceAccess(input: ContinuationInput): Promise<void> {
  const { nodes, subscription: sub } = input
  const space = requirePath(sub.TargetPath, 'TargetPath')
  const subject = requireSubject(input, 'GrantSpaceAccess')
  const role = requireRole(sub.Role, 'Viewer') as Role
  await requireExisting(nodes, space, 'Space')
  await recheckRequester(nodes, sub, space)
  await grantAccess(nodes, space, subject, role)
  if (sub.Pin === true) await pinForUser(nodes, subject, space)
}

grantSpaceAccess.touches = (sub: EventSubscription, subject: string | null): string[] => {
  const paths = [sub.TargetPath ?? '']
  if (subject) paths.push(assignmentPath(sub.TargetPath ?? '', subject))
  if (subject && sub.Pin === true) paths.push(subject)
  return paths
}

async function addToGroup(input: ContinuationInput): Promise<void> {
  const { nodes, subscription: sub } = input
  const group = requirePath(sub.TargetPath, 'TargetPath')
  const subject = requireSubject(input, 'AddToGroup')
  const role = requireRole(sub.Role, null)
  await requireExisting(nodes, group, 'Group')
  await recheckRequester(nodes, sub, group)
  await addMembership(nodes, group, subject)
  // Groups are not publicly readable: the grant is what lets the new member see the group.
  if (role) await grantAccess(nodes, group, subject, role)
}

function defaultMessageText(sub: EventSubscription): string {
  if (sub.Text) return sub.Text
  if (sub.WatchPath) return `${sub.WatchPath} has finished (subscription ${sub.Id}).`
  return `Subscription ${sub.Id} fired.`
}

async function postThreadMessage(input: ContinuationInput): Promise<void> {
  const { nodes, subscription: sub } = input
  const thread = requirePath(sub.TargetPath, 'TargetPath')
  let missing = false
  await nodes.update(SYSTEM, thread, (current) => {
    if (!current) {
      missing = true
      return undefined
    }
    const messages = Array.isArray(current.content.Messages) ? current.content.Messages : []
    // Idempotent per subscription: a replay after a crash finds its own message and stops.
    if (messages.some((m) => isJsonObject(m) && m.SubscriptionId === sub.Id)) return undefined
    const message: JsonObject = {
      Id: `sub_${sub.Id}`,
      Role: 'system',
      Text: defaultMessageText(sub),
      SubscriptionId: sub.Id,
      At: input.now.toISOString(),
    }
    if (input.subjectId) message.SubjectId = input.subjectId
    return { nodeType: current.nodeType, name: current.name, content: { ...current.content, Messages: [...messages, message] } }
  }, 'engine')
  if (missing) throw new ContinuationFailure(`Thread ${thread} does not exist.`)
}

/**
 * The one generic continuation for a module's own effect: write an EventDelivery onto the node
 * named by DeliverTo, as system, through that node's own update path. The node's type decides
 * what the firing means (and re-checks CreatedBy's right before acting).
 */
async function deliverToNode(input: ContinuationInput): Promise<void> {
  const { nodes, subscription: sub } = input
  if (!sub.DeliverTo) throw new ContinuationFailure('DeliverToNode needs DeliverTo: no node to deliver to.')
  const target = requirePath(sub.DeliverTo, 'DeliverTo')
  const delivery: EventDelivery = {
    SubscriptionId: sub.Id,
    SubjectId: input.subjectId,
    At: input.now.toISOString(),
    CreatedBy: sub.CreatedBy ?? null,
  }
  let missing = false
  await nodes.update(SYSTEM, target, (current) => {
    if (!current) {
      missing = true
      return undefined
    }
    const past = Array.isArray(current.content.EventDeliveries) ? current.content.EventDeliveries : []
    if (past.some((d) => isJsonObject(d) && d.SubscriptionId === sub.Id)) return undefined
    return {
      nodeType: current.nodeType,
      name: current.name,
      content: { ...current.content, EventDelivery: delivery as JsonObject, EventDeliveries: [...past, delivery as JsonObject] },
    }
  }, 'engine')
  if (missing) throw new ContinuationFailure(`DeliverTo node ${target} does not exist.`)
}
