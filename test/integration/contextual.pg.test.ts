import { randomBytes } from 'node:crypto'
import pg from 'pg'
import { afterAll, describe, expect, it } from 'vitest'
import type { NodePath } from '../../shared/index.js'
import { VirtualClock } from '../../sync-server/engines/kit/index.js'
import { openPostgresStorage } from '../../sync-server/storage/postgres-adapter.js'
import { Harness, ME, SUB, attempt, fenceOf, leaseInterleavings, log, seedMesh, staleAttachmentRefused, type OpenStorage } from '../sim/contextual-harness.js'
import { forEachSeed, seeds } from '../sim/rng.js'

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

describe('contextual subscriptions on PostgreSQL', () => {
  it('[CTX34] seeded interleavings: at most one commit per reaction, no stale evidence accepted', { timeout: 300_000 }, async () => {
    await forEachSeed('contextual leases (PostgreSQL)', seeds(3, 2900), async (seed) => {
      const h = await new Harness(freshSchema(), new VirtualClock()).boot()
      try {
        return await leaseInterleavings(h, seed)
      } finally {
        await h.close()
      }
    })
  })

  it('[CTX26] a commit carrying an outcome with stale lease evidence is refused whole', async () => {
    const h = await new Harness(freshSchema(), new VirtualClock()).boot()
    try {
      await seedMesh(h)
      await staleAttachmentRefused(h)
    } finally {
      await h.close()
    }
  })

  it('[CTX24] [CTX26] two instances: a redelivered attempt and the stale one react at once; exactly one commit, the stale one denied or repeated', { timeout: 120_000 }, async () => {
    const clock = new VirtualClock()
    const open = freshSchema()
    const a = await new Harness(open, clock).boot()
    await seedMesh(a)
    // The second instance boots after the set-up (without Redis, an instance learns of access changes at boot).
    const b = await new Harness(open, clock).boot()
    try {
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
    } finally {
      await b.stop()
      await a.stop()
    }
  })
})
