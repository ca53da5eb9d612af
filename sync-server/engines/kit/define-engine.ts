import type { Observable } from 'rxjs'
import type { Logger } from 'pino'
import type { ChangeRecord } from '../../../shared/index.js'
import type { LiveChange, NodeApi } from '../../nodes/index.js'
import { realClock, type Clock } from './clock.js'
import { FeedFollower } from './feed-follower.js'
import { KeyedWorker } from './keyed-worker.js'
import { Reconciler } from './reconciler.js'

/**
 * An engine from the kit's parts (issue 17): what it watches on the feed, how it finds work
 * a pass at a time, and what it does with one key. `defineEngine` wires the rest:
 *   feed follower (boot-then-live, gap replay) ─┐
 *                                               ├─▶ keyed worker ─▶ handle(key)
 *   paged reconciler (boot + every interval) ───┘
 * `handle` reads the key's current state and acts through claims: it may run any number of
 * times for a key, from either path, after a crash, with the same outcome.
 */
export interface EngineSpec<T> {
  name: string
  /** The keys a feed change concerns (none: `[]`). Cheap: runs for every change. */
  watch: (change: LiveChange) => readonly string[]
  /** Which change-log records to replay after a gap (before the node is read). Default: all. */
  replays?: (record: ChangeRecord) => boolean
  /** At start, replay this many of the latest change-log records too (FeedFollower `bootReplay`). */
  bootReplay?: number
  /** The reconciler's pages: items in key order, at most `limit`, after `after`. */
  reconcile: {
    page: (after: string | undefined, limit: number) => Promise<readonly T[]>
    keyOf: (item: T) => string
    /** The keys an item needs handled (default: its key); `[]` when it needs nothing. */
    needs?: (item: T) => readonly string[]
    intervalMs: number | null
    pageSize?: number
  }
  handle: (key: string) => Promise<void>
  /** Keys handled at once (default 16). */
  concurrency?: number
}

export interface EngineDeps {
  nodes: Pick<NodeApi, 'changes$' | 'changesSince' | 'get' | 'headVersion'>
  log: Logger
  clock?: Clock
  changes$?: Observable<LiveChange>
}

export interface KitEngine {
  readonly name: string
  /** Feed first, then the boot reconcile; resolves when that pass has queued its work. */
  start(): Promise<void>
  stop(): Promise<void>
  /** Asks for `key` to be handled (coalesced per key). */
  kick(key: string): void
  /** A reconcile pass now (or right after the one under way). */
  reconcileNow(): Promise<void>
  /** Resolves once no replay, reconcile or job is under way. */
  idle(): Promise<void>
  readonly feed: FeedFollower
  readonly worker: KeyedWorker<string>
  readonly reconciler: Reconciler<unknown>
}

export function defineEngine<T>(spec: EngineSpec<T>, deps: EngineDeps): KitEngine {
  const clock = deps.clock ?? realClock
  const log = deps.log
  const worker = new KeyedWorker<string>(spec.handle, {
    concurrency: spec.concurrency ?? 16,
    onError: (err, key) => log.error({ err, key }, `${spec.name}: work failed; the next change or reconcile retries`),
  })
  const feed = new FeedFollower({
    nodes: deps.nodes,
    ...(deps.changes$ ? { changes$: deps.changes$ } : {}),
    ...(spec.replays ? { interested: spec.replays } : {}),
    ...(spec.bootReplay ? { bootReplay: spec.bootReplay } : {}),
    onChange: (c) => {
      for (const key of spec.watch(c)) worker.kick(key)
    },
    clock,
    log,
    what: spec.name,
  })
  const needs = spec.reconcile.needs ?? ((item: T) => [spec.reconcile.keyOf(item)])
  const reconciler = new Reconciler<T>({
    page: spec.reconcile.page,
    keyOf: spec.reconcile.keyOf,
    each: (item) => {
      for (const key of needs(item)) worker.kick(key)
    },
    intervalMs: spec.reconcile.intervalMs,
    ...(spec.reconcile.pageSize ? { pageSize: spec.reconcile.pageSize } : {}),
    clock,
    log,
    what: spec.name,
  })
  return {
    name: spec.name,
    feed,
    worker,
    reconciler: reconciler as Reconciler<unknown>,
    async start() {
      await feed.start(() => reconciler.start())
    },
    async stop() {
      await feed.stop()
      await reconciler.stop()
      await worker.stop()
    },
    kick: (key) => worker.kick(key),
    reconcileNow: () => reconciler.run(),
    async idle() {
      // Each can give the others work (a replay kicks a job); until all three are quiet at once.
      for (;;) {
        await feed.idle()
        await reconciler.idle()
        await worker.idle()
        if (worker.pending === 0 && !reconciler.busy && !feed.busy) return
      }
    },
  }
}
