import { z } from 'zod'
import {
  Role,
  SYSTEM,
  isJsonObject,
  readSubscriptionStatus,
  selfAndAncestors,
  tryParseNodePath,
  type EventDelivery,
  type EventSubscription,
  type JsonObject,
  type MeshNode,
  type NodePath,
} from '../../../shared/index.js'
import { ACCESS_SEGMENT, assignmentLabel } from '../../access/index.js'
import type { NodeApi } from '../../nodes/index.js'
import { higherRole } from './access.js'
import { ContinuationFailure, type ContinuationInput, type ContinuationRegistry } from './continuation-registry.js'
import { recheckRequesters, requesterOf } from './requester.js'

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
function recheckAdmin(input: ContinuationInput, scope: string): void {
  recheckRequesters(input.nodes, input.node, scope, 'ManageAccess', (by) => `${by} is no longer Admin of ${scope}, so the invite was not honoured.`)
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

/** What a grant did: `denied` means an explicit Denied assignment stood in its way and stays. */
export type GrantOutcome = 'granted' | 'unchanged' | 'denied'

/**
 * [SUB10] Which firing wrote an assignment, and what was there before it: on the assignment
 * itself (`GrantedBy` = the subscription id, queryable; `Grant` = the rest), written in the same
 * write as the grant, so a revoke that overtakes the firing can take back exactly that grant,
 * also after a restart. `Invited` is the subscription's CreatedAt: a re-invite (same id) is
 * another firing.
 */
const GrantRecord = z.object({
  // Absent, not null, when there is none: a null in content is a delete (RFC 7396).
  Invited: z.string().nullish().transform((v) => v ?? null),
  Role: z.string(),
  PriorRole: z.string().nullish().transform((v) => v ?? null),
  PriorPinned: z.boolean(),
  Pin: z.boolean(),
})
type GrantRecord = z.output<typeof GrantRecord>
export interface GrantedBy {
  subscription: string
  invited: string | null
  priorPinned: boolean
  pin: boolean
}

/**
 * `{scope}/_Access/{subject}_Access`; never lowers a role the subject already holds there, and
 * [SUB9] never clears an explicit `Denied`: an Admin said no to this subject on this scope, and
 * an invite (made before, or by someone else) does not overrule that.
 */
export async function grantAccess(nodes: NodeApi, scope: string, subject: string, role: Role, by?: GrantedBy): Promise<GrantOutcome> {
  return (await grantAccessHeld(nodes, scope, subject, role, by)).outcome
}

/** What a grant did and the role the subject holds on the scope after it (null when Denied). */
export interface GrantResult {
  outcome: GrantOutcome
  role: Role | null
}

/**
 * [ACC42] The role the subject holds on `scope` by its own assignment closest above it (none when
 * that one is Denied): what an assignment written on `scope` would stand in for, since the closest
 * assignment wins ([ACC1]). A grant on a group inside a space must not write a Viewer over the
 * Admin its subject holds on the space: that lowered them there (an Admin inviting themselves to
 * their own group with a role lost the right to manage it).
 */
async function inheritedRole(nodes: NodeApi, scope: NodePath, subject: string): Promise<Role | null> {
  for (const above of selfAndAncestors(scope).slice(1)) {
    const path = tryParseNodePath(assignmentPath(above, subject))
    const node = path ? await nodes.get(SYSTEM, path) : null
    // As the access index reads it: an assignment of another subject, or with no role it knows, counts for nothing.
    if (node?.nodeType !== 'AccessAssignment' || node.content.Subject !== subject || !Role.isMember(node.content.Role)) continue
    return node.content.Denied === true ? null : node.content.Role
  }
  return null
}

/** `grantAccess`, telling the role held after it: an invite says so ([ACC40]), never "granted" for a role kept. */
export async function grantAccessHeld(nodes: NodeApi, scope: string, subject: string, role: Role, by?: GrantedBy): Promise<GrantResult> {
  const path = requirePath(assignmentPath(scope, subject), 'Assignment')
  const inherited = await inheritedRole(nodes, requirePath(scope, 'Scope'), subject)
  let outcome: GrantOutcome = 'unchanged'
  let heldAfter: Role | null = null
  await nodes.update(SYSTEM, path, (current) => {
    if (current?.content.Denied === true) {
      outcome = 'denied'
      heldAfter = null
      return undefined
    }
    // [ACC42] No assignment here: what they inherit is what they hold, and one as high or higher is kept as it stands.
    if (!Role.isMember(current?.content.Role) && inherited !== null && higherRole(inherited, role) === inherited) {
      outcome = 'unchanged'
      heldAfter = inherited
      return undefined
    }
    const held = current?.content.Role
    const next = Role.isMember(held) ? higherRole(held, role) : role
    heldAfter = next
    if (current && held === next && current.content.Subject === subject) {
      outcome = 'unchanged'
      return undefined
    }
    outcome = 'granted'
    const content: JsonObject = { ...(current?.content ?? {}), Subject: subject, Role: next, Denied: false }
    // A grant by anyone else makes the assignment theirs: an older record no longer describes it.
    delete content.GrantedBy
    delete content.Grant
    if (by) {
      const record: JsonObject = { Role: next, PriorPinned: by.priorPinned, Pin: by.pin }
      if (by.invited !== null) record.Invited = by.invited
      if (typeof held === 'string') record.PriorRole = held
      content.GrantedBy = by.subscription
      content.Grant = record
    }
    return { nodeType: 'AccessAssignment', name: current?.name ?? `${subject} access`, content }
  }, 'engine')
  return { outcome, role: heldAfter }
}

/** [SUB9] Whether an explicit `Denied` assignment of the subject stands on `scope`. */
export async function isDenied(nodes: NodeApi, scope: string, subject: string): Promise<boolean> {
  const path = tryParseNodePath(assignmentPath(scope, subject))
  return path !== null && (await nodes.get(SYSTEM, path))?.content.Denied === true
}

/** The message of a grant an explicit Denied refused. */
export function deniedMessage(subject: string, scope: string): string {
  return `${subject} is explicitly Denied on ${scope}; the grant does not override it (an Admin can remove the Denied assignment first).`
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
    // [SUB12] A pin is in the list once: an earlier duplicate (or a client's) is folded away too.
    const unique = [...new Set(pinned)]
    if (unique.includes(path) && unique.length === pinned.length) return undefined
    return { nodeType: current.nodeType, name: current.name, content: { ...current.content, PinnedPaths: unique.includes(path) ? unique : [...unique, path] } }
  }, 'engine')
  if (missing) throw new ContinuationFailure(`User ${userId} does not exist, so ${path} could not be pinned.`)
}

