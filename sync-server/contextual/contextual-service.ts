import { randomBytes, randomUUID } from 'node:crypto'
import type { Logger } from 'pino'
import type { Subscription } from 'rxjs'
import type { z } from 'zod'
import {
  SYSTEM,
  CONTEXTUAL_BOUNDS,
  DEFAULT_MAX_JSON_DEPTH,
  ConsumerRequest,
  RedriveRequest,
  ExtendRequest,
  FenceRequest,
  NackRequest,
  NextRequest,
  ReactRequest,
  SubscriptionRequest,
  MineRequest,
  WeftError,
  tryParseNodePath,
  type SubscriptionConsumers,
  type MyConsumer,
  type MyConsumers,
  type ContextualStatus,
  type ListedConsumer,
  type OfferedReaction,
  type ReactionOutcome,
  type ReactResult,
  type AckResult,
  type CausedBy,
  type NextResult,
  type WorkItem,
  isWeftError,
  parseNodePath,
  type JsonObject,
  type NodePath,
  type PathRange,
  type Principal,
} from '../../shared/index.js'
import type { AccessService } from '../access/index.js'
import { personNames, type CommitAttachment, type NodeApi } from '../nodes/index.js'
import {
  matchesEventFilter,
  type ContextualAttachment,
  type ConsumerRow,
  type ConsumerStatus,
  type ContextualAttention,
  type ContextualCall,
  type ContextualMeta,
  type QuietConsumer,
  type UnreadEvents,
  type EventFilter,
  type Fence,
  type LeasedEvent,
  type LeaseResult,
  type ReactTruth,
  type RedriveBatch,
  type OutcomeRow,
  type StorageAdapter,
} from '../storage/index.js'
import { every, realClock, type Clock } from '../engines/kit/index.js'
import { canonicalJson, sha256Hex } from './canonical.js'
import { compileDefinition, type CompiledDefinition } from './definition.js'
import { hydrate, resolveTemplate } from './context.js'
import { mayRun, runCommand } from './reactions.js'
import { systemClock, type Clock as ThreadClock } from '../engines/threads/index.js'
import { openClaims, sealClaims, type CausationClaims } from './seal.js'

/**
 * [CTX5]–[CTX33] The one contextual service: every surface (HTTP now; gRPC and MCP call the same
 * functions) goes through `next`, `ack`, `nack`, `extend`, `status`, `react` and `redrive`, each
 * acting as its caller, checked as themselves on every call.
 */

export { NextRequest, FenceRequest, NackRequest, ExtendRequest, ConsumerRequest, ReactRequest, MineRequest }
export type { OfferedReaction, ReactionOutcome, WorkItem }

/** [CTX24] What a causation token holds of its lease's token. */
const leaseDigest = (token: string): string => sha256Hex(`lease:${token}`).slice(0, 32)

/**
 * [CTX42] Long polls of one user waiting at once, over every transport: a pool of agents under one
 * account fits; thousands from one user slowed every other user's commits (each commit is matched
 * against every waiter).
 */
export const WAITING_PER_USER = 64

/**
 * [CTX46] Consumers one account may have at once, over every subscription: each is a durable row
 * with its events, made by a pull that names a new consumer. A pool of agents under one account
 * uses one consumer (or a few); a bench's 1,000 long polls take 16 accounts ([CTX42]).
 */
export const CONSUMERS_PER_USER = 1_000

/**
 * [CTX68] Dead letters one re-drive transaction takes at most (a re-drive runs as many as it
 * needs): PostgreSQL holds both consumer rows' locks, and SQLite its one writer, for one batch only.
 */
export const REDRIVE_BATCH = 500

/**
 * [CTX68] [CTX69] Runs `batch` until one comes back short (`last` null: fewer rows than its limit),
 * each starting after the last version the one before took: it ends however many rows arrive
 * meanwhile.
 * `each` sees every batch as it comes (and may throw to stop).
 */
async function inBatches<B extends { last: number | null }>(batch: (after: number) => Promise<B>, each?: (b: B) => void): Promise<void> {
  for (let after = 0; ; ) {
    const b = await batch(after)
    each?.(b)
    if (b.last === null) return
    after = b.last
  }
}

/** [CTX38] The most consumers one status page lists. */
const CONSUMERS_PER_PAGE = 100
/** [CTX31] Commits remembered for a pull whose lease statement was under way when they came. */
const RECENT_CHANGES = 256
/** How many consumer rows a service keeps in memory. */
const REMEMBERED = 10_000
/** How many subscriptions' compiled definitions (each up to CONTEXTUAL_BOUNDS.maxDefinitionBytes of JSON, its schemas built). */
const COMPILED_REMEMBERED = 500

/**
 * [CTX44] A reaction starts with at least this long left on its lease (else: denied; extend first).
 * The lease is at least 5 s; a reaction's checks and commit take milliseconds.
 */
export const REACT_LEASE_MARGIN_MS = 1_000

/**
 * [CTX31] A long poll of a consumer at its in-flight limit waits until its first lease ends (a settle
 * on this instance wakes it at once); on PostgreSQL, where another instance may settle one, it also
 * looks again this often. (Every second, 1,000 such polls were 1,000 lease statements a second.)
 */
export const FULL_RECHECK_MS = 5_000

/**
 * [CTX45] A settled event's row (acked, or skipped as unreadable) is deleted this long after it was
 * settled: the cursor is past it, its lease is void, and a repeated reaction resolves its outcome
 * row, which is kept. Without it every event ever delivered stayed a row per consumer.
 */
export const SETTLED_RETENTION_MS = 24 * 3600_000
/**
 * [CTX51] An outcome row (a reaction's answer to its repeats, and its causation record) is deleted
 * this long after the reaction by default (OUTCOME_RETENTION_DAYS), once its event is settled or
 * gone: a token expires with its lease, so by then no repeat can be anything but denied. Without
 * it every reaction ever made stayed a row.
 */
export const OUTCOME_RETENTION_MS = 30 * 24 * 3600_000
/** How often the sweep runs, and how many rows one of its statements deletes at most. */
const SWEEP_EVERY_MS = 10 * 60_000
const SWEEP_ROWS = 1_000
const SWEEP_CONSUMERS = 500

/** [CTX59] The digest of a reaction's parameters, canonical (key order and absent optionals do not count). */
const paramsDigest = (params: unknown): string => sha256Hex(`params:${canonicalJson(params ?? {})}`).slice(0, 32)

const PARAMS_DIFFER = "This event's reaction was already committed with other parameters; yours were not applied (the outcome returned is the committed one)."

/**
 * [CTX59] Whether a repeat's parameters differ from those its outcome was committed with (an
 * outcome recorded before the digest was kept: not known, so not said).
 */
function paramsDiffer(prior: OutcomeRow, rawParams: Record<string, unknown>): boolean {
  let recorded: unknown
  try {
    recorded = (JSON.parse(prior.causation) as { paramsDigest?: unknown }).paramsDigest
  } catch {
    return false
  }
  return typeof recorded === 'string' && recorded !== paramsDigest(rawParams)
}

/** [CTX63] One answer for a consumer that is not there and one the caller may not see or act on, on every operation. */
const noConsumer = (id: string) => new WeftError('not_found', `No consumer ${id} that you can see (consumers are seen by their owner and by an Admin of their subscription).`)

const DENIED = 'This reaction is not authorized now (the lease, the token, your access or the source row no longer allow it).'
const deny = () => new WeftError('reaction_denied', DENIED)

/** Deeper than `max` levels of objects and arrays (walked without recursion). */
function nestsDeeperThan(v: unknown, max: number): boolean {
  const stack: [unknown, number][] = [[v, 0]]
  while (stack.length > 0) {
    const [x, depth] = stack.pop()!
    if (x === null || typeof x !== 'object') continue
    if (depth >= max) return true
    for (const child of Object.values(x)) stack.push([child, depth + 1])
  }
  return false
}

function parse<T>(schema: z.ZodType<T>, raw: unknown, what: string): T {
  // The same answer on every transport: zod's JSON schema recurses (a stack overflow, a 500, past
  // a few thousand levels), and only MCP checked depth before it.
  if (nestsDeeperThan(raw, DEFAULT_MAX_JSON_DEPTH)) throw new WeftError('invalid_request', `${what} nests deeper than ${DEFAULT_MAX_JSON_DEPTH} levels.`)
  const r = schema.safeParse(raw)
  if (r.success) return r.data
  const issue = r.error.issues[0]
  // [CTX62] A required field left out is named as such, on HTTP and gRPC as on MCP.
  if (issue?.code === 'invalid_type' && issue.path.length === 1 && (typeof raw !== 'object' || raw === null || !Object.prototype.hasOwnProperty.call(raw, issue.path[0]!))) {
    throw new WeftError('invalid_request', `${what} is invalid: ${String(issue.path[0])} is required.`)
  }
  const where = issue && issue.path.length ? ` at ${issue.path.join('.')}` : ''
  throw new WeftError('invalid_request', `${what} is invalid${where}: ${issue?.message ?? 'invalid'}.`)
}

