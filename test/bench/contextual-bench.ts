/**
 * Contextual subscriptions' throughput (issue 19), in-process service calls (no HTTP), one
 * worker, sequential:
 *  - `sqliteCyclesPerSec` / `pgCyclesPerSec`: `next → react → ack` cycles per second, the react
 *    committing a one-field patch of the event's node (a real commit with its outcome record);
 *  - `sqliteNextAckPerSec` / `pgNextAckPerSec`: `next → ack` alone (the queue part);
 *  - `sqliteSettleCyclesPerSec` / `pgSettleCyclesPerSec`: [CTX47] `next → react` with `ack: true`
 *    (the item settled in the reaction's transaction), `pgSettleCycleRatioToPgBoss` over pg-boss
 *    `fetch → complete` and `pgSettleCycleRatioToPgBossWithEffect` over it with the effect;
 *  - [CTX52] `sqliteChainCyclesPerSec` / `pgChainCyclesPerSec`: one `react` with ack and next per
 *    item (the reaction, the settle and the next pull in one call), `pgChainCycleRatioToPgBoss`, and
 *    `pgChainOverSettle` over `next → react(ack)`;
 *  - [CTX52] `httpSettleCyclesPerSec` / `httpChainCyclesPerSec` (SQLite, over HTTP as a remote
 *    worker calls): `next` then `react` with ack (two requests per item) against one `react` with
 *    ack and next (one request), `httpChainOverSettle` the second over the first;
 *  - `pgBossFetchCompletePerSec`: pg-boss `fetch → complete` on the same PostgreSQL database in the
 *    same run, rounds alternating with ours; `pgCycleRatioToPgBoss` and `pgNextAckRatioToPgBoss`
 *    are ours over pg-boss's (goal for next→ack ≥ 1×). EVENTS per round, ROUNDS rounds each, best
 *    round kept (the machine is shared);
 *  - `pgBossWithEffectPerSec`: pg-boss `fetch → effect → complete`, the effect what our react
 *    commits, written as a pg-boss worker would at its cheapest: one autocommit statement that
 *    records the job's outcome under its key (an idempotency row) and patches a JSON row; beside it
 *    `pgCycleRatioToPgBossWithEffect` (our cycle over it: the same work on both sides);
 *  - `pgCyclesPerSecWorkers` / `pgBossFetchCompletePerSecWorkers`: the same with WORKERS workers at
 *    once on one consumer (MaxInFlight WORKERS) and on one pg-boss queue, `pgCycleRatioToPgBossWorkers`
 *    ours over pg-boss's;
 *  - [CTX16] `sqliteHydratedPullsPerSecUnderWrites` / `pgHydratedPullsPerSecUnderWrites`: `next → ack`
 *    of a definition with two hydration queries (a Get, a Children list) while another writer
 *    patches a node of another space as fast as it can (`…BusyWritesPerSec`), and the share of
 *    pulls refused `unavailable` (`…HydratedPullsRefused`, pulled again): a commit elsewhere must
 *    not refuse a pull.
 * Run alone: `npx tsx test/bench/contextual-bench.ts` prints JSON.
 */
import { performance } from 'node:perf_hooks'
import { pathToFileURL } from 'node:url'
import pg from 'pg'
import { PgBoss } from 'pg-boss'
import { fenceOf, userPrincipal, type NodePath, type Principal, type UserId } from '../../shared/index.js'
import { api, createSpace, expectStatus, freshDatabase, signup, startTestServer, type TestServer } from '../helpers/index.js'
import { round } from './stats.js'
import type { Goal } from './run.js'

export const GOALS: Record<string, Goal> = {
  pgNextAckRatioToPgBoss: { op: '>=', value: 1, unit: '×' },
}

const EVENTS = Number(process.env.CONTEXTUAL_BENCH_EVENTS ?? 150)
const ROUNDS = 2

/** Workers at once in the concurrent rounds (the definition's MaxInFlight bound). */
const WORKERS = 8
/** Events per concurrent round: each worker takes many. */
const EVENTS_CONCURRENT = EVENTS * 4

interface Rig {
  ts: TestServer
  principal: Principal
  token: string
  sub: string
  /** The same subscription with MaxInFlight WORKERS. */
  subWide: string
  prefix: string
  round: number
}

