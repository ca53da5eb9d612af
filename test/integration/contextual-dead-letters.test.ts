import { randomBytes } from 'node:crypto'
import { join } from 'node:path'
import type { Client } from '@modelcontextprotocol/sdk/client/index.js'
import Database from 'better-sqlite3'
import pg from 'pg'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createContextualClient, type AdminOverview, type ContextualStatus, type MyConsumers } from '../../shared/index.js'
import type { NodePath } from '../../shared/index.js'
import { restoreBackup, takeBackup } from '../../sync-server/backup/index.js'
import { REDRIVE_BATCH } from '../../sync-server/contextual/contextual-service.js'
import { VirtualClock } from '../../sync-server/engines/kit/index.js'
import type { ContextualCall } from '../../sync-server/storage/index.js'
import { openPostgresStorage } from '../../sync-server/storage/postgres-adapter.js'
import { Harness, ME, SUB, log, seedMesh } from '../sim/contextual-harness.js'
import { api, createDocument, createSpace, expectStatus, freshDatabase, grantRole, makeTempDir, removeDir, signup, startTestServer, type TestServer, type TestUser } from '../helpers/index.js'
import { ctx, definition, putSubscription, type Item, type NextBody } from './contextual-helpers.js'
import { call, ok, stub, type ContextualStub } from './contextual-grpc-helpers.js'
import { callTool, connectHttp, must } from './mcp-helpers.js'

/**
 * [CTX65]–[CTX68] Dead letters after a new user's walk (issue 19): they carry when they died, an
 * Admin re-drives one of them, an agent finds its consumers over MCP, and a re-drive of very many
 * (a stale consumer's, into the consumer that continues it) runs in bounded transactions.
 */
const storages = [
  { name: 'SQLite', pg: false },
  { name: 'PostgreSQL', pg: true },
] as const

const OPS_EMAIL = `ops-${Date.now()}@example.com`

type Body<T> = T & { error?: { code: string; message: string } }

