import { z } from 'zod'
import { digest } from 'lib0/hash/sha256'
import {
  EventContinuationType,
  EventSubscriptionStatus,
  EventTriggerType,
  MeshChangeKind,
} from './enums.js'
import { EventDeliverySchema } from './node-types.js'
import { slug } from './path.js'

/**
 * Content of an `EventSubscription` node at `Admin/EventSubscription/{id}` (event-subscriptions
 * seed). Flat and enum-discriminated: new trigger or continuation kinds are appended enum members
 * plus nullable fields. Enum fields are persisted by name; the schema keeps them as raw strings
 * (or numbers) on purpose, so a value this build does not know survives a round trip and the
 * runner can end the subscription Failed with that value named on LastError.
 */
const enumValue = z.union([z.string(), z.number()])
const optionalString = z.string().nullable().optional()

export const EventSubscriptionContent = z.looseObject({
  Id: z.string().min(1),
  TriggerType: enumValue,
  // NodeChange
  TriggerNodeType: optionalString,
  TriggerKind: enumValue.nullable().optional(),
  MatchField: optionalString,
  MatchValue: optionalString,
  // Timer (ISO time)
  FireAt: optionalString,
  /** The continuation's subject when the trigger carries no node (Timer, NodeStatus). */
  SubjectId: optionalString,
  // NodeStatus
  WatchPath: optionalString,
  StatusField: optionalString,
  RestingValues: z.array(z.string()).nullable().optional(),
  RequireActiveFirst: z.boolean().nullable().optional(),
  /**
   * [THR23] A resting status does not fire while the watched node's HoldField is one of HoldValues
   * (a content field name; e.g. Disposition / [AwaitingInput]: a thread asking a question is not
   * done). Absent: every resting value fires, as before.
   */
  HoldField: optionalString,
  HoldValues: z.array(z.string()).nullable().optional(),
  /** Set by the runner once the status watch saw a non-resting value: RequireActiveFirst survives a restart. */
  ObservedActiveAt: optionalString,
  // Continuation
  ContinuationType: enumValue,
  TargetPath: optionalString,
  Role: optionalString,
  Pin: z.boolean().nullable().optional(),
  DeliverTo: optionalString,
  /** Optional text for PostThreadMessage / PublishSocialPost. */
  Text: optionalString,
  // Lifecycle
  Status: enumValue.optional(),
  CreatedBy: optionalString,
  CreatedAt: optionalString,
  FiredAt: optionalString,
  LastError: optionalString,
})
export type EventSubscription = z.infer<typeof EventSubscriptionContent>

export { EventDeliverySchema }
export type EventDelivery = z.infer<typeof EventDeliverySchema>

/** `Admin/Invitation/inv_{key(email)}`: the person-facing record of pending invites for one address. */
export const InvitationContent = z.looseObject({
  Email: z.string(),
  /** Subscription ids of the invites sent to this address (space and group invites). */
  SubscriptionIds: z.array(z.string()).default([]),
  InvitedBy: optionalString,
  InvitedAt: optionalString,
})
export type Invitation = z.infer<typeof InvitationContent>

export const SUBSCRIPTIONS_PARENT = 'Admin/EventSubscription'
export const LEGACY_SCHEDULED_ACTIONS_PARENT = 'Admin/ScheduledAction'
export const INVITATIONS_PARENT = 'Admin/Invitation'

/**
 * [SUB15] An invite's key: the first 128 bits of SHA-256 over the address (its case does not
 * matter: sign-up matches it without) and the exact path, in hex. Fixed length, so any space's
 * name fits in a node name; and no two invites share it (slugs did: spaces TeamX and teamX,
 * addresses ann.lee@ and ann_lee@, and one invite silently replaced the other).
 */
function inviteKey(email: string, target: string): string {
  const bytes = digest(new TextEncoder().encode(JSON.stringify([email.trim().toLowerCase(), target])))
  return Array.from(bytes.subarray(0, 16), (b) => b.toString(16).padStart(2, '0')).join('')
}

/** [SUB4] [SUB15] Deterministic per invitee + space, so a re-invite upserts the same subscription. */
export function spaceInviteSubscriptionId(email: string, space: string): string {
  return `grant_${inviteKey(email, space)}`
}

/** [SUB4] [SUB15] Deterministic per invitee + group. */
export function groupInviteSubscriptionId(email: string, group: string): string {
  return `addgroup_${inviteKey(email, group)}`
}

/**
 * The ids invites had before [SUB15] (slugs of the address and the path). An invite made then is
 * still listed and revoked by its id; a re-invite upserts it when it is that same invite.
 */
export function legacyInviteSubscriptionIds(email: string, target: string): { space: string; group: string } {
  return { space: `grant_${slug(email)}_${slug(target)}`, group: `addgroup_${slug(email)}_${slug(target)}` }
}

export function subscriptionPath(id: string): string {
  return `${SUBSCRIPTIONS_PARENT}/${id}`
}

/**
 * [SUB16] One record per address, keyed like an invite ([SUB15]): slugs of two addresses
 * collided (`ann.lee@x` and `ann_lee@x`), and one address's record took the other's invites.
 */
export function invitationPath(email: string): string {
  return `${INVITATIONS_PARENT}/inv_${inviteKey(email, '')}`
}

/**
 * Reads a persisted enum value: a member name (case-sensitive, as persisted), or a stable number
 * (or its decimal string). Anything else is `unknown` with a description that names the value.
 */
export type EnumRead<T extends string> = { known: true; value: T } | { known: false; described: string }

interface EnumTableLike<T extends string> {
  members: readonly T[]
  isMember(value: unknown): value is T
  fromNumber(n: number): T | undefined
}

function readEnum<T extends string>(table: EnumTableLike<T>, enumName: string, raw: unknown): EnumRead<T> {
  if (table.isMember(raw)) return { known: true, value: raw }
  const asNumber = typeof raw === 'number' ? raw : typeof raw === 'string' && /^\d+$/.test(raw) ? Number(raw) : NaN
  if (Number.isInteger(asNumber)) {
    const member = table.fromNumber(asNumber)
    if (member !== undefined) return { known: true, value: member }
  }
  return { known: false, described: `${enumName} ${JSON.stringify(raw ?? null)}` }
}

export const readTriggerType = (raw: unknown) => readEnum(EventTriggerType, 'EventTriggerType', raw)
export const readContinuationType = (raw: unknown) => readEnum(EventContinuationType, 'EventContinuationType', raw)
export const readSubscriptionStatus = (raw: unknown) => readEnum(EventSubscriptionStatus, 'EventSubscriptionStatus', raw)
export const readChangeKind = (raw: unknown) => readEnum(MeshChangeKind, 'MeshChangeKind', raw)

/** `GET /api/spaces/{space}/members`: one row per member (the wire shape, server and app). */
export interface MemberView {
  subject: string
  role: string
  denied: boolean
  email: string | null
  name: string | null
}

/** `GET /api/spaces/{space}/members`: one row per invite. */
export interface InviteView {
  subscriptionId: string
  email: string | null
  role: string | null
  pin: boolean
  status: string
  lastError: string | null
  createdBy: string | null
  createdAt: string | null
  firedAt: string | null
}
