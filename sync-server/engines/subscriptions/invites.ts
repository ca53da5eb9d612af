import { z } from 'zod'
import {
  Role,
  SUBSCRIPTIONS_PARENT,
  SYSTEM,
  WeftError,
  groupInviteSubscriptionId,
  invitationPath,
  isSystem,
  legacyInviteSubscriptionIds,
  readSubscriptionStatus,
  spaceInviteSubscriptionId,
  subscriptionPath,
  tryParseNodePath,
  type JsonObject,
  type MeshNode,
  type NodePath,
  type Principal,
  type InviteView,
  type MemberView,
} from '../../../shared/index.js'
import { MAX_EMAIL_LENGTH, type UserDirectory } from '../../auth/index.js'
import type { NodeApi } from '../../nodes/index.js'
import { ALL, isAdminOf } from './access.js'
import { addMembership, deniedMessage, grantAccess, grantAccessHeld, isDenied, pinForUser } from './continuations.js'

/**
 * Invites by email (event-subscriptions seed, "Trigger 1"): grant now when the person has an
 * account, otherwise write a deterministic-id subscription that grants the moment a User with
 * that email is created. Authorized as the caller here (Admins only); the runner re-checks the
 * inviter's right again when the subscription fires.
 */
export interface InviteDeps {
  nodes: NodeApi
  users: UserDirectory
  now?: () => number
}

/**
 * [ACC40] What an invite of someone with an account did to their role: `granted` (they hold the
 * role asked, or now hold it), `same_role` (they held it already: nothing changed), `higher_role`
 * (they hold more, which an invite never lowers: `role` says what), `self` (the caller: nothing
 * changes). A group invite's is a `GroupChange`.
 */
export type GrantChange = 'granted' | 'same_role' | 'higher_role' | 'self'

/**
 * [ACC41] What a group invite of someone with an account did: `added` (they are now a member, or
 * the role asked was given to them), `already_member` (a member already, the role asked held or
 * none asked: nothing changed), `self` (the caller's own address, already a member: nothing
 * changed).
 */
export type GroupChange = 'added' | 'already_member' | 'self'

export type InviteOutcome =
  | { email: string; status: 'Granted'; userId: string; change?: GrantChange | GroupChange; role?: Role | null }
  | { email: string; status: 'Invited'; subscriptionId: string }

/**
 * [ACC44] An address sign-up would take: no longer than MAX_EMAIL_LENGTH (an invite of a 200,000
 * character address wrote its subscription, then its Invitation was refused for its name's
 * length: a 400 that left a Pending invite behind).
 */
const Email = z.string().trim().toLowerCase().pipe(z.email()).pipe(z.string().max(MAX_EMAIL_LENGTH))
/** [ACC45] The most addresses one group invite takes: a pasted list a person reads back, not a mailing list written address by address in one request. */
export const MAX_INVITES_PER_REQUEST = 500

export const SpaceInviteBody = z.object({
  email: z.string(),
  role: z.enum(Role.members as unknown as [Role, ...Role[]]).default('Editor'),
  pin: z.boolean().default(true),
})

/** `emails` is a list or a pasted block (bulk); `email` alone invites one address. */
export const GroupInviteBody = z
  .object({
    emails: z.union([z.array(z.string()), z.string()]).optional(),
    email: z.string().optional(),
    role: z.enum(Role.members as unknown as [Role, ...Role[]]).nullable().optional(),
  })
  .transform((b) => ({ emails: [...(b.emails === undefined ? [] : Array.isArray(b.emails) ? b.emails : [b.emails]), ...(b.email ? [b.email] : [])], role: b.role }))

export function parseEmail(raw: string): string {
  const r = Email.safeParse(raw)
  if (!r.success) throw new WeftError('invalid_request', `${JSON.stringify(raw.length > 80 ? `${raw.slice(0, 80)}…` : raw)} is not an email address${raw.length > MAX_EMAIL_LENGTH ? ` (at most ${MAX_EMAIL_LENGTH} characters)` : ''}.`)
  return r.data
}