/**
 * [CTX53] The answer of a pull whose signal ended it: the reason when it is Weft's (a session that
 * ended, [AUTH8]: `unauthorized`), else no item (the caller went away, [CTX42]).
 */
function endedBy(signal: AbortSignal, consumerId: string): NextResult {
  if (isWeftError(signal.reason)) throw signal.reason
  return { consumerId, item: null }
}

function userOf(principal: Principal): string {
  if (principal.kind !== 'user') throw new WeftError('unauthorized', 'Sign in first.')
  return principal.userId
}

/** A long poll waiting: the consumer it pulls for, and the events that may give it work (null: none; only its own consumer's settling can). */
interface Waiter {
  consumerId: string
  filter: Readonly<EventFilter> | null
}

interface WakeListener {
  consumerId: string
  principal: Principal
  filter: Readonly<EventFilter>
  wake(path: string | null): void
}

export interface ContextualServiceOptions {
  nodes: NodeApi
  /**
   * `readRegions` ([CTX8]): without it, every change the filter matches is ingested (a pull still
   * skips what the owner cannot read). `groupsOf` ([CTX54]): without it, only changes withheld
   * from the owner by name are skipped.
   */
  access: Pick<AccessService, 'permissions' | 'capabilityRevision'> & Partial<Pick<AccessService, 'readRegions' | 'groupsOf'>>
  storage: StorageAdapter
  log: Logger
  clock?: Clock
  /** 32 bytes (CONTEXTUAL_SEAL_KEY, base64); default: the key kept in the database's contextual meta row. */
  sealKey?: Buffer
  /** [CTX51] How long an outcome row is kept after its reaction (default OUTCOME_RETENTION_MS); null: forever. */
  outcomeRetentionMs?: number | null
}

/**
 * [CTX48] The other instances of a deployment (Redis, cluster.ts): a consumer's settle, nack,
 * re-drive or delete on one instance wakes its long polls (and wake-up listeners) on the others.
 * Payload-free: a consumer id and whether work became due; what a woken poll then leases is read
 * from storage under its own caller's rights. Lost messages cost only latency (PostgreSQL polls
 * of a full consumer still look again every FULL_RECHECK_MS).
 */
export interface ContextualPeers {
  publish(consumerId: string, due: boolean): void
  onWake(handler: (consumerId: string, due: boolean) => void): void
}

/** [OPS14] Change records the overview reads after a quiet consumer's cursor (one page of a pull's ingest). */
const UNREAD_SCANNED = 500

/** [CTX10] Page budgets a pull that may not wait reads on through, when its consumer is far behind the log. */
const CATCH_UP_BUDGETS = 10

export class ContextualService {
  private readonly clock: Clock
  private peers: ContextualPeers | null = null
  private metaP: Promise<ContextualMeta & { key: Buffer }> | null = null
  /** [CTX31] Long polls waiting, each with its consumer and the events that may give it work. */
  private readonly waiters = new Map<() => void, Waiter>()
  /** [CTX48] The same long polls by consumer: a consumer's wake-up (from any instance) visits only its own. */
  private readonly waitersOf = new Map<string, Set<() => void>>()
  /**
   * [CTX31] What happened while a pull's lease statement ran (its waiter not registered yet), so it
   * does not sleep through it: settles numbered in one sequence, each consumer's last one kept (the
   * REMEMBERED most recent; of those forgotten, the latest number: a pull of a forgotten consumer
   * counts any later one as its own and leases again), and the last RECENT_CHANGES commits numbered.
   */
  private settleSeq = 0
  private readonly settledAt = new Map<string, number>()
  private forgottenSettle = 0
  private readonly recent: { seq: number; change: { path: string; node_type: string; kind: string } }[] = []
  private changeSeq = 0
  private feed: Subscription | null = null
  /** [CTX45] Stops the periodic sweep; whether one is under way (a tick during it is skipped). */
  private stopSweeps: (() => void) | null = null
  private sweeping = false
  /** [CTX39] Wake-up listeners: each bound to one consumer of its owner, with the filter as the owner read the definition. */
  private readonly listeners = new Set<WakeListener>()
  /** Reactions under way, per idempotency key: one at a time in this process (storage fences across processes). */
  private readonly reacting = new Map<string, Promise<unknown>>()
  /**
   * [CTX44] The lease operations of one owner on one work item that can end the lease (react, ack,
   * nack), one after another in this process. A reaction's change reaches the node (and its editors) before
   * its commit, whose transaction checks the lease: an ack of the same lease landing in between
   * refused that commit, and the refused change made the node's editors reconnect. A worker sending
   * both at once did that every time. Keyed by the owner too: nobody else's call can delay them.
   */
  private readonly leaseTurns = new Map<string, Promise<unknown>>()
  /**
   * Consumer rows seen (immutable but for the cursor, which is not used from here), so `next` skips
   * the upsert and `nack`/`extend` the read. Never an authorization: the lease and every fenced
   * statement check the owner in storage; a lease that finds the row gone or another's drops it, and
   * a changed history incarnation (a restore) drops them all with the meta.
   */
  private readonly consumerRows = new Map<string, ConsumerRow>()
  /**
   * [CTX69] Consumers whose takeover of their predecessor's pending events this instance ran to
   * the end (a consumer read by `status` is remembered above before any pull of it took over).
   * Only with a row remembered: a consumer made again after a delete or a restore runs it again.
   */
  private readonly carried = new Map<string, true>()
  /** Compiled definitions by subscription path, node version and update time. */
  /** [CTX42] Each user's long polls waiting now (WAITING_PER_USER at most). */
  private readonly waitingOf = new Map<string, number>()
  /** Each subscription's definition as last compiled (by path: an older version is replaced, not kept). */
  private readonly compiled = new Map<string, { version: string; def: CompiledDefinition; createdAt: string }>()

  /** The threads' clock over ours (a thread post stamps its cell with it). */
  private readonly threadClock: ThreadClock

  constructor(private readonly opts: ContextualServiceOptions) {
    this.clock = opts.clock ?? realClock
    this.threadClock = { now: () => new Date(this.clock.now()), sleep: systemClock.sleep }
  }

  /** [CTX31] Payload-free wake-ups: a commit wakes the long polls it may give work, which re-ask durable truth. */
  start(): void {
    this.stopSweeps ??= every(this.clock, SWEEP_EVERY_MS, () => void this.sweep())
    this.feed ??= this.opts.nodes.changes$.subscribe((c) => {
      const change = { path: c.path, node_type: c.nodeType, kind: c.kind }
      this.recent.push({ seq: ++this.changeSeq, change })
      if (this.recent.length > RECENT_CHANGES) this.recent.shift()
      this.wake(change)
      for (const l of this.listeners) {
        // [CTX39] Only a change of the consumer's events that its owner may read now: a hidden commit wakes nobody.
        if (matchesEventFilter(l.filter, change) && this.opts.access.permissions(l.principal, c.path as NodePath).has('Read')) l.wake(c.path)
      }
    })
  }

  stop(): void {
    this.feed?.unsubscribe()
    this.feed = null
    this.stopSweeps?.()
    this.stopSweeps = null
    this.wakeAll()
  }

  private async sweep(): Promise<void> {
    if (this.sweeping) return
    this.sweeping = true
    try {
      const n = await this.prune()
      if (n > 0) this.opts.log.info({ op: 'contextual.prune', deleted: n }, 'contextual: settled events deleted')
      const o = await this.pruneOutcomes()
      if (o > 0) this.opts.log.info({ op: 'contextual.prune', outcomes: o }, 'contextual: outcomes past their retention deleted')
    } catch (err) {
      this.opts.log.warn({ err }, 'contextual: the sweep of settled events failed; it runs again later')
    } finally {
      this.sweeping = false
    }
  }

  /**
   * [CTX51] Deletes the outcome rows recorded the retention before `now` whose event is settled
   * or gone (never one a pending, leased or dead event may still need), a bounded batch per
   * statement; answers how many. Each instance of a cluster may run it at once.
   */
  async pruneOutcomes(now = this.clock.now()): Promise<number> {
    const keep = this.opts.outcomeRetentionMs === undefined ? OUTCOME_RETENTION_MS : this.opts.outcomeRetentionMs
    if (keep === null) return 0
    const before = new Date(now - keep).toISOString()
    let deleted = 0
    for (let after: { at: string; key: string } | null = null; ; ) {
      const batch: { deleted: number; last: { at: string; key: string } | null } = await this.call({ op: 'pruneOutcomes', before, limit: SWEEP_ROWS, after })
      deleted += batch.deleted
      if (batch.deleted < SWEEP_ROWS || !batch.last) return deleted
      after = batch.last
    }
  }

