import { randomBytes } from 'node:crypto'
import pg from 'pg'
import { afterAll, describe, expect, it } from 'vitest'
import type { NodePath, WorkItem } from '../../shared/index.js'
import type { ContextualService } from '../../sync-server/contextual/index.js'
import { VirtualClock } from '../../sync-server/engines/kit/index.js'
import { openPostgresStorage } from '../../sync-server/storage/postgres-adapter.js'
import { Harness, ME, SUB, attempt, withHarness, fenceOf, leaseInterleavings, log, outcomeAloneOnce, outcomesInOneBatch, reactSettles, seedMesh, staleAttachmentRefused, type OpenStorage } from '../sim/contextual-harness.js'
import { forEachSeed, seeds } from '../sim/rng.js'
import { admissionRounds } from '../sim/contextual-admission.js'
import { waitFor } from '../helpers/index.js'

/** [CTX5] [CTX34] Contextual consumers on PostgreSQL: the same lease algorithm and invariants, and two instances racing. */
const connectionString = process.env.WEFT_TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test'
const schemas: string[] = []

function freshSchema(): OpenStorage {
  const schema = `weft_ctx_${randomBytes(6).toString('hex')}`
  schemas.push(schema)
  return () => openPostgresStorage({ connectionString, schema, log })
}

afterAll(async () => {
  const client = new pg.Client({ connectionString })
  await client.connect()
  for (const s of schemas) await client.query(`DROP SCHEMA IF EXISTS "${s}" CASCADE`)
  await client.end()
})

type Pull = () => ReturnType<ContextualService['next']>

/** One instance on a fresh schema (with `withHarness`, closed after its work). */
const onFreshSchema = () => new Harness(freshSchema(), new VirtualClock()).boot()

/**
 * One instance on a fresh schema with consumer `c` made and `docs` events committed, and a plain
 * client of that schema (a transaction or a change made behind the service's back); both closed after `fn`.
 */
async function withPlainClient(maxInFlight: number, docs: number, fn: (h: Harness, raw: pg.Client, pull: Pull, consumerId: string) => Promise<void>): Promise<void> {
  const h = await new Harness(freshSchema(), new VirtualClock()).boot()
  const raw = new pg.Client({ connectionString })
  try {
    await seedMesh(h, 60, maxInFlight)
    const pull: Pull = () => h.service.next(ME, { subscription: SUB, consumer: 'c' })
    const { consumerId } = await pull()
    for (let i = 0; i < docs; i++) await h.nodes.put(ME, `P/in/d${i}` as NodePath, { nodeType: 'Document', content: {} })
    await raw.connect()
    await raw.query(`SET search_path TO "${schemas[schemas.length - 1]}"`)
    await fn(h, raw, pull, consumerId)
  } finally {
    await raw.end().catch(() => undefined)
    await h.close()
  }
}

/** Two instances on one fresh schema and one virtual clock, the mesh seeded through the first; both stopped after `fn`. */
async function twoInstances(fn: (a: Harness, b: Harness, clock: VirtualClock) => Promise<void>, leaseSeconds = 5, maxInFlight = 2): Promise<void> {
  const clock = new VirtualClock()
  const open = freshSchema()
  const a = await new Harness(open, clock).boot()
  await seedMesh(a, leaseSeconds, maxInFlight)
  // The second instance boots after the set-up (without Redis, an instance learns of access changes at boot).
  const b = await new Harness(open, clock).boot()
  try {
    await fn(a, b, clock)
  } finally {
    await b.stop()
    await a.stop()
  }
}

