import { randomBytes } from 'node:crypto'
import pg from 'pg'
import { afterAll, describe, expect, it } from 'vitest'
import type { NodePath } from '../../shared/index.js'
import { VirtualClock } from '../../sync-server/engines/kit/index.js'
import { openPostgresStorage } from '../../sync-server/storage/postgres-adapter.js'
import { Harness, ME, SUB, log, seedMesh } from '../sim/contextual-harness.js'

/** [OPS6] The contextual figures `/metrics` reads, on PostgreSQL (the same query as on SQLite). */
const connectionString = process.env.WEFT_TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test'
const schema = `weft_ops_${randomBytes(6).toString('hex')}`

afterAll(async () => {
  const client = new pg.Client({ connectionString })
  await client.connect()
  await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`)
  await client.end()
})

describe('Metrics (issue 20) on PostgreSQL', () => {
  it('[OPS6] contextual totals: consumers, leased and pending events, lag, every consumer together', async () => {
    const h = await new Harness(() => openPostgresStorage({ connectionString, schema, log }), new VirtualClock()).boot()
    try {
      const totals = () => h.storage.contextual({ op: 'totals', now: h.clock.now() })
      expect(await totals()).toEqual({ consumers: 0, pending: 0, leased: 0, dead: 0, maxLag: 0 })
      await seedMesh(h)
      const pull = () => h.service.next(ME, { subscription: SUB, consumer: 'c' })
      await pull()
      await h.nodes.put(ME, 'P/in/a' as NodePath, { nodeType: 'Document', content: {} })
      await h.nodes.put(ME, 'P/in/b' as NodePath, { nodeType: 'Document', content: {} })
      expect((await pull()).item).not.toBeNull()
      const t = (await totals()) as { consumers: number; pending: number; leased: number; dead: number; maxLag: number }
      expect(t).toMatchObject({ consumers: 1, leased: 1, dead: 0 })
      expect(t.pending + t.leased).toBe(2)
      expect(t.maxLag).toBeGreaterThanOrEqual(0)
    } finally {
      await h.close()
    }
  })
})
