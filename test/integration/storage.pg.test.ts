import { randomBytes } from 'node:crypto'
import fc from 'fast-check'
import pg from 'pg'
import { describe, expect, it } from 'vitest'
import * as Y from 'yjs'
import { docToJson, type NodePath } from '../../shared/index.js'
import { COMPACT_AFTER_UPDATES, openPostgresStorage } from '../../sync-server/storage/index.js'
import { NodeWriter, rebuild, runStorageContract } from './storage-contract.js'

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
    // A database of a release before the table (and before [STO12]'s record of the schema).
    dropClientBindings: () => sql(`DROP TABLE "${schema}".node_clients; DROP TABLE "${schema}".schema_state`),
    failWritesOf: (path) =>
      sql(`
        CREATE FUNCTION "${schema}".boom() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN IF NEW.path = '${path.replaceAll("'", "''")}' THEN RAISE EXCEPTION 'boom'; END IF; RETURN NEW; END $$;
        CREATE TRIGGER boom BEFORE INSERT ON "${schema}".node_updates FOR EACH ROW EXECUTE FUNCTION "${schema}".boom();`),
  }
})

/** Whether the node row's update count is the number of its log entries. */
async function logCount(schema: string, path: string): Promise<{ counted: boolean }> {
  const client = new pg.Client({ connectionString })
  await client.connect()
  try {
    const r = await client.query<{ counted: boolean }>(
      `SELECT update_count = (SELECT count(*) FROM "${schema}".node_updates u WHERE u.path = n.path) AS counted FROM "${schema}".nodes n WHERE path = $1`,
      [path],
    )
    return { counted: r.rows[0]?.counted ?? false }
  } finally {
    await client.end()
  }
}

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

  it('[SCALE15] compaction takes the row lock only to write: commits, folds and compactions from two instances interleaved keep every update (seeded)', async () => {
    const { schema, drop } = freshSchema()
    // Only the test's compactions run (commits schedule none), so that some are sure to be due.
    const open = () => openPostgresStorage({ connectionString, schema, autoCompact: false })
    const [a, b] = await Promise.all([open(), open()])
    const outcomes = new Map<string, number>()
    let run = 0
    try {
      const op = fc.record({ kind: fc.constantFrom('commit', 'commit', 'commit', 'commit', 'fold', 'compact'), onB: fc.boolean(), yieldFor: fc.integer({ min: 0, max: 3 }) })
      await fc.assert(
        fc.asyncProperty(fc.array(op, { minLength: 20, maxLength: 40 }), async (ops) => {
          const w = new NodeWriter(`hot${run++}` as NodePath)
          await a.commit(w.input('Created', { N: 0 }))
          // Past the threshold first, so that the compactions in the mix are due.
          for (let i = 1; i <= COMPACT_AFTER_UPDATES; i += 20) await Promise.all(Array.from({ length: 20 }, (_, j) => a.commit(w.input('Updated', { N: i + j }))))
          const pending: Promise<unknown>[] = []
          const commits: Promise<unknown>[] = []
          let n = 1000
          for (const o of ops) {
            const store = o.onB ? b : a
            if (o.kind === 'commit') {
              for (let k = 0; k < 8; k++) commits.push(store.commit(w.input('Updated', { N: ++n, [`F${n % 11}`]: n })))
            } else if (o.kind === 'fold') {
              // A fold's state holds every entry committed before it (on one instance its queue
              // sees to that; [DOC1]): the commits land first. Compactions still in flight race it.
              await Promise.all(commits.splice(0))
              await store.foldDoc(w.path, Y.encodeStateAsUpdate(w.doc))
            } else {
              pending.push(store.compactNode(w.path).then((r) => outcomes.set(r, (outcomes.get(r) ?? 0) + 1)))
            }
            for (let y = 0; y < o.yieldFor; y++) await new Promise((r) => setImmediate(r))
          }
          await Promise.all([...commits, ...pending])
          // Whatever interleaving: the row counts its log, and the stored snapshot and log
          // rebuild every update, on both.
          expect(await logCount(schema, w.path)).toEqual({ counted: true })
          for (const store of [a, b]) {
            const doc = rebuild((await store.loadDoc(w.path)) ?? { snapshot: null, updates: [] })
            expect(docToJson(doc)).toEqual(docToJson(w.doc))
            expect(Y.encodeStateVector(doc)).toEqual(Y.encodeStateVector(w.doc))
          }
        }),
        { seed: 1512, numRuns: 12 },
      )
      // Compactions did write (a compaction finding its entries folded meanwhile is the next
      // test's, made to happen; here it happens or not as the runs interleave).
      expect(outcomes.get('compacted') ?? 0).toBeGreaterThan(0)
    } finally {
      await Promise.all([a.close(), b.close()])
      await drop()
    }
  })

  it('[SCALE15] a compaction whose entries were folded by another instance between its read and its write writes nothing: no update is lost', async () => {
    const { schema, drop } = freshSchema()
    const open = () => openPostgresStorage({ connectionString, schema, autoCompact: false })
    const [a, b] = await Promise.all([open(), open()])
    try {
      const w = new NodeWriter('raced' as NodePath)
      await a.commit(w.input('Created', { N: 0 }))
      for (let i = 1; i <= COMPACT_AFTER_UPDATES + 10; i++) await a.commit(w.input('Updated', { N: i }))
      const outcome = await a.compactNode(w.path, {
        // Between the read and the write: more commits, a fold of them all, and one more.
        beforeWrite: async () => {
          for (let i = 0; i < 5; i++) await b.commit(w.input('Updated', { [`Later${i}`]: i }))
          await b.foldDoc(w.path, Y.encodeStateAsUpdate(w.doc))
          await b.commit(w.input('Updated', { Last: true }))
        },
      })
      expect(outcome).toBe('changed')
      const doc = rebuild((await a.loadDoc(w.path)) ?? { snapshot: null, updates: [] })
      expect(docToJson(doc)).toEqual(docToJson(w.doc))
      expect(docToJson(doc)).toMatchObject({ Later4: 4, Last: true })
      expect(await logCount(schema, w.path)).toEqual({ counted: true })
      // Compacted again from what is there now.
      for (let i = 0; i < COMPACT_AFTER_UPDATES; i++) await a.commit(w.input('Updated', { N: 1000 + i }))
      expect(await a.compactNode(w.path)).toBe('compacted')
      expect(docToJson(rebuild((await b.loadDoc(w.path)) ?? { snapshot: null, updates: [] }))).toEqual(docToJson(w.doc))
      expect(await logCount(schema, w.path)).toEqual({ counted: true })
    } finally {
      await Promise.all([a.close(), b.close()])
      await drop()
    }
  })

  it('[SCALE15] a delete takes the node row lock before its log rows: beside a compaction holding the row, neither deadlocks', async () => {
    const { schema, drop } = freshSchema()
    const store = await openPostgresStorage({ connectionString, schema, autoCompact: false })
    const raw = new pg.Client({ connectionString })
    await raw.connect()
    try {
      const w = new NodeWriter('gone' as NodePath)
      await store.commit(w.input('Created', { N: 0 }))
      for (let i = 1; i <= 5; i++) await store.commit(w.input('Updated', { N: i }))
      // A compaction's write, half done: the row locked, its log rows not deleted yet.
      await raw.query(`SET search_path TO "${schema}"`)
      await raw.query('BEGIN')
      await raw.query("SELECT 1 FROM nodes WHERE path = 'gone' FOR UPDATE")
      const deleted = store.commit(w.input('Deleted'))
      // Until the delete waits for the row.
      for (let i = 0; i < 200; i++) {
        const waiting = await raw.query("SELECT count(*)::int AS n FROM pg_locks WHERE NOT granted AND locktype = 'transactionid'")
        if (waiting.rows[0].n > 0) break
        await new Promise((resolve) => setTimeout(resolve, 10))
      }
      await raw.query("DELETE FROM node_updates WHERE path = 'gone'")
      await raw.query('COMMIT')
      await deleted
      expect(await store.getNode('gone' as NodePath)).toBeNull()
    } finally {
      await raw.end()
      await store.close()
      await drop()
    }
  })
})