  /**
   * [CTX45] Deletes the rows of events settled SETTLED_RETENTION_MS before `now`, every consumer's,
   * a bounded batch per statement; answers how many. Each instance of a cluster may run it at once.
   */
  async prune(now = this.clock.now()): Promise<number> {
    const before = now - SETTLED_RETENTION_MS
    let deleted = 0
    for (let after = ''; ; ) {
      const ids = await this.call<string[]>({ op: 'consumerIds', after, limit: SWEEP_CONSUMERS, settledBefore: before })
      for (const consumerId of ids) {
        try {
          for (;;) {
            const n = await this.call<number>({ op: 'prune', consumerId, before, limit: SWEEP_ROWS })
            deleted += n
            if (n < SWEEP_ROWS) break
          }
        } catch (err) {
          // One consumer's failure (a storage hiccup) leaves the others swept; it is tried next time.
          this.opts.log.warn({ err, consumerId }, 'contextual: sweeping a consumer failed; the next sweep tries again')
        }
      }
      if (ids.length < SWEEP_CONSUMERS) return deleted
      after = ids.at(-1)!
    }
  }

  /**
   * [CTX39] Listens for "there may be work for this consumer" — the caller's own consumer only (a
   * wake-up always names a subscription identity; there is no database-wide one). `wake` is told
   * the changed path for in-process use; transports send nothing of it. Returns the unlisten.
   */
  async listen(principal: Principal, raw: unknown, wake: (path: string | null) => void): Promise<() => void> {
    const req = parse(ConsumerRequest, raw, 'The wake-up request')
    const consumer = await this.ownConsumer(principal, req.consumerId)
    const def = await this.definition(principal, consumer.subscriptionPath as NodePath)
    const listener: WakeListener = { consumerId: consumer.id, principal, filter: def.events, wake }
    this.listeners.add(listener)
    return () => this.listeners.delete(listener)
  }

  /** [CTX48] Hears the other instances' consumer changes (once, after the cluster started). */
  connect(peers: ContextualPeers): void {
    this.peers = peers
    peers.onWake((consumerId, due) => this.wakeHere(consumerId, due))
  }

  /**
   * [CTX31] [CTX48] A consumer's state changed: its ack (or settle) freed a lease slot, its nack or
   * re-drive made work due (`due`: its wake-up listeners are told too), it was deleted. Its long
   * polls wake, here and on the other instances; nobody else's: work of one consumer is never another's.
   */
  private wakeConsumer(consumerId: string, due = false): void {
    this.wakeHere(consumerId, due)
    this.peers?.publish(consumerId, due)
  }

  private wakeHere(consumerId: string, due: boolean): void {
    // The most recent last: what is forgotten first is the consumer that settled longest ago.
    this.settledAt.delete(consumerId)
    this.remember(this.settledAt, consumerId, ++this.settleSeq, REMEMBERED, (at) => (this.forgottenSettle = Math.max(this.forgottenSettle, at)))
    for (const w of [...(this.waitersOf.get(consumerId) ?? [])]) w()
    if (due) for (const l of this.listeners) if (l.consumerId === consumerId) l.wake(null)
  }

  private wakeAll(): void {
    const ws = [...this.waiters.keys()]
    this.waiters.clear()
    for (const w of ws) w()
  }

  /** Whether, since `seen`, the consumer settled something or a commit of `filter`'s events came (too many commits to tell: yes). */
  private missed(consumerId: string, seen: { settles: number; change: number }, filter: Readonly<EventFilter> | null): boolean {
    if ((this.settledAt.get(consumerId) ?? this.forgottenSettle) > seen.settles) return true
    if (!filter || this.changeSeq === seen.change) return false
    if (this.changeSeq - seen.change > this.recent.length) return true
    return this.recent.some((r) => r.seq > seen.change && matchesEventFilter(filter, r.change))
  }

  /** Wakes the waiters whose filter the change matches (each one leaves the map as it resolves). */
  private wake(change: { path: string; node_type: string; kind: string }): void {
    for (const [w, { filter }] of [...this.waiters]) if (filter && matchesEventFilter(filter, change)) w()
  }

  /** [CTX42] Long polls waiting now. */
  get waiting(): number {
    return this.waiters.size
  }

  private wait(user: string, ms: number, waiter: Waiter, signal?: AbortSignal): Promise<void> {
    // A caller gone while the lease was being read (its abort event has fired already) waits for nothing.
    if (signal?.aborted) return Promise.resolve()
    const waiting = this.waitingOf.get(user) ?? 0
    if (waiting >= WAITING_PER_USER) {
      throw new WeftError('rate_limited', `At most ${WAITING_PER_USER} long polls (next with waitSeconds) of yours wait at once, on every transport; let one end first.`)
    }
    this.waitingOf.set(user, waiting + 1)
    return new Promise((resolve) => {
      let finished = false
      const done = () => {
        if (finished) return
        finished = true
        cancel()
        signal?.removeEventListener('abort', done)
        this.waiters.delete(done)
        const mine = this.waitersOf.get(waiter.consumerId)
        mine?.delete(done)
        if (mine?.size === 0) this.waitersOf.delete(waiter.consumerId)
        const left = (this.waitingOf.get(user) ?? 1) - 1
        if (left > 0) this.waitingOf.set(user, left)
        else this.waitingOf.delete(user)
        resolve()
      }
      const cancel = this.clock.setTimeout(done, ms)
      this.waiters.set(done, waiter)
      const mine = this.waitersOf.get(waiter.consumerId) ?? new Set<() => void>()
      mine.add(done)
      this.waitersOf.set(waiter.consumerId, mine)
      signal?.addEventListener('abort', done, { once: true })
    })
  }

  /** `fn` after every earlier lease operation of `user` on this work item has settled (see leaseTurns). */
  private inTurn<T>(user: string, consumerId: string, eventId: string, fn: () => Promise<T>): Promise<T> {
    const key = `${user}\n${consumerId}\n${eventId}`
    const before = this.leaseTurns.get(key)
    const turn = before ? before.then(fn, fn) : fn()
    const settled = turn.catch(() => undefined)
    this.leaseTurns.set(key, settled)
    void settled.then(() => {
      if (this.leaseTurns.get(key) === settled) this.leaseTurns.delete(key)
    })
    return turn
  }

  private call<T>(c: ContextualCall): Promise<T> {
    return this.opts.storage.contextual(c) as Promise<T>
  }

  private remember<V>(map: Map<string, V>, key: string, value: V, most = REMEMBERED, forgotten?: (value: V) => void): V {
    if (map.size >= most && !map.has(key)) {
      const [oldest, old] = map.entries().next().value as [string, V]
      map.delete(oldest)
      forgotten?.(old)
    }
    map.set(key, value)
    return value
  }

  /** [CTX37] A lease ran under another history incarnation than the one we hold: a restore; forget what it replaced. */
  private async sameIncarnation(incarnation: number): Promise<void> {
    if (!this.metaP || incarnation === 0 || (await this.metaP).incarnation === incarnation) return
    this.metaP = null
    this.consumerRows.clear()
  }

  private meta(): Promise<ContextualMeta & { key: Buffer }> {
    this.metaP ??= this.call<ContextualMeta>({ op: 'meta', fresh: { databaseId: randomUUID(), incarnation: 1, sealKey: randomBytes(32).toString('base64') } }).then((m) => ({
      ...m,
      key: this.opts.sealKey ?? Buffer.from(m.sealKey, 'base64'),
    }))
    return this.metaP
  }

  /**
   * [CTX8] A consumer's events happen under the definition's PathPrefix: its owner reads there, or
   * its counts (pending, lag) would tell them when nodes they cannot read change.
   */
  private mayWatch(principal: Principal, def: CompiledDefinition): void {
    const prefix = tryParseNodePath(def.events.prefix)
    if (!prefix || !this.opts.access.permissions(principal, prefix).has('Read')) {
      throw new WeftError('forbidden', `You cannot read ${def.events.prefix}, where this subscription's events happen.`)
    }
  }

  /**
   * [CTX8] The owner's readable regions clipped to the events' prefix (usually one, or none): the
   * ingest takes only changes inside them, so a change under a subtree the owner is Denied is
   * counted nowhere (status `pending` counted it until a pull skipped it).
   */
  private readableWithin(user: string, prefix: string): PathRange[] | undefined {
    if (!this.opts.access.readRegions) return undefined
    const to = `${prefix}0`
    const out: PathRange[] = []
    for (const r of this.opts.access.readRegions(user)) {
      if (r.to <= prefix || r.from >= to) continue
      out.push({ from: r.from < prefix ? prefix : r.from, to: r.to > to ? to : r.to })
    }
    return out
  }

  /** The definition as the caller reads it, compiled. */
  private async definition(principal: Principal, path: NodePath): Promise<CompiledDefinition> {
    return (await this.definitionNode(principal, path)).def
  }

