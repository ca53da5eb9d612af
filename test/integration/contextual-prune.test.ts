import pg from 'pg'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { userPrincipal, type UserId } from '../../shared/index.js'
import { OUTCOME_RETENTION_MS, SETTLED_RETENTION_MS } from '../../sync-server/contextual/index.js'
import { CONSUMERS_PER_USER } from '../../sync-server/contextual/contextual-service.js'
import { api, createSpace, errorCode, expectStatus, freshDatabase, grantRole, signup, startTestServer, type TestServer } from '../helpers/index.js'
import { ctx, putSubscription } from './contextual-helpers.js'

/**
 * [CTX45] The rows of settled events (acked, or skipped as unreadable) are deleted a day after they
 * were settled, on a real server over each storage: nothing else is touched, the status still counts
 * the acked ones, no deleted event is delivered again, and a repeated reaction still finds its outcome.
 * [CTX51] Outcome rows go past their retention, only once their event is settled or gone.
 */
async function settledRowsSwept(ts: TestServer): Promise<void> {
  const owner = await signup(ts.url)
  const bob = await signup(ts.url)
  const space = await createSpace(ts.url, owner.token)
  await grantRole(ts.url, owner.token, space, bob.userId, 'Editor')
  const prefix = `${space}/in`
  const o = api(ts.url, owner.token)
  expectStatus(await o.putNode(prefix, 'Document', {}), 201)
  expectStatus(await o.putNode(`${prefix}/secret`, 'Document', {}), 201)
  await grantRole(ts.url, owner.token, `${prefix}/secret`, bob.userId, 'Viewer', true)
  const sub = `${space}/sweep`
  expectStatus(
    await putSubscription(ts.url, owner.token, sub, {
      Operation: 'sweep',
      Events: { NodeTypes: ['Document'], Kinds: ['Created'], PathPrefix: prefix },
      Reactions: { annotate: { Command: 'patch', Target: '{event.path}', Parameters: { Note: { Type: 'string' } } } },
      Limits: { LeaseSeconds: 60, MaxInFlight: 8, MaxAttempts: 1 },
    }),
    201,
  )
  const b = ctx(ts.url, bob.token)
  const consumerId = expectStatus(await b.next(sub, 'w'), 200).body.consumerId
  for (const name of ['a', 'b', 'c']) expectStatus(await o.putNode(`${prefix}/${name}`, 'Document', {}), 201)
  expectStatus(await o.putNode(`${prefix}/secret/h`, 'Document', {}), 201)
  for (const name of ['d', 'e']) expectStatus(await o.putNode(`${prefix}/${name}`, 'Document', {}), 201)

  const pulled = new Map<string, NonNullable<Awaited<ReturnType<typeof b.next>>['body']['item']>>()
  for (let i = 0; i < 5; i++) {
    const item = expectStatus(await b.next(sub, 'w'), 200).body.item!
    pulled.set(item.event.path.slice(prefix.length + 1), item)
  }
  // The hidden one was never taken in ([CTX8]: outside Bob's readable regions), never delivered.
  expect([...pulled.keys()].sort()).toEqual(['a', 'b', 'c', 'd', 'e'])
  const reacted = expectStatus(await b.react(pulled.get('a')!, 'annotate', { Note: 'seen' }), 200).body
  // [CTX51] Outcomes of an event to be dead-lettered and of one left leased.
  const reactedD = expectStatus(await b.react(pulled.get('d')!, 'annotate', { Note: 'd' }), 200).body
  expectStatus(await b.react(pulled.get('e')!, 'annotate', { Note: 'e' }), 200)
  for (const name of ['a', 'b', 'c']) expectStatus(await b.ack(consumerId, pulled.get(name)!), 200)
  expect(expectStatus(await b.nack(consumerId, pulled.get('d')!, 0, 'broken'), 200).body.state).toBe('dead')
  const counts = (s: Record<string, unknown>) => ({ pending: s.pending, leased: s.leased, acked: s.acked, dead: s.dead })
  const before = counts(expectStatus(await b.status(consumerId), 200).body)
  expect(before).toEqual({ pending: 0, leased: 1, acked: 3, dead: 1 })

  const svc = ts.server.contextual
  // Settled just now: kept.
  expect(await svc.prune(Date.now())).toBe(0)
  // A day later: the three acked, nothing else; once. (A skipped row, one whose reader lost Read
  // between its intake and its pull, goes the same way: the sweep deletes acked and skipped alike.)
  expect(await svc.prune(Date.now() + SETTLED_RETENTION_MS + 60_000)).toBe(3)
  expect(await svc.prune(Date.now() + SETTLED_RETENTION_MS + 60_000)).toBe(0)
  expect(counts(expectStatus(await b.status(consumerId), 200).body)).toEqual(before)

  // The repeat of a reaction whose event row is gone resolves its outcome; nothing is written again.
  const again = expectStatus(await b.react(pulled.get('a')!, 'annotate', { Note: 'seen' }), 200).body
  expect(again).toEqual({ outcome: reacted.outcome, repeated: true })
  // [CTX51] Outcomes: kept within their retention; past it, only the one whose event row is gone
  // ('a', swept): 'd' is dead (a re-drive may lease it again), 'e' is leased.
  const pastRetention = Date.now() + OUTCOME_RETENTION_MS + 60_000
  expect(await svc.pruneOutcomes(Date.now())).toBe(0)
  expect(await svc.pruneOutcomes(pastRetention)).toBe(1)
  expect(await svc.pruneOutcomes(pastRetention)).toBe(0)
  // A's token can commit nothing again (its lease was settled): denied, as before the outcome went.
  expect(errorCode(await b.react(pulled.get('a')!, 'annotate', { Note: 'seen' }))).toBe('reaction_denied')
  // No deleted event comes back; the held lease still settles; new events come once, first attempt.
  expect(expectStatus(await b.next(sub, 'w'), 200).body.item).toBeNull()
  expectStatus(await b.ack(consumerId, pulled.get('e')!), 200)
  expectStatus(await o.putNode(`${prefix}/f`, 'Document', {}), 201)
  expect(expectStatus(await b.next(sub, 'w'), 200).body.item).toMatchObject({ event: { path: `${prefix}/f` }, attempt: 1 })
  expect(expectStatus(await b.next(sub, 'w'), 200).body.item).toBeNull()
  // The dead letter was kept: re-driven by the Admin, it is delivered again.
  expect(expectStatus(await ctx(ts.url, owner.token).redrive(consumerId), 200).body.redriven).toBe(1)
  const redelivered = expectStatus(await b.next(sub, 'w'), 200).body.item!
  expect(redelivered).toMatchObject({ event: { path: `${prefix}/d` }, attempt: 1 })
  expect(counts(expectStatus(await b.status(consumerId), 200).body)).toEqual({ pending: 0, leased: 2, acked: 4, dead: 0 })
  // [CTX51] Now 'e' is acked: its outcome goes; the re-driven 'd' is leased again and its outcome
  // stays, the answer of the new attempt's reaction (nothing committed twice).
  expect(await svc.pruneOutcomes(pastRetention)).toBe(1)
  expect(expectStatus(await b.react(redelivered, 'annotate', { Note: 'd again' }), 200).body).toEqual({
    outcome: reactedD.outcome, repeated: true, paramsDiffer: true, message: expect.stringContaining('yours were not applied') as unknown as string,
  })
}

