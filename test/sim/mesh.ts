import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import pino from 'pino'
import { Observable, Subject, type Subscription } from 'rxjs'
import { WeftError, type NodePath } from '../../shared/index.js'
import { AccessService } from '../../sync-server/access/access-service.js'
import { VirtualClock } from '../../sync-server/engines/kit/index.js'
import type { Engine, EngineContext } from '../../sync-server/engines/types.js'
import { NodeService } from '../../sync-server/nodes/node-service.js'
import type { LiveChange, NodeApi } from '../../sync-server/nodes/types.js'
import { openSqliteStorage, type StorageAdapter } from '../../sync-server/storage/index.js'
import { Rng } from './rng.js'

/**
 * The deterministic test mesh (issue 17): the real node service over a real SQLite file, the
 * engines in-process, a virtual clock, and a seeded random source between the node service's
 * change feed and the engines that drops, delays and reorders events. `crash()` drops every bit
 * of memory (node service, engines, in-flight work) and boots them again over the same file.
 */
export interface FeedFaults {
  /** Probability an event is never delivered. */
  drop: number
  /** Probability an event is delivered later (after 1..maxDelayMs of virtual time: reordered). */
  delay: number
  maxDelayMs: number
}

export const NO_FAULTS: FeedFaults = { drop: 0, delay: 0, maxDelayMs: 0 }

export interface EngineDeps {
  clock: VirtualClock
  changes$: Observable<LiveChange>
}

export type SimEngineFactory = (ctx: EngineContext, deps: EngineDeps) => Engine

const log = pino({ level: process.env.WEFT_SIM_LOG ?? 'silent' })

/** A node API that stops answering at a crash: the dead process's late writes never land. */
function fused(nodes: NodeService, changes$: Observable<LiveChange>, isDead: () => boolean): NodeApi {
  const dead = () => new WeftError('unavailable', 'The process crashed.')
  return new Proxy(nodes, {
    get(target, prop, receiver) {
      if (prop === 'changes$') return changes$
      const v = Reflect.get(target, prop, receiver) as unknown
      if (typeof v !== 'function') return v
      if (prop === 'node$') {
        return (path: NodePath) => (isDead() ? new Observable(() => undefined) : target.node$(path))
      }
      return (...args: unknown[]) => {
        if (isDead()) {
          if (prop === 'permissions' || prop === 'registerWriteRule') throw dead()
          return Promise.reject(dead())
        }
        return (v as (...a: unknown[]) => unknown).apply(target, args)
      }
    },
  }) as unknown as NodeApi
}

class Life {
  dead = false
  readonly abort = new AbortController()
  readonly feed = new Subject<LiveChange>()
  readonly engines: Engine[] = []
  tap: Subscription | null = null
  constructor(
    readonly storage: StorageAdapter,
    readonly service: NodeService,
  ) {}
}

export class SimMesh {
  readonly clock = new VirtualClock()
  readonly rng: Rng
  /** Feed events seen, dropped, delayed: the seeded steps of a run. */
  readonly counts = { events: 0, dropped: 0, delayed: 0, crashes: 0 }
  /** Every committed change, before the feed's faults and across crashes (what tests assert on). */
  readonly committed$ = new Subject<LiveChange>()
  private life!: Life

  private constructor(
    private readonly dir: string,
    seed: number,
    private readonly faults: FeedFaults,
    private readonly factories: SimEngineFactory[],
  ) {
    this.rng = new Rng(seed)
  }

  static async open(opts: { seed: number; faults?: FeedFaults; engines: SimEngineFactory[] }): Promise<SimMesh> {
    const dir = await mkdtemp(join(tmpdir(), 'weft-sim-'))
    const mesh = new SimMesh(dir, opts.seed, opts.faults ?? NO_FAULTS, opts.engines)
    await mesh.boot()
    return mesh
  }

  /** The node API as engines see it (system writes for set-up go through here too). */
  get nodes(): NodeApi {
    return this.api
  }

  private api!: NodeApi

  get engines(): readonly Engine[] {
    return this.life.engines
  }

  engine<E extends Engine>(name: string): E {
    const e = this.life.engines.find((x) => x.name === name)
    if (!e) throw new Error(`no engine ${name}`)
    return e as E
  }

  private async boot(): Promise<void> {
    // Writes on this thread: no writer thread to start per boot (a crash boots again); still a real file.
    const storage = openSqliteStorage({ file: join(this.dir, 'weft.db'), log, writer: 'inline' })
    const service = new NodeService(storage, new AccessService(), { idleUnloadMs: 60_000, log })
    await service.boot()
    const life = new Life(storage, service)
    this.life = life
    life.tap = service.changes$.subscribe((c) => this.route(life, c))
    this.api = fused(service, life.feed.asObservable(), () => life.dead)
    const ctx: EngineContext = { nodes: this.api, users: { findUserIdByEmail: async () => null }, log, signal: life.abort.signal }
    for (const f of this.factories) life.engines.push(f(ctx, { clock: this.clock, changes$: life.feed.asObservable() }))
    for (const e of life.engines) await e.start()
  }

  /** The seeded fault between the node service's feed and the engines. */
  private route(life: Life, c: LiveChange): void {
    this.counts.events++
    this.committed$.next(c)
    const r = this.rng.next()
    if (r < this.faults.drop) {
      this.counts.dropped++
      return
    }
    if (r < this.faults.drop + this.faults.delay) {
      this.counts.delayed++
      this.clock.setTimeout(() => {
        if (!life.dead) life.feed.next(c)
      }, this.rng.int(1, this.faults.maxDelayMs))
      return
    }
    life.feed.next(c)
  }

  /**
   * A kill -9: from now on the old process's engines reach nothing (every call fails, the feed is
   * silent), storage closes with what was acknowledged, memory is dropped, and a fresh node
   * service and fresh engines boot over the same file. Unflushed row content is repaired at boot.
   */
  async crash(): Promise<void> {
    this.counts.crashes++
    const old = this.life
    old.dead = true
    old.tap?.unsubscribe()
    old.feed.complete()
    await old.storage.close()
    await old.service.close().catch(() => undefined)
    // Frees the dead engines' threads and timers; their writes fail at the fuse.
    old.abort.abort()
    await Promise.allSettled(old.engines.map((e) => e.stop()))
    await this.boot()
  }

  /** A clean stop of everything, and the temp directory removed. */
  async close(): Promise<void> {
    const life = this.life
    life.abort.abort()
    for (const e of [...life.engines].reverse()) await e.stop().catch(() => undefined)
    life.tap?.unsubscribe()
    await life.service.close()
    await life.storage.close()
    await rm(this.dir, { recursive: true, force: true })
  }
}