  /** The definition as the caller reads it, compiled, with when its node was made. */
  private async definitionNode(principal: Principal, path: NodePath): Promise<{ def: CompiledDefinition; createdAt: string }> {
    const node = await this.opts.nodes.get(principal, path)
    if (!node) throw new WeftError('not_found', `No ContextualSubscription at ${path} that you can read.`)
    if (node.nodeType !== 'ContextualSubscription') throw new WeftError('invalid_request', `${path} is a ${node.nodeType}, not a ContextualSubscription.`)
    const version = `${node.version}\n${node.updatedAt}\n${node.createdAt}`
    const known = this.compiled.get(path)
    return known?.version === version ? known : this.remember(this.compiled, path, { version, def: compileDefinition(node.content), createdAt: node.createdAt }, COMPILED_REMEMBERED)
  }

  /**
   * [CTX11] Another's consumer belongs to the subscription node at its path now: of its definition,
   * and made after the node was (a node deleted and made again with the same content, by someone
   * else, does not lend its consumers).
   */
  private ofThisNode(consumer: ConsumerRow, node: { def: CompiledDefinition; createdAt: string }): boolean {
    return consumer.defHash === node.def.hash && this.madeAtThisNode(consumer, node)
  }

  /**
   * [CTX56] Made at the subscription node standing at its path now, of this or an earlier
   * definition of it (an edit keeps the node; a node deleted and made again does not lend its
   * consumers): what an Admin of the node sees, re-drives and deletes, the stale ones marked.
   */
  private madeAtThisNode(consumer: ConsumerRow, node: { createdAt: string }): boolean {
    return Date.parse(consumer.createdAt) >= Date.parse(node.createdAt)
  }

  /** Whether the consumer's subscription node is still at its path (the definition it was made of, made before it). */
  private async stillAt(consumer: ConsumerRow): Promise<boolean> {
    const node = await this.definitionNode(SYSTEM, consumer.subscriptionPath as NodePath).catch(() => null)
    return node !== null && this.ofThisNode(consumer, node)
  }

  private async ownConsumer(principal: Principal, consumerId: string): Promise<ConsumerRow> {
    const user = userOf(principal)
    const c = await this.call<ConsumerRow | null>({ op: 'consumer', id: consumerId })
    if (!c || c.owner !== user) throw noConsumer(consumerId)
    return this.remember(this.consumerRows, c.id, c)
  }

  /** The caller's consumer, from memory when seen before (storage checks the owner again in the statement that uses it). */
  private knownConsumer(principal: Principal, consumerId: string): Promise<ConsumerRow> {
    const c = this.consumerRows.get(consumerId)
    return c && c.owner === userOf(principal) ? Promise.resolve(c) : this.ownConsumer(principal, consumerId)
  }

  /** [CTX5] The consumer `next` names, made on its first pull and owned by its caller. */
  private async ensureConsumer(user: string, def: CompiledDefinition, subscription: NodePath, params: JsonObject, name: string, id: string, nodeCreatedAt: string): Promise<ConsumerRow> {
    const known = this.consumerRows.get(id)
    if (known && known.owner === user && this.carried.has(id)) return known
    const consumer = known && known.owner === user ? known : await this.call<ConsumerRow | null>({
      op: 'ensureConsumer',
      consumer: {
        id, defHash: def.hash, operation: def.operation, subscriptionPath: subscription, params: canonicalJson(params), name, owner: user,
        limits: JSON.stringify(def.limits), cursor: await this.opts.storage.lastVersion(), createdAt: new Date(this.clock.now()).toISOString(),
      },
      most: CONSUMERS_PER_USER,
      // [CTX56] A consumer of an earlier definition of this node, under this name, goes on in it.
      continues: { since: nodeCreatedAt, filter: def.events },
    })
    if (!consumer) {
      throw new WeftError(
        'contextual_too_many_consumers',
        `You have ${CONSUMERS_PER_USER} consumers, the most one account may have; delete one you no longer use (find them with POST /api/contextual/mine or on the app's page #/consumers, which marks those whose subscription is gone; delete with POST /api/contextual/delete or the button there) and pull again.`,
      )
    }
    if (consumer.owner !== user) throw new WeftError('forbidden', `Consumer ${name} of this subscription belongs to someone else; pick another name.`)
    // [CTX69] Its predecessor's pending events follow in batches of REDRIVE_BATCH, each its own
    // transaction, until one comes back short. Marked carried only after: a pull after a failure
    // (or a restart) runs them again and moves what is left.
    await inBatches((after) => this.call<{ moved: number; last: number | null }>({ op: 'carryOver', consumerId: id, since: nodeCreatedAt, filter: def.events, after, limit: REDRIVE_BATCH }))
    this.remember(this.carried, id, true)
    return this.remember(this.consumerRows, id, consumer)
  }

  /**
   * [CTX5] [CTX6] `next`: leases at most one event, waiting up to `waitSeconds` for one (long poll).
   * [CTX42] `signal` ends the wait (the caller went away; [AUTH8] its session ended, the signal's
   * reason a WeftError then thrown): its waiter is released and nothing more is leased for it.
   */
  async next(principal: Principal, raw: unknown, signal?: AbortSignal): Promise<NextResult> {
    const user = userOf(principal)
    const req = parse(NextRequest, raw, 'The next request')
    const subscription = parseNodePath(req.subscription)
    const { def, createdAt: nodeCreatedAt } = await this.definitionNode(principal, subscription)
    this.mayWatch(principal, def)
    const p = def.paramsSchema.safeParse(req.params ?? {})
    if (!p.success) throw new WeftError('invalid_params', `Consumer parameters are invalid: ${p.error.issues[0]?.message ?? 'invalid'}.`)
    const params = p.data
    const id = sha256Hex(canonicalJson([def.hash, def.operation, params, req.consumer])).slice(0, 32)
    let consumer = await this.ensureConsumer(user, def, subscription, params, req.consumer, id, nodeCreatedAt)
    // [CTX49] Pulled from another path than it was made at (the subscription node moved; the id
    // holds the definition, not the path): it now belongs to this one, as its owner's list says.
    // [CTX11] Not while its node is still there: a copy of the definition elsewhere (the same
    // identity) would take it over, and the copy's Admin (its owner, in a space of their own)
    // would re-drive its dead letters, while the subscription's Admin lost sight of it.
    if (consumer.subscriptionPath !== subscription) {
      if (await this.stillAt(consumer)) {
        throw new WeftError('conflict', `Consumer ${req.consumer} belongs to the subscription at ${consumer.subscriptionPath}, which holds this same definition: pull it there, or name another consumer here.`)
      }
      await this.call({ op: 'consumerPath', id, path: subscription })
      consumer = this.remember(this.consumerRows, id, { ...consumer, subscriptionPath: subscription })
    }
    const deadline = this.clock.now() + (req.waitSeconds ?? 0) * 1000
    let waited = false
    /** Scans past the page budget made by a pull that may not wait (CATCH_UP_BUDGETS at most). */
    let catchUps = 0
    // The history incarnation of the first lease: a consumer gone under a later one went with a restore, not a delete.
    let incarnation: number | null = null
    for (let made = false; ; ) {
      if (signal?.aborted) return endedBy(signal, id)
      const now = this.clock.now()
      const seen = { settles: this.settleSeq, change: this.changeSeq }
      const leased = await this.call<LeaseResult>({
        op: 'lease', consumerId: id, owner: user, filter: def.events, now, leaseMs: def.limits.leaseMs, maxInFlight: def.limits.maxInFlight, maxAttempts: def.limits.maxAttempts, token: randomBytes(16).toString('base64url'),
        readable: this.readableWithin(user, def.events.prefix),
        subjects: [user, ...(this.opts.access.groupsOf?.(user) ?? [])],
      })
      await this.sameIncarnation(leased.incarnation)
      incarnation ??= leased.incarnation
      if (leased.kind === 'gone') {
        this.consumerRows.delete(id)
        // [CTX46] Deleted while this pull waited: the pull ends (a waiting poll made it again at once,
        // and an Admin's delete of a polling agent's consumer never took).
        if (waited && leased.incarnation === incarnation) throw new WeftError('not_found', `Consumer ${req.consumer} of this subscription was deleted while you waited; pull again to start it anew from new events.`)
        // The row we remembered is gone (or, after a restore, another's): make or read it again, once.
        if (made) throw new WeftError('not_found', `Consumer ${req.consumer} of this subscription is gone; pull again.`)
        made = true
        consumer = await this.ensureConsumer(user, def, subscription, params, req.consumer, id, nodeCreatedAt)
        continue
      }
      // [CTX10] The scan stopped at its page budget with more of the log unread (a consumer far
      // behind): read on at once, while the pull may wait, and for a few budgets more when it may
      // not. It used to answer "nothing" with its event further on in the log, and a long poll
      // slept its whole wait: under a steady load elsewhere, a worker never caught up.
      if (leased.kind === 'none' && leased.behind && (this.clock.now() < deadline || ++catchUps <= CATCH_UP_BUDGETS)) continue
      if (leased.kind === 'leased') {
        const e = leased.event
        /** This lease's fence, as of `at`. */
        const fenceAt = (at: number) => ({ consumerId: id, eventId: e.eventId, token: e.token, attempt: e.attempt, now: at })
        // [CTX8] An event the caller cannot read is not theirs to see: skipped, never delivered.
        if (!this.opts.access.permissions(principal, e.path as NodePath).has('Read')) {
          await this.call({ op: 'skip', fence: fenceAt(now) })
          continue
        }
        let item: WorkItem
        try {
          item = await this.workItem(principal, def, consumer, params, e)
        } catch (err) {
          // [CTX18] An item that cannot be delivered (its context over the bound, the head moving
          // through every read, a storage error) goes back with its reason: a dead letter after the
          // last attempt, not a lease nobody holds a token of till it expires (a pull again found
          // nothing). Best effort: the answer is the item's error either way.
          const reason = isWeftError(err) ? err.message : 'The work item could not be built.'
          await this.call({ op: 'nack', fence: fenceAt(this.clock.now()), owner: user, availableAt: this.clock.now(), error: reason, maxAttempts: def.limits.maxAttempts }).catch(() => undefined)
          throw err
        }
        // [CTX53] Looked at again as it is handed out: a pull that ended while the item was leased
        // and built (its caller gone, [AUTH8] its session ended) gives the lease back, its attempt
        // unspent, and is told why; nobody holds a lease nobody was handed.
        if (signal?.aborted) {
          if (await this.call<boolean>({ op: 'release', fence: fenceAt(this.clock.now()), owner: user }).catch(() => false)) this.wakeConsumer(id, true)
          return endedBy(signal, id)
        }
        return { consumerId: id, item }
      }
      const left = deadline - this.clock.now()
      if (left <= 0) return { consumerId: id, item: null }
      // [CTX31] At its in-flight limit, no commit can give the consumer work: only its own ack or nack
      // (which wake it here), or a lease running out (it waits until the first ends). On PostgreSQL it
      // also looks again every FULL_RECHECK_MS (an ack may land on another instance).
      const at = leased.kind === 'none' || leased.kind === 'full' ? leased.nextAt : null
      let due = at !== null ? Math.max(1, at - this.clock.now()) : left
      if (leased.kind === 'full' && this.opts.storage.kind === 'postgres') due = Math.min(due, FULL_RECHECK_MS)
      // Woken already, while the lease statement ran: look again at once.
      if (this.missed(id, seen, leased.kind === 'full' ? null : def.events)) continue
      await this.wait(user, Math.min(left, due), { consumerId: id, filter: leased.kind === 'full' ? null : def.events }, signal)
      waited = true
    }
  }

