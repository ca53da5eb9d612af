/**
 * Contextual consumers' upkeep (stop 36), an in-process server per storage:
 *  - `sqliteSweepRowsPerSec` / `pgSweepRowsPerSec`: [CTX45] the sweep (`ContextualService.prune`)
 *    deleting SWEEP_ROWS settled event rows of one consumer (written straight into the table, as a
 *    day of acks would leave them); `sqliteSweepMs` / `pgSweepMs` its whole time;
 *    `sqlitePutP99DuringSweepMs` / `...Idle...`: the p99 of node `PUT`s sent one after another
 *    while the sweep runs, and without it (SQLite has one writer: a sweep batch holds it);
 *  - `sqliteOutcomeSweepRowsPerSec` / `pgOutcomeSweepRowsPerSec`: [CTX51] then the sweep of the same
 *    events' SWEEP_ROWS outcome rows past their retention (`pruneOutcomes`), past PROTECTED_OUTCOMES
 *    older ones it must keep (their events are dead letters), and
 *    `...PutP99DuringOutcomeSweepMs` the PUTs' p99 beside it;
 *  - `fullWaitersLeasesPerCommit`: [CTX31] FULL_WAITERS consumers, each at its in-flight limit and
 *    long-polling (SQLite), while COMMITS events of their subscription are committed: the lease
 *    statements run per commit for them (each had one per commit before stop 36: every commit woke
 *    every full waiter); `putP50WithFullWaitersMs` the commits' median meanwhile.
 * Run alone: `npx tsx test/bench/contextual-sweep-bench.ts` prints JSON.
 */
import { setMaxListeners } from 'node:events'
import { join } from 'node:path'
import { performance } from 'node:perf_hooks'
import { pathToFileURL } from 'node:url'
import Database from 'better-sqlite3'
import pg from 'pg'
import { userPrincipal, type UserId } from '../../shared/index.js'
import { api, createSpace, expectStatus, freshDatabase, signup, startTestServer, type TestServer } from '../helpers/index.js'
import { percentile, round } from './stats.js'
import type { Goal } from './run.js'

export const GOALS: Record<string, Goal> = {}

const SWEEP_ROWS = Number(process.env.CONTEXTUAL_SWEEP_ROWS ?? 100_000)
/** [CTX51] Outcomes older still whose events are dead letters: kept, and walked past by the outcome sweep. */
const PROTECTED_OUTCOMES = Number(process.env.CONTEXTUAL_PROTECTED_OUTCOMES ?? 20_000)
const FULL_WAITERS = 50
const COMMITS = 40

interface Rig {
  ts: TestServer
  token: string
  userId: string
  sub: string
  prefix: string
}

async function rig(config: Record<string, unknown>, maxInFlight = 1): Promise<Rig> {
  const ts = await startTestServer({ config })
  const owner = await signup(ts.url)
  const space = await createSpace(ts.url, owner.token)
  const prefix = `${space}/inbox`
  expectStatus(await api(ts.url, owner.token).putNode(prefix, 'Document', {}), 201)
  const sub = `${space}/sweep`
  expectStatus(
    await api(ts.url, owner.token).putNode(sub, 'ContextualSubscription', {
      Operation: 'sweep',
      Events: { NodeTypes: ['Document'], Kinds: ['Created'], PathPrefix: prefix },
      Reactions: { annotate: { Command: 'patch', Target: '{event.path}', Parameters: { Note: { Type: 'string' } } } },
      Limits: { LeaseSeconds: 60, MaxInFlight: maxInFlight, MaxAttempts: 3 },
    }),
    201,
  )
  return { ts, token: owner.token, userId: owner.userId, sub, prefix }
}

/** SWEEP_ROWS acked rows of a fresh consumer, settled at time 1 (long before any retention). */
async function settledRows(r: Rig, insert: (consumerId: string) => Promise<void>): Promise<string> {
  const { consumerId } = await r.ts.server.contextual.next(userPrincipal(r.userId as UserId), { subscription: r.sub, consumer: 'swept' })
  await insert(consumerId)
  return consumerId
}

/** PUTs one after another for `ms`, or until `until` settles: each one's time. */
async function puts(r: Rig, tag: string, until: Promise<unknown> | null, ms = 2_000): Promise<number[]> {
  const times: number[] = []
  let done = false
  void until?.finally(() => (done = true))
  const t0 = performance.now()
  for (let i = 0; until ? !done : performance.now() - t0 < ms; i++) {
    const s = performance.now()
    expectStatus(await api(r.ts.url, r.token).putNode(`${r.prefix}/${tag}-${i}`, 'Document', { i }), 201)
    times.push(performance.now() - s)
  }
  return times
}

