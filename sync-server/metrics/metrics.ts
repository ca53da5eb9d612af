import { createHash, timingSafeEqual } from 'node:crypto'
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client'
import type { Logger } from 'pino'
import { WeftError } from '../../shared/index.js'
import { bearerToken, type Route } from '../http/index.js'

/** Where the figures read on scrape come from (server.ts wires them). */
export interface MetricsSources {
  /** Open WebSockets (/sync and /mux). */
  connections(): number
  /** Loaded nodes. */
  loadedDocs(): number
  /** Loaded nodes with a client connected. */
  rooms(): number
  /** [OPS5] Versions in the change log not yet on this instance's change feed (what the engines follow). */
  engineLag(): Promise<number>
  /** [OPS5] Whether this instance holds the engines' lease (a lone instance always does). */
  engineLeaseHeld(): boolean
  /** [SCALE17] Each engine partition (by engine name): whether this instance runs it now. */
  enginePartitions(): Record<string, boolean>
  /** [OPS6] Contextual consumers' events, every consumer together. */
  contextual(): Promise<{ consumers: number; pending: number; leased: number; dead: number; maxLag: number }>
  /** [CTX48] Contextual long polls waiting on this instance now. */
  contextualWaiting(): number
}

/** Commit latency buckets, in seconds: group commits land in milliseconds; a stalled disk shows at the top. */
const COMMIT_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5]

/**
 * [OPS3]–[OPS8] The Prometheus figures of one server, in a registry of its own (several servers
 * in one process never share a count). Hot paths only increment counters; gauges are read from
 * their sources when scraped.
 */
export class ServerMetrics {
  readonly registry = new Registry()
  private readonly updates: Counter<'transport'>
  private readonly acks: Counter<'transport'>
  private readonly refusals: Counter<'code' | 'transport'>
  private readonly commits: Histogram

  constructor(sources: MetricsSources, private readonly log: Logger) {
    const registers = [this.registry]
    this.updates = new Counter({ name: 'weft_updates_total', help: 'Client updates received over sockets.', labelNames: ['transport'], registers })
    this.acks = new Counter({ name: 'weft_acks_total', help: 'Client updates made durable (acknowledged).', labelNames: ['transport'], registers })
    this.refusals = new Counter({ name: 'weft_refusals_total', help: 'Requests and client updates refused, by error code and transport.', labelNames: ['code', 'transport'], registers })
    this.commits = new Histogram({ name: 'weft_commit_duration_seconds', help: 'Time from a commit being enqueued to it being durable.', buckets: COMMIT_BUCKETS, registers })
    this.gauge('weft_connections', 'Open WebSockets (/sync and /mux).', () => sources.connections())
    this.gauge('weft_rooms', 'Loaded nodes with at least one client connected.', () => sources.rooms())
    this.gauge('weft_loaded_docs', 'Nodes loaded in memory.', () => sources.loadedDocs())
    this.gauge('weft_engine_lag_versions', 'Versions in the change log not yet on this instance\'s change feed.', () => sources.engineLag())
    this.gauge('weft_engine_lease_held', '1 when this instance holds an engine partition\'s lease (runs an engine), else 0.', () => (sources.engineLeaseHeld() ? 1 : 0))
    new Gauge({
      name: 'weft_engine_partition_held',
      help: '1 for each engine partition this instance runs now, 0 for the others.',
      labelNames: ['partition'],
      registers,
      collect() {
        for (const [partition, held] of Object.entries(sources.enginePartitions())) this.set({ partition }, held ? 1 : 0)
      },
    })
    // One query for the five contextual figures per scrape, shared by their collect functions.
    let contextual: ReturnType<MetricsSources['contextual']> | null = null
    const ctx = <K extends 'consumers' | 'pending' | 'leased' | 'dead' | 'maxLag'>(key: K) => async () => {
      contextual ??= sources.contextual().finally(() => queueMicrotask(() => (contextual = null)))
      return (await contextual)[key]
    }
    this.gauge('weft_contextual_consumers', 'Contextual consumers.', ctx('consumers'))
    this.gauge('weft_contextual_pending_events', 'Contextual events waiting to be leased, every consumer together.', ctx('pending'))
    this.gauge('weft_contextual_leased_events', 'Contextual events under a live lease, every consumer together.', ctx('leased'))
    this.gauge('weft_contextual_dead_letters', 'Contextual events that used up their attempts (re-drive them).', ctx('dead'))
    this.gauge('weft_contextual_max_lag_versions', 'Change-log head minus the furthest-behind consumer\'s cursor.', ctx('maxLag'))
    this.gauge('weft_contextual_waiting_polls', 'Contextual long polls (next with waitSeconds) waiting on this instance now.', () => sources.contextualWaiting())
    // [OPS7] Process figures, event-loop delay among them (nodejs_eventloop_lag_*).
    collectDefaultMetrics({ register: this.registry })
  }

  /** A gauge read on scrape; a source that fails keeps the last value (a scrape never fails for it). */
  private gauge(name: string, help: string, read: () => number | Promise<number>): void {
    const log = this.log
    new Gauge({
      name,
      help,
      registers: [this.registry],
      async collect() {
        try {
          this.set(await read())
        } catch (err) {
          log.warn({ err, metric: name }, 'metric source failed; the last value stays')
        }
      },
    })
  }

  update(transport: string): void {
    this.updates.inc({ transport })
  }

  acked(transport: string): void {
    this.acks.inc({ transport })
  }

  refused(code: string, transport: string): void {
    this.refusals.inc({ code, transport })
  }

  committed(seconds: number): void {
    this.commits.observe(seconds)
  }
}

function digest(s: string): Buffer {
  return createHash('sha256').update(s).digest()
}

/**
 * [OPS1] [OPS2] `GET /metrics`: Prometheus text for `Authorization: Bearer $METRICS_TOKEN`. Without
 * METRICS_TOKEN the endpoint does not exist (404); a missing or wrong token is 401 `unauthorized`.
 * The token is compared in constant time; `?token=` is not read.
 */
export function metricsRoute(metrics: ServerMetrics | null, token: string | undefined): Route {
  const expected = token ? digest(token) : null
  return {
    method: 'GET',
    pattern: /^\/metrics$/,
    auth: false,
    async handler({ req, res }) {
      if (!metrics || !expected) throw new WeftError('not_found', 'Metrics are off on this server: set METRICS_TOKEN to serve /metrics.')
      const given = bearerToken(req)
      if (!given) throw new WeftError('unauthorized', 'Send Authorization: Bearer <METRICS_TOKEN> to read /metrics.')
      if (!timingSafeEqual(digest(given), expected)) throw new WeftError('unauthorized', 'That is not this server\'s METRICS_TOKEN.')
      const text = await metrics.registry.metrics()
      res.writeHead(200, { 'content-type': metrics.registry.contentType, 'content-length': Buffer.byteLength(text), 'cache-control': 'no-store' })
      res.end(text)
      return { status: 200 }
    },
  }
}