  private async workItem(principal: Principal, def: CompiledDefinition, consumer: ConsumerRow, params: JsonObject, e: LeasedEvent): Promise<WorkItem> {
    const meta = await this.meta()
    const user = userOf(principal)
    const view = await hydrate(this.opts.nodes, this.opts.storage, principal, def, e, params)
    const root = randomUUID()
    // [CTX25] What the offer is made under; a reaction commits only while it is still the same.
    const rev = this.opts.access.capabilityRevision(user)
    const reactions: OfferedReaction[] = []
    for (const r of def.reactions.values()) {
      const target = resolveTemplate(r.spec.Target, e, params)
      if (!target) continue
      const targetNode = r.spec.Command === 'request_activity_status' ? await this.opts.nodes.get(principal, target).catch(() => null) : null
      // [CTX19] Offered only when declared AND the caller may run its command now.
      if (!mayRun(this.opts.access, principal, r, target, targetNode)) continue
      const claims: CausationClaims = {
        db: meta.databaseId, inc: meta.incarnation, def: def.hash, op: def.operation, consumer: consumer.id, name: consumer.name,
        event: e.eventId, attempt: e.attempt, lease: leaseDigest(e.token), principal: user, rev, reaction: r.name, command: r.commandId, target, root,
        exp: this.clock.now() + CONTEXTUAL_BOUNDS.leaseSeconds.max * 1000,
      }
      reactions.push({
        name: r.name, command: r.spec.Command, target, parameters: (r.spec.Parameters ?? {}) as JsonObject, rejections: r.spec.Rejections ?? [],
        causationToken: sealClaims(meta.key, claims),
      })
    }
    const causedBy = this.causedBy(principal, e)
    return {
      event: { eventId: e.eventId, version: e.version, path: e.path, nodeType: e.nodeType, kind: e.kind, node: view.event, ...(causedBy ? { causedBy } : {}) },
      leaseToken: e.token,
      attempt: e.attempt,
      expiresAt: new Date(e.expiresAt).toISOString(),
      databaseId: meta.databaseId,
      incarnation: meta.incarnation,
      contextHead: view.contextHead,
      hydration: view.results,
      reactions,
    }
  }

  /**
   * [CTX61] The contextual reaction whose commit the event is (its outcome rode that commit), from
   * its causation record: an agent skips its own echoes by it. Told only to a reader of that
   * reaction's subscription (it names a consumer and a reaction there).
   */
  private causedBy(principal: Principal, e: LeasedEvent): CausedBy | null {
    // [CTX70] Read by the lease on both storages.
    const text = e.causation
    if (!text) return null
    const c = JSON.parse(text) as { subscription?: string; consumer?: string; consumerName?: string; reaction?: string; event?: { id?: string }; rootRequestId?: string }
    const sub = tryParseNodePath(c.subscription)
    if (!sub || !c.consumer || !c.reaction || !c.event?.id || !this.opts.access.permissions(principal, sub).has('Read')) return null
    return { subscription: sub, consumerId: c.consumer, consumerName: c.consumerName ?? '', reaction: c.reaction, eventId: c.event.id, rootRequestId: c.rootRequestId ?? '' }
  }

  private fence(raw: z.infer<typeof FenceRequest>): Fence {
    return { consumerId: raw.consumerId, eventId: raw.eventId, token: raw.leaseToken, attempt: raw.attempt, now: this.clock.now() }
  }

  /** A fenced statement changed nothing: `not_found` when the consumer is not the caller's (read durably), else `stale_lease`. */
  private async refused(principal: Principal, consumerId: string): Promise<never> {
    this.consumerRows.delete(consumerId)
    await this.ownConsumer(principal, consumerId)
    throw new WeftError('stale_lease', 'This work item is no longer leased to you (expired, taken by another pull, or already settled); pull again.')
  }

  /** [CTX12] `ack`: settles the event, fenced by (lease token, attempt) and the owner, in one statement. */
  async ack(principal: Principal, raw: unknown): Promise<AckResult> {
    const user = userOf(principal)
    const req = parse(FenceRequest, raw, 'The ack request')
    const fence = this.fence(req)
    const acked = await this.inTurn(user, req.consumerId, req.eventId, () => this.settleLease(fence, user))
    if (acked) return { ok: true, state: 'acked', repeated: false }
    // [CTX60] The same ack again (its answer was lost): settled already under this very lease.
    if (await this.call<boolean>({ op: 'ackedUnder', fence, owner: user })) return { ok: true, state: 'acked', repeated: true }
    return this.refused(principal, req.consumerId)
  }

  /** Settles a leased event (fenced, `owner`'s consumer only); a lease slot is then free: the consumer's long polls look again. */
  private async settleLease(fence: Fence, owner: string): Promise<boolean> {
    const acked = await this.call<boolean>({ op: 'ack', fence, owner })
    if (acked) this.wakeConsumer(fence.consumerId)
    return acked
  }

  /** [CTX13] `nack`: back to pending after a bounded delay, or a dead letter after the last attempt. */
  async nack(principal: Principal, raw: unknown): Promise<{ state: 'pending' | 'dead' }> {
    const req = parse(NackRequest, raw, 'The nack request')
    const consumer = await this.knownConsumer(principal, req.consumerId)
    const limits = JSON.parse(consumer.limits) as CompiledDefinition['limits']
    const state = await this.inTurn(userOf(principal), req.consumerId, req.eventId, () => {
      const fence = this.fence(req)
      return this.call<'pending' | 'dead' | null>({
        op: 'nack', fence, owner: consumer.owner, availableAt: Math.ceil(fence.now + (req.delaySeconds ?? 0) * 1000), error: req.error ?? 'nacked', maxAttempts: limits.maxAttempts,
      })
    })
    if (!state) return this.refused(principal, req.consumerId)
    this.wakeConsumer(req.consumerId, state === 'pending' && !req.delaySeconds)
    return { state }
  }