/** Bulk paste: commas, semicolons, whitespace or new lines; duplicates removed. */
export function splitEmails(raw: string | string[]): string[] {
  const parts = (Array.isArray(raw) ? raw : [raw]).flatMap((s) => s.split(/[\s,;]+/)).map((s) => s.trim()).filter(Boolean)
  return [...new Set(parts.map((p) => p.toLowerCase()))]
}

export async function requireAdmin(nodes: NodeApi, caller: Principal, scope: NodePath): Promise<void> {
  if (isSystem(caller)) return
  if (!isAdminOf(nodes, caller.userId, scope)) {
    throw new WeftError('forbidden', `Only an Admin of ${scope} may invite or revoke invites.`)
  }
}

async function requireNode(nodes: NodeApi, path: NodePath, nodeType: string | null): Promise<void> {
  const node = await nodes.get(SYSTEM, path)
  if (!node || (nodeType !== null && node.nodeType !== nodeType)) {
    throw new WeftError('not_found', `No ${nodeType ?? 'node'} at ${path}.`)
  }
}

function callerName(caller: Principal): string | null {
  return isSystem(caller) ? null : caller.userId
}

/**
 * [SUB15] Whether `node` is the invite of `email` to `target` with this continuation: only then
 * may an invite upsert it (the address compared as sign-up matches it, without case).
 */
function isSameInvite(node: MeshNode, fields: JsonObject): boolean {
  const c = node.content
  return (
    node.nodeType === 'EventSubscription' &&
    typeof c.MatchValue === 'string' &&
    typeof fields.MatchValue === 'string' &&
    c.MatchValue.toLowerCase() === fields.MatchValue.toLowerCase() &&
    c.TargetPath === fields.TargetPath &&
    c.ContinuationType === fields.ContinuationType
  )
}

/**
 * The id of the invite of `email` to `target`: the one it had before [SUB15] when an invite made
 * then is there (so a re-invite still upserts it, [SUB4]), else the hashed one.
 */
async function inviteId(nodes: NodeApi, id: string, legacy: string, fields: JsonObject): Promise<string> {
  const old = await nodes.get(SYSTEM, subscriptionPath(legacy) as NodePath)
  return old && isSameInvite(old, fields) ? legacy : id
}

/**
 * Upserts the subscription at a deterministic id: a re-invite makes the same one Pending again.
 * [SUB15] Never another invite's: a subscription at the id for another address, target or
 * continuation is refused (`conflict`), never merged into.
 */
async function upsertSubscription(nodes: NodeApi, id: string, fields: JsonObject, at: string): Promise<void> {
  let other = false
  await nodes.update(SYSTEM, subscriptionPath(id) as NodePath, (current) => {
    if (current && !isSameInvite(current, fields)) {
      other = true
      return undefined
    }
    const content: JsonObject = { ...(current?.content ?? {}), ...fields, Id: id, Status: 'Pending', CreatedAt: at }
    delete content.FiredAt
    delete content.LastError
    delete content.ObservedActiveAt
    // A revived invite is a new firing: a take-back of the last one is not this one's.
    delete content.TakenBackAt
    return { nodeType: 'EventSubscription', name: current?.name ?? id, content }
  }, 'engine')
  if (other) throw new WeftError('conflict', `Subscription ${id} is another invite; nothing was changed.`)
}

/**
 * The invite of someone without an account: a subscription that fires when a User with this
 * email is created (upserted under its deterministic id), and the Invitation that lists it.
 */
async function inviteOnSignup(deps: InviteDeps, caller: Principal, email: string, ids: { id: string; legacy: string }, continuation: JsonObject): Promise<string> {
  const at = new Date((deps.now ?? Date.now)()).toISOString()
  const fields: JsonObject = {
    TriggerType: 'NodeChange',
    TriggerNodeType: 'User',
    TriggerKind: 'Created',
    MatchField: 'Email',
    MatchValue: email,
    ...continuation,
    CreatedBy: callerName(caller),
  }
  const id = await inviteId(deps.nodes, ids.id, ids.legacy, fields)
  await upsertSubscription(deps.nodes, id, fields, at)
  await recordInvitation(deps.nodes, email, id, callerName(caller), at)
  return id
}