describe.each(storages)('contextual dead letters ($name)', ({ pg: onPg }) => {
  let ts: TestServer
  let db: Awaited<ReturnType<typeof freshDatabase>> | null = null
  let ann: TestUser
  let bob: TestUser
  let vic: TestUser
  let ops: TestUser
  let space = ''
  let grpcClient: ContextualStub
  let agents: Client[] = []

  /** Runs `sql` with `params` (`?` placeholders) on the server's own database, beside it. */
  async function sql(text: string, ...params: unknown[]): Promise<void> {
    if (!db) {
      const file = new Database(join(ts.dataDir, 'weft.db'))
      file.pragma('busy_timeout = 10000')
      try {
        file.prepare(text).run(...params)
      } finally {
        file.close()
      }
      return
    }
    const c = new pg.Client({ connectionString: db.url })
    await c.connect()
    try {
      let i = 0
      await c.query(text.replace(/\?/g, () => `$${++i}`), params)
    } finally {
      await c.end()
    }
  }

  beforeAll(async () => {
    db = onPg ? await freshDatabase('weft_ctx_dead_') : null
    ts = await startTestServer({ config: { grpcPort: 0, operatorEmails: [OPS_EMAIL], ...(db ? { databaseUrl: db.url } : {}) } })
    ann = await signup(ts.url)
    bob = await signup(ts.url)
    vic = await signup(ts.url)
    ops = await signup(ts.url, OPS_EMAIL)
    space = await createSpace(ts.url, ann.token)
    await grantRole(ts.url, ann.token, space, bob.userId, 'Editor')
    await grantRole(ts.url, ann.token, space, vic.userId, 'Viewer')
    grpcClient = stub(ts.server.grpcPort!)
  })
  afterAll(async () => {
    grpcClient?.close()
    for (const a of agents) await a.close()
    agents = []
    await ts.cleanup()
    await db?.drop()
  })

  /**
   * A subscription `{space}/{n}` (one attempt each) whose consumer, Bob's, holds `dead` dead
   * letters (nacked, with their error) and one pending event after them.
   */
  async function consumerWithDeadLetters(n: string, dead: number) {
    const sub = `${space}/${n}`
    const prefix = `${space}/${n}-in`
    expectStatus(await putSubscription(ts.url, ann.token, sub, definition(prefix, { Limits: { LeaseSeconds: 30, MaxInFlight: 1, MaxAttempts: 1 } })), 201)
    await createDocument(ts.url, ann.token, prefix, {})
    const b = ctx(ts.url, bob.token)
    const consumerId = expectStatus(await b.next(sub), 200).body.consumerId
    for (let i = 0; i <= dead; i++) await createDocument(ts.url, ann.token, `${prefix}/e${i}`, {})
    const letters: Item[] = []
    for (let i = 0; i < dead; i++) {
      const item = expectStatus(await b.next(sub), 200).body.item!
      expect(expectStatus(await b.nack(consumerId, item, 0, `failed e${i}`), 200).body.state).toBe('dead')
      letters.push(item)
    }
    return { sub, prefix, consumerId, letters, b }
  }

  /**
   * `many` events of the consumer's filter (Documents `{prefix}/m{version}` created, versions from
   * `base`), written beside the server: dead letters (nacked once, failed) or pending, never leased.
   */
  async function writeEvents(consumerId: string, prefix: string, base: number, many: number, state: 'dead' | 'pending'): Promise<void> {
    const values = state === 'dead' ? `'dead', 1, NULL, 0, 0, 'failed', 1` : `'pending', 0, NULL, 0, 0, NULL, NULL`
    for (let i = 0; i < many; i += 250) {
      const rows = Array.from({ length: Math.min(250, many - i) }, (_, k) => base + i + k)
      await sql(
        `INSERT INTO contextual_events (consumer_id, event_id, version, path, node_type, kind, state, attempt, lease_token, expires_at, available_at, last_error, died_at)
         VALUES ${rows.map(() => `(?, ?, ?, ?, 'Document', 'Created', ${values})`).join(', ')}`,
        ...rows.flatMap((v) => [consumerId, String(v), v, `${prefix}/m${v}`]),
      )
    }
  }

  const statusOf = async (token: string, consumerId: string) => expectStatus(await ctx(ts.url, token).status(consumerId), 200).body as unknown as ContextualStatus

  it('[CTX65] a dead letter says when it died, alike over HTTP, gRPC, MCP and on the operator overview; one from before the time was kept says null', async () => {
    const before = Date.now()
    const { consumerId, letters } = await consumerWithDeadLetters('died', 2)
    const after = Date.now()
    const st = await statusOf(bob.token, consumerId)
    expect(st.deadLetters.map((d) => d.eventId)).toEqual(letters.map((l) => l.event.eventId))
    for (const d of st.deadLetters) {
      expect(d.diedAt).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/)
      expect(Date.parse(d.diedAt!)).toBeGreaterThanOrEqual(before)
      expect(Date.parse(d.diedAt!)).toBeLessThanOrEqual(after)
    }
    const diedAt = Object.fromEntries(st.deadLetters.map((d) => [d.eventId, d.diedAt]))
    // gRPC: the same time in died_at.
    const g = await ok(call(grpcClient, 'status', { consumerId }, bob.token))
    expect(Object.fromEntries((g.deadLetters as Array<{ eventId: string; diedAt: string }>).map((d) => [d.eventId, d.diedAt]))).toEqual(diedAt)
    // MCP: the tool answers the HTTP status.
    const agent = await connectHttp(ts.url, bob.token)
    agents.push(agent)
    const m = await must<ContextualStatus>(agent, 'weft_contextual_status', { consumerId })
    expect(Object.fromEntries(m.deadLetters.map((d) => [d.eventId, d.diedAt]))).toEqual(diedAt)
    // The operator's overview lists them with the same time.
    const o = expectStatus(await api(ts.url, ops.token).get<AdminOverview>('/api/admin/overview'), 200).body
    const mine = o.deadLetters.filter((d) => d.consumerId === consumerId)
    expect(Object.fromEntries(mine.map((d) => [d.eventId, d.diedAt]))).toEqual(diedAt)

    // A letter that died before the server kept the time (its column empty): null, said so
    // everywhere, and it re-drives as any other.
    const old = letters[0]!.event.eventId
    await sql('UPDATE contextual_events SET died_at = NULL WHERE consumer_id = ? AND event_id = ?', consumerId, old)
    expect((await statusOf(bob.token, consumerId)).deadLetters.find((d) => d.eventId === old)?.diedAt).toBeNull()
    const gOld = await ok(call(grpcClient, 'status', { consumerId }, bob.token))
    expect((gOld.deadLetters as Array<{ eventId: string; diedAt: string }>).find((d) => d.eventId === old)?.diedAt).toBe('')
    const oOld = expectStatus(await api(ts.url, ops.token).get<AdminOverview>('/api/admin/overview'), 200).body
    expect(oOld.deadLetters.find((d) => d.consumerId === consumerId && d.eventId === old)?.diedAt).toBeNull()
    expect(expectStatus(await ctx(ts.url, ann.token).redrive(consumerId), 200).body.redriven).toBe(2)
    // Re-driven, a letter has no time of death any more.
    await sql('UPDATE contextual_events SET state = ? WHERE consumer_id = ?', 'dead', consumerId)
    expect((await statusOf(bob.token, consumerId)).deadLetters.every((d) => d.diedAt === null)).toBe(true)
  })

  it('[CTX65] a database from before the column: opened by this release, the column is added and its dead letters say null', async () => {
    const { consumerId } = await consumerWithDeadLetters('migrate', 1)
    await sql('ALTER TABLE contextual_events DROP COLUMN died_at')
    // PostgreSQL applies the schema only when the database is not at this release's (STO12).
    if (db) await sql('UPDATE schema_state SET fingerprint = ?', 'before-died-at')
    await ts.restart()
    grpcClient.close()
    grpcClient = stub(ts.server.grpcPort!)
    const st = await statusOf(bob.token, consumerId)
    expect(st.dead).toBe(1)
    expect(st.deadLetters.map((d) => d.diedAt)).toEqual([null])
  })

  it('[CTX66] an Admin re-drives one dead letter by its eventId: only it goes back to pending; bad input and others are refused with stable codes and change nothing', async () => {
    const { sub, consumerId, letters } = await consumerWithDeadLetters('one', 3)
    const [l0, l1, l2] = letters.map((l) => l.event.eventId) as [string, string, string]
    // Another consumer (of another subscription) with a dead letter of its own.
    const other = await consumerWithDeadLetters('other', 1)
    const foreign = other.letters[0]!.event.eventId
    const redrive = (token: string, body: unknown) => api(ts.url, token).post<Body<{ redriven: number }>>('/api/contextual/redrive', body)
    const unchanged = async () => {
      const st = await statusOf(bob.token, consumerId)
      expect({ dead: st.dead, letters: st.deadLetters.map((d) => d.eventId) }).toEqual({ dead: 3, letters: [l0, l1, l2] })
      expect((await statusOf(bob.token, other.consumerId)).dead).toBe(1)
    }
    // Who may not: the owner who is no Admin (forbidden, as for all letters), a Viewer (not found).
    expect((await redrive(bob.token, { consumerId, eventId: l1 })).body.error?.code).toBe('forbidden')
    expect((await redrive(vic.token, { consumerId, eventId: l1 })).body.error?.code).toBe('not_found')
    // What is not a dead letter of this consumer: unknown, another consumer's, wrong types, too long.
    const refusals: Array<[unknown, number, string]> = [
      [{ consumerId, eventId: '999999999' }, 404, 'not_found'],
      [{ consumerId, eventId: foreign }, 404, 'not_found'],
      [{ consumerId: other.consumerId.replace(/.$/, (c) => (c === '0' ? '1' : '0')), eventId: l1 }, 404, 'not_found'],
      [{ consumerId, eventId: Number(l1) }, 400, 'invalid_request'],
      [{ consumerId, eventId: '' }, 400, 'invalid_request'],
      [{ consumerId, eventId: null }, 400, 'invalid_request'],
      [{ consumerId, eventId: [l1] }, 400, 'invalid_request'],
      [{ consumerId, eventId: 'x'.repeat(100_000) }, 400, 'invalid_request'],
      [{ consumerId, eventId: l1, extra: true }, 400, 'invalid_request'],
    ]
    for (const [body, status, code] of refusals) {
      const r = await redrive(ann.token, body)
      expect([r.status, r.body.error?.code], JSON.stringify(body).slice(0, 80)).toEqual([status, code])
      expect(r.body.error?.message).toMatch(/\w+ \w+/)
    }
    await unchanged()
    // The one letter, as the Admin: only it is pending again, its attempts starting over.
    expect(expectStatus(await redrive(ann.token, { consumerId, eventId: l1 }), 200).body).toEqual({ redriven: 1 })
    const st = await statusOf(bob.token, consumerId)
    expect({ dead: st.dead, letters: st.deadLetters.map((d) => d.eventId), pending: st.pending }).toEqual({ dead: 2, letters: [l0, l2], pending: 2 })
    // No longer dead: 409 with its own code, nothing changes.
    const again = await redrive(ann.token, { consumerId, eventId: l1 })
    expect([again.status, again.body.error?.code]).toEqual([409, 'contextual_not_dead_letter'])
    expect(again.body.error?.message).toContain('not a dead letter')
    // Bob's worker gets exactly that letter (the one pending before it comes after it).
    const next = expectStatus(await ctx(ts.url, bob.token).next(sub), 200).body as NextBody
    expect([next.item?.event.eventId, next.item?.attempt]).toEqual([l1, 1])
    // The typed client and gRPC take the same field.
    const client = createContextualClient({ baseUrl: ts.url, token: ann.token })
    expect(await client.redrive(consumerId, { eventId: l2 })).toEqual({ redriven: 1 })
    await expect(client.redrive(consumerId, { eventId: '' })).rejects.toMatchObject({ code: 'invalid_request' })
    expect(await ok(call(grpcClient, 'redrive', { consumerId, eventId: l0 }, ann.token))).toMatchObject({ redriven: 1 })
    const gAgain = await call(grpcClient, 'redrive', { consumerId, eventId: l0 }, ann.token)
    expect(gAgain.ok ? null : gAgain.weftCode).toBe('contextual_not_dead_letter')
    const gForeign = await call(grpcClient, 'redrive', { consumerId, eventId: foreign }, ann.token)
    expect(gForeign.ok ? null : gForeign.weftCode).toBe('not_found')
    expect((await statusOf(bob.token, other.consumerId)).dead).toBe(1)
    expect((await statusOf(bob.token, consumerId)).dead).toBe(0)
  })

  it("[CTX66] one letter of a stale consumer re-driven: only it moves to the consumer continuing it; the stale one's pending event stays", async () => {
    const sub = `${space}/stale1`
    const prefix = `${space}/stale1-in`
    const limits = { LeaseSeconds: 30, MaxInFlight: 2, MaxAttempts: 2 }
    expectStatus(await putSubscription(ts.url, ann.token, sub, definition(prefix, { Limits: limits })), 201)
    await createDocument(ts.url, ann.token, prefix, {})
    const b = ctx(ts.url, bob.token)
    const old = expectStatus(await b.next(sub), 200).body.consumerId
    await createDocument(ts.url, ann.token, `${prefix}/e0`, {})
    await createDocument(ts.url, ann.token, `${prefix}/e1`, {})
    // e0 held; e1 nacked twice: dead.
    const e0 = expectStatus(await b.next(sub), 200).body.item!
    for (let i = 0; i < 2; i++) {
      const e1 = expectStatus(await b.next(sub), 200).body.item!
      expect(e1.event.path).toBe(`${prefix}/e1`)
      expectStatus(await b.nack(old, e1), 200)
    }
    // The definition is edited; Bob's next pull makes the consumer continuing his.
    expectStatus(await api(ts.url, ann.token).patchNode(sub, { Limits: { ...limits, MaxAttempts: 3 } }), 200)
    const successor = expectStatus(await b.next(sub, 'w1', { waitSeconds: 0 }), 200).body.consumerId
    expect(successor).not.toBe(old)
    // e0's lease on the stale consumer is handed back: pending there, before the dead letter.
    expect(expectStatus(await b.nack(old, e0), 200).body.state).toBe('pending')
    const dead = (await statusOf(bob.token, old)).deadLetters.map((d) => d.eventId)
    expect(dead).toHaveLength(1)
    expect(expectStatus(await api(ts.url, ann.token).post<{ redriven: number }>('/api/contextual/redrive', { consumerId: old, eventId: dead[0] }), 200).body).toEqual({ redriven: 1 })
    const st = await statusOf(bob.token, old)
    expect([st.dead, st.pending]).toEqual([0, 1])
    expect((await statusOf(bob.token, successor)).pending).toBe(1)
  })

  it("[CTX67] weft_contextual_mine lists the caller's own consumers, as HTTP mine does, and never another's", async () => {
    const { consumerId } = await consumerWithDeadLetters('mine', 0)
    const bobAgent = await connectHttp(ts.url, bob.token)
    const vicAgent = await connectHttp(ts.url, vic.token)
    agents.push(bobAgent, vicAgent)
    const viaMcp = await must<MyConsumers>(bobAgent, 'weft_contextual_mine', {})
    const viaHttp = expectStatus(await api(ts.url, bob.token).post<MyConsumers>('/api/contextual/mine', {}), 200).body
    expect(viaMcp).toEqual(viaHttp)
    expect(viaMcp.consumers.map((c) => c.consumerId)).toContain(consumerId)
    const page = await must<MyConsumers>(bobAgent, 'weft_contextual_mine', { limit: 1 })
    expect(page.consumers).toHaveLength(1)
    expect(page.next).toBe(page.consumers[0]!.consumerId)
    // Vic (a Viewer of the same space) and Ann (its Admin) see none of Bob's.
    expect((await must<MyConsumers>(vicAgent, 'weft_contextual_mine', {})).consumers).toEqual([])
    const annAgent = await connectHttp(ts.url, ann.token)
    agents.push(annAgent)
    expect((await must<MyConsumers>(annAgent, 'weft_contextual_mine', {})).consumers.map((c) => c.consumerId)).not.toContain(consumerId)
    for (const args of [{ limit: 'x' }, { limit: 0 }, { after: 'x'.repeat(10_000) }, { owner: bob.userId }]) {
      const r = await callTool(vicAgent, 'weft_contextual_mine', args)
      expect(r.ok ? null : r.code, JSON.stringify(args).slice(0, 60)).toBe('invalid_request')
    }
    const tools = await vicAgent.listTools()
    expect(tools.tools.find((t) => t.name === 'weft_contextual_mine')?.annotations?.readOnlyHint).toBe(true)
  })

  it('[CTX68] a stale consumer with very many dead letters is re-driven into its continuation in bounded batches, every letter moved', { timeout: 240_000 }, async () => {
    const { sub, prefix, consumerId } = await consumerWithDeadLetters('many', 0)
    // Many dead letters written beside the server (making each through a pull and a nack would take
    // minutes): events of this consumer's filter, at versions past the log.
    const many = REDRIVE_BATCH * 2 + 37
    await writeEvents(consumerId, prefix, 10_000_000, many, 'dead')
    expect((await statusOf(bob.token, consumerId)).dead).toBe(many)
    // The definition is edited: Bob's consumer is stale; his next pull makes the one continuing it.
    expectStatus(await api(ts.url, ann.token).patchNode(sub, { Limits: { LeaseSeconds: 30, MaxInFlight: 1, MaxAttempts: 2 } }), 200)
    const fresh = expectStatus(await ctx(ts.url, bob.token).next(sub, 'w1', { waitSeconds: 0 }), 200).body
    const successor = fresh.consumerId
    expect(successor).not.toBe(consumerId)
    // Every storage call of the re-drive is seen: each one transaction.
    const storage = ts.server.storage
    const original = storage.contextual.bind(storage)
    const calls: ContextualCall[] = []
    storage.contextual = (c: ContextualCall) => {
      calls.push(c)
      return original(c)
    }
    try {
      expect(expectStatus(await ctx(ts.url, ann.token).redrive(consumerId), 200).body.redriven).toBe(many)
    } finally {
      storage.contextual = original
    }
    const batches = calls.filter((c) => c.op === 'redrive')
    expect(batches.length).toBe(Math.ceil(many / REDRIVE_BATCH))
    for (const b of batches) expect(b).toMatchObject({ op: 'redrive', limit: REDRIVE_BATCH, into: { id: successor } })
    // Every letter moved to the continuing consumer, pending there; none stayed with the stale one.
    const old = await statusOf(bob.token, consumerId)
    expect([old.dead, old.pending]).toEqual([0, 0])
    expect((await statusOf(bob.token, successor)).pending).toBe(many)
  })

  it('[CTX69] an edited definition\'s consumer takes over very many pending events in bounded batches; a failure between batches loses none, and the next pull moves the rest', { timeout: 240_000 }, async () => {
    const { sub, prefix, consumerId } = await consumerWithDeadLetters('carry', 0)
    // Many pending events written beside the server (events of its filter, at versions past the
    // log: the continuing consumer never ingests them itself): what a worker had not pulled yet
    // when the definition was edited.
    const many = REDRIVE_BATCH * 2 + 37
    const base = 20_000_000
    await writeEvents(consumerId, prefix, base, many, 'pending')
    expect((await statusOf(bob.token, consumerId)).pending).toBe(many)
    expectStatus(await api(ts.url, ann.token).patchNode(sub, { Limits: { LeaseSeconds: 30, MaxInFlight: 1, MaxAttempts: 2 } }), 200)
    // Every storage call of the pull that makes the continuing consumer is seen; the second batch fails.
    const storage = ts.server.storage
    const original = storage.contextual.bind(storage)
    const calls: ContextualCall[] = []
    storage.contextual = (c: ContextualCall) => {
      calls.push(c)
      if (c.op === 'carryOver' && calls.filter((k) => k.op === 'carryOver').length === 2) return Promise.reject(new Error('the server went down'))
      return original(c)
    }
    try {
      expect((await ctx(ts.url, bob.token).next(sub, 'w1', { waitSeconds: 0 })).status).toBe(500)
    } finally {
      storage.contextual = original
    }
    const made = calls.find((c) => c.op === 'ensureConsumer')
    expect(made).toBeDefined()
    const successor = (made as { consumer: { id: string } }).consumer.id
    expect(successor).not.toBe(consumerId)
    const carried = calls.filter((c) => c.op === 'carryOver')
    expect(carried.length).toBe(2)
    for (const c of carried) expect(c).toMatchObject({ op: 'carryOver', consumerId: successor, limit: REDRIVE_BATCH })
    // One batch moved; the rest waits, pending, with the stale consumer: none lost, none in both.
    const half = [await statusOf(bob.token, consumerId), await statusOf(bob.token, successor)]
    expect([half[0]!.pending, half[1]!.pending]).toEqual([many - REDRIVE_BATCH, REDRIVE_BATCH])
    // The next pull moves the rest, in bounded batches again, and leases the first event it holds.
    calls.length = 0
    storage.contextual = (c: ContextualCall) => {
      calls.push(c)
      return original(c)
    }
    let item: Item | null = null
    try {
      const body = expectStatus(await ctx(ts.url, bob.token).next(sub, 'w1', { waitSeconds: 0 }), 200).body
      expect(body.consumerId).toBe(successor)
      item = body.item
    } finally {
      storage.contextual = original
    }
    expect(calls.filter((c) => c.op === 'carryOver').length).toBe(Math.ceil((many - REDRIVE_BATCH) / REDRIVE_BATCH))
    expect(item?.event.path).toBe(`${prefix}/m${base}`)
    const old = await statusOf(bob.token, consumerId)
    const now = await statusOf(bob.token, successor)
    expect(old.pending).toBe(0)
    // Every event once, in the continuing consumer (one of them leased).
    expect([now.pending, now.leased]).toEqual([many - 1, 1])
  })
})