/** Makes `userId` a member of `group`; [ACC41] `true` when it did, `false` when they were one already. */
export async function addMembership(nodes: NodeApi, group: string, userId: string): Promise<boolean> {
  const path = requirePath(`${group}/${userId}_Membership`, 'Membership')
  let added = false
  await nodes.update(SYSTEM, path, (current) => {
    added = false
    if (current && current.nodeType === 'Membership') return undefined
    added = true
    return { nodeType: 'Membership', name: `${userId} in ${group}`, content: { Subject: userId, Group: group } }
  }, 'engine')
  return added
}

function isPendingStatus(status: unknown): boolean {
  const s = readSubscriptionStatus(status ?? 'Pending')
  return s.known && s.value === 'Pending'
}

/** [SUB10] A Cancelled subscription whose firing may have granted before the revoke, not yet checked. */
export function needsTakeBack(node: MeshNode): boolean {
  const s = readSubscriptionStatus(node.content.Status ?? 'Pending')
  return s.known && s.value === 'Cancelled' && node.content.TakenBackAt === undefined
}

async function grantSpaceAccess(input: ContinuationInput): Promise<void> {
  const { nodes, subscription: sub } = input
  const space = requirePath(sub.TargetPath, 'TargetPath')
  const subject = requireSubject(input, 'GrantSpaceAccess')
  const role = requireRole(sub.Role, 'Viewer') as Role
  // The right first: a requester without it learns nothing of whether the space exists.
  recheckAdmin(input, space)
  await requireExisting(nodes, space, 'Space')
  const user = await nodes.get(SYSTEM, requirePath(subject, 'User'))
  const pins = Array.isArray(user?.content.PinnedPaths) ? user.content.PinnedPaths : []
  // [SUB10] A revoke that landed before this point wins: nothing is granted. One that lands
  // later is caught by the runner's claim, which then takes this grant back.
  const now = await nodes.get(SYSTEM, input.node.path)
  if (!now || !isPendingStatus(now.content.Status)) return
  const by: GrantedBy = { subscription: sub.Id, invited: typeof now.content.CreatedAt === 'string' ? now.content.CreatedAt : null, priorPinned: pins.includes(space), pin: sub.Pin === true }
  if ((await grantAccess(nodes, space, subject, role, by)) === 'denied') throw new ContinuationFailure(deniedMessage(subject, space))
  if (sub.Pin === true) await pinForUser(nodes, subject, space)
}