async function recordInvitation(nodes: NodeApi, email: string, subscriptionId: string, by: string | null, at: string): Promise<void> {
  await nodes.update(SYSTEM, invitationPath(email) as NodePath, (current) => {
    const ids = Array.isArray(current?.content.SubscriptionIds) ? (current.content.SubscriptionIds as string[]) : []
    if (current && ids.includes(subscriptionId) && current.content.Email === email) return undefined
    return {
      nodeType: 'Invitation',
      name: current?.name ?? email,
      content: {
        ...(current?.content ?? {}),
        Email: email,
        SubscriptionIds: ids.includes(subscriptionId) ? ids : [...ids, subscriptionId],
        InvitedBy: by,
        InvitedAt: at,
      },
    }
  }, 'engine')
}

export async function inviteToSpace(
  deps: InviteDeps,
  caller: Principal,
  space: NodePath,
  body: z.infer<typeof SpaceInviteBody>,
): Promise<InviteOutcome> {
  await requireAdmin(deps.nodes, caller, space)
  await requireNode(deps.nodes, space, null)
  const email = parseEmail(body.email)
  const existing = await deps.users.findUserIdByEmail(email)
  if (existing) {
    // [SUB12] Inviting yourself: you are Admin here already (requireAdmin), and the space is in
    // your list of spaces; a pin would show it twice.
    const self = !isSystem(caller) && caller.userId === existing
    if (self) return { email, status: 'Granted', userId: existing, change: 'self', role: null }
    const grant = await grantAccessHeld(deps.nodes, space, existing, body.role)
    if (grant.outcome === 'denied') throw new WeftError('conflict', deniedMessage(existing, space))
    if (body.pin) await pinForUser(deps.nodes, existing, space)
    // [ACC40] Said as it is: an invite never lowers a role, and one that changes nothing says so.
    const change: GrantChange = grant.role !== body.role ? 'higher_role' : grant.outcome === 'granted' ? 'granted' : 'same_role'
    return { email, status: 'Granted', userId: existing, change, role: grant.role }
  }
  const ids = { id: spaceInviteSubscriptionId(email, space), legacy: legacyInviteSubscriptionIds(email, space).space }
  const id = await inviteOnSignup(deps, caller, email, ids, { ContinuationType: 'GrantSpaceAccess', TargetPath: space, Role: body.role, Pin: body.pin })
  return { email, status: 'Invited', subscriptionId: id }
}

export async function inviteToGroup(
  deps: InviteDeps,
  caller: Principal,
  group: NodePath,
  body: z.infer<typeof GroupInviteBody>,
): Promise<InviteOutcome[]> {
  await requireAdmin(deps.nodes, caller, group)
  await requireNode(deps.nodes, group, 'Group')
  const listed = splitEmails(body.emails)
  if (listed.length > MAX_INVITES_PER_REQUEST) throw new WeftError('invalid_request', `${listed.length} addresses; one invite takes at most ${MAX_INVITES_PER_REQUEST}: send them in parts.`)
  const emails = listed.map(parseEmail)
  if (emails.length === 0) throw new WeftError('invalid_request', 'No email address to invite.')
  const role = body.role ?? null
  // [ACC43] Every address's account, and a Denied one refused, before anything is written: a
  // refusal of the third address left the first two members, and the caller read only the refusal.
  const accounts = await Promise.all(emails.map((email) => deps.users.findUserIdByEmail(email)))
  if (role) {
    for (const existing of accounts) {
      if (existing && (await isDenied(deps.nodes, group, existing))) throw new WeftError('conflict', deniedMessage(existing, group))
    }
  }
  const out: InviteOutcome[] = []
  for (const [i, email] of emails.entries()) {
    const existing = accounts[i]
    if (existing) {
      const added = await addMembership(deps.nodes, group, existing)
      const granted = role ? await grantAccess(deps.nodes, group, existing, role) : 'unchanged'
      if (granted === 'denied') throw new WeftError('conflict', deniedMessage(existing, group))
      out.push({ email, status: 'Granted', userId: existing, change: groupChange(added || granted === 'granted', !isSystem(caller) && caller.userId === existing) })
      continue
    }
    const ids = { id: groupInviteSubscriptionId(email, group), legacy: legacyInviteSubscriptionIds(email, group).group }
    const id = await inviteOnSignup(deps, caller, email, ids, { ContinuationType: 'AddToGroup', TargetPath: group, Role: role })
    out.push({ email, status: 'Invited', subscriptionId: id })
  }
  return out
}

