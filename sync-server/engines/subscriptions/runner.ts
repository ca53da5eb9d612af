import type { Observable, Subscription } from 'rxjs'
import type { Logger } from 'pino'
import {
  EventSubscriptionContent,
  LEGACY_SCHEDULED_ACTIONS_PARENT,
  SUBSCRIPTIONS_PARENT,
  SYSTEM,
  readContinuationType,
  readSubscriptionStatus,
  tryParseNodePath,
  type EventSubscription,
  type JsonObject,
  type MeshChangeKind,
  type MeshNode,
  type NodePath,
} from '../../../shared/index.js'
import type { LiveChange, NodeApi } from '../../nodes/index.js'
import { ContinuationFailure, type ContinuationRegistry } from './continuation-registry.js'
import { needsTakeBack } from './continuations.js'
import { scheduleAt, type CancelTimer } from './long-timer.js'
import { MatchIndex } from './match-index.js'
import { classifySubscription, idFromPath, matchKey, readFieldInsensitive, triggerSignature, type PendingEntry, type Trigger } from './model.js'
import { LegacyMigrator } from './legacy-migration.js'
import { watchStatus } from './status-watch.js'
import { WorkQueue } from './work-queue.js'
import { FeedFollower, afterFailure, claim, every, isDue, realClock, waitMs, type BackoffPolicy, type Clock } from '../kit/index.js'

export interface RunnerOptions {
  nodes: NodeApi
  log: Logger
  registry: ContinuationRegistry
  /** The change feed to react to; defaults to `nodes.changes$` (tests drop events through it). */
  changes$?: Observable<LiveChange>
  /**
   * Firings in flight at once (default 512): enough to keep the writer busy (10,000 timers due in
   * one second), few enough that the ones in flight do not slow each other (more live promises,
   * more garbage; 2,048 measured slower), and a reconcile that matches 100,000 sign-ups stays a
   * stream, not a stampede.
   */
  concurrency?: number
  /** Safety-net reconcile of every pending subscription; null disables it (default 5 minutes). */
  reconcileIntervalMs?: number | null
  /** Transient continuation errors are retried this many times before the subscription fails. */
  maxAttempts?: number
  /** Above this many NodeChange subscriptions on one node type, reconcile scans the type once. */
  scanThreshold?: number
  /**
   * A Timer subscription's node is loaded into memory this long before its FireAt (default 2 s),
   * so a burst of timers due in the same second spends the due time on continuations and claims,
   * not on storage reads and doc rebuilds. Keep it under the server's idle-unload time (30 s).
   */
  warmAheadMs?: number
  /** Every timer, retry and timestamp of the runner (default wall time; the test mesh passes a virtual one). */
  clock?: Clock
}

type NodeChangeTrigger = Extract<Trigger, { type: 'NodeChange' }>

const SUBSCRIPTION_PREFIX = `${SUBSCRIPTIONS_PARENT}/`
/** The node service's largest page for a direct (unscanned) query. */
const LOAD_PAGE = 1000
const LEGACY_PREFIX = `${LEGACY_SCHEDULED_ACTIONS_PARENT}/`
/** Warm-ups in flight at once: background work, never in the way of a firing. */
const WARM_CONCURRENCY = 16

/**
 * The one EventSubscription runner of a server. Two complementary paths drive every pending
 * subscription (event-subscriptions seed):
 *  - live: the change feed (NodeChange), one timer per Timer subscription, one status watch per
 *    NodeStatus subscription;
 *  - reconcile: at boot and whenever a subscription becomes pending, it is re-evaluated against
 *    current state, so a trigger that happened while the runner was down still fires.
 *
 * [SUB3] A subscription fires at most once: Pending → Fired | Failed is written inside
 * `nodes.update` after re-reading the node, so when the live and reconcile paths race (or a
 * replay follows a kill -9) only one terminal write happens. Continuations run BEFORE that write
 * and are idempotent create-or-updates: a crash between the two replays the continuation, which
 * finds its work done. The in-memory maps only route and coalesce; none decides correctness.
 */
export class SubscriptionRunner {
  private readonly nodes: NodeApi
  private readonly log: Logger
  private readonly registry: ContinuationRegistry
  private readonly changes$: Observable<LiveChange>
  private readonly clock: Clock
  private readonly maxAttempts: number
  private readonly scanThreshold: number
  private readonly reconcileIntervalMs: number | null
  private readonly warmAheadMs: number
  private readonly retry: BackoffPolicy

