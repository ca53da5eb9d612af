/**
 * [OPS10] `GET /api/admin/overview`: what an operator watches and acts on (the server builds it in
 * sync-server/metrics/overview.ts; the app's operator page reads it).
 */
export interface AdminOverview {
  at: string
  /** INSTANCE_ID of the instance that answered: the figures are that instance's. */
  instance: string
  figures: {
    connections: number
    rooms: number
    loadedDocs: number
    /** Totals since start; two readings give a rate. */
    updates: number
    acks: number
    commits: { count: number; meanSeconds: number; p99Seconds: number | null }
    refusals: Record<string, number>
    engineLagVersions: number
    engineLeaseHeld: boolean
    /** [SCALE17] The engine partitions (engine names) this instance runs now. */
    enginePartitions: string[]
    contextual: { consumers: number; pending: number; leased: number; dead: number; maxLag: number }
    eventLoopDelaySeconds: { mean: number; p99: number }
  }
  /** [CTX65] `diedAt`: when it died (ISO), null for one that died before the server kept the time. */
  deadLetters: Array<{ consumerId: string; subscriptionPath: string; name: string; eventId: string; path: string; attempt: number; lastError: string | null; diedAt: string | null }>
  /** [OPS12] Consumers with events waiting (pending, or leased past their lease), the oldest first. */
  laggingConsumers: Array<{ consumerId: string; subscriptionPath: string; name: string; cursor: number; lag: number; waiting: number }>
  /**
   * `startedByName`: the starter's display name ([OPS12]: the operator shares no space with them);
   * `name`: the run's own name ([WEB74], "Forever run"; null when it has none).
   */
  stuckRuns: Array<{ path: string; name: string | null; category: string | null; codePath: string | null; startedBy: string | null; startedByName: string | null; start: string; runningMs: number }>
  /** STUCK_RUN_MS: a run `Running` longer than this is listed. */
  stuckRunMs: number
  /**
   * [SCALE17] Each engine partition and the instance (INSTANCE_ID) running it now, across every
   * instance; null when none does (its lease is free: another instance takes it within ENGINE_LEASE_MS).
   */
  engines: Array<{ partition: string; instance: string | null }>
}