/** [ACC41] Said as it is: your own address is said as such when it changed nothing (an Admin may still join the group they run). */
function groupChange(changed: boolean, self: boolean): GroupChange {
  return changed ? 'added' : self ? 'self' : 'already_member'
}

/** Members and roles of a space plus its invites; any reader of the space may list them. */
export async function listSpaceMembers(
  deps: InviteDeps,
  caller: Principal,
  space: NodePath,
): Promise<{ members: MemberView[]; invites: InviteView[] }> {
  const node = await deps.nodes.get(caller, space)
  if (!node) throw new WeftError('not_found', `No node at ${space}.`)
  const assignments = await deps.nodes.query(SYSTEM, { parent: `${space}/_Access` as NodePath, nodeType: 'AccessAssignment', limit: ALL })
  const members: MemberView[] = []
  for (const a of assignments) {
    const subject = String(a.content.Subject ?? '')
    const userPath = tryParseNodePath(subject)
    const user = userPath && !userPath.includes('/') ? await deps.nodes.get(SYSTEM, userPath) : null
    members.push({
      subject,
      role: String(a.content.Role ?? ''),
      denied: a.content.Denied === true,
      email: user?.nodeType === 'User' && typeof user.content.Email === 'string' ? user.content.Email : null,
      name: user?.nodeType === 'User' && typeof user.content.FullName === 'string' ? user.content.FullName : null,
    })
  }
  members.sort((x, y) => (x.email ?? x.subject).localeCompare(y.email ?? y.subject))
  const subs = await deps.nodes.query(SYSTEM, {
    parent: SUBSCRIPTIONS_PARENT as NodePath,
    nodeType: 'EventSubscription',
    where: { TargetPath: space, ContinuationType: 'GrantSpaceAccess' },
    limit: ALL,
  })
  const invites: InviteView[] = subs
    .filter((s) => s.content.TargetPath === space)
    .map((s) => {
      const c = s.content
      const str = (v: unknown) => (typeof v === 'string' ? v : null)
      return {
        subscriptionId: str(c.Id) ?? s.path.slice(SUBSCRIPTIONS_PARENT.length + 1),
        email: str(c.MatchValue),
        role: str(c.Role),
        pin: c.Pin === true,
        status: String(c.Status ?? 'Pending'),
        lastError: str(c.LastError),
        createdBy: str(c.CreatedBy),
        createdAt: str(c.CreatedAt),
        firedAt: str(c.FiredAt),
      }
    })
    .sort((x, y) => (y.createdAt ?? '').localeCompare(x.createdAt ?? ''))
  return { members, invites }
}

/** Revoke = Cancelled, only while Pending (a fired invite is undone by removing the access). */
export async function revokeSpaceInvite(deps: InviteDeps, caller: Principal, space: NodePath, subscriptionId: string): Promise<{ status: string }> {
  await requireAdmin(deps.nodes, caller, space)
  const path = tryParseNodePath(subscriptionPath(subscriptionId))
  if (!path || subscriptionId.includes('/')) throw new WeftError('invalid_request', `Invalid subscription id ${JSON.stringify(subscriptionId)}.`)
  let outcome = 'missing' as string
  await deps.nodes.update(SYSTEM, path, (current) => {
    if (!current || current.content.TargetPath !== space) {
      outcome = 'missing'
      return undefined
    }
    const s = readSubscriptionStatus(current.content.Status ?? 'Pending')
    if (!s.known || s.value !== 'Pending') {
      outcome = String(current.content.Status)
      return undefined
    }
    outcome = 'cancelled'
    return { nodeType: current.nodeType, name: current.name, content: { ...current.content, Status: 'Cancelled' } }
  }, 'engine')
  if (outcome === 'missing') throw new WeftError('not_found', `No invite ${subscriptionId} on ${space}.`)
  if (outcome !== 'cancelled') throw new WeftError('conflict', `Invite ${subscriptionId} is already ${outcome}; only a Pending invite can be revoked.`)
  return { status: 'Cancelled' }
}