async function sweep(r: Rig, outcomes = false): Promise<{ ms: number; deleted: number; putTimes: number[] }> {
  const t0 = performance.now()
  // A day and an hour on: past SETTLED_RETENTION_MS (24 h) for every row; outcomes: 31 days on.
  const svc = r.ts.server.contextual
  const running = outcomes ? svc.pruneOutcomes(Date.now() + 31 * 24 * 3600_000) : svc.prune(Date.now() + 25 * 3600_000)
  const putTimes = await puts(r, outcomes ? 'during-outcomes' : 'during', running)
  const deleted = await running
  return { ms: performance.now() - t0, deleted, putTimes }
}

/** `PUT`s idle, then the sweep of the SWEEP_ROWS settled rows with `PUT`s beside it: the figures under `storage`'s prefix. */
async function sweepFigures(r: Rig, storage: 'sqlite' | 'pg'): Promise<Record<string, number>> {
  const idle = await puts(r, 'idle', null)
  const s = await sweep(r)
  if (s.deleted !== SWEEP_ROWS) throw new Error(`${storage} sweep deleted ${s.deleted} of ${SWEEP_ROWS}`)
  const o = await sweep(r, true)
  if (o.deleted !== SWEEP_ROWS) throw new Error(`${storage} outcome sweep deleted ${o.deleted} of ${SWEEP_ROWS}`)
  return {
    [`${storage}OutcomeSweepRowsPerSec`]: round(SWEEP_ROWS / (o.ms / 1000)),
    [`${storage}PutP99DuringOutcomeSweepMs`]: round(percentile(o.putTimes, 99), 2),
    [`${storage}SweepMs`]: round(s.ms),
    [`${storage}SweepRowsPerSec`]: round(SWEEP_ROWS / (s.ms / 1000)),
    [`${storage}PutP99IdleMs`]: round(percentile(idle, 99), 2),
    [`${storage}PutP99DuringSweepMs`]: round(percentile(s.putTimes, 99), 2),
    [`${storage}PutMaxDuringSweepMs`]: round(Math.max(...s.putTimes), 2),
  }
}

/** [CTX31] Lease statements run for FULL_WAITERS full, long-polling consumers while COMMITS events land. */
async function fullWaiters(r: Rig): Promise<{ perCommit: number; putP50: number }> {
  const svc = r.ts.server.contextual
  const owner = userPrincipal(r.userId as UserId)
  const ids: string[] = []
  for (let i = 0; i < FULL_WAITERS; i++) ids.push((await svc.next(owner, { subscription: r.sub, consumer: `full${i}` })).consumerId)
  // One event each consumer takes: each is at its limit (MaxInFlight 1) from then on.
  expectStatus(await api(r.ts.url, r.token).putNode(`${r.prefix}/held`, 'Document', {}), 201)
  for (let i = 0; i < FULL_WAITERS; i++) if (!(await svc.next(owner, { subscription: r.sub, consumer: `full${i}` })).item) throw new Error('no item to hold')
  const stop = new AbortController()
  setMaxListeners(FULL_WAITERS + 10, stop.signal)
  const polls = ids.map((_, i) => svc.next(owner, { subscription: r.sub, consumer: `full${i}`, waitSeconds: 60 }, stop.signal).catch(() => null))
  while (svc.waiting < FULL_WAITERS) await new Promise((resolve) => setTimeout(resolve, 10))
  const storage = r.ts.server.storage
  const original = storage.contextual.bind(storage)
  let leases = 0
  storage.contextual = (call) => {
    if (call.op === 'lease') leases++
    return original(call)
  }
  try {
    const times: number[] = []
    for (let i = 0; i < COMMITS; i++) {
      const s = performance.now()
      expectStatus(await api(r.ts.url, r.token).putNode(`${r.prefix}/c${i}`, 'Document', { i }), 201)
      times.push(performance.now() - s)
    }
    return { perCommit: leases / COMMITS, putP50: percentile(times, 50) }
  } finally {
    storage.contextual = original
    stop.abort()
    await Promise.all(polls)
  }
}

const PARTS = (process.env.CONTEXTUAL_SWEEP_PARTS ?? 'sweep,full').split(',')

export async function benchContextualSweep(): Promise<Record<string, number | string>> {
  const out: Record<string, number | string> = { sweepRows: SWEEP_ROWS, protectedOutcomes: PROTECTED_OUTCOMES, fullWaiters: FULL_WAITERS, commits: COMMITS }
  if (PARTS.includes('sweep')) await sweeps(out)
  if (PARTS.includes('full')) {
    const full = await rig({}, 1)
    try {
      const f = await fullWaiters(full)
      out.fullWaitersLeasesPerCommit = round(f.perCommit, 2)
      out.putP50WithFullWaitersMs = round(f.putP50, 2)
    } finally {
      await full.ts.cleanup()
    }
  }
  return out
}