async function rig(config: Record<string, unknown>): Promise<Rig> {
  const ts = await startTestServer({ config })
  const owner = await signup(ts.url)
  const space = await createSpace(ts.url, owner.token)
  const prefix = `${space}/inbox`
  expectStatus(await api(ts.url, owner.token).putNode(prefix, 'Document', {}), 201)
  const sub = `${space}/bench`
  expectStatus(
    await api(ts.url, owner.token).putNode(sub, 'ContextualSubscription', {
      Operation: 'bench',
      Events: { NodeTypes: ['Document'], Kinds: ['Created'], PathPrefix: prefix },
      Reactions: { annotate: { Command: 'patch', Target: '{event.path}', Parameters: { Note: { Type: 'string' } } } },
      Limits: { LeaseSeconds: 60, MaxInFlight: 1, MaxAttempts: 3 },
    }),
    201,
  )
  const subWide = `${space}/bench-wide`
  expectStatus(
    await api(ts.url, owner.token).putNode(subWide, 'ContextualSubscription', {
      Operation: 'bench_wide',
      Events: { NodeTypes: ['Document'], Kinds: ['Created'], PathPrefix: prefix },
      Reactions: { annotate: { Command: 'patch', Target: '{event.path}', Parameters: { Note: { Type: 'string' } } } },
      Limits: { LeaseSeconds: 60, MaxInFlight: WORKERS, MaxAttempts: 3 },
    }),
    201,
  )
  return { ts, principal: userPrincipal(owner.userId as UserId), token: owner.token, sub, subWide, prefix, round: 0 }
}

/**
 * WORKERS workers at once on one consumer (MaxInFlight WORKERS), each `next → react → ack` until
 * every event is taken: the throughput a pool of agents gets, where commits of reactions that
 * land together share a transaction.
 */
async function cyclesConcurrent(r: Rig): Promise<number> {
  const svc = r.ts.server.contextual
  const consumer = `w${++r.round}`
  await svc.next(r.principal, { subscription: r.subWide, consumer })
  for (let i = 0; i < EVENTS_CONCURRENT; i += 20) {
    await Promise.all(
      Array.from({ length: Math.min(20, EVENTS_CONCURRENT - i) }, (_, j) =>
        api(r.ts.url, r.token)
          .putNode(`${r.prefix}/w${r.round}-${i + j}`, 'Document', { i: i + j })
          .then((res) => expectStatus(res, 201)),
      ),
    )
  }
  let taken = 0
  let done = 0
  const t0 = performance.now()
  await Promise.all(
    Array.from({ length: WORKERS }, async () => {
      while (taken < EVENTS_CONCURRENT) {
        const { consumerId, item } = await svc.next(r.principal, { subscription: r.subWide, consumer })
        if (!item) {
          await new Promise((resolve) => setImmediate(resolve))
          continue
        }
        taken++
        await svc.react(r.principal, { causationToken: item.reactions[0]!.causationToken, params: { Note: 'seen' } })
        await svc.ack(r.principal, fenceOf(consumerId, item))
        done++
      }
    }),
  )
  if (done !== EVENTS_CONCURRENT) throw new Error(`concurrent round: ${done} of ${EVENTS_CONCURRENT} done`)
  return done / ((performance.now() - t0) / 1000)
}

/**
 * EVENTS fresh events for a fresh consumer; then the timed loop: `next → react → ack` ('react'),
 * `next → ack` ('ack'), [CTX47] `next → react` with the ack in the reaction's transaction
 * ('settle'), or [CTX52] one `react` with ack and next per item ('chain', after one first `next`).
 */