/**
 * [SUB10] Undoes what a firing overtaken by a revoke granted: the role goes back to what it was
 * (the assignment goes when there was none), and the pin goes when the grant added it. Only an
 * assignment still as this firing left it is touched: a change someone made since stands.
 * `TakenBackAt` on the subscription says it was done, so it runs once.
 */
grantSpaceAccess.takeBack = async (nodes: NodeApi, subscription: MeshNode, at: Date = new Date()): Promise<void> => {
  const id = typeof subscription.content.Id === 'string' ? subscription.content.Id : null
  const space = tryParseNodePath(subscription.content.TargetPath)
  const invited = typeof subscription.content.CreatedAt === 'string' ? subscription.content.CreatedAt : null
  if (id && space) {
    const mine = (a: MeshNode | null): GrantRecord | null => {
      if (!a || a.content.GrantedBy !== id || a.content.Denied === true) return null
      const g = GrantRecord.safeParse(a.content.Grant)
      return g.success && g.data.Invited === invited && a.content.Role === g.data.Role ? g.data : null
    }
    const found = await nodes.query(SYSTEM, { parent: `${space}/${ACCESS_SEGMENT}` as NodePath, nodeType: 'AccessAssignment', where: { GrantedBy: id }, limit: 100 })
    for (const a of found) {
      const g = mine(a)
      if (!g) continue
      await nodes.update(SYSTEM, a.path, (current) => {
        const still = mine(current)
        if (!current || !still) return undefined
        if (still.PriorRole === null) return null
        const content: JsonObject = { ...current.content, Role: still.PriorRole }
        delete content.GrantedBy
        delete content.Grant
        return { nodeType: current.nodeType, name: current.name, content }
      }, 'engine')
      const user = tryParseNodePath(a.content.Subject)
      if (g.Pin && !g.PriorPinned && user) {
        await nodes.update(SYSTEM, user, (current) => {
          const pinned = current && Array.isArray(current.content.PinnedPaths) ? current.content.PinnedPaths : null
          if (!current || !pinned || !pinned.includes(space)) return undefined
          return { nodeType: current.nodeType, name: current.name, content: { ...current.content, PinnedPaths: pinned.filter((p) => p !== space) } }
        }, 'engine')
      }
    }
  }
  await nodes.update(SYSTEM, subscription.path, (current) => {
    if (!current || !needsTakeBack(current)) return undefined
    return { nodeType: current.nodeType, name: current.name, content: { ...current.content, TakenBackAt: at.toISOString() } }
  }, 'engine')
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
  recheckAdmin(input, group)
  await requireExisting(nodes, group, 'Group')
  // [SUB9] Refused before anything is written, as the direct invite is: a membership added ahead
  // of the refused grant would give the subject whatever the group holds elsewhere.
  if (role && (await isDenied(nodes, group, subject))) throw new ContinuationFailure(deniedMessage(subject, group))
  await addMembership(nodes, group, subject)
  // Groups are not publicly readable: the grant is what lets the new member see the group.
  if (role && (await grantAccess(nodes, group, subject, role)) === 'denied') throw new ContinuationFailure(deniedMessage(subject, group))
}