describe('[CTX45] settled events are swept (SQLite)', () => {
  let ts: TestServer
  beforeAll(async () => {
    ts = await startTestServer()
  })
  afterAll(async () => ts.cleanup())

  it('[CTX45] a day after they were settled, acked and skipped events are deleted; counts, outcomes and delivery are unchanged', async () => {
    await settledRowsSwept(ts)
  })
})

describe('[CTX45] settled events are swept (PostgreSQL)', () => {
  let ts: TestServer
  let db: Awaited<ReturnType<typeof freshDatabase>>
  beforeAll(async () => {
    db = await freshDatabase('weft_ctxprune_')
    ts = await startTestServer({ config: { databaseUrl: db.url } })
  })
  afterAll(async () => {
    await ts.cleanup()
    await db.drop()
  })

  it('[CTX45] the same on PostgreSQL', async () => {
    await settledRowsSwept(ts)
  })
})

describe('[CTX45] [CTX46] two servers on one PostgreSQL database: sweeps, deletes and new consumers at once', () => {
  let a: TestServer
  let b: TestServer
  let db: Awaited<ReturnType<typeof freshDatabase>>
  let pool: pg.Pool
  beforeAll(async () => {
    db = await freshDatabase('weft_ctxrace_')
    a = await startTestServer({ config: { databaseUrl: db.url } })
    b = await startTestServer({ config: { databaseUrl: db.url } })
    pool = new pg.Pool({ connectionString: db.url })
  })
  afterAll(async () => {
    await pool.end()
    await a.cleanup()
    await b.cleanup()
    await db.drop()
  })

  async function subscriptionOn(ts: TestServer) {
    const owner = await signup(ts.url)
    const space = await createSpace(ts.url, owner.token)
    expectStatus(await api(ts.url, owner.token).putNode(`${space}/in`, 'Document', {}), 201)
    const sub = `${space}/sub`
    expectStatus(
      await putSubscription(ts.url, owner.token, sub, {
        Operation: 'race',
        Events: { NodeTypes: ['Document'], Kinds: ['Created'], PathPrefix: `${space}/in` },
        Reactions: { annotate: { Command: 'patch', Target: '{event.path}' } },
      }),
      201,
    )
    return { owner, sub, principal: userPrincipal(owner.userId as UserId) }
  }

  it("[CTX45] a sweep on one server and a delete of the same consumer on the other both finish: no deadlock, no error, no orphaned rows", async () => {
    const { sub, principal } = await subscriptionOn(a)
    for (let i = 0; i < 12; i++) {
      const { consumerId } = await a.server.contextual.next(principal, { subscription: sub, consumer: `d${i}` })
      await pool.query(
        `INSERT INTO contextual_events (consumer_id, event_id, version, path, node_type, kind, state, attempt, lease_token, expires_at, available_at, last_error)
         SELECT $1, 'x' || g, -g, 'P/x', 'Document', 'Created', CASE WHEN g % 4 = 0 THEN 'skipped' WHEN g % 7 = 0 THEN 'dead' ELSE 'acked' END, 1, NULL, 0, 0, NULL
         FROM generate_series(1, 3000) g`,
        [consumerId],
      )
      const failures: unknown[] = []
      const storage = b.server.storage
      // The sweep logs and carries on past a failed consumer: count failures at the storage call instead.
      const original = storage.contextual.bind(storage)
      storage.contextual = (call) => original(call).catch((err: unknown) => (failures.push(err), Promise.reject(err)))
      try {
        await Promise.all([b.server.contextual.prune(Date.now() + 25 * 3600_000), a.server.contextual.delete(principal, { consumerId })])
      } finally {
        storage.contextual = original
      }
      expect(failures).toEqual([])
      const orphans = (await pool.query('SELECT count(*)::int AS n FROM contextual_events e WHERE NOT EXISTS (SELECT 1 FROM contextual_consumers c WHERE c.id = e.consumer_id)')).rows[0]
      expect(orphans).toEqual({ n: 0 })
    }
  })

  it('[CTX51] outcomes pruned on both servers at once: each row deleted once, no error, the open event\'s kept', async () => {
    const { sub, principal } = await subscriptionOn(a)
    const { consumerId } = await a.server.contextual.next(principal, { subscription: sub, consumer: 'o' })
    const old = new Date(Date.now() - OUTCOME_RETENTION_MS - 3600_000).toISOString()
    await pool.query(
      `INSERT INTO contextual_outcomes (key, consumer_id, event_id, reaction, attempt, principal, outcome, causation, version, at)
       SELECT 'race-' || g, $1, 'ev' || g, 'annotate', 1, 'u', '{}', '{}', NULL, $2 FROM generate_series(1, 5000) g`,
      [consumerId, old],
    )
    // One of them is the outcome of an event still leased: kept.
    await pool.query(
      `INSERT INTO contextual_events (consumer_id, event_id, version, path, node_type, kind, state, attempt, lease_token, expires_at, available_at, last_error)
       VALUES ($1, 'ev7', -7, 'P/x', 'Document', 'Created', 'leased', 1, 't', 0, 0, NULL)`,
      [consumerId],
    )
    const [x, y] = await Promise.all([a.server.contextual.pruneOutcomes(), b.server.contextual.pruneOutcomes()])
    expect(x + y).toBe(4999)
    const left = (await pool.query("SELECT key FROM contextual_outcomes WHERE key LIKE 'race-%'")).rows
    expect(left).toEqual([{ key: 'race-7' }])
  })

  it('[CTX51] batches of the outcome sweep go on from the last row deleted: the older rows it keeps are walked once, every other row goes', async () => {
    const { sub, principal } = await subscriptionOn(a)
    const { consumerId } = await a.server.contextual.next(principal, { subscription: sub, consumer: 'cursor' })
    const old = (d: number) => new Date(Date.now() - OUTCOME_RETENTION_MS - d * 3600_000).toISOString()
    // 1,500 kept (their events are dead letters), older than 2,500 to delete, some at the same moment.
    await pool.query(
      `INSERT INTO contextual_events (consumer_id, event_id, version, path, node_type, kind, state, attempt, lease_token, expires_at, available_at, last_error)
       SELECT $1, 'dead' || g, -g, 'P/x', 'Document', 'Created', 'dead', 1, NULL, 0, 0, 'x' FROM generate_series(1, 1500) g`,
      [consumerId],
    )
    await pool.query(
      `INSERT INTO contextual_outcomes (key, consumer_id, event_id, reaction, attempt, principal, outcome, causation, version, at)
       SELECT 'kept-' || g, $1, 'dead' || g, 'annotate', 1, 'u', '{}', '{}', NULL, $2 FROM generate_series(1, 1500) g`,
      [consumerId, old(48)],
    )
    await pool.query(
      `INSERT INTO contextual_outcomes (key, consumer_id, event_id, reaction, attempt, principal, outcome, causation, version, at)
       SELECT 'gone-' || g, $1, 'ev' || g, 'annotate', 1, 'u', '{}', '{}', NULL, CASE WHEN g % 2 = 0 THEN $2 ELSE $3 END FROM generate_series(1, 2500) g`,
      [consumerId, old(24), old(12)],
    )
    const storage = a.server.storage
    const original = storage.contextual.bind(storage)
    const afters: unknown[] = []
    storage.contextual = (call) => {
      if (call.op === 'pruneOutcomes') afters.push(call.after)
      return original(call)
    }
    try {
      expect(await a.server.contextual.pruneOutcomes()).toBe(2500)
    } finally {
      storage.contextual = original
    }
    // Three batches (1,000, 1,000, 500), each after the last row the one before deleted.
    expect(afters).toHaveLength(3)
    expect(afters[0]).toBeNull()
    expect(afters[1]).toMatchObject({ key: expect.stringMatching(/^gone-/) })
    const left = (await pool.query("SELECT count(*)::int AS n, count(*) FILTER (WHERE key LIKE 'kept-%')::int AS kept FROM contextual_outcomes WHERE consumer_id = $1", [consumerId])).rows[0]
    expect(left).toEqual({ n: 1500, kept: 1500 })
  })

  it(`[CTX46] new consumers pulled at once stop at ${CONSUMERS_PER_USER} exactly`, async () => {
    const { sub, principal } = await subscriptionOn(a)
    for (let i = 0; i < CONSUMERS_PER_USER - 20; i++) await a.server.contextual.next(principal, { subscription: sub, consumer: `c${i}` })
    const answers = await Promise.all(
      // On one server: its pool's connections make them at once (each counted under its own snapshot, 1,003 were made).
      Array.from({ length: 80 }, (_, i) => a.server.contextual.next(principal, { subscription: sub, consumer: `burst${i}` }).then(() => 'made', (err: { code?: string }) => err.code)),
    )
    expect(answers.filter((x) => x === 'made')).toHaveLength(20)
    expect(answers.filter((x) => x !== 'made' && x !== 'contextual_too_many_consumers')).toEqual([])
    const count = (await pool.query('SELECT count(*)::int AS n FROM contextual_consumers WHERE owner = $1', [principal.kind === 'user' ? principal.userId : ''])).rows[0]
    expect(count).toEqual({ n: CONSUMERS_PER_USER })
  })
})
