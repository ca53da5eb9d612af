import type { Cluster, ClusterOptions } from './cluster.js'

export type { Cluster, ClusterOptions } from './cluster.js'

/** [PROD3] `ioredis` (and the lease store's `pg`) load only when REDIS_URL is set. */
export async function startCluster(o: ClusterOptions): Promise<Cluster> {
  const cluster = await import('./cluster.js')
  return cluster.startCluster(o)
}