async function sweeps(out: Record<string, number | string>): Promise<void> {
  const lite = await rig({})
  try {
    await settledRows(lite, async (consumerId) => {
      const db = new Database(join(lite.ts.dataDir, 'weft.db'))
      db.pragma('busy_timeout = 10000')
      const add = db.prepare(
        `INSERT INTO contextual_events (consumer_id, event_id, version, path, node_type, kind, state, attempt, lease_token, expires_at, available_at, last_error)
         VALUES (?, ?, ?, ?, 'Document', 'Created', 'acked', 1, NULL, 1, 1, NULL)`,
      )
      const outcome = db.prepare(
        `INSERT INTO contextual_outcomes (key, consumer_id, event_id, reaction, attempt, principal, outcome, causation, version, at)
         VALUES (?, ?, ?, 'annotate', 1, 'u', '{}', '{}', NULL, '2000-01-01T00:00:00.000Z')`,
      )
      const dead = db.prepare(
        `INSERT INTO contextual_events (consumer_id, event_id, version, path, node_type, kind, state, attempt, lease_token, expires_at, available_at, last_error)
         VALUES (?, ?, ?, ?, 'Document', 'Created', 'dead', 1, NULL, 1, 1, 'x')`,
      )
      const kept = db.prepare(
        `INSERT INTO contextual_outcomes (key, consumer_id, event_id, reaction, attempt, principal, outcome, causation, version, at)
         VALUES (?, ?, ?, 'annotate', 1, 'u', '{}', '{}', NULL, '1999-01-01T00:00:00.000Z')`,
      )
      db.transaction(() => {
        for (let i = 0; i < SWEEP_ROWS; i++) add.run(consumerId, `x${i}`, -i, `${lite.prefix}/gone${i}`)
        for (let i = 0; i < SWEEP_ROWS; i++) outcome.run(`k${i}`, consumerId, `x${i}`)
        for (let i = 0; i < PROTECTED_OUTCOMES; i++) {
          dead.run(consumerId, `p${i}`, -SWEEP_ROWS - i, `${lite.prefix}/dead${i}`)
          kept.run(`p${i}`, consumerId, `p${i}`)
        }
      })()
      db.close()
    })
    Object.assign(out, await sweepFigures(lite, 'sqlite'))
  } finally {
    await lite.ts.cleanup()
  }
  const db = await freshDatabase('weft_ctxsweep_')
  const rigPg = await rig({ databaseUrl: db.url })
  try {
    await settledRows(rigPg, async (consumerId) => {
      const client = new pg.Client({ connectionString: db.url })
      await client.connect()
      await client.query(
        `INSERT INTO contextual_events (consumer_id, event_id, version, path, node_type, kind, state, attempt, lease_token, expires_at, available_at, last_error)
         SELECT $1, 'x' || i, -i, $2 || i, 'Document', 'Created', 'acked', 1, NULL, 1, 1, NULL FROM generate_series(0, $3::int - 1) i`,
        [consumerId, `${rigPg.prefix}/gone`, SWEEP_ROWS],
      )
      await client.query(
        `INSERT INTO contextual_outcomes (key, consumer_id, event_id, reaction, attempt, principal, outcome, causation, version, at)
         SELECT 'k' || i, $1, 'x' || i, 'annotate', 1, 'u', '{}', '{}', NULL, '2000-01-01T00:00:00.000Z' FROM generate_series(0, $2::int - 1) i`,
        [consumerId, SWEEP_ROWS],
      )
      await client.query(
        `INSERT INTO contextual_events (consumer_id, event_id, version, path, node_type, kind, state, attempt, lease_token, expires_at, available_at, last_error)
         SELECT $1, 'p' || i, -$3::int - i, $2 || i, 'Document', 'Created', 'dead', 1, NULL, 1, 1, 'x' FROM generate_series(0, $4::int - 1) i`,
        [consumerId, `${rigPg.prefix}/dead`, SWEEP_ROWS, PROTECTED_OUTCOMES],
      )
      await client.query(
        `INSERT INTO contextual_outcomes (key, consumer_id, event_id, reaction, attempt, principal, outcome, causation, version, at)
         SELECT 'p' || i, $1, 'p' || i, 'annotate', 1, 'u', '{}', '{}', NULL, '1999-01-01T00:00:00.000Z' FROM generate_series(0, $2::int - 1) i`,
        [consumerId, PROTECTED_OUTCOMES],
      )
      await client.end()
    })
    Object.assign(out, await sweepFigures(rigPg, 'pg'))
  } finally {
    await rigPg.ts.cleanup()
    await db.drop()
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  benchContextualSweep().then(
    (r) => console.log(JSON.stringify(r, null, 2)),
    (e: unknown) => {
      console.error(e)
      process.exit(1)
    },
  )
}
