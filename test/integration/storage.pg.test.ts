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