  private readonly entries = new Map<string, PendingEntry>()
  private readonly index = new MatchIndex()
  private readonly timers = new Map<string, CancelTimer>()
  private readonly watches = new Map<string, Subscription>()
  /** Coalesces a subscription's concurrent firings (live + reconcile) into one attempt. */
  private readonly inFlight = new Set<string>()
  private readonly parsed = new WeakMap<JsonObject, ReturnType<typeof EventSubscriptionContent.safeParse>>()
  private readonly retryTimers = new Set<CancelTimer>()
  private readonly queue: WorkQueue
  private readonly warmQueue: WorkQueue
  private readonly migrator: LegacyMigrator
  /** The feed, boot-then-live, with gaps replayed from the durable change log (the kit's). */
  private feed: FeedFollower | null = null
  private interval: CancelTimer | null = null
  private stopped = false

  constructor(opts: RunnerOptions) {
    this.nodes = opts.nodes
    this.log = opts.log
    this.registry = opts.registry
    this.changes$ = opts.changes$ ?? opts.nodes.changes$
    this.clock = opts.clock ?? realClock
    this.maxAttempts = opts.maxAttempts ?? 3
    this.retry = { baseMs: 400, maxMs: 60_000, maxAttempts: this.maxAttempts }
    this.scanThreshold = opts.scanThreshold ?? 32
    this.warmAheadMs = opts.warmAheadMs ?? 2_000
    this.reconcileIntervalMs = opts.reconcileIntervalMs === undefined ? 5 * 60_000 : opts.reconcileIntervalMs
    this.queue = new WorkQueue(opts.concurrency ?? 512, (e) => this.log.error({ err: e }, 'subscription firing crashed'))
    this.warmQueue = new WorkQueue(WARM_CONCURRENCY, (e) => this.log.debug({ err: e }, 'subscription warm-up failed; the firing reads it'))
    this.migrator = new LegacyMigrator(opts.nodes, opts.log, this.clock)
  }

  /** Number of pending subscriptions the runner currently routes events to. */
  get pendingCount(): number {
    return this.entries.size
  }

  /** Resolves once the boot reconcile is done and the firings it started have settled. */
  async start(): Promise<void> {
    // Feed first, then read state: a change between the read and the subscription is not lost
    // (held until the boot read is done, then delivered).
    this.feed = new FeedFollower({
      nodes: this.nodes,
      changes$: this.changes$,
      interested: (r) => isSubscriptionPath(r.path) || r.path.startsWith(LEGACY_PREFIX) || this.index.watches(r.nodeType, r.kind),
      onChange: (change) => this.onChange(change),
      clock: this.clock,
      log: this.log,
      what: 'subscription runner',
    })
    const started = this.clock.now()
    let loaded = 0
    await this.feed.start(async () => {
      await this.migrator.migrateAll()
      // Page by path: each page is routed and dropped, so 100,000 subscriptions never sit in the
      // heap as MeshNodes at once (young-generation garbage instead of a full-heap collection).
      let after: string | undefined
      for (;;) {
        const page = await this.nodes.query(SYSTEM, { parent: SUBSCRIPTIONS_PARENT as NodePath, nodeType: 'EventSubscription', limit: LOAD_PAGE, after })
        for (const node of page) this.upsert(node, false)
        loaded += page.length
        if (page.length < LOAD_PAGE) break
        after = page[page.length - 1]!.path
      }
      await this.reconcileNodeChanges()
      await this.queue.onIdle()
    })
    this.log.info({ pending: this.entries.size, loaded, ms: this.clock.now() - started }, 'subscription runner reconciled')
    if (this.reconcileIntervalMs !== null) {
      this.interval = every(this.clock, this.reconcileIntervalMs, () => void this.reconcile())
    }
  }

  async stop(): Promise<void> {
    this.stopped = true
    await this.feed?.stop()
    this.interval?.()
    for (const cancel of this.timers.values()) cancel()
    for (const w of this.watches.values()) w.unsubscribe()
    for (const cancel of this.retryTimers) cancel()
    this.timers.clear()
    this.watches.clear()
    this.migrator.stop()
    await Promise.all([this.queue.onIdle(), this.warmQueue.onIdle()])
  }

  /** The safety net: re-evaluate every pending NodeChange subscription against current state. */
  async reconcile(): Promise<void> {
    if (this.stopped) return
    try {
      await this.migrator.migrateAll()
      await this.reconcileNodeChanges()
    } catch (err) {
      this.log.warn({ err }, 'subscription reconcile failed; the next one retries')
    }
  }

