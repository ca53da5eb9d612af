import type { Logger } from 'pino'
import { WeftError } from '../../shared/index.js'
import { Ownership, type Engine, type EngineContext, type EngineFactory, type LeaseStore } from '../engines/index.js'
import { writeFence, type NodeService } from '../nodes/index.js'

/** The node API's methods that write: refused by an owner whose lease is gone. */
const WRITES = new Set<PropertyKey>(['put', 'create', 'patch', 'update', 'delete', 'append', 'relocate', 'rename', 'applyClientUpdate', 'applyClientUpdateLoaded'])

/**
 * [SCALE7] The node API as an owned engine sees it: every write first checks, synchronously,
 * that this instance still holds the lease (`Ownership.holds`, by its own monotonic clock, so it
 * turns false before the database could give the lease to another instance). Write rules were
 * registered by the engines built for the routes; a second registration is skipped.
 */
export function fencedNodes(nodes: NodeService, holds: () => boolean): NodeService {
  return new Proxy(nodes, {
    get(target, key) {
      if (key === 'registerWriteRule') return () => undefined
      const value: unknown = Reflect.get(target, key, target)
      if (typeof value !== 'function') return value
      const fn = value as (...args: unknown[]) => unknown
      if (!WRITES.has(key)) return fn.bind(target)
      return (...args: unknown[]) => {
        if (!holds()) return Promise.reject(new WeftError('unavailable', 'This server no longer owns the engines (its lease expired); another server has taken them over.'))
        // A write made once more after a wait checks the lease again (nodes/fence.ts).
        return writeFence.run(holds, () => fn.apply(target, args))
      }
    },
  })
}

/** [SCALE17] What the balance of partitions needs from the lease table (pg-leases.ts). */
export interface MemberStore extends LeaseStore {
  /** The live holder of each lease, by lease name. */
  holders(): Promise<Map<string, string>>
  /** Marks `holder` alive for `ttlMs`; answers how many instances are alive, itself included. */
  census(holder: string, ttlMs: number): Promise<number>
  leave(holder: string): Promise<void>
}

export interface EngineOwnerOptions {
  instanceId: string
  /** One partition per engine, named by the engine (its lease is `engines:<name>`). */
  partitions: ReadonlyArray<{ name: string; factory: EngineFactory }>
  context: Omit<EngineContext, 'nodes' | 'signal'>
  nodes: NodeService
  store: MemberStore
  ttlMs: number
  log: Logger
  /** Before an engine starts under a new lease: every change up to now applied here. */
  catchUp: () => Promise<void>
  /** Tells the other instances this one gave the lease `name` up (they try to take it at once). */
  announce: (name: string) => void
}

/** The lease name of an engine's partition. */
export const partitionLease = (engine: string): string => `engines:${engine}`

/**
 * [SCALE6] [SCALE17] One engine partition: its engine runs on this instance only while it holds
 * the partition's lease. On acquiring it the engine is built afresh (on nodes fenced by this
 * lease) and started, which is its crash recovery (it reconciles from the database); on losing or
 * giving it up the engine is stopped before the lease is released.
 */
class Partition {
  private running: { engine: Engine; abort: AbortController } | null = null
  private chain: Promise<void> = Promise.resolve()
  readonly ownership: Ownership

  constructor(
    readonly name: string,
    private readonly factory: EngineFactory,
    private readonly o: EngineOwnerOptions,
    graceMs: () => number,
  ) {
    this.ownership = new Ownership({
      name: partitionLease(name),
      holder: o.instanceId,
      store: o.store,
      ttlMs: o.ttlMs,
      log: o.log,
      graceMs,
      acquired: () => this.serial(() => this.begin()),
      // The engine's signal is aborted at once (a reconcile under way stops now, not when it ends,
      // since end() waits its turn behind begin()); its writes were refused from the moment the lease lapsed.
      lost: () => {
        this.running?.abort.abort()
        return this.serial(() => this.end())
      },
    })
  }

  get holds(): boolean {
    return this.ownership.holds()
  }

  private serial(job: () => Promise<void>): Promise<void> {
    const next = this.chain.then(job)
    this.chain = next.catch((err: unknown) => this.o.log.error({ err, partition: this.ownership.name }, 'engine ownership step failed'))
    return next
  }

  private async begin(): Promise<void> {
    if (!this.ownership.holds() || this.running) return
    await this.o.catchUp()
    if (!this.ownership.holds()) return
    this.o.log.info({ partition: this.ownership.name }, 'engine starting under the lease')
    const abort = new AbortController()
    const nodes = fencedNodes(this.o.nodes, () => this.ownership.holds())
    const engine = this.factory({ ...this.o.context, nodes, signal: abort.signal })
    this.running = { engine, abort }
    await engine.start()
    this.o.log.info({ partition: this.ownership.name, engines: [engine.name] }, 'engines started under the lease')
  }

  private async end(): Promise<void> {
    const r = this.running
    if (!r) return
    this.running = null
    r.abort.abort()
    await r.engine.stop().catch((err: unknown) => this.o.log.error({ err, partition: this.ownership.name }, 'engine stop failed'))
    this.o.log.info({ partition: this.ownership.name }, 'engine stopped: lease gone')
  }

