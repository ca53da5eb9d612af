import type { Logger } from 'pino'
import type { EngineContext, EngineFactory } from '../engines/index.js'
import type { ContextualPeers } from '../contextual/index.js'
import type { McpPeers } from '../mcp/index.js'
import type { NodeService } from '../nodes/index.js'
import type { TokenPeers } from '../auth/index.js'
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
  /** [SCALE12] See ServerConfig.earlyConfirmMs. */
  earlyConfirmMs?: number
  nodes: NodeService
  storage: StorageAdapter
  /** [SCALE17] One partition per engine, named by the engine. */
  partitions: ReadonlyArray<{ name: string; factory: EngineFactory }>
  context: Omit<EngineContext, 'nodes' | 'signal'>
  log: Logger
}

export interface Cluster {
  owner: EngineOwner
  /** [CTX43] MCP cancels told to and heard from the other instances. */
  mcpPeers: McpPeers
  /** [CTX48] Contextual consumers' changes told to and heard from the other instances. */
  contextualPeers: ContextualPeers
  /** [AUTH7] Revoked tokens told to and heard from the other instances. */
  tokenPeers: TokenPeers
  /** Starts competing for the engines' partitions (after the server listens). */
  startEngines(): void
  close(): Promise<void>
}

/** [SCALE1] [SCALE6] Several instances on one PostgreSQL: the Redis fan-out and the engines' lease. */
export async function startCluster(o: ClusterOptions): Promise<Cluster> {
  const log = o.log.child({ instance: o.instanceId })
  let fanOut: FanOut | null = null
  let owner: EngineOwner | null = null
  const cancels: Array<Parameters<McpPeers['onCancel']>[0]> = []
  const wakes: Array<Parameters<ContextualPeers['onWake']>[0]> = []
  const revocations: Array<(hash: string) => void> = []
  const bus = new RedisBus(o.redisUrl, log, {
    message: (m) => {
      if (m.t === 'lease-released') {
        if (m.from !== o.instanceId) owner?.released(m.name)
      }
      else if (m.t === 'contextual-wake') {
        // A consumer id is 32 hex digits (contextual-service.ts); nothing else is remembered or looked for.
        if (m.from !== o.instanceId && typeof m.consumer === 'string' && /^[0-9a-f]{32}$/.test(m.consumer)) for (const h of wakes) h(m.consumer, m.due === true)
      }
      else if (m.t === 'token-revoked') {
        if (m.from !== o.instanceId && typeof m.hash === 'string') for (const h of revocations) h(m.hash)
      }
      else if (m.t !== 'mcp-cancel') fanOut?.receive(m)
      else if (m.from !== o.instanceId && typeof m.caller === 'string' && (typeof m.id === 'string' || typeof m.id === 'number')) for (const h of cancels) h(m.caller, m.id)
    },
    reconnected: () => void fanOut?.reconnected(),
  })
  const fan = new FanOut({ instanceId: o.instanceId, nodes: o.nodes, storage: o.storage, log, publish: (m) => bus.publish(m), ...(o.earlyConfirmMs ? { earlyConfirmMs: o.earlyConfirmMs } : {}) })
  fanOut = fan
  await bus.start()
  await fan.start()
  const store = await PgLeaseStore.open(o.databaseUrl)
  const engineOwner = new EngineOwner({
    instanceId: o.instanceId,
    partitions: o.partitions,
    context: o.context,
    nodes: o.nodes,
    store,
    ttlMs: o.engineLeaseMs,
    log,
    catchUp: () => fan.catchUp(),
    announce: (name) => void bus.publish({ t: 'lease-released', from: o.instanceId, name }),
  })
  owner = engineOwner
  return {
    owner: engineOwner,
    mcpPeers: {
      publishCancel: (caller, id) => void bus.publish({ t: 'mcp-cancel', from: o.instanceId, caller, id }),
      onCancel: (handler) => void cancels.push(handler),
    },
    contextualPeers: {
      publish: (consumer, due) => void bus.publish({ t: 'contextual-wake', from: o.instanceId, consumer, due }),
      onWake: (handler) => void wakes.push(handler),
    },
    tokenPeers: {
      publish: (hash) => void bus.publish({ t: 'token-revoked', from: o.instanceId, hash }),
      onRevoked: (handler) => void revocations.push(handler),
    },
    startEngines: () => engineOwner.start(),
    async close() {
      // [PROD2] Given up, not left to expire: the others hear of it and take it over at once.
      for (const name of await engineOwner.stop()) await bus.publish({ t: 'lease-released', from: o.instanceId, name })
      await fan.close()
      await bus.close()
      await store.close()
    },
  }
}
