import type { Logger } from 'pino'
import { WeftError } from '../../shared/index.js'
import { Ownership, type Engine, type EngineContext, type EngineFactory, type LeaseStore } from '../engines/index.js'
import type { NodeService } from '../nodes/index.js'

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
        return fn.apply(target, args)
      }
    },
  })
}

export interface EngineOwnerOptions {
  instanceId: string
  factories: readonly EngineFactory[]
  context: Omit<EngineContext, 'nodes' | 'signal'>
  nodes: NodeService
  store: LeaseStore
  ttlMs: number
  log: Logger
  /** Before the engines start under a new lease: every change up to now applied here. */
  catchUp: () => Promise<void>
}

/**
 * [SCALE6] The engines of this instance run only while it holds the `engines` lease: on
 * acquiring it they are built afresh (on fenced nodes) and started, which is their crash
 * recovery (each reconciles from the database); on losing it they are stopped.
 */
export class EngineOwner {
  private running: { engines: Engine[]; abort: AbortController } | null = null
  private chain: Promise<void> = Promise.resolve()
  readonly ownership: Ownership

  constructor(private readonly o: EngineOwnerOptions) {
    this.ownership = new Ownership({
      name: 'engines',
      holder: o.instanceId,
      store: o.store,
      ttlMs: o.ttlMs,
      log: o.log,
      acquired: () => this.serial(() => this.begin()),
      lost: () => this.serial(() => this.end()),
    })
  }

  start(): void {
    this.ownership.start()
  }

  get owns(): boolean {
    return this.ownership.holds()
  }

  private serial(job: () => Promise<void>): Promise<void> {
    const next = this.chain.then(job)
    this.chain = next.catch((err: unknown) => this.o.log.error({ err }, 'engine ownership step failed'))
    return next
  }

  private async begin(): Promise<void> {
    if (!this.ownership.holds() || this.running) return
    await this.o.catchUp()
    const abort = new AbortController()
    const nodes = fencedNodes(this.o.nodes, () => this.ownership.holds())
    const engines = this.o.factories.map((f) => f({ ...this.o.context, nodes, signal: abort.signal }))
    this.running = { engines, abort }
    for (const e of engines) await e.start()
    this.o.log.info({ engines: engines.map((e) => e.name) }, 'engines started under the lease')
  }

  private async end(): Promise<void> {
    const r = this.running
    if (!r) return
    this.running = null
    r.abort.abort()
    for (const e of [...r.engines].reverse()) await e.stop().catch((err: unknown) => this.o.log.error({ err }, 'engine stop failed'))
  }

  async stop(): Promise<void> {
    await this.ownership.stop()
    await this.chain
  }
}