async function cycles(r: Rig, mode: 'react' | 'ack' | 'settle' | 'chain'): Promise<number> {
  const svc = r.ts.server.contextual
  const consumer = `c${++r.round}`
  await svc.next(r.principal, { subscription: r.sub, consumer })
  for (let i = 0; i < EVENTS; i++) expectStatus(await api(r.ts.url, r.token).putNode(`${r.prefix}/r${r.round}-${i}`, 'Document', { i }), 201)
  const t0 = performance.now()
  if (mode === 'chain') {
    let { item } = await svc.next(r.principal, { subscription: r.sub, consumer })
    for (let i = 0; i < EVENTS; i++) {
      if (!item) throw new Error(`no item at ${i}`)
      const out = await svc.react(r.principal, { causationToken: item.reactions[0]!.causationToken, params: { Note: 'seen' }, ack: true, next: true })
      if (!out.acked || !out.next) throw new Error(`not settled, or no next, at ${i}`)
      item = out.next.item
    }
    return EVENTS / ((performance.now() - t0) / 1000)
  }
  for (let i = 0; i < EVENTS; i++) {
    const { consumerId, item } = await svc.next(r.principal, { subscription: r.sub, consumer })
    if (!item) throw new Error(`no item at ${i}`)
    if (mode === 'settle') {
      const out = await svc.react(r.principal, { causationToken: item.reactions[0]!.causationToken, params: { Note: 'seen' }, ack: true })
      if (!out.acked) throw new Error(`not settled at ${i}`)
      continue
    }
    if (mode === 'react') await svc.react(r.principal, { causationToken: item.reactions[0]!.causationToken, params: { Note: 'seen' } })
    await svc.ack(r.principal, fenceOf(consumerId, item))
  }
  return EVENTS / ((performance.now() - t0) / 1000)
}

/**
 * [CTX52] The same loops as a remote worker runs them, over HTTP: `next` then `react` with ack
 * ('settle', two requests per item), or one `react` with ack and next per item ('chain').
 */
async function httpCycles(r: Rig, mode: 'settle' | 'chain'): Promise<number> {
  const consumer = `h${++r.round}`
  const call = async <T>(op: string, body: unknown): Promise<T> => expectStatus(await api(r.ts.url, r.token).post<T>(`/api/contextual/${op}`, body), 200).body
  type Pulled = { item: { reactions: { causationToken: string }[] } | null }
  await call('next', { subscription: r.sub, consumer })
  for (let i = 0; i < EVENTS; i++) expectStatus(await api(r.ts.url, r.token).putNode(`${r.prefix}/${consumer}-${i}`, 'Document', { i }), 201)
  const t0 = performance.now()
  let item = mode === 'chain' ? (await call<Pulled>('next', { subscription: r.sub, consumer })).item : null
  for (let i = 0; i < EVENTS; i++) {
    if (mode === 'settle') item = (await call<Pulled>('next', { subscription: r.sub, consumer })).item
    if (!item) throw new Error(`http: no item at ${i}`)
    const out = await call<{ acked?: boolean; next?: Pulled }>('react', { causationToken: item.reactions[0]!.causationToken, params: { Note: 'seen' }, ack: true, ...(mode === 'chain' ? { next: true } : {}) })
    if (!out.acked) throw new Error(`http: not settled at ${i}`)
    if (mode === 'chain') item = out.next!.item
  }
  return EVENTS / ((performance.now() - t0) / 1000)
}

/** pg-boss `fetch → complete` EVENTS times, each job's `effect` (if any) run between the two. */
async function pgBossRound(boss: PgBoss, queue: string, effect?: (job: { id: string; data: { i: number } }) => Promise<void>): Promise<number> {
  await boss.insert(queue, Array.from({ length: EVENTS }, (_, i) => ({ data: { i } })))
  const t0 = performance.now()
  for (let i = 0; i < EVENTS; i++) {
    const [job] = await boss.fetch<{ i: number }>(queue)
    if (!job) throw new Error(`pg-boss: no job at ${i}`)
    await effect?.(job)
    await boss.complete(queue, job.id)
  }
  return EVENTS / ((performance.now() - t0) / 1000)
}

/** The effect a reaction has, as a pg-boss worker would write it: an outcome row under the job's key, and a JSON row patched, in one statement. */
const EFFECT_SQL = `WITH o AS (INSERT INTO bench_outcomes (key, outcome) VALUES ($1, $2::jsonb) ON CONFLICT (key) DO NOTHING RETURNING key)
  UPDATE bench_docs SET body = body || $3::jsonb, version = version + 1 WHERE id = $4 AND EXISTS (SELECT 1 FROM o)`

const effectOn = (pool: pg.Pool, queue: string) => async (job: { id: string; data: { i: number } }) => {
  const r = await pool.query(EFFECT_SQL, [`${queue}:${job.id}:reply`, JSON.stringify({ status: 'committed' }), JSON.stringify({ Note: 'seen' }), job.data.i % 100])
  if (r.rowCount !== 1) throw new Error(`pg-boss effect: ${r.rowCount} rows for job ${job.id}`)
}

