import type { MetricObjectWithValues, MetricValue, MetricValueWithName } from 'prom-client'
import { ADMIN_PARTITION, SYSTEM, WeftError, type AdminOverview, type NodePath, type Principal } from '../../shared/index.js'
import type { AccessService } from '../access/index.js'
import { personNames, type NodeService } from '../nodes/index.js'
import type { ContextualAttention } from '../storage/index.js'
import type { Route } from '../http/index.js'
import type { ServerMetrics } from './metrics.js'

/** Rows of each list the page shows; an operator acts on the first ones, the counts say how many in all. */
const LISTED = 50

type Family = MetricObjectWithValues<MetricValue<string> | MetricValueWithName<string>>

function sum(f: Family | undefined, metricName?: string): number {
  if (!f) return 0
  let total = 0
  for (const v of f.values) if (!metricName || (v as MetricValueWithName<string>).metricName === metricName) total += v.value
  return total
}

/** The upper bound of the bucket where the 99th percentile falls (null: no commit yet). */
function p99(f: Family | undefined): number | null {
  if (!f) return null
  const buckets = f.values
    .filter((v) => (v as MetricValueWithName<string>).metricName?.endsWith('_bucket'))
    .map((v) => ({ le: v.labels.le === '+Inf' ? Infinity : Number(v.labels.le), n: v.value }))
    .sort((a, b) => a.le - b.le)
  const total = buckets.at(-1)?.n ?? 0
  if (total === 0) return null
  const hit = buckets.find((b) => b.n >= total * 0.99)
  return hit && Number.isFinite(hit.le) ? hit.le : (buckets.at(-2)?.le ?? null)
}

/** The figures of one server, from its registry (gauges are collected as for a scrape). */
export async function overviewFigures(metrics: ServerMetrics): Promise<AdminOverview['figures']> {
  const families = new Map((await metrics.registry.getMetricsAsJSON()).map((f) => [f.name, f as Family]))
  const one = (name: string) => sum(families.get(name))
  const refusals: Record<string, number> = {}
  for (const v of families.get('weft_refusals_total')?.values ?? []) {
    const code = String(v.labels.code)
    refusals[code] = (refusals[code] ?? 0) + v.value
  }
  const commits = families.get('weft_commit_duration_seconds')
  const count = sum(commits, 'weft_commit_duration_seconds_count')
  return {
    connections: one('weft_connections'),
    rooms: one('weft_rooms'),
    loadedDocs: one('weft_loaded_docs'),
    updates: one('weft_updates_total'),
    acks: one('weft_acks_total'),
    commits: { count, meanSeconds: count > 0 ? sum(commits, 'weft_commit_duration_seconds_sum') / count : 0, p99Seconds: p99(commits) },
    refusals,
    engineLagVersions: one('weft_engine_lag_versions'),
    engineLeaseHeld: one('weft_engine_lease_held') === 1,
    enginePartitions: (families.get('weft_engine_partition_held')?.values ?? []).filter((v) => v.value === 1).map((v) => String(v.labels.partition)).sort(),
    contextual: {
      consumers: one('weft_contextual_consumers'),
      pending: one('weft_contextual_pending_events'),
      leased: one('weft_contextual_leased_events'),
      dead: one('weft_contextual_dead_letters'),
      maxLag: one('weft_contextual_max_lag_versions'),
    },
    eventLoopDelaySeconds: { mean: one('nodejs_eventloop_lag_mean_seconds'), p99: one('nodejs_eventloop_lag_p99_seconds') },
  }
}

export interface OverviewOptions {
  metrics: ServerMetrics
  nodes: NodeService
  access: AccessService
  /** [OPS14] The contextual service's attention (dead letters, lagging consumers with unread events counted). */
  attention: (limit: number, now: number) => Promise<ContextualAttention>
  instanceId: string
  /** A run `Running` for longer than this is listed as stuck (STUCK_RUN_MS). */
  stuckRunMs: number
  /** Accounts that are operators by configuration (OPERATOR_EMAILS, lower case). */
  operatorEmails: ReadonlySet<string>
  /** [SCALE17] Each engine partition and the instance running it (every instance's view alike). */
  engines: () => Promise<AdminOverview['engines']>
}

