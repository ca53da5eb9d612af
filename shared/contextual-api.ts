import { z } from 'zod'
import { CONTEXTUAL_BOUNDS } from './contextual.js'
import { storableText } from './storable-text.js'
import type { JsonObject } from './json.js'
import { JsonObjectInput, type MeshNode } from './node.js'

/**
 * [CTX30] [CTX40] The contextual operations' shapes, shared by the server (which parses every
 * request with these schemas), the typed client (shared/contextual-client.ts, which checks its
 * input with the same schemas before sending) and the web app.
 */

export const NextRequest = z.strictObject({
  subscription: z.string().min(1).max(1024),
  consumer: z.string().regex(/^[A-Za-z0-9_.-]{1,64}$/, 'a consumer name is 1–64 letters, digits, _ . -'),
  params: JsonObjectInput.optional(),
  waitSeconds: z.number().min(0).max(CONTEXTUAL_BOUNDS.maxWaitSeconds).optional(),
})
export const FenceRequest = z.strictObject({
  consumerId: z.string().min(1).max(100),
  eventId: z.string().min(1).max(40),
  leaseToken: z.string().min(1).max(100),
  attempt: z.number().int().min(1),
})
export const NackRequest = FenceRequest.extend({
  delaySeconds: z.number().min(0).max(CONTEXTUAL_BOUNDS.maxNackDelaySeconds).optional(),
  // [STO10] Stored as written on every storage: SQLite kept a NUL that PostgreSQL refused.
  error: z.string().max(2000).refine(storableText, 'The error holds a NUL character or half an emoji, which cannot be stored; remove it.').optional(),
})
export const ExtendRequest = FenceRequest.extend({
  seconds: z.number().int().min(CONTEXTUAL_BOUNDS.leaseSeconds.min).max(CONTEXTUAL_BOUNDS.leaseSeconds.max).optional(),
})
export const ConsumerRequest = z.strictObject({ consumerId: z.string().min(1).max(100) })
/** [CTX66] A re-drive: every dead letter of the consumer, or only the one with `eventId`. */
export const RedriveRequest = ConsumerRequest.extend({ eventId: z.string().min(1).max(40).optional() })
export const SubscriptionRequest = z.strictObject({ subscription: z.string().min(1).max(1024) })
/** [CTX49] A page of one's own consumers over every subscription (`after`: the last consumerId of the page before). */
export const MineRequest = z.strictObject({ after: z.string().max(100).optional(), limit: z.number().int().min(1).max(100).optional() })
export const ReactRequest = z.strictObject({
  causationToken: z.string().min(1).max(4096),
  params: JsonObjectInput.optional(),
  /**
   * [CTX47] Settle (ack) the work item in the reaction's own transaction: for a reaction that is
   * the item's last word, one call instead of react then ack, and no crash between the two.
   */
  ack: z.boolean().optional(),
  /**
   * [CTX52] With `ack: true`: the consumer's next work item is pulled in the same call once the
   * reaction is settled (`next` in the answer), waiting up to `waitSeconds` for one as `next`
   * does. A worker's loop is then one call per item: react, settle, take the next.
   */
  next: z.boolean().optional(),
  waitSeconds: z.number().min(0).max(CONTEXTUAL_BOUNDS.maxWaitSeconds).optional(),
}).superRefine((r, ctx) => {
  if (r.next && r.ack !== true) ctx.addIssue({ code: 'custom', path: ['next'], message: 'next: true asks for the next work item once this one is settled: add ack: true' })
  if (r.waitSeconds !== undefined && !r.next) ctx.addIssue({ code: 'custom', path: ['waitSeconds'], message: 'waitSeconds is how long the pull of next: true waits: add next: true' })
})

export type NextRequest = z.infer<typeof NextRequest>
export type FenceRequest = z.infer<typeof FenceRequest>
export type NackRequest = z.infer<typeof NackRequest>
export type ExtendRequest = z.infer<typeof ExtendRequest>
export type ConsumerRequest = z.infer<typeof ConsumerRequest>
export type RedriveRequest = z.infer<typeof RedriveRequest>
export type ReactRequest = z.infer<typeof ReactRequest>

export interface OfferedReaction {
  name: string
  command: string
  target: string
  parameters: JsonObject
  rejections: string[]
  causationToken: string
}

export type Hydrated = Record<string, MeshNode | null | MeshNode[]>

/**
 * [CTX61] The contextual reaction that committed an event's change (told to a reader of its
 * subscription): a worker whose reactions change what it watches skips its own echoes, e.g.
 * `causedBy?.subscription === mySubscription && causedBy.consumerId === myConsumerId`.
 */
export interface CausedBy {
  subscription: string
  consumerId: string
  consumerName: string
  reaction: string
  /** The event the reaction was made for. */
  eventId: string
  rootRequestId: string
}