  /** [CTX14] `extend`: a heartbeat; the lease runs `seconds` (default: the definition's lease) from now. */
  async extend(principal: Principal, raw: unknown): Promise<{ expiresAt: string }> {
    const req = parse(ExtendRequest, raw, 'The extend request')
    const consumer = await this.knownConsumer(principal, req.consumerId)
    const limits = JSON.parse(consumer.limits) as CompiledDefinition['limits']
    // Not in turn with a reaction ([CTX44]): a heartbeat leaves the lease held past the moment a
    // reaction's commit is fenced by (it ends at least 5 s from now), so it refuses no commit.
    const fence = this.fence(req)
    const expiresAt = fence.now + (req.seconds !== undefined ? req.seconds * 1000 : limits.leaseMs)
    if (!(await this.call<boolean>({ op: 'extend', fence, owner: consumer.owner, expiresAt }))) await this.refused(principal, req.consumerId)
    return { expiresAt: new Date(expiresAt).toISOString() }
  }

  /**
   * [OPS10] [OPS12] [OPS14] What the operator's page lists: the newest dead letters, and the
   * consumers with events waiting, the oldest first. Waiting is what the consumer's pull would
   * hand out now: its pending events, and the changes after its cursor its pull would ingest
   * (the same rule, `ingests`). The second counts for a worker that stopped pulling: its matching
   * changes were never ingested, and it was not listed at all. Bounded: at most `limit` consumers
   * behind the head with nothing ingested waiting (the furthest behind first), plus ([SCALE22]) the
   * at most `limit` listed with events waiting whose cursor is behind the head, and for each one
   * page of UNREAD_SCANNED change records after its cursor (by version, the primary key), so a
   * reading reads at most 2 × `limit` × UNREAD_SCANNED change rows however long the log. An event
   * further on than that page is not counted (a stopped consumer whose first one lies there is not
   * listed: the price of the bound; its status page tells its changes since the last pull).
   */
  async attention(limit: number, now: number): Promise<ContextualAttention> {
    const [a, quiet] = await Promise.all([
      this.call<ContextualAttention>({ op: 'attention', limit, now }),
      this.call<QuietConsumer[]>({ op: 'quietConsumers', limit, now }),
    ])
    // [SCALE22] A consumer listed with events pending may have changes after its cursor waiting as
    // well (a pull that leases a due event ingests nothing, and a worker that stops then leaves
    // them unread): they are counted too, or the page said 1 where 2 waited.
    const listed = await Promise.all(a.lagging.map(async (l) => {
      if (l.cursor >= a.headVersion) return l
      const row = await this.call<ConsumerRow | null>({ op: 'consumer', id: l.consumerId })
      const u = row ? await this.unreadOf({ consumerId: row.id, subscriptionPath: row.subscriptionPath, name: row.name, cursor: row.cursor, defHash: row.defHash, owner: row.owner, createdAt: row.createdAt }) : null
      return u ? { ...l, waiting: l.waiting + u.count, oldest: Math.min(l.oldest, u.oldest) } : l
    }))
    const unread = await Promise.all(quiet.map(async (c) => {
      const u = await this.unreadOf(c)
      return u ? { consumerId: c.consumerId, subscriptionPath: c.subscriptionPath, name: c.name, cursor: c.cursor, lag: Math.max(0, a.headVersion - c.cursor), waiting: u.count, oldest: u.oldest } : null
    }))
    const lagging = [...listed, ...unread.filter((l) => l !== null)].sort((x, y) => x.oldest - y.oldest || (x.consumerId < y.consumerId ? -1 : 1)).slice(0, limit)
    return { ...a, lagging }
  }

  /**
   * [OPS14] The changes after the consumer's cursor its pull would ingest, in one page of
   * UNREAD_SCANNED change records; null when none (or its subscription holds another definition).
   * Its filter is its subscription node's definition, read as system (the operator shares no space
   * with its owner); a node replaced since (another definition) is not its own any more.
   */
  private async unreadOf(c: QuietConsumer): Promise<{ count: number; oldest: number } | null> {
    const node = await this.definitionNode(SYSTEM, c.subscriptionPath as NodePath).catch(() => null)
    if (!node || node.def.hash !== c.defHash || Date.parse(c.createdAt) < Date.parse(node.createdAt)) return null
    const u = await this.call<UnreadEvents>({
      op: 'unread', after: c.cursor, limit: UNREAD_SCANNED, filter: node.def.events,
      readable: this.readableWithin(c.owner, node.def.events.prefix), subjects: [c.owner, ...(this.opts.access.groupsOf?.(c.owner) ?? [])],
    })
    return u.count > 0 && u.oldest !== null ? { count: u.count, oldest: u.oldest } : null
  }

  /** [CTX29] `status` of one's own consumer. */
  async status(principal: Principal, raw: unknown): Promise<ContextualStatus> {
    const req = parse(ConsumerRequest, raw, 'The status request')
    const consumer = await this.ownConsumer(principal, req.consumerId)
    this.mayWatch(principal, await this.definition(principal, consumer.subscriptionPath as NodePath).catch(() => { throw noConsumer(req.consumerId) }))
    const def = await this.definition(principal, consumer.subscriptionPath as NodePath).catch(() => null)
    const status = await this.statusOf(principal, consumer, def)
    // Deleted since it was read.
    if (!status) throw noConsumer(req.consumerId)
    return status
  }

  /**
   * [CTX49] The caller's own consumers over every subscription, a page at a time, each marked
   * whether its subscription still holds its definition: how a person at the bound finds the
   * consumers of deleted or changed subscriptions to delete them. Only their own, so no access
   * question but the node's, read as them.
   */
  async mine(principal: Principal, raw: unknown): Promise<MyConsumers> {
    const user = userOf(principal)
    const req = parse(MineRequest, raw, 'The mine request')
    const limit = req.limit ?? CONSUMERS_PER_PAGE
    // One more than the page: `next` only when there is more.
    const page = await this.call<{ consumers: ConsumerRow[]; total: number }>({ op: 'consumersOfOwner', owner: user, after: req.after ?? '', limit: limit + 1 })
    const rows = page.consumers.slice(0, limit)
    // Each subscription path read once per page. Only a node that is not there, not readable or
    // not a valid subscription makes a consumer not current; any other failure (storage) is the
    // request's, not a reason to tell someone their live consumer is dead.
    const defs = new Map<string, CompiledDefinition | null>()
    for (const path of new Set(rows.map((c) => c.subscriptionPath))) {
      try {
        const def = await this.definition(principal, path as NodePath)
        this.mayWatch(principal, def)
        defs.set(path, def)
      } catch (err) {
        if (!isWeftError(err) || !['not_found', 'forbidden', 'invalid_request', 'invalid_path', 'contextual_invalid_definition'].includes(err.code)) throw err
        defs.set(path, null)
      }
    }
    const consumers: MyConsumer[] = rows.map((c) => ({ consumerId: c.id, subscription: c.subscriptionPath, name: c.name, createdAt: c.createdAt, current: defs.get(c.subscriptionPath)?.hash === c.defHash }))
    return { consumers, total: page.total, next: page.consumers.length > limit ? rows[rows.length - 1]!.id : null }
  }

  /**
   * [CTX38] The consumers of one subscription with their status, for its status page: one's own,
   * or every consumer for an Admin of the subscription (ManageAccess, who may re-drive them).
   */
  async consumers(principal: Principal, raw: unknown): Promise<SubscriptionConsumers> {
    const user = userOf(principal)
    const req = parse(SubscriptionRequest, raw, 'The consumers request')
    const path = parseNodePath(req.subscription)
    const perms = this.opts.access.permissions(principal, path)
    const node = perms.has('Read') ? await this.definitionNode(principal, path).catch(() => null) : null
    if (!node) throw new WeftError('not_found', `No ContextualSubscription at ${path} that you can read.`)
    this.mayWatch(principal, node.def)
    const canRedrive = perms.has('ManageAccess')
    const rows = await this.call<ConsumerRow[]>({ op: 'consumersOf', subscriptionPath: path, owner: canRedrive ? null : user, limit: CONSUMERS_PER_PAGE })
    const listed: Array<{ c: ConsumerRow; status: ContextualStatus }> = []
    for (const c of rows) {
      // [CTX56] Another's consumer of an earlier definition of this node is listed too, stale.
      if (c.owner !== user && !this.madeAtThisNode(c, node)) continue
      // Deleted meanwhile: not listed.
      const status = await this.statusOf(principal, c, node.def)
      if (status) listed.push({ c, status })
    }
    // [CTX55] Whose each is, by name: an Admin sees every worker's consumer and may delete it.
    const names = await personNames(this.opts.nodes, listed.map(({ c }) => c.owner))
    const consumers: ListedConsumer[] = listed.map(({ c, status }) => ({ ...status, owner: c.owner, ownerName: names.get(c.owner) ?? null }))
    const stale = { consumers: 0, pending: 0, leased: 0, dead: 0 }
    for (const c of consumers) {
      if (c.current) continue
      stale.consumers++
      stale.pending += c.pending
      stale.leased += c.leased
      stale.dead += c.dead
    }
    return { subscription: path, definitionHash: node.def.hash, canRedrive, consumers, stale }
  }

