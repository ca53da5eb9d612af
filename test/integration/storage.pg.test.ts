import { randomBytes } from 'node:crypto'
import pg from 'pg'
import { describe, expect, it } from 'vitest'
import type { NodePath } from '../../shared/index.js'
import { openPostgresStorage } from '../../sync-server/storage/index.js'
import { runStorageContract } from './storage-contract.js'

/** Needs PostgreSQL: `WEFT_TEST_DATABASE_URL`, else the local test database. */
const connectionString = process.env.WEFT_TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test'

async function sql(text: string): Promise<void> {
  const client = new pg.Client({ connectionString })
  await client.connect()
  try {
    await client.query(text)
  } finally {
    await client.end()
  }
}

/** A fresh schema per test: runs never see each other's rows, and dropping it cleans up. */
function freshSchema(): { schema: string; drop: () => Promise<void> } {
  const schema = `weft_test_${randomBytes(6).toString('hex')}`
  return { schema, drop: () => sql(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`) }
}

runStorageContract('postgres', async () => {
  const { schema, drop } = freshSchema()
  return {
    adapter: await openPostgresStorage({ connectionString, schema }),
    reopen: () => openPostgresStorage({ connectionString, schema }),
    cleanup: drop,
    dropClientBindings: () => sql(`DROP TABLE "${schema}".node_clients`),
    failWritesOf: (path) =>
      sql(`
        CREATE FUNCTION "${schema}".boom() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN IF NEW.path = '${path.replaceAll("'", "''")}' THEN RAISE EXCEPTION 'boom'; END IF; RETURN NEW; END $$;
        CREATE TRIGGER boom BEFORE INSERT ON "${schema}".node_updates FOR EACH ROW EXECUTE FUNCTION "${schema}".boom();`),
  }
})

describe('storage: postgres specifics', () => {
  it('[SCALE13] a statement failing early in a pipelined batch: every caller gets its cause, nothing is written, the pool keeps serving', async () => {
    const { schema, drop } = freshSchema()
    const store = await openPostgresStorage({ connectionString, schema, poolSize: 2 })
    try {
      const at = new Date().toISOString()
      const create = (path: string) =>
        store.commit({ path: path as NodePath, kind: 'Created', nodeType: 'Document', name: path, content: { P: path }, createdBy: 'alice', at, update: new Uint8Array([0, 0]) })
      const base = await create('kept')
      // The row's INSERT fails: the writes sent after it in the same flight (other rows, the log,
      // the counter, COMMIT) only echo the abort.
      await sql(`
        CREATE FUNCTION "${schema}".boom_row() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN IF NEW.path = 'boom' THEN RAISE EXCEPTION 'boom-row refused'; END IF; RETURN NEW; END $$;
        CREATE TRIGGER boom_row BEFORE INSERT ON "${schema}".nodes FOR EACH ROW EXECUTE FUNCTION "${schema}".boom_row();`)
      const update = store.commit({ path: 'kept' as NodePath, kind: 'Updated', nodeType: 'Document', name: 'kept', content: { P: 'changed' }, createdBy: 'alice', at, update: new Uint8Array([0, 0]) })
      const results = await Promise.allSettled([create('a1'), update, create('boom'), create('a2')])
      expect(results.map((r) => r.status)).toEqual(['rejected', 'rejected', 'rejected', 'rejected'])
      for (const r of results) expect(String((r as PromiseRejectedResult).reason)).toMatch(/boom-row refused/)
      expect(await store.lastVersion()).toBe(base.version)
      expect(await store.getNode('a1' as NodePath)).toBeNull()
      expect((await store.getNode('kept' as NodePath))?.content).toEqual({ P: 'kept' })
      // Both pooled connections still work, and the failed batch used no version.
      const next = await Promise.all([create('b1'), create('b2'), create('b3')])
      expect(next.map((r) => r.version).sort()).toEqual([base.version + 1, base.version + 2, base.version + 3])
      for (let i = 0; i < 4; i++) expect((await create(`c${i}`)).version).toBe(base.version + 4 + i)
    } finally {
      await store.close()
      await drop()
    }
  })

  it('opens the same schema from two instances at once and keeps one version sequence', async () => {
    const { schema, drop } = freshSchema()
    const [a, b] = await Promise.all([openPostgresStorage({ connectionString, schema }), openPostgresStorage({ connectionString, schema })])
    try {
      const commit = (store: typeof a, i: number) =>
        store.commit({
          path: `multi/n${i}` as NodePath,
          kind: 'Created',
          nodeType: 'Document',
          name: `n${i}`,
          content: { I: i },
          createdBy: 'alice',
          at: new Date().toISOString(),
          update: new Uint8Array([0, 0]),
        })
      const records = await Promise.all(Array.from({ length: 200 }, (_, i) => commit(i % 2 ? a : b, i)))
      const versions = records.map((r) => r.version).sort((x, y) => x - y)
      expect(versions).toEqual(Array.from({ length: 200 }, (_, i) => i + 1))
      expect((await a.changesSince(0, 1000)).map((c) => c.version)).toEqual(versions)
    } finally {
      await Promise.all([a.close(), b.close()])
      await drop()
    }
  })
})