describe('contextual subscriptions on PostgreSQL', () => {
  it('[CTX34] seeded interleavings: at most one commit per reaction, no stale evidence accepted', { timeout: 300_000 }, async () => {
    await forEachSeed('contextual leases (PostgreSQL)', seeds(3, 2900), (seed) => withHarness(onFreshSchema, (h) => leaseInterleavings(h, seed)))
  })

  it('[CTX25] seeded: a reaction commits exactly when nothing touching the caller landed between its checks and its commit', { timeout: 300_000 }, async () => {
    await forEachSeed('contextual admission (PostgreSQL)', seeds(2, 4300), (seed) => withHarness(onFreshSchema, (h) => admissionRounds(h, seed)))
  })

  it('[CTX22] an outcome with no commit is recorded in one statement, once, only under the held lease', async () => {
    await withHarness(onFreshSchema, async (h) => {
      await seedMesh(h)
      await outcomeAloneOnce(h)
    })
  })

  it('[CTX26] a commit carrying an outcome with stale lease evidence is refused whole', async () => {
    await withHarness(onFreshSchema, async (h) => {
      await seedMesh(h)
      await staleAttachmentRefused(h)
    })
  })

  it('[CTX26] commits carrying outcomes in one batch: each verdict its own, an outcome only with its commit', async () => {
    await withHarness(onFreshSchema, async (h) => {
      await seedMesh(h)
      await outcomesInOneBatch(h)
    })
  })

  it('[CTX47] a reaction asked to settle its item commits and settles it in one transaction, and only under its own lease', async () => {
    await withHarness(onFreshSchema, reactSettles)
  })

  it('[CTX24] [CTX26] two instances: a redelivered attempt and the stale one react at once; exactly one commit, the stale one denied or repeated', { timeout: 120_000 }, async () => {
    await twoInstances(async (a, b, clock) => {
      const pull = (h: Harness) => h.service.next(ME, { subscription: SUB, consumer: 'c' })
      const { consumerId } = await pull(a)
      await a.nodes.put(ME, 'P/in/doc' as NodePath, { nodeType: 'Document', content: {} })
      const first = (await pull(a)).item!
      await clock.advance(6_000)
      const second = (await pull(b)).item!
      expect([second.event.eventId, second.attempt]).toEqual([first.event.eventId, 2])
      const [ra, rb] = await Promise.all([
        attempt(() => a.service.react(ME, { causationToken: first.reactions[0]!.causationToken, params: { Note: 'stale' } })),
        attempt(() => b.service.react(ME, { causationToken: second.reactions[0]!.causationToken, params: { Note: 'current' } })),
      ])
      expect(rb.ok && !rb.value.repeated).toBe(true)
      // The stale one is denied, or, when the current one committed before it looked, resolves to that outcome as a repeat ([CTX27]).
      if (ra.ok) expect(ra.value).toEqual({ repeated: true, outcome: rb.ok ? rb.value.outcome : null })
      else expect(ra).toEqual({ ok: false, code: 'reaction_denied' })
      const changes = await a.storage.changesSince(0, 1000)
      expect(changes.filter((c) => c.path === 'P/in/doc' && c.kind === 'Updated')).toHaveLength(1)
      // The stale ack is refused on either instance; the current one settles it.
      expect(await attempt(() => a.service.ack(ME, fenceOf({ consumerId, item: first })))).toEqual({ ok: false, code: 'stale_lease' })
      expect((await attempt(() => a.service.ack(ME, fenceOf({ consumerId, item: second })))).ok).toBe(true)
      expect(await b.service.status(ME, { consumerId })).toMatchObject({ acked: 1, leased: 0, pending: 0 })
    })
  })

  it('[CTX48] a settle on one instance wakes the full consumer\'s long poll waiting on the other (their peers linked, as Redis links them)', { timeout: 120_000 }, async () => {
    await twoInstances(async (a, b) => {
      // What cluster.ts does through Redis: each instance's consumer changes reach the other's service.
      const heard: Array<Array<(id: string, due: boolean) => void>> = [[], []]
      ;[a, b].forEach((h, i) => h.service.connect({ publish: (id, due) => heard[1 - i]!.forEach((f) => f(id, due)), onWake: (f) => void heard[i]!.push(f) }))
      const pull = (h: Harness, waitSeconds = 0) => h.service.next(ME, { subscription: SUB, consumer: 'c', waitSeconds })
      await pull(a)
      await a.nodes.put(ME, 'P/in/one' as NodePath, { nodeType: 'Document', content: {} })
      await a.nodes.put(ME, 'P/in/two' as NodePath, { nodeType: 'Document', content: {} })
      const first = (await pull(b)).item!
      // At MaxInFlight 1 the poll on a waits; its clock (virtual) never runs out, nor does its re-check.
      let got: WorkItem | null | undefined
      const polling = pull(a, 30).then((r) => (got = r.item))
      await waitFor(() => a.service.waiting === 1, { description: 'the poll on a waiting' })
      expect(await b.service.react(ME, { causationToken: first.reactions[0]!.causationToken, params: { Note: 'x' }, ack: true })).toMatchObject({ acked: true })
      await waitFor(() => got !== undefined, { description: "b's settle waking the poll on a" })
      await polling
      expect(got?.event.path).toBe('P/in/two')
    }, 60, 1)
  })

  it('[CTX41] a remembered consumer row authorizes nothing: when storage says the consumer is gone or another\'s, pulls and acks follow storage', { timeout: 120_000 }, async () => {
    await withPlainClient(2, 3, async (h, raw, pull, consumerId) => {
      const held = (await pull()).item!
      // The row now belongs to someone else (as a restore of another history could leave it): the memory of it changes nothing.
      await raw.query('UPDATE contextual_consumers SET owner = $1 WHERE id = $2', ['u2', consumerId])
      expect(await attempt(() => h.service.ack(ME, fenceOf({ consumerId, item: held })))).toEqual({ ok: false, code: 'not_found' })
      expect(await attempt(() => h.service.extend(ME, fenceOf({ consumerId, item: held })))).toEqual({ ok: false, code: 'not_found' })
      expect(await attempt(pull)).toEqual({ ok: false, code: 'forbidden' })
      // Deleted: the next pull makes it again, from the head (the old events are not its).
      await raw.query('DELETE FROM contextual_consumers WHERE id = $1', [consumerId])
      await raw.query('DELETE FROM contextual_events WHERE consumer_id = $1', [consumerId])
      expect(await pull()).toEqual({ consumerId, item: null })
      await h.nodes.put(ME, 'P/in/after' as NodePath, { nodeType: 'Document', content: {} })
      expect((await pull()).item).toMatchObject({ event: { path: 'P/in/after' }, attempt: 1 })
    })
  })

  it('[CTX41] pulls racing on one consumer never hold more than MaxInFlight leases between them', { timeout: 120_000 }, async () => {
    await twoInstances(async (a, b) => {
      const pull = (h: Harness) => h.service.next(ME, { subscription: SUB, consumer: 'c' })
      await pull(a)
      for (let i = 0; i < 10; i++) await a.nodes.put(ME, `P/in/d${i}` as NodePath, { nodeType: 'Document', content: {} })
      // Eight pulls at once on two instances: three leases (MaxInFlight), three distinct events, the rest no item.
      const got = await Promise.all(Array.from({ length: 8 }, (_, i) => pull(i % 2 ? b : a)))
      const items = got.flatMap((g) => (g.item ? [g.item] : []))
      expect(items).toHaveLength(3)
      expect(new Set(items.map((i) => i.event.eventId)).size).toBe(3)
      expect(await a.service.status(ME, { consumerId: got[0]!.consumerId })).toMatchObject({ leased: 3, pending: 7 })
    }, 60, 3)
  })

  it('[CTX41] [SCALE11] a pull passes over an event another transaction holds locked (SKIP LOCKED) instead of waiting for it', { timeout: 120_000 }, async () => {
    await withPlainClient(4, 2, async (h, raw, pull, consumerId) => {
      const first = (await pull()).item!
      await h.service.nack(ME, { consumerId, eventId: first.event.eventId, leaseToken: first.leaseToken, attempt: first.attempt })
      // The first event is due again, but another transaction (a pull on another instance, mid-lease) holds its row.
      await raw.query('BEGIN')
      await raw.query('SELECT 1 FROM contextual_events WHERE consumer_id = $1 AND event_id = $2 FOR UPDATE', [consumerId, first.event.eventId])
      const second = (await pull()).item!
      expect(second.event.eventId).not.toBe(first.event.eventId)
      await raw.query('ROLLBACK')
      expect((await pull()).item).toMatchObject({ event: { eventId: first.event.eventId }, attempt: 2 })
    })
  })

  it('[SCALE11] a pull passes over the slot a concurrent pull is taking instead of waiting on it (and then failing)', { timeout: 120_000 }, async () => {
    await withPlainClient(4, 3, async (h, raw, pull, consumerId) => {
      const first = (await pull()).item!
      // Another pull mid-lease: it holds the slot it picked (slot 1, the lowest free) and has
      // written its lease, not committed yet. Picking slot 1 too would wait on the unique index
      // until that pull commits, then fail and pull again: 8 workers on one consumer spent most
      // of their time so (bench: contextual, pgCyclesPerSecWorkers).
      await raw.query('BEGIN')
      await raw.query('SELECT pg_advisory_xact_lock(hashtext($1), 1)', [consumerId])
      const taking = await raw.query<{ event_id: string }>(
        `UPDATE contextual_events SET state = 'leased', slot = 1, attempt = attempt + 1, lease_token = 'other', expires_at = 9e15
         WHERE consumer_id = $1 AND event_id = (SELECT event_id FROM contextual_events WHERE consumer_id = $1 AND state = 'pending' ORDER BY version LIMIT 1)
         RETURNING event_id`,
        [consumerId],
      )
      const second = (await pull()).item!
      expect(second.event.eventId).not.toBe(first.event.eventId)
      expect(second.event.eventId).not.toBe(taking.rows[0]!.event_id)
      await raw.query('COMMIT')
      const slots = await raw.query<{ slot: number }>(`SELECT slot FROM contextual_events WHERE consumer_id = $1 AND state = 'leased' ORDER BY slot`, [consumerId])
      expect(slots.rows.map((r) => r.slot)).toEqual([0, 1, 2])
      expect(await h.service.status(ME, { consumerId })).toMatchObject({ leased: 3 })
    })
  })

  it('[CTX41] [SCALE11] several workers on two instances pull one consumer at once while events arrive: every event leased exactly once, none lost', { timeout: 300_000 }, async () => {
    const EVENTS = 60
    await twoInstances(async (a, b) => {
      const { consumerId } = await a.service.next(ME, { subscription: SUB, consumer: 'c' })
      for (let i = 0; i < EVENTS / 2; i++) await a.nodes.put(ME, `P/in/e${i}` as NodePath, { nodeType: 'Document', content: {} })
      const leased: WorkItem[] = []
      let written = EVENTS / 2
      // The other half arrives while the workers pull (each pull may ingest it, on either instance).
      const writer = (async () => {
        for (; written < EVENTS; written++) await b.nodes.put(ME, `P/in/e${written}` as NodePath, { nodeType: 'Document', content: {} })
      })()
      const worker = async (h: Harness) => {
        for (let idle = 0; idle < 2_000; ) {
          const { item } = await h.service.next(ME, { subscription: SUB, consumer: 'c' })
          if (!item) {
            if (written === EVENTS && leased.length === EVENTS) return
            idle++
            await new Promise((resolve) => setTimeout(resolve, 2))
            continue
          }
          leased.push(item)
          await h.service.ack(ME, { consumerId, eventId: item.event.eventId, leaseToken: item.leaseToken, attempt: item.attempt })
        }
        throw new Error(`a worker found no work 2,000 times with ${leased.length} of ${EVENTS} events leased`)
      }
      await Promise.all([writer, ...Array.from({ length: 6 }, (_, i) => worker(i % 2 ? b : a))])
      const ids = leased.map((i) => i.event.eventId)
      expect(new Set(ids).size).toBe(EVENTS)
      expect(ids).toHaveLength(EVENTS)
      expect(leased.every((i) => i.attempt === 1)).toBe(true)
      expect(await b.service.status(ME, { consumerId })).toMatchObject({ acked: EVENTS, leased: 0, pending: 0, dead: 0 })
    }, 60, 4)
  })

  it('[CTX52] react with ack and next on PostgreSQL: a loop of one call per item leases every event once and settles each', async () => {
    await withPlainClient(1, 4, async (h, _raw, pull, consumerId) => {
      let item = (await pull()).item
      const seen: string[] = []
      while (item) {
        seen.push(item.event.path)
        const r = await h.service.react(ME, { causationToken: item.reactions[0]!.causationToken, params: { Note: 'x' }, ack: true, next: true })
        expect(r).toMatchObject({ repeated: false, acked: true, next: { consumerId } })
        item = r.next!.item
      }
      expect(seen).toEqual(['P/in/d0', 'P/in/d1', 'P/in/d2', 'P/in/d3'])
      expect(await h.service.status(ME, { consumerId })).toMatchObject({ acked: 4, leased: 0, pending: 0 })
    })
  })
})