  /** Waits until no firing or warm-up is queued or running (tests and benchmarks). */
  async idle(): Promise<void> {
    await Promise.all([this.queue.onIdle(), this.warmQueue.onIdle()])
  }

  // ------------------------------------------------------------------ live path

  private onChange(change: LiveChange): void {
    if (this.stopped) return
    if (change.path.startsWith(SUBSCRIPTION_PREFIX) && change.path.indexOf('/', SUBSCRIPTION_PREFIX.length) < 0) {
      const id = idFromPath(change.path)
      if (change.kind === 'Deleted' || !change.node) this.removeEntry(id)
      // Ended (the runner's own claim, mostly): what upsert would conclude, without classifying.
      else if (isTerminalName(change.node.content.Status)) {
        this.removeEntry(id)
        this.takeBackIfIdle(id, change.node)
      }
      else if (change.node.nodeType === 'EventSubscription') this.upsert(change.node, true)
      return
    }
    if (change.path.startsWith(LEGACY_PREFIX) && change.kind !== 'Deleted' && change.node) {
      this.migrator.migrate(change.node)
      return
    }
    const candidates = this.index.candidates(change.nodeType, change.kind, change.node?.content ?? null)
    for (const id of candidates) this.fire(id, change.path)
  }

  /** A subscription node appeared or changed: route it, and (live) reconcile just this one. */
  private upsert(node: MeshNode, reconcileNow: boolean): void {
    const id = idFromPath(node.path)
    const c = classifySubscription(node)
    if (c.state === 'terminal') {
      this.removeEntry(id)
      this.takeBackIfIdle(id, node)
      return
    }
    if (c.state === 'invalid') {
      this.removeEntry(id)
      this.queue.push(async () => {
        await this.finish(node.path as NodePath, 'Failed', c.reason)
      })
      return
    }
    const existing = this.entries.get(id)
    if (existing && triggerSignature(existing.trigger) === triggerSignature(c.entry.trigger)) {
      // Same trigger (e.g. the runner's own ObservedActiveAt write): keep the timer or watch.
      this.entries.set(id, c.entry)
      return
    }
    if (existing) this.removeEntry(id)
    this.addEntry(c.entry)
    if (reconcileNow && c.entry.trigger.type === 'NodeChange') {
      const entry = c.entry
      this.queue.push(() => this.reconcileOne(entry, entry.trigger as NodeChangeTrigger))
    }
  }

  private addEntry(entry: PendingEntry): void {
    this.entries.set(entry.id, entry)
    const t = entry.trigger
    switch (t.type) {
      case 'NodeChange':
        this.index.add(entry.id, t)
        break
      case 'Timer':
        // A past-due FireAt fires at once (inside the boot reconcile that gates /healthz):
        // at-least-once across restarts, no external scheduler.
        if (t.fireAt <= this.clock.now()) this.fire(entry.id, null)
        else this.timers.set(entry.id, this.armTimer(entry, t.fireAt))
        break
      case 'NodeStatus':
        this.startWatch(entry, t)
        break
      default:
        t satisfies never
    }
  }

  /** The timer of a Timer subscription, with its warm-up `warmAheadMs` before FireAt. */
  private armTimer(entry: PendingEntry, fireAt: number): CancelTimer {
    const fire = () => this.fire(entry.id, null)
    if (fireAt - this.clock.now() <= this.warmAheadMs) {
      this.warm(entry)
      return scheduleAt(fireAt, fire, this.clock)
    }
    let cancel = scheduleAt(fireAt - this.warmAheadMs, () => {
      cancel = scheduleAt(fireAt, fire, this.clock)
      this.warm(entry)
    }, this.clock)
    return () => cancel()
  }

  /**
   * Ahead of a timer's FireAt: loads the subscription, checks its schema, and loads the nodes
   * its continuation says it touches, so the due time is spent on the writes alone.
   */
  private warm(entry: PendingEntry): void {
    this.warmQueue.push(async () => {
      if (this.stopped || !this.entries.has(entry.id)) return
      const node = await this.nodes.read(SYSTEM, entry.path as NodePath)
      const parsed = node ? this.parse(entry.id, node) : null
      if (!parsed?.success) return
      const sub = parsed.data
      const touches = this.registry.resolve(continuationKey(sub))?.touches?.(sub, sub.SubjectId ?? null) ?? []
      for (const raw of touches) {
        const path = tryParseNodePath(raw)
        if (path) await this.nodes.read(SYSTEM, path)
      }
    })
  }