/** WORKERS loops at once, each `fetch → complete`, until the queue is empty. */
async function pgBossConcurrent(boss: PgBoss, queue: string): Promise<number> {
  await boss.insert(queue, Array.from({ length: EVENTS_CONCURRENT }, (_, i) => ({ data: { i } })))
  let done = 0
  const t0 = performance.now()
  await Promise.all(
    Array.from({ length: WORKERS }, async () => {
      for (;;) {
        const [job] = await boss.fetch<{ i: number }>(queue)
        if (!job) return
        await boss.complete(queue, job.id)
        done++
      }
    }),
  )
  if (done !== EVENTS_CONCURRENT) throw new Error(`pg-boss concurrent: ${done} of ${EVENTS_CONCURRENT} done`)
  return done / ((performance.now() - t0) / 1000)
}

const best = (xs: number[]) => Math.max(...xs)

/**
 * [CTX16] Pulls of a definition with hydration queries while a writer patches another space's node
 * as fast as it can: pulls per second, the writer's writes per second, and the share of pulls
 * refused `unavailable` (each pulled again until it is not).
 */
async function hydratedUnderWrites(r: Rig): Promise<{ pullsPerSec: number; writesPerSec: number; refused: number }> {
  const svc = r.ts.server.contextual
  const sub = `${r.prefix}-hyd`
  const prefix = `${r.prefix}-hin`
  expectStatus(await api(r.ts.url, r.token).putNode(prefix, 'Document', {}), 201)
  expectStatus(
    await api(r.ts.url, r.token).putNode(sub, 'ContextualSubscription', {
      Operation: 'bench_hydrated',
      Events: { NodeTypes: ['Document'], Kinds: ['Created'], PathPrefix: prefix },
      Hydration: { source: { Get: '{event.path}' }, siblings: { Children: '{event.parent}', NodeType: 'Document', Limit: 20 } },
      Reactions: { annotate: { Command: 'patch', Target: '{event.path}', Parameters: { Note: { Type: 'string' } } } },
      Limits: { LeaseSeconds: 60, MaxInFlight: 1, MaxAttempts: 3 },
    }),
    201,
  )
  const other = await createSpace(r.ts.url, r.token)
  const busyPath = `${other}/busy`
  expectStatus(await api(r.ts.url, r.token).putNode(busyPath, 'Document', { n: 0 }), 201)
  await svc.next(r.principal, { subscription: sub, consumer: 'h' })
  for (let i = 0; i < EVENTS; i++) expectStatus(await api(r.ts.url, r.token).putNode(`${prefix}/e${i}`, 'Document', { i }), 201)
  let writing = true
  let writes = 0
  const writer = (async () => {
    while (writing) {
      await r.ts.server.nodes.patch(r.principal, busyPath as NodePath, { n: ++writes })
    }
  })()
  let refused = 0
  const t0 = performance.now()
  for (let i = 0; i < EVENTS; i++) {
    for (;;) {
      try {
        const { consumerId, item } = await svc.next(r.principal, { subscription: sub, consumer: 'h' })
        if (!item) throw new Error(`no item at ${i}`)
        await svc.ack(r.principal, fenceOf(consumerId, item))
        break
      } catch (err) {
        if ((err as { code?: string }).code !== 'unavailable') throw err
        refused++
      }
    }
  }
  const secs = (performance.now() - t0) / 1000
  writing = false
  await writer
  return { pullsPerSec: EVENTS / secs, writesPerSec: writes / secs, refused: refused / (EVENTS + refused) }
}

