import pg from 'pg'
import { afterEach, describe, expect, it } from 'vitest'
import { openPostgresStorage } from '../../sync-server/storage/index.js'
import { RETIRED_INDEXES, SCAN_INDEXES } from '../../sync-server/storage/postgres-online-indexes.js'
import { freshDatabase, waitFor } from '../helpers/index.js'

/**
 * [STO11] An index a release adds to a database that holds nodes is built without stopping the
 * writes of the instances already serving it (a rolling upgrade). Found: the first boot of the
 * [STO10] release built its scan indexes with a plain CREATE INDEX inside the schema's
 * transaction, which queues every write to `nodes` behind it for the whole build.
 */
describe('indexes built online on a database that holds nodes (PostgreSQL)', () => {
  const cleanup: (() => Promise<void>)[] = []
  afterEach(async () => {
    for (const f of cleanup.splice(0).reverse()) await f()
  })

  /** A database as the release before left it: nodes, and the old whole-value indexes. */
  async function olderDatabase(): Promise<{ url: string; sql: pg.Client }> {
    const db = await freshDatabase('weft_online_idx_')
    cleanup.push(db.drop)
    await (await openPostgresStorage({ connectionString: db.url })).close()
    const sql = new pg.Client({ connectionString: db.url })
    await sql.connect()
    cleanup.push(() => sql.end())
    for (const i of SCAN_INDEXES) await sql.query(`DROP INDEX ${i.name}`)
    await sql.query("CREATE INDEX nodes_scan_status ON nodes (node_type, (content ->> 'Status'))")
    await sql.query("CREATE INDEX nodes_scan_requested ON nodes (node_type, (content ->> 'RequestedStatus'))")
    await sql.query(`INSERT INTO nodes (path, node_type, name, parent, last_segment, content, created_by, created_at, updated_at, version)
      SELECT 's/n' || i, 'Document', 'n' || i, 's', 'n' || i, jsonb_build_object('Status', 'Done'), 'u', '', '', i FROM generate_series(1, 2000) i`)
    return { url: db.url, sql }
  }

  async function indexes(sql: pg.Client): Promise<Record<string, boolean>> {
    const r = await sql.query<{ relname: string; indisvalid: boolean }>(
      "SELECT c.relname, i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid WHERE c.relname LIKE 'nodes_scan%'",
    )
    return Object.fromEntries(r.rows.map((x) => [x.relname, x.indisvalid]))
  }

  const built = Object.fromEntries(SCAN_INDEXES.map((i) => [i.name, true]))

  it('a write from another instance goes through while the index waits for a transaction already open', async () => {
    const { url, sql } = await olderDatabase()
    // An instance already serving, in the middle of a write.
    const open = new pg.Client({ connectionString: url })
    await open.connect()
    cleanup.push(() => open.end())
    await open.query('BEGIN')
    await open.query("UPDATE nodes SET updated_at = 'x' WHERE path = 's/n1'")
    const booting = openPostgresStorage({ connectionString: url })
    // The new release's boot now waits for that transaction.
    await waitFor(async () => {
      const r = await sql.query("SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'")
      return r.rows[0].n > 0
    })
    // Another instance's write meanwhile: before, it queued behind the build's lock (lock_timeout).
    const other = new pg.Client({ connectionString: url })
    await other.connect()
    cleanup.push(() => other.end())
    await other.query("SET lock_timeout = '10s'")
    const wrote = await other.query("UPDATE nodes SET updated_at = 'y' WHERE path = 's/n2'")
    expect(wrote.rowCount).toBe(1)
    await open.query('COMMIT')
    await (await booting).close()
    expect(await indexes(sql)).toEqual(built)
  })

  it('an index an interrupted build left invalid is built again; two instances booting at once build each index once', async () => {
    const { url, sql } = await olderDatabase()
    await sql.query(`CREATE INDEX ${SCAN_INDEXES[0]!.name} ${SCAN_INDEXES[0]!.definition}`)
    await sql.query(`UPDATE pg_index SET indisvalid = false WHERE indexrelid = '${SCAN_INDEXES[0]!.name}'::regclass`)
    expect((await indexes(sql))[SCAN_INDEXES[0]!.name]).toBe(false)
    const both = await Promise.all([openPostgresStorage({ connectionString: url }), openPostgresStorage({ connectionString: url })])
    for (const s of both) await s.close()
    expect(await indexes(sql)).toEqual(built)
    for (const name of RETIRED_INDEXES) expect(await indexes(sql)).not.toHaveProperty(name)
    // A second boot has nothing to build.
    await (await openPostgresStorage({ connectionString: url })).close()
    expect(await indexes(sql)).toEqual(built)
  })
})