  /**
   * The subscription's full schema check, remembered per content object: a node's content is
   * replaced (never mutated) by every write, so an unchanged object means an unchanged result.
   */
  private parse(id: string, node: MeshNode): ReturnType<typeof EventSubscriptionContent.safeParse> {
    let parsed = this.parsed.get(node.content)
    if (!parsed) {
      parsed = EventSubscriptionContent.safeParse({ Id: id, ...node.content })
      this.parsed.set(node.content, parsed)
    }
    return parsed
  }

  private removeEntry(id: string): void {
    // Index, timer and watch exist only for an entry (addEntry): nothing else to drop without one.
    if (!this.entries.delete(id)) return
    this.index.remove(id)
    this.timers.get(id)?.()
    this.timers.delete(id)
    this.watches.get(id)?.unsubscribe()
    this.watches.delete(id)
  }

  private startWatch(entry: PendingEntry, trigger: Extract<Trigger, { type: 'NodeStatus' }>): void {
    const watchPath = trigger.watchPath as NodePath
    const subscription = watchStatus(this.nodes.node$(watchPath), trigger, {
      onActive: () => {
        this.queue.push(() => this.recordObservedActive(entry.path as NodePath))
      },
      onResting: () => {
        this.watches.delete(entry.id)
        this.fire(entry.id, null, watchPath)
      },
      onGone: (reason) => {
        this.watches.delete(entry.id)
        this.log.warn({ subscription: entry.id, watchPath }, reason)
        this.queue.push(async () => {
          await this.finish(entry.path as NodePath, 'Failed', reason)
        })
      },
      onFault: (err, attempt) => {
        this.log.warn({ err, subscription: entry.id, watchPath, attempt }, 'status watch faulted; re-establishing')
      },
    }, this.clock)
    if (!subscription.closed) this.watches.set(entry.id, subscription)
  }

  private async recordObservedActive(path: NodePath): Promise<void> {
    await this.nodes.update(SYSTEM, path, (current) => {
      if (!current || current.content.ObservedActiveAt || !isPending(current)) return undefined
      return { nodeType: current.nodeType, name: current.name, content: { ...current.content, ObservedActiveAt: new Date(this.clock.now()).toISOString() } }
    }, 'engine')
  }

  // ------------------------------------------------------------------ reconcile path

  /**
   * Boot / periodic reconcile of NodeChange subscriptions. Per node type: few subscriptions →
   * one indexed query each; many (100,000 pending invites) → one scan of that type's nodes, each
   * routed through the match index. Either way O(nodes + subscriptions), never their product.
   */
  private async reconcileNodeChanges(): Promise<void> {
    const byType = new Map<string, PendingEntry[]>()
    for (const entry of this.entries.values()) {
      const t = entry.trigger
      if (t.type !== 'NodeChange' || t.kind === 'Deleted') continue
      let list = byType.get(t.nodeType)
      if (!list) byType.set(t.nodeType, (list = []))
      list.push(entry)
    }
    for (const [nodeType, list] of byType) {
      if (list.length <= this.scanThreshold) {
        for (const entry of list) await this.reconcileOne(entry, entry.trigger as NodeChangeTrigger)
        continue
      }
      // Paged by path (issue 17: never the whole type in memory at once).
      let after: string | undefined
      for (;;) {
        let nodes: MeshNode[]
        try {
          nodes = await this.nodes.query(SYSTEM, { nodeType, limit: LOAD_PAGE, ...(after !== undefined ? { after } : {}) })
        } catch (err) {
          // One node type's trouble must not keep the server from booting; the next reconcile retries.
          this.log.error({ err, nodeType }, 'reconcile scan failed')
          break
        }
        for (const node of nodes) {
          for (const kind of ['Created', 'Updated'] as const) {
            for (const id of this.index.candidates(nodeType, kind, node.content)) {
              const entry = this.entries.get(id)
              if (entry && happenedSince(entry, kind, node)) this.fire(id, node.path)
            }
          }
        }
        if (nodes.length < LOAD_PAGE) break
        after = nodes[nodes.length - 1]!.path
      }
    }
  }