  /** A consumer's status as `viewer` may see it: dead letters of nodes they cannot read are left out. */
  private async statusOf(viewer: Principal, consumer: ConsumerRow, def: CompiledDefinition | null): Promise<ContextualStatus | null> {
    const status = await this.call<ConsumerStatus | null>({ op: 'status', consumerId: consumer.id, now: this.clock.now() })
    if (!status) return null
    const { deadLetters, ...s } = status
    const readable = deadLetters.filter((d) => this.opts.access.permissions(viewer, d.path as NodePath).has('Read'))
    return {
      consumerId: consumer.id, subscription: consumer.subscriptionPath, name: consumer.name, ...s, deadLetters: readable, lag: Math.max(0, s.headVersion - s.cursor),
      current: def?.hash === consumer.defHash, definitionHash: consumer.defHash, createdAt: consumer.createdAt,
    }
  }

  /**
   * [CTX11] [CTX46] A consumer as `principal` may see it to act on it: their own, or another's of a
   * subscription they read, of the definition it holds now (a node that stood at the path before,
   * deleted and its name taken again, does not lend its consumers). Anything else is not found, so
   * nobody learns that a consumer exists where they cannot see it.
   */
  private async visibleConsumer(principal: Principal, consumerId: string): Promise<{ consumer: ConsumerRow; mine: boolean; admin: boolean; def: CompiledDefinition | null }> {
    const user = userOf(principal)
    const consumer = await this.call<ConsumerRow | null>({ op: 'consumer', id: consumerId })
    if (!consumer) throw noConsumer(consumerId)
    const path = consumer.subscriptionPath as NodePath
    const perms = this.opts.access.permissions(principal, path)
    const mine = consumer.owner === user
    const node = perms.has('Read') ? await this.definitionNode(principal, path).catch(() => null) : null
    if (!mine) {
      if (!node || !this.madeAtThisNode(consumer, node)) throw noConsumer(consumerId)
      // [CTX63] Someone else's consumer is not found by a non-Admin, as `status` answers it: a
      // refusal by name (forbidden) told that it exists.
      if (!perms.has('ManageAccess')) throw noConsumer(consumerId)
    }
    return { consumer, mine, admin: perms.has('ManageAccess'), def: node && this.madeAtThisNode(consumer, node) ? node.def : null }
  }

  /**
   * [CTX11] An Admin of the subscription re-drives a consumer's dead letters (attempts start over);
   * [CTX66] with `eventId`, only that one (a letter the consumer does not hold, or holds but not
   * dead, is refused by its own code and nothing changes). [CTX68] In batches of REDRIVE_BATCH
   * letters, each its own transaction: however many letters, no one transaction holds the
   * consumer rows (and SQLite's writer) longer than one batch.
   */
  async redrive(principal: Principal, raw: unknown): Promise<{ redriven: number }> {
    const req = parse(RedriveRequest, raw, 'The redrive request')
    const { consumer, admin, def } = await this.visibleConsumer(principal, req.consumerId)
    if (!admin) throw new WeftError('forbidden', 'Only an Admin of the subscription re-drives dead letters.')
    // [CTX56] A stale consumer's dead letters go to the consumer that continues it (same owner,
    // Operation, parameters and name under the definition now), where its worker pulls them; while
    // none is made yet they wait here and move to it when its first pull makes it.
    const successor = def && def.hash !== consumer.defHash && def.operation === consumer.operation ? sha256Hex(canonicalJson([def.hash, def.operation, JSON.parse(consumer.params) as JsonObject, consumer.name])).slice(0, 32) : null
    let redriven = 0
    await inBatches(
      (after) => this.call<RedriveBatch>({
        op: 'redrive', consumerId: consumer.id, after, limit: REDRIVE_BATCH,
        ...(req.eventId !== undefined ? { eventId: req.eventId } : {}),
        ...(successor ? { into: { id: successor, owner: consumer.owner, filter: def!.events } } : {}),
      }),
      (batch) => {
        redriven += batch.redriven
        if (batch.state === null) throw new WeftError('not_found', `Consumer ${consumer.id} holds no event ${req.eventId}: re-drive one of the eventIds its status lists under deadLetters.`)
        if (batch.state !== undefined) throw new WeftError('contextual_not_dead_letter', `Event ${req.eventId} of consumer ${consumer.id} is not a dead letter (it is ${batch.state}): only dead letters are re-driven.`)
      },
    )
    this.wakeConsumer(consumer.id, redriven > 0)
    if (successor) this.wakeConsumer(successor, redriven > 0)
    return { redriven }
  }

  /**
   * [CTX46] Deletes a consumer and its events, by its owner or an Admin of the subscription (as for
   * a re-drive); its reactions' outcomes (the causation records) are kept. Its leases are void at
   * once; a later pull naming it makes it again, at the head of the change log.
   */
  async delete(principal: Principal, raw: unknown): Promise<{ deleted: true }> {
    const req = parse(ConsumerRequest, raw, 'The delete request')
    const { consumer, mine, admin } = await this.visibleConsumer(principal, req.consumerId)
    if (!mine && !admin) throw noConsumer(req.consumerId)
    await this.call<boolean>({ op: 'deleteConsumer', id: consumer.id })
    this.consumerRows.delete(consumer.id)
    // Its long polls find it gone.
    this.wakeConsumer(consumer.id)
    this.opts.log.info({ op: 'contextual.delete', consumer: consumer.id, subscription: consumer.subscriptionPath, user: userOf(principal) }, 'contextual consumer deleted')
    return { deleted: true }
  }

  /** [CTX20]–[CTX28] `react`: one declared reaction, exactly once in effect. */
  async react(principal: Principal, raw: unknown, signal?: AbortSignal): Promise<ReactResult> {
    const user = userOf(principal)
    const req = parse(ReactRequest, raw, 'The react request')
    const meta = await this.meta()
    const claims = openClaims(meta.key, req.causationToken)
    if (!claims || claims.principal !== user || claims.db !== meta.databaseId || claims.inc !== meta.incarnation) throw deny()
    const result = await this.reactOnly(principal, user, claims, req)
    if (!req.next) return result
    // [CTX52] The pull after the settle, as the caller's own `next` of this consumer (its
    // subscription, name and parameters): outside the reaction's turn, so a long poll holds up
    // neither a repeat of the reaction nor anything else of the item.
    try {
      const consumer = await this.knownConsumer(principal, claims.consumer)
      const pulled = await this.next(
        principal,
        { subscription: consumer.subscriptionPath, consumer: consumer.name, params: JSON.parse(consumer.params) as JsonObject, ...(req.waitSeconds !== undefined ? { waitSeconds: req.waitSeconds } : {}) },
        signal,
      )
      return { ...result, next: pulled }
    } catch (err) {
      // Whatever stopped the pull, the reaction stands (committed, settled): its answer goes back.
      if (isWeftError(err)) return { ...result, nextError: { code: err.code, message: err.message } }
      this.opts.log.error({ err, op: 'contextual.react.next', consumer: claims.consumer }, 'the pull after a reaction failed')
      return { ...result, nextError: { code: 'internal', message: 'The next work item could not be pulled (the reaction is saved and settled); pull with next.' } }
    }
  }

  private async reactOnly(principal: Principal, user: string, claims: CausationClaims, req: ReactRequest): Promise<ReactResult> {
    // [CTX23] The idempotency key is the server's, from the sealed claims; a caller cannot pick it.
    // Per consumer (its identity holds the definition, the operation and the canonical parameters)
    // and principal: another consumer of the event, or another person, has an effect of its own, and
    // neither's outcome answers (or blocks) the other's reaction.
    const key = sha256Hex(canonicalJson([claims.def, claims.op, claims.consumer, claims.principal, claims.event, claims.command, claims.reaction])).slice(0, 48)
    for (;;) {
      const running = this.reacting.get(key)
      if (!running) break
      await running.catch(() => undefined)
    }
    const work = this.inTurn(user, claims.consumer, claims.event, () => this.reactOnce(principal, user, claims, key, req.params ?? {}, req.ack === true))
    this.reacting.set(key, work)
    try {
      return await work
    } finally {
      this.reacting.delete(key)
    }
  }

  private outcomeOf(row: OutcomeRow): ReactionOutcome {
    return { ...(JSON.parse(row.outcome) as ReactionOutcome), version: row.version }
  }

