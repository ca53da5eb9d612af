import pg from 'pg'
import pino from 'pino'
import { afterEach, describe, expect, it } from 'vitest'
import { openPostgresStorage } from '../../sync-server/storage/index.js'
import { FEED_INDEXES, RETIRED_INDEXES, SCAN_INDEXES } from '../../sync-server/storage/postgres-online-indexes.js'
import { POSTGRES_WITHHOLD } from '../../sync-server/storage/feed-withhold.js'
import { freshDatabase, waitFor } from '../helpers/index.js'
import type { NodePath } from '../../shared/index.js'

/** The statement a release from before [STO10] runs at every boot. */
const OLD_RELEASE_INDEX = "CREATE INDEX IF NOT EXISTS nodes_scan_status ON nodes (node_type, (content ->> 'Status'))"

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
    for (const name of [...SCAN_INDEXES.map((i) => i.name), ...RETIRED_INDEXES]) await sql.query(`DROP INDEX ${name}`)
    await sql.query('DROP TABLE schema_state')
    await sql.query(OLD_RELEASE_INDEX)
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

  // The retired names are held by empty indexes (a release from before restarting cannot rebuild them).
  const built = Object.fromEntries([...SCAN_INDEXES.map((i) => i.name), ...RETIRED_INDEXES].map((name) => [name, true]))

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
    // A second boot has nothing to build.
    await (await openPostgresStorage({ connectionString: url })).close()
    expect(await indexes(sql)).toEqual(built)
  })

  it('an instance of the release before, restarting after the upgrade, cannot bring its whole-value index back', async () => {
    const { url, sql } = await olderDatabase()
    const storage = await openPostgresStorage({ connectionString: url })
    cleanup.push(() => storage.close())
    await sql.query(OLD_RELEASE_INDEX)
    expect(await indexes(sql)).toEqual(built)
    // A Status that does not compress, over what a whole-value btree entry holds.
    const status = Array.from({ length: 4_000 }, (_, i) => String.fromCharCode(0x4e00 + ((i * 7919) % 20_000))).join('')
    const record = await storage.commit({ path: 's/long' as NodePath, kind: 'Created', nodeType: 'Document', name: 'long', content: { Status: status }, createdBy: 'u', at: new Date().toISOString(), update: null })
    expect(record.version).toBeGreaterThan(0)
  })

  it('[STO12] a boot beside a long reader (a backup) holds no other instance up: at the schema, no DDL; an upgrade waits its turn', async () => {
    const { url, sql } = await olderDatabase()
    await (await openPostgresStorage({ connectionString: url })).close()
    const reader = new pg.Client({ connectionString: url })
    await reader.connect()
    cleanup.push(() => reader.end())
    const writer = new pg.Client({ connectionString: url })
    await writer.connect()
    cleanup.push(() => writer.end())
    await writer.query("SET lock_timeout = '10s'")
    await reader.query('BEGIN ISOLATION LEVEL REPEATABLE READ')
    await reader.query('SELECT count(*) FROM nodes')
    // A restart: the database is at this release's schema.
    await (await openPostgresStorage({ connectionString: url })).close()
    expect((await writer.query("UPDATE nodes SET updated_at = 'a' WHERE path = 's/n3'")).rowCount).toBe(1)
    // An upgrade: the schema's record says another release.
    await sql.query("UPDATE schema_state SET fingerprint = 'an older release'")
    const said: string[] = []
    const log = pino({ level: 'info' }, { write: (line: string) => void said.push(JSON.parse(line).msg as string) })
    const booting = openPostgresStorage({ connectionString: url, log })
    let booted = false
    void booting.then(() => (booted = true), () => (booted = true))
    // It gave a try up (a lock not granted in time) and will try again.
    await waitFor(() => said.some((m) => m.includes('waits for transactions on its tables')) || booted)
    for (let i = 0; i < 3; i++) expect((await writer.query("UPDATE nodes SET updated_at = $1 WHERE path = 's/n4'", [`b${i}`])).rowCount).toBe(1)
    expect(booted).toBe(false)
    await reader.query('COMMIT')
    await (await booting).close()
    expect((await sql.query('SELECT fingerprint FROM schema_state')).rows[0].fingerprint).not.toBe('an older release')
  })

  it('[FEED6] the change log gains its "C" path index online, and a Denied\'s marking of its scope reads it, not the whole log', async () => {
    const { url, sql } = await olderDatabase()
    for (const i of FEED_INDEXES) await sql.query(`DROP INDEX IF EXISTS ${i.name}`)
    await sql.query(`INSERT INTO changes (version, path, node_type, kind) SELECT 100000 + i, 's' || (i % 50) || '/n' || i, 'Document', 'Updated' FROM generate_series(1, 20000) i`)
    await (await openPostgresStorage({ connectionString: url })).close()
    const r = await sql.query<{ relname: string; indisvalid: boolean }>("SELECT c.relname, i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid WHERE c.relname = ANY($1)", [FEED_INDEXES.map((i) => i.name)])
    expect(Object.fromEntries(r.rows.map((x) => [x.relname, x.indisvalid]))).toEqual(Object.fromEntries(FEED_INDEXES.map((i) => [i.name, true])))
    await sql.query('ANALYZE changes')
    const plan = (await sql.query(`EXPLAIN ${POSTGRES_WITHHOLD}`, ['u', 's7', 's7/', 's70', 200000, 's7/_Access/u_Access'])).rows.map((x: Record<string, string>) => x['QUERY PLAN']).join('\n')
    expect(plan).toContain('changes_path_c')
    expect(plan).not.toContain('Seq Scan')
  })
})