  private async reconcileOne(entry: PendingEntry, t: NodeChangeTrigger): Promise<void> {
    // Still pending with the same trigger? (The entry object may have been replaced by a
    // same-trigger update meanwhile; that must not skip this reconcile.)
    const current = this.entries.get(entry.id)
    if (t.kind === 'Deleted' || !current || triggerSignature(current.trigger) !== triggerSignature(t)) return
    const where = t.field === null ? undefined : { [t.field]: String(t.value) }
    const wanted = t.value === null ? null : matchKey(t.value)
    // Paged by path until the first match (issue 17: never every node of the type at once).
    let after: string | undefined
    for (;;) {
      let found: MeshNode[]
      try {
        found = await this.nodes.query(SYSTEM, { nodeType: t.nodeType, where, limit: t.field === null ? LOAD_PAGE : 100, ...(after !== undefined ? { after } : {}) })
      } catch (err) {
        this.log.error({ err, subscription: entry.id }, 'reconcile query failed; the next reconcile retries')
        return
      }
      for (const node of found) {
        if (t.field !== null && matchKey(readFieldInsensitive(node.content, t.field)) !== wanted) continue
        if (!happenedSince(entry, t.kind, node)) continue
        this.fire(entry.id, node.path)
        return
      }
      // A MatchField query looks at its first 100 candidates, as before; "any node" pages on.
      if (t.field !== null || found.length < LOAD_PAGE) return
      after = found[found.length - 1]!.path
    }
  }

  // ------------------------------------------------------------------ firing

  /** Queue a firing unless one is already in flight for this subscription. */
  private fire(id: string, subjectPath: string | null, fallbackSubject: string | null = null): void {
    if (this.stopped || this.inFlight.has(id)) return
    this.inFlight.add(id)
    this.queue.push(async () => {
      try {
        await this.runFiring(id, subjectPath, fallbackSubject)
      } finally {
        this.inFlight.delete(id)
      }
    })
  }

  private async runFiring(id: string, subjectPath: string | null, fallbackSubject: string | null): Promise<void> {
    const path = `${SUBSCRIPTION_PREFIX}${id}` as NodePath
    // Loaded, not just read: the terminal write follows on the same node.
    const node = await this.nodes.read(SYSTEM, path)
    if (!node || !isPending(node)) {
      this.removeEntry(id)
      return
    }
    const parsed = this.parse(id, node)
    if (!parsed.success) {
      await this.finish(path, 'Failed', `Invalid subscription: ${parsed.error.issues[0]?.message ?? 'invalid'}.`)
      return
    }
    const sub = parsed.data
    const type = readContinuationType(sub.ContinuationType)
    const key = continuationKey(sub)
    const handler = this.registry.resolve(key)
    if (!handler) {
      const named = type.known ? `EventContinuationType ${JSON.stringify(key)}` : type.described
      const reason = `No handler claims ${named}: the continuation was not run.`
      this.log.warn({ subscription: id }, reason)
      await this.finish(path, 'Failed', reason)
      return
    }
    const subjectId = subjectPath ?? sub.SubjectId ?? fallbackSubject
    // A retry whose time has not come (found by a reconcile or a restart): wake up then.
    if (!isDue(node.content, this.clock.now())) {
      this.retryAt(this.clock.now() + waitMs(node.content, this.clock.now()), id, subjectPath, fallbackSubject)
      return
    }
    try {
      await handler({ nodes: this.nodes, log: this.log, node, subscription: sub, subjectId, now: new Date(this.clock.now()) })
    } catch (err) {
      if (err instanceof ContinuationFailure) {
        this.log.warn({ subscription: id, continuation: key }, err.message)
        await this.finish(path, 'Failed', err.message)
        return
      }
      // [KIT6] The count and the next retry's time live on the subscription (Attempts,
      // NextRetryAt), written as a claim: a restart neither forgets them nor retries early.
      const message = `${key} failed: ${(err as Error).message ?? String(err)}`
      const failure = afterFailure(this.retry, node.content, this.clock.now())
      if (failure.kind === 'exhausted') {
        await this.finish(path, 'Failed', `${message} (after ${failure.attempts} attempts)`)
        return
      }
      this.log.warn({ err, subscription: id, attempt: failure.fields.Attempts }, 'continuation failed; retrying')
      const noted = await claim(this.nodes, path, {
        when: (cur) => cur !== null && isPending(cur),
        write: (cur) => ({ nodeType: cur!.nodeType, name: cur!.name, content: { ...cur!.content, ...failure.fields } }),
      })
      if (noted.claimed) this.retryAt(failure.at, id, subjectPath, fallbackSubject)
      return
    }
    const ended = await this.finish(path, 'Fired', null, subjectId)
    // [SUB10] A revoke overtook the firing after its claim-ahead: take the effect back.
    if (ended === 'Cancelled' && handler.takeBack) {
      const now = await this.nodes.read(SYSTEM, path)
      if (now && needsTakeBack(now)) await handler.takeBack(this.nodes, now, new Date(this.clock.now()))
    }
  }