describe.each(storages)('[CTX65] a dead letter whose last lease ran out ($name, virtual clock)', ({ pg: onPg }) => {
  it('[CTX65] died when its last lease ended, not when a pull found it', async () => {
    const clock = new VirtualClock()
    const connectionString = process.env.WEFT_TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test'
    const schema = `weft_ctx_died_${randomBytes(5).toString('hex')}`
    const h = onPg
      ? await new Harness(() => openPostgresStorage({ connectionString, schema, log }), clock, async () => {
          const c = new pg.Client({ connectionString })
          await c.connect()
          await c.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`)
          await c.end()
        }).boot()
      : await Harness.sqlite(clock)
    try {
      await seedMesh(h, 5, 1)
      const pull = () => h.service.next(ME, { subscription: SUB, consumer: 'c' })
      const { consumerId } = await pull()
      await h.nodes.put(ME, 'P/in/a' as NodePath, { nodeType: 'Document', content: {} })
      // MaxAttempts 4: four leases run out, each found by the next pull.
      let lastEnd = ''
      for (let i = 1; i <= 4; i++) {
        const got = await pull()
        expect(got.item?.attempt).toBe(i)
        lastEnd = got.item!.expiresAt
        await clock.advance(6_000)
      }
      // Found a while after the last lease ended: it died at that lease's end.
      await clock.advance(60_000)
      expect((await pull()).item).toBeNull()
      const st = await h.service.status(ME, { consumerId })
      expect(st.deadLetters.map((d) => [d.lastError, d.diedAt])).toEqual([['lease expired', lastEnd]])
    } finally {
      await h.close()
    }
  })
})

describe('[CTX65] backups carry when a dead letter died', () => {
  it('[CTX65] SQLite and PostgreSQL: backed up while the server runs, restored, the time is the same', { timeout: 240_000 }, async () => {
    const dirs: string[] = []
    const dbs: Array<Awaited<ReturnType<typeof freshDatabase>>> = []
    try {
      for (const onPg of [false, true]) {
        const from = onPg ? await freshDatabase('weft_ctx_bak_') : null
        const to = onPg ? await freshDatabase('weft_ctx_bak_') : null
        if (from) dbs.push(from)
        if (to) dbs.push(to)
        const dir = await makeTempDir('weft-ctx-bak-')
        dirs.push(dir)
        const ts = await startTestServer({ dataDir: join(dir, 'a'), config: from ? { databaseUrl: from.url } : {} })
        let consumerId = ''
        let before: ContextualStatus['deadLetters'] = []
        const owner = await signup(ts.url)
        try {
          const space = await createSpace(ts.url, owner.token)
          const sub = `${space}/s`
          expectStatus(await putSubscription(ts.url, owner.token, sub, definition(`${space}/in`, { Limits: { LeaseSeconds: 30, MaxInFlight: 1, MaxAttempts: 1 } })), 201)
          const c = ctx(ts.url, owner.token)
          consumerId = expectStatus(await c.next(sub), 200).body.consumerId
          await createDocument(ts.url, owner.token, `${space}/in`, {})
          const item = expectStatus(await c.next(sub), 200).body.item!
          expectStatus(await c.nack(consumerId, item), 200)
          before = (expectStatus(await c.status(consumerId), 200).body as unknown as ContextualStatus).deadLetters
          expect(before[0]?.diedAt).toEqual(expect.any(String))
          await takeBackup(from ? { databaseUrl: from.url } : { dataDir: join(dir, 'a') }, join(dir, 'b.weftbak'))
        } finally {
          await ts.cleanup()
        }
        await restoreBackup(join(dir, 'b.weftbak'), to ? { databaseUrl: to.url } : { dataDir: join(dir, 'c') })
        const back = await startTestServer({ dataDir: join(dir, 'c'), config: to ? { databaseUrl: to.url } : {} })
        try {
          const st = expectStatus(await ctx(back.url, owner.token).status(consumerId), 200).body as unknown as ContextualStatus
          expect(st.deadLetters).toEqual(before)
        } finally {
          await back.cleanup()
        }
      }
    } finally {
      for (const d of dbs) await d.drop()
      for (const d of dirs) await removeDir(d)
    }
  })
})