  private async reactOnce(principal: Principal, user: string, claims: CausationClaims, key: string, rawParams: Record<string, unknown>, settle: boolean): Promise<ReactResult> {
    const { nodes, access, log } = this.opts
    // One read of the outcome, the consumer and the lease (one round trip).
    const truth = await this.call<ReactTruth>({ op: 'reactTruth', key, consumerId: claims.consumer, eventId: claims.event })
    // [CTX27] A repeat resolves the persisted outcome, even with an expired token.
    const prior = truth.outcome
    if (prior) {
      if (prior.principal !== user) throw deny()
      const outcome = this.outcomeOf(prior)
      const differ = paramsDiffer(prior, rawParams)
      const repeat: ReactResult = { outcome, repeated: true, ...(differ ? { paramsDiffer: true, message: PARAMS_DIFFER } : {}) }
      return settle ? { ...repeat, acked: await this.settleRepeat(user, claims, truth, prior) } : repeat
    }
    const now = this.clock.now()
    // [CTX28] An expired token never authorizes a new commit.
    if (claims.exp <= now) throw deny()
    // [CTX24] Durable lease truth: this event, this attempt, leased and not expired.
    const { consumer, lease } = truth
    if (!consumer || consumer.owner !== user || consumer.defHash !== claims.def) throw deny()
    // [CTX44] With REACT_LEASE_MARGIN_MS left at least: the commit is fenced by this moment's clock, and
    // a pull after the lease's end (a new attempt) would refuse a commit still under way.
    if (!lease || lease.state !== 'leased' || lease.attempt !== claims.attempt || lease.expiresAt - now < REACT_LEASE_MARGIN_MS || !lease.token || leaseDigest(lease.token) !== claims.lease) throw deny()
    // [CTX25] Reauthorize as the caller now: the definition, the source row, the command.
    let def: CompiledDefinition
    try {
      def = await this.definition(principal, consumer.subscriptionPath as NodePath)
    } catch {
      throw deny()
    }
    const reaction = def.reactions.get(claims.reaction)
    if (def.hash !== claims.def || !reaction || reaction.commandId !== claims.command) throw deny()
    const source = lease.path as NodePath
    // [CTX25] The caller's capability revision is the token's (no grant, revocation or role change
    // touching them since the offer), and the event's source row is readable: checked now, and
    // again by `admit` in the one synchronous stretch in which the command's first write is
    // authorized and committed; that commit's transaction checks the row is still stored. Every
    // principal takes this path: no role is trusted on lease truth alone.
    /** [CTX26] What the command's commits carry: the attachment (set below), `admit`, and whether one landed. */
    const holder: CommitAttachment = { attachment: null }
    /** [CTX50] Set once the command itself deleted the source row (a delete of a subtree holding it). */
    const sourceGone = { value: false }
    const admit = (): void => {
      // [CTX50] The caller's authority is checked at each commit of the command until its first is
      // durable: the reaction is authorized atomically with its first write, and its later commits
      // (a thread post's enqueue, the rest of a subtree's delete) complete that command.
      if (!holder.landed && (access.capabilityRevision(user) !== claims.rev || !access.permissions(principal, source).has('Read'))) throw deny()
      // At every commit: a delete of the source applied here but not durable yet (storage checks the
      // durable row; on PostgreSQL a batch's verdicts do not see its own earlier writes).
      if (lease.kind !== 'Deleted' && !sourceGone.value && nodes.applied?.(source) === false) throw deny()
    }
    admit()
    if (lease.kind !== 'Deleted' && !(await nodes.get(principal, source).catch(() => null))) throw deny()
    const params = JSON.parse(consumer.params) as JsonObject
    const target = resolveTemplate(reaction.spec.Target, lease, params)
    if (target !== claims.target) throw deny()
    const targetNode = reaction.spec.Command === 'request_activity_status' ? await nodes.get(principal, target).catch(() => null) : null
    if (!mayRun(access, principal, reaction, target, targetNode)) throw deny()
    const p = reaction.params.safeParse(rawParams)
    if (!p.success) {
      const issue = p.error.issues[0]
      throw new WeftError('invalid_params', `Parameters of ${reaction.name} are invalid${issue?.path.length ? ` at ${issue.path.join('.')}` : ''}: ${issue?.message ?? 'invalid'}.`)
    }
    // [CTX26] The nested command is a separate audited operation with a derived child request id.
    const childRequestId = sha256Hex(`${claims.root}:${key}`).slice(0, 32)
    const causation = {
      rootRequestId: claims.root, childRequestId, subscription: consumer.subscriptionPath, definitionHash: claims.def, operation: claims.op,
      consumer: claims.consumer, consumerName: claims.name, event: { id: claims.event, path: lease.path, kind: lease.kind, version: lease.version },
      attempt: claims.attempt, principal: user, capabilityRevision: claims.rev, reaction: claims.reaction, commandId: claims.command, target,
      // [CTX59] What a repeat compares its parameters with (the digest only: the values are the command's).
      paramsDigest: paramsDigest(p.data),
    }
    const at = new Date(now).toISOString()
    const base = { reaction: reaction.name, eventId: claims.event, path: target, rootRequestId: claims.root, childRequestId }
    const attachment = (outcome: ReactionOutcome): ContextualAttachment => ({
      fence: { consumerId: claims.consumer, eventId: claims.event, token: lease.token!, attempt: claims.attempt, now },
      outcome: { key, consumerId: claims.consumer, eventId: claims.event, reaction: reaction.name, attempt: claims.attempt, principal: user, outcome: JSON.stringify(outcome), causation: JSON.stringify(causation), at },
      ...(lease.kind !== 'Deleted' && !sourceGone.value ? { source: { path: source, version: lease.version }, sourceGone } : {}),
      ...(settle ? { settle: true } : {}),
    })
    // [CTX47] Settled with its outcome: a slot of the consumer is free.
    const done = (outcome: ReactionOutcome): ReactResult => {
      if (!settle) return { outcome, repeated: false }
      this.wakeConsumer(claims.consumer)
      return { outcome, repeated: false, acked: true }
    }
    log.info({ op: 'contextual.react', requestId: claims.root, key, reaction: reaction.name, event: claims.event, user }, 'contextual reaction')
    const committed: ReactionOutcome = { status: 'committed', ...base, version: null }
    holder.attachment = attachment(committed)
    holder.admit = admit
    try {
      log.info({ op: 'contextual.command', requestId: childRequestId, rootRequestId: claims.root, command: reaction.spec.Command, target, user }, 'contextual nested command')
      const value = await runCommand(nodes, holder, principal, reaction, target, p.data, `ctx-${key.slice(0, 40)}`, this.threadClock)
      const carried = holder.attachment === null
      if (!carried) {
        await this.recordAlone(attachment(committed), admit)
        return done(committed)
      }
      // [CTX27] What a repeat will resolve: the outcome row holds the version of the commit that
      // carried it (a thread post commits more than once, and its command reports none).
      return done({ ...committed, version: holder.version ?? value.version })
    } catch (err) {
      if (!isWeftError(err)) throw err
      if (err.code === 'stale_lease' || err.code === 'forbidden' || err.code === 'forbidden_field' || err.code === 'reaction_denied') throw deny()
      // [CTX22] A declared business rejection is an outcome, persisted like a commit: only while
      // the command has committed nothing ([CTX50]: after a step landed, the error is the caller's
      // and a retry completes the command; a rejection would close it half-done).
      if ((reaction.spec.Rejections ?? []).includes(err.code) && !holder.landed) {
        const rejected: ReactionOutcome = { status: 'rejected', ...base, version: null, code: err.code, message: err.message }
        await this.recordAlone(attachment(rejected), admit)
        return done(rejected)
      }
      throw err
    }
  }

  /**
   * [CTX47] A repeat that asks to settle answers whether the item is settled now: it settles it
   * only under the lease its token was sealed for (this attempt's, still held, the token not
   * expired: a settle is a write); an item settled already (by the earlier call whose answer was
   * lost, or by any ack) is reported settled, one leased to another attempt is not. [CTX45] An
   * item whose row is gone while its consumer (made before the outcome) stands was swept, which
   * only settled rows are: settled.
   */
  private async settleRepeat(user: string, claims: CausationClaims, truth: ReactTruth, prior: OutcomeRow): Promise<boolean> {
    const { lease, consumer } = truth
    if (!lease) return consumer !== null && Date.parse(consumer.createdAt) <= Date.parse(prior.at)
    if (lease.state === 'acked' || lease.state === 'skipped') return true
    const now = this.clock.now()
    if (lease.state !== 'leased' || lease.attempt !== claims.attempt || !lease.token || leaseDigest(lease.token) !== claims.lease || claims.exp <= now) return false
    return this.settleLease({ consumerId: claims.consumer, eventId: claims.event, token: lease.token, attempt: claims.attempt, now }, user)
  }

  private async recordAlone(attachment: ContextualAttachment, admit: () => void): Promise<void> {
    admit()
    const refusal = await this.call<string | null>({ op: 'recordOutcome', attachment })
    if (refusal) throw deny()
  }
}