  /** A wake-up for a retry (only a timer: the attempt count and time are on the node). */
  private retryAt(at: number, id: string, subjectPath: string | null, fallbackSubject: string | null): void {
    if (this.stopped) return
    const cancel = scheduleAt(at, () => {
      this.retryTimers.delete(cancel)
      this.fire(id, subjectPath, fallbackSubject)
    }, this.clock)
    this.retryTimers.add(cancel)
  }

  /**
   * [SUB10] A Cancelled subscription whose firing was cut short (a revoke while it ran, then a
   * crash before its take-back) is taken back when seen at boot or on the feed, unless a firing
   * is in flight: that one's own end takes it back, after its effect has landed.
   */
  private takeBackIfIdle(id: string, node: MeshNode): void {
    if (this.stopped || this.inFlight.has(id) || !needsTakeBack(node)) return
    const parsed = this.parse(id, node)
    const handler = parsed.success ? this.registry.resolve(continuationKey(parsed.data)) : undefined
    const takeBack = handler?.takeBack
    if (!takeBack) return
    this.inFlight.add(id)
    this.queue.push(async () => {
      try {
        const now = await this.nodes.read(SYSTEM, node.path as NodePath)
        if (now && needsTakeBack(now)) await takeBack(this.nodes, now, new Date(this.clock.now()))
      } finally {
        this.inFlight.delete(id)
      }
    })
  }

  /** The claim: only a subscription that is still Pending (or has an unknown status) ends. */
  /** Resolves with the status the subscription had when the claim found it already ended, else null. */
  private async finish(path: NodePath, status: 'Fired' | 'Failed', lastError: string | null, subjectId?: string | null): Promise<string | null> {
    const at = new Date(this.clock.now()).toISOString()
    let ended: string | null = null
    await this.nodes.update(SYSTEM, path, (current) => {
      if (!current) return undefined
      const s = readSubscriptionStatus(current.content.Status ?? 'Pending')
      if (s.known && s.value !== 'Pending') {
        ended = s.value
        return undefined
      }
      const content: JsonObject = { ...current.content, Status: status }
      delete content.NextRetryAt
      if (status === 'Fired') {
        content.FiredAt = at
        delete content.LastError
        delete content.Attempts
        if (subjectId && !content.SubjectId) content.SubjectId = subjectId
      } else {
        content.LastError = lastError ?? 'Failed.'
      }
      return { nodeType: current.nodeType, name: current.name, content }
    }, 'engine')
    this.removeEntry(idFromPath(path))
    return ended
  }
}

/** The registry key of a subscription's continuation: its enum name, or the raw value this build does not know. */
function continuationKey(sub: EventSubscription): string {
  const type = readContinuationType(sub.ContinuationType)
  return type.known ? type.value : String(sub.ContinuationType)
}

function isSubscriptionPath(path: string): boolean {
  return path.startsWith(SUBSCRIPTION_PREFIX) && !path.slice(SUBSCRIPTION_PREFIX.length).includes('/')
}

/** A terminal status by its name (what the runner itself writes); numbers and unknown values take the full path. */
function isTerminalName(status: unknown): boolean {
  return status === 'Fired' || status === 'Failed' || status === 'Cancelled'
}

function isPending(node: MeshNode): boolean {
  const s = readSubscriptionStatus(node.content.Status ?? 'Pending')
  return s.known && s.value === 'Pending'
}

/**
 * What reconcile may conclude from current state:
 *  - Created with a MatchField: the matching node exists → exact replay of the missed event.
 *  - Created without a MatchField ("any node of the type"): only nodes created after the
 *    subscription count, or every pre-existing node would fire it at once.
 *  - Updated: the node changed after the subscription was written.
 *  - Deleted: a deleted node leaves nothing to match; live path only.
 */
function happenedSince(entry: PendingEntry, kind: MeshChangeKind, node: MeshNode): boolean {
  const t = entry.trigger
  if (t.type !== 'NodeChange' || t.kind !== kind) return false
  switch (kind) {
    case 'Created':
      return t.field !== null || !(Date.parse(node.createdAt) < entry.createdAt)
    case 'Updated':
      return node.updatedAt !== node.createdAt && !(Date.parse(node.updatedAt) < entry.createdAt)
    case 'Deleted':
      return false
    default:
      return kind satisfies never
  }
}