function defaultMessageText(sub: EventSubscription): string {
  if (sub.Text) return sub.Text
  if (sub.WatchPath) return `${sub.WatchPath} has finished (subscription ${sub.Id}).`
  return `Subscription ${sub.Id} fired.`
}

/**
 * [THR9] PostThreadMessage: a `tool` cell `{thread}/_t.{subscription id}` (made once: a replay
 * after a crash finds it) listed in the thread's Messages once. It records the hand-back in the
 * thread; it is not input for a round (a delegating round, live or resumed, waits on the
 * sub-thread itself), so the parent continues exactly once.
 */
async function postThreadMessage(input: ContinuationInput): Promise<void> {
  const { nodes, subscription: sub } = input
  const thread = requirePath(sub.TargetPath, 'TargetPath')
  // [SUB13] Posting into a thread is the Thread right, the one a person's own post needs; checked
  // before the thread is looked at, so a refusal tells nothing of a thread they may not read.
  recheckRequesters(nodes, input.node, thread, 'Thread', (by) => `${by} may not post in ${thread}, so the message was not posted.`)
  const target = await nodes.get(SYSTEM, thread)
  if (!target) throw new ContinuationFailure(`Thread ${thread} does not exist.`)
  const cell = requirePath(`${thread}/_t.${sub.Id}`, 'TargetPath')
  // A watched thread that ended cancelled (its question withdrawn, or stopped) is said to be, not "finished".
  const watchPath = sub.WatchPath ? tryParseNodePath(sub.WatchPath) : null
  const watched = watchPath ? await nodes.get(SYSTEM, watchPath) : null
  // [THR32] Said by the thread's name, never its path (a sub-thread's is `…/_sub.{id}`).
  const text = watched?.nodeType === 'Thread' && watched.content.Status === 'Cancelled' ? `“${watched.name}” was cancelled.` : defaultMessageText(sub)
  const content: JsonObject = { Role: 'tool', Author: 'system', Text: text, CreatedAt: input.now.toISOString(), SubscriptionId: sub.Id }
  if (input.subjectId) content.SubjectId = input.subjectId
  // The node the message reports on, for a link to it (the text is only text: never rendered as HTML).
  if (watched && watchPath) content.About = watchPath
  await nodes.update(SYSTEM, cell, (current) => (current ? undefined : { nodeType: 'ThreadMessage', name: `_t.${sub.Id}`, content }), 'engine')
  await nodes.update(SYSTEM, thread, (current) => {
    if (!current) return undefined
    const messages = Array.isArray(current.content.Messages) ? current.content.Messages : []
    if (messages.includes(cell)) return undefined
    return { nodeType: current.nodeType, name: current.name, content: { ...current.content, Messages: [...messages, cell] } }
  }, 'engine')
}

/**
 * The one generic continuation for a module's own effect: write an EventDelivery onto the node
 * named by DeliverTo, as system, through that node's own update path. The node's type decides
 * what the firing means (and re-checks CreatedBy's right before acting). [SUB13] The requester
 * must hold Update on that node: a delivery is a write to it made for them.
 */
async function deliverToNode(input: ContinuationInput): Promise<void> {
  const { nodes, subscription: sub } = input
  if (!sub.DeliverTo) throw new ContinuationFailure('DeliverToNode needs DeliverTo: no node to deliver to.')
  const target = requirePath(sub.DeliverTo, 'DeliverTo')
  recheckRequesters(nodes, input.node, target, 'Update', (by) => `${by} may not update ${target}, so nothing was delivered to it.`)
  const delivery: EventDelivery = {
    SubscriptionId: sub.Id,
    SubjectId: input.subjectId,
    At: input.now.toISOString(),
    CreatedBy: requesterOf(input.node),
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
