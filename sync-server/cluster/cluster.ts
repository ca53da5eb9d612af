import type { Logger } from 'pino'
import type { EngineContext, EngineFactory } from '../engines/index.js'
import type { NodeService } from '../nodes/index.js'
import type { StorageAdapter } from '../storage/index.js'
import { EngineOwner } from './engine-owner.js'
import { FanOut } from './fan-out.js'
import { PgLeaseStore } from './pg-leases.js'
import { RedisBus } from './redis-bus.js'

export interface ClusterOptions {
  instanceId: string
  redisUrl: string
  databaseUrl: string
  engineLeaseMs: number
  nodes: NodeService
  storage: StorageAdapter
  factories: readonly EngineFactory[]
  context: Omit<EngineContext, 'nodes' | 'signal'>
  log: Logger
}

export interface Cluster {
  owner: EngineOwner
  /** Starts competing for the engines' lease (after the server listens). */
  startEngines(): void
  close(): Promise<void>
}

/** [SCALE1] [SCALE6] Several instances on one PostgreSQL: the Redis fan-out and the engines' lease. */
export async function startCluster(o: ClusterOptions): Promise<Cluster> {
  const log = o.log.child({ instance: o.instanceId })
  let fanOut: FanOut | null = null
  const bus = new RedisBus(o.redisUrl, log, {
    message: (m) => fanOut?.receive(m),
    reconnected: () => void fanOut?.reconnected(),
  })
  const fan = new FanOut({ instanceId: o.instanceId, nodes: o.nodes, storage: o.storage, log, publish: (m) => bus.publish(m) })
  fanOut = fan
  await bus.start()
  await fan.start()
  const store = await PgLeaseStore.open(o.databaseUrl)
  const owner = new EngineOwner({ instanceId: o.instanceId, factories: o.factories, context: o.context, nodes: o.nodes, store, ttlMs: o.engineLeaseMs, log, catchUp: () => fan.catchUp() })
  return {
    owner,
    startEngines: () => owner.start(),
    async close() {
      await owner.stop()
      await fan.close()
      await bus.close()
      await store.close()
    },
  }
}