export async function benchContextual(): Promise<Record<string, number | string>> {
  const out: Record<string, number | string> = { events: EVENTS, rounds: ROUNDS }
  const lite = await rig({})
  try {
    const c: number[] = []
    const q: number[] = []
    const st: number[] = []
    const ch: number[] = []
    const hs: number[] = []
    const hc: number[] = []
    for (let i = 0; i < ROUNDS; i++) {
      c.push(await cycles(lite, 'react'))
      q.push(await cycles(lite, 'ack'))
      st.push(await cycles(lite, 'settle'))
      ch.push(await cycles(lite, 'chain'))
      hs.push(await httpCycles(lite, 'settle'))
      hc.push(await httpCycles(lite, 'chain'))
    }
    out.sqliteCyclesPerSec = round(best(c))
    out.sqliteNextAckPerSec = round(best(q))
    out.sqliteSettleCyclesPerSec = round(best(st))
    out.sqliteChainCyclesPerSec = round(best(ch))
    out.httpSettleCyclesPerSec = round(best(hs))
    out.httpChainCyclesPerSec = round(best(hc))
    out.httpChainOverSettle = round(best(hc) / best(hs), 2)
    const hy = await hydratedUnderWrites(lite)
    out.sqliteHydratedPullsPerSecUnderWrites = round(hy.pullsPerSec)
    out.sqliteBusyWritesPerSec = round(hy.writesPerSec)
    out.sqliteHydratedPullsRefused = round(hy.refused, 3)
  } finally {
    await lite.ts.cleanup()
  }
  const db = await freshDatabase('weft_ctxbench_')
  const rigPg = await rig({ databaseUrl: db.url })
  const boss = new PgBoss({ connectionString: db.url, schema: 'pgboss' })
  boss.on('error', (err) => console.error('pg-boss', err))
  const pool = new pg.Pool({ connectionString: db.url, max: 1 })
  try {
    await boss.start()
    await boss.createQueue('bench')
    await pool.query('CREATE TABLE bench_outcomes (key text PRIMARY KEY, outcome jsonb NOT NULL)')
    await pool.query('CREATE TABLE bench_docs (id int PRIMARY KEY, body jsonb NOT NULL, version bigint NOT NULL)')
    await pool.query(`INSERT INTO bench_docs SELECT i, '{"T": 1}'::jsonb, 1 FROM generate_series(0, 99) i`)
    const e: number[] = []
    const c: number[] = []
    const q: number[] = []
    const st: number[] = []
    const b: number[] = []
    const cw: number[] = []
    const bw: number[] = []
    const ch: number[] = []
    for (let i = 0; i < ROUNDS; i++) {
      c.push(await cycles(rigPg, 'react'))
      b.push(await pgBossRound(boss, 'bench'))
      st.push(await cycles(rigPg, 'settle'))
      e.push(await pgBossRound(boss, 'bench', effectOn(pool, 'bench')))
      ch.push(await cycles(rigPg, 'chain'))
      q.push(await cycles(rigPg, 'ack'))
      b.push(await pgBossRound(boss, 'bench'))
      cw.push(await cyclesConcurrent(rigPg))
      bw.push(await pgBossConcurrent(boss, 'bench'))
    }
    out.workers = WORKERS
    out.pgCyclesPerSecWorkers = round(best(cw))
    out.pgBossFetchCompletePerSecWorkers = round(best(bw))
    out.pgCycleRatioToPgBossWorkers = round(best(cw) / best(bw), 2)
    out.pgCyclesPerSec = round(best(c))
    out.pgNextAckPerSec = round(best(q))
    out.pgBossFetchCompletePerSec = round(best(b))
    out.pgCycleRatioToPgBoss = round(best(c) / best(b), 2)
    out.pgSettleCyclesPerSec = round(best(st))
    out.pgSettleCycleRatioToPgBoss = round(best(st) / best(b), 2)
    out.pgChainCyclesPerSec = round(best(ch))
    out.pgChainCycleRatioToPgBoss = round(best(ch) / best(b), 2)
    out.pgChainOverSettle = round(best(ch) / best(st), 2)

    out.pgSettleCycleRatioToPgBossWithEffect = round(best(st) / best(e), 2)
    out.pgBossWithEffectPerSec = round(best(e))
    out.pgCycleRatioToPgBossWithEffect = round(best(c) / best(e), 2)
    out.pgNextAckRatioToPgBoss = round(best(q) / best(b), 2)
    const hy = await hydratedUnderWrites(rigPg)
    out.pgHydratedPullsPerSecUnderWrites = round(hy.pullsPerSec)
    out.pgBusyWritesPerSec = round(hy.writesPerSec)
    out.pgHydratedPullsRefused = round(hy.refused, 3)
  } finally {
    await boss.stop({ graceful: false }).catch(() => undefined)
    await pool.end().catch(() => undefined)
    await rigPg.ts.cleanup()
    await db.drop()
  }
  return out
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  benchContextual().then(
    (r) => console.log(JSON.stringify(r, null, 2)),
    (e: unknown) => {
      console.error(e)
      process.exit(1)
    },
  )
}