/**
 * [OPS10] An operator is a user holding the Admin role on the `Admin` partition, or one whose
 * account email (the `User` node's `Email`, written by system only) is in OPERATOR_EMAILS.
 */
export async function isOperator(o: Pick<OverviewOptions, 'nodes' | 'access' | 'operatorEmails'>, principal: Principal): Promise<boolean> {
  if (principal.kind !== 'user') return false
  if (o.access.has(principal, ADMIN_PARTITION, 'ManageAccess')) return true
  if (o.operatorEmails.size === 0) return false
  const user = await o.nodes.get(SYSTEM, principal.userId as string as NodePath).catch(() => null)
  const email = user?.nodeType === 'User' && typeof user.content.Email === 'string' ? user.content.Email.toLowerCase() : null
  return email !== null && o.operatorEmails.has(email)
}

async function stuckRuns(o: OverviewOptions, now: number): Promise<AdminOverview['stuckRuns']> {
  const rows = await o.nodes.queryFields(SYSTEM, { nodeType: 'ActivityLog', where: { Status: 'Running' }, limit: 1_000 }, ['Status', 'Start', 'Category', 'CodePath', 'StartedBy'])
  const str = (v: unknown) => (typeof v === 'string' ? v : null)
  const listed = rows
    .filter((r) => r.fields.Status === 'Running')
    .map((r) => {
      const start = str(r.fields.Start) ?? new Date(now).toISOString()
      return { path: r.path as string, category: str(r.fields.Category), codePath: str(r.fields.CodePath), startedBy: str(r.fields.StartedBy), start, runningMs: Math.max(0, now - Date.parse(start)) }
    })
    .filter((r) => r.runningMs >= o.stuckRunMs)
    .sort((a, b) => b.runningMs - a.runningMs)
    .slice(0, LISTED)
  // [OPS12] Who started a run, by name: the operator is in none of their spaces, so the app has no
  // way to learn it (it showed the account id).
  // [WEB74] Each run's own name ("Forever run"), read as system for the same reason (LISTED reads at most).
  const [names, runNames] = await Promise.all([
    personNames(o.nodes, listed.flatMap((r) => (r.startedBy ? [r.startedBy] : []))),
    Promise.all(listed.map((r) => o.nodes.get(SYSTEM, r.path as NodePath).then((n) => n?.name || null, () => null))),
  ])
  return listed.map((r, i) => ({ ...r, name: runNames[i] ?? null, startedByName: r.startedBy ? (names.get(r.startedBy) ?? null) : null }))
}

export async function adminOverview(o: OverviewOptions): Promise<AdminOverview> {
  const now = Date.now()
  const [figures, attention, runs, engines] = await Promise.all([
    overviewFigures(o.metrics),
    o.attention(LISTED, now),
    stuckRuns(o, now),
    o.engines(),
  ])
  return {
    at: new Date(now).toISOString(),
    instance: o.instanceId,
    figures,
    deadLetters: attention.deadLetters,
    laggingConsumers: attention.lagging.map(({ oldest: _, ...l }) => l),
    stuckRuns: runs,
    stuckRunMs: o.stuckRunMs,
    engines,
  }
}

/** [OPS10] `GET /api/admin/overview`: 401 without a session, 403 `forbidden` for anyone but an operator. */
export function adminOverviewRoute(o: OverviewOptions): Route {
  return {
    method: 'GET',
    pattern: /^\/api\/admin\/overview$/,
    async handler({ principal }) {
      if (!principal || !(await isOperator(o, principal))) {
        throw new WeftError('forbidden', 'Only operators see the overview: the Admins of the Admin partition, or the accounts listed in OPERATOR_EMAILS.')
      }
      return { status: 200, body: await adminOverview(o), headers: { 'cache-control': 'no-store' } }
    },
  }
}