  async stop(): Promise<void> {
    await this.ownership.stop()
    await this.chain
  }
}

/**
 * [SCALE6] [SCALE17] The engines of this instance, one lease per engine (partition), balanced
 * between the live instances: each instance's share is ceil(partitions / instances alive).
 *  - Alive: a row of `engine_members` renewed every third of the lease time (the census), valid
 *    for two thirds of it.
 *  - An instance below its share takes a free partition at once; one at or above its share takes
 *    it only after it has been free for half a lease time (when nobody below took it: the
 *    partition is never left without an owner for long).
 *  - An instance above its share at two censuses in a row gives one partition up (its engine
 *    stopped first) and tells the others, so one below its share takes it at once.
 * Failover is per partition: the survivors' next census counts the dead instance out, and its
 * partitions are taken as their leases expire.
 */
export class EngineOwner {
  private readonly partitions: Partition[]
  private members = 1
  private over = 0
  private timer: ReturnType<typeof setTimeout> | null = null
  private stopped = false
  private censusRunning: Promise<void> | null = null
  private givingUp: Promise<void> | null = null
  private started = false

  constructor(private readonly o: EngineOwnerOptions) {
    this.partitions = o.partitions.map((p) => new Partition(p.name, p.factory, o, () => this.graceMs()))
  }

  /** How many partitions an instance should hold now. */
  private get share(): number {
    return Math.ceil(this.partitions.length / Math.max(1, this.members))
  }

  private graceMs(): number {
    return this.held().length < this.share ? 0 : Math.floor(this.o.ttlMs / 2)
  }

  /** [SCALE17] Each partition and the instance running it now (null: none), as the database has it. */
  async holders(): Promise<Array<{ partition: string; instance: string | null }>> {
    const live = await this.o.store.holders()
    return this.partitions.map((p) => ({ partition: p.name, instance: live.get(partitionLease(p.name)) ?? null }))
  }

  /** The partitions (engine names) this instance runs now. */
  held(): string[] {
    return this.partitions.filter((p) => p.holds).map((p) => p.name)
  }

  start(): void {
    if (this.started || this.stopped) return
    this.started = true
    void this.census().finally(() => {
      if (this.stopped) return
      for (const p of this.partitions) p.ownership.start()
      this.schedule()
    })
  }

  get owns(): boolean {
    return this.partitions.some((p) => p.holds)
  }

  private schedule(): void {
    if (this.stopped) return
    this.timer = setTimeout(() => void this.census().finally(() => this.schedule()), Math.max(50, Math.floor(this.o.ttlMs / 3)))
    this.timer.unref?.()
  }

  /** Counts the instances alive (renewing this one's row), then gives a partition up when above the share. */
  private census(): Promise<void> {
    this.censusRunning ??= (async () => {
      try {
        // Renewed every third of the lease time, counted alive for two thirds: a dead instance is
        // counted out no later than its leases expire, so the others' shares have grown by then.
        const members = await this.o.store.census(this.o.instanceId, Math.floor((this.o.ttlMs * 2) / 3))
        if (this.stopped) return
        const fewer = members < this.members
        this.members = members
        const held = this.partitions.filter((p) => p.holds)
        this.over = held.length > this.share ? this.over + 1 : 0
        if (this.over >= 2 && !this.givingUp) {
          this.over = 0
          // Not awaited here: stopping an engine may take a while, and the census goes on meanwhile.
          this.givingUp = this.giveUp(held[held.length - 1]!, `${held.length} partitions held, above this instance's share of ${this.share} with ${members} instances alive`)
        }
        // Fewer instances alive: this one's share may have grown; try the free partitions now.
        if (fewer) for (const p of this.partitions) if (!p.holds) p.ownership.poke('fewer instances alive: trying to take the free engine partitions')
      } catch (err) {
        this.o.log.warn({ err }, 'engine census: the database did not answer')
      } finally {
        this.censusRunning = null
      }
    })()
    return this.censusRunning
  }

  private async giveUp(p: Partition, why: string): Promise<void> {
    try {
      if ((await p.ownership.giveUp(why)) && !this.stopped) this.o.announce(partitionLease(p.name))
    } finally {
      this.givingUp = null
    }
  }

  /**
   * [PROD2] Another instance gave the `name` lease up: count again (after any census under way,
   * which may have begun before that instance left), then try to take it.
   */
  released(name: string): void {
    const p = this.partitions.find((x) => partitionLease(x.name) === name)
    if (!p || !this.started || this.stopped) return
    void (this.censusRunning ?? Promise.resolve())
      .then(() => this.census())
      .finally(() => p.ownership.poke())
  }

  /** Stops every partition (each lease given up); answers the lease names that were held. */
  async stop(): Promise<string[]> {
    this.stopped = true
    if (this.timer) clearTimeout(this.timer)
    await this.censusRunning
    await this.givingUp
    const held = this.partitions.filter((p) => p.holds).map((p) => partitionLease(p.name))
    await Promise.all(this.partitions.map((p) => p.stop()))
    await this.o.store.leave(this.o.instanceId).catch(() => undefined)
    return held
  }
}