export interface WorkItem {
  event: { eventId: string; version: number; path: string; nodeType: string; kind: string; node: MeshNode | null; causedBy?: CausedBy }
  leaseToken: string
  attempt: number
  expiresAt: string
  databaseId: string
  incarnation: number
  contextHead: number
  hydration: Hydrated
  reactions: OfferedReaction[]
}

export interface ReactionOutcome {
  status: 'committed' | 'rejected'
  reaction: string
  eventId: string
  path: string
  version: number | null
  code?: string
  message?: string
  rootRequestId: string
  childRequestId: string
}

/** What `react` answers; `acked` only when the request asked to settle the item ([CTX47]). */
export interface ReactResult {
  outcome: ReactionOutcome
  /** The outcome was already persisted (a repeat): it is returned, nothing new committed. */
  repeated: boolean
  /**
   * [CTX59] A repeat whose parameters differ from those the outcome was committed with: yours
   * were not applied (the outcome is the committed one); `message` says so. Absent otherwise.
   */
  paramsDiffer?: true
  message?: string
  /** [CTX47] The work item is settled now (by this call, or by the earlier call a repeat resolves). */
  acked?: boolean
  /** [CTX52] Asked with `next: true`: the consumer's next work item (null: none came within `waitSeconds`). */
  next?: NextResult
  /**
   * [CTX52] Asked with `next: true` and the pull after the reaction failed (the reaction stands):
   * its error, as `next` would have answered it. Pull again with `next`.
   */
  nextError?: { code: string; message: string }
}

/**
 * [CTX12] [CTX60] What `ack` answers: settled (`repeated`: by an earlier ack under the same lease
 * token and attempt, whose answer the worker lost; a different token or attempt is `stale_lease`).
 */
export interface AckResult {
  ok: true
  state: 'acked'
  repeated: boolean
}

export interface DeadLetter {
  eventId: string
  path: string
  /** [CTX55] What happened to the node at `path`: the event's kind (Created, Updated, Deleted). */
  kind: string
  attempt: number
  lastError: string | null
  /** [CTX65] When it died (ISO); null for one that died before the server kept the time. */
  diedAt: string | null
}

export interface ContextualStatus {
  consumerId: string
  subscription: string
  name: string
  pending: number
  leased: number
  acked: number
  dead: number
  cursor: number
  headVersion: number
  lag: number
  deadLetters: DeadLetter[]
  /**
   * [CTX56] The consumer was made for the definition its subscription holds now. false: an
   * earlier one (the definition was edited since; a pull under the same name makes a new
   * consumer, which continues from this one's cursor with its pending events) — its leased
   * events and dead letters stay here, for an Admin to re-drive or for its owner or an Admin to
   * delete.
   */
  current: boolean
  /** [CTX56] The hash of the definition the consumer was made for. */
  definitionHash: string
  createdAt: string
}

/** [CTX49] One of the caller's consumers, wherever its subscription is (or was). */
export interface MyConsumer {
  consumerId: string
  subscription: string
  name: string
  createdAt: string
  /**
   * Its subscription node (where it was last pulled from) is there, readable by you with its
   * events' path, and holds the definition the consumer was made for; false: the node was
   * deleted, changed to another definition or hidden from you (a pull through it is refused:
   * delete it to free its place under the bound of 1,000).
   */
  current: boolean
}

/** [CTX49] A page of the caller's consumers, `total` all they have (the bound is 1,000), `next` the `after` of the next page. */
export interface MyConsumers {
  consumers: MyConsumer[]
  total: number
  next: string | null
}

/** [CTX38] A subscription's consumers as its status page shows them. */
export interface SubscriptionConsumers {
  subscription: string
  /** The caller is an Admin (ManageAccess) of the subscription: every consumer is listed and may be re-driven. */
  canRedrive: boolean
  consumers: ListedConsumer[]
  /** [CTX56] The hash of the definition the subscription holds now. */
  definitionHash: string
  /**
   * [CTX56] The listed consumers of earlier definitions (current: false) and what they still hold:
   * the app's warning that leased events and dead letters stay with them.
   */
  stale: { consumers: number; pending: number; leased: number; dead: number }
}

/** [CTX55] A consumer on its subscription's status page: its status, and whose it is. */
export interface ListedConsumer extends ContextualStatus {
  /** The user id of the worker's account. */
  owner: string
  /** Their display name (null: the account has no profile any more). */
  ownerName: string | null
}

export interface NextResult {
  consumerId: string
  item: WorkItem | null
}

/** The evidence of a work item that ack, nack and extend carry. */
export function fenceOf(consumerId: string, item: Pick<WorkItem, 'event' | 'leaseToken' | 'attempt'>): FenceRequest {
  return { consumerId, eventId: item.event.eventId, leaseToken: item.leaseToken, attempt: item.attempt }
}
