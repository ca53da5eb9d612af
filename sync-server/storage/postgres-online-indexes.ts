import { setTimeout as sleep } from 'node:timers/promises'
import pg from 'pg'
import type { Logger } from 'pino'

/**
 * [STO11] Indexes a release adds to a database that already holds nodes are built `CONCURRENTLY`
 * before the schema's transaction, and the indexes they replace dropped the same way: a plain
 * `CREATE INDEX` holds a lock that stops every write to `nodes` for the whole build (minutes on a
 * large data set), and the other instances of a rolling upgrade are still serving. On an empty or
 * new database the schema's own `CREATE INDEX IF NOT EXISTS` builds them (nothing to wait for).
 */

/** [KIT7] [STO10] Engine scans (queryFields, exact): a value's first 200 characters. */
export const SCAN_INDEXES: readonly { name: string; definition: string }[] = [
  { name: 'nodes_scan_status_prefix', definition: "ON nodes (node_type, left(content ->> 'Status', 200))" },
  { name: 'nodes_scan_requested_prefix', definition: "ON nodes (node_type, left(content ->> 'RequestedStatus', 200))" },
  { name: 'nodes_scan_pending_prefix', definition: "ON nodes (node_type, left(content ->> 'HasPending', 200))" },
]

/** Whole-value btree entries, which refused a value over ~2.7 kB that does not compress. */
export const RETIRED_INDEXES: readonly string[] = ['nodes_scan_status', 'nodes_scan_requested', 'nodes_scan_pending']

/** The schema transaction's statements for the same indexes (no-ops once built online). */
export const SCAN_INDEX_SQL = [
  ...RETIRED_INDEXES.map((name) => `DROP INDEX IF EXISTS ${name};`),
  ...SCAN_INDEXES.map((i) => `CREATE INDEX IF NOT EXISTS ${i.name} ${i.definition};`),
].join('\n')

/** Arbitrary constant key: one instance builds at a time ("WEFI"). */
const ONLINE_INDEX_LOCK_KEY = 0x57_45_46_49
const POLL_MS = 250

interface IndexRow {
  relname: string
  indisvalid: boolean
}

export async function buildIndexesOnline(connectionString: string, sessionOptions: string, log?: Logger): Promise<void> {
  // A connection of its own, not pipelined: CONCURRENTLY runs outside any transaction block.
  const client = new pg.Client({ connectionString, options: sessionOptions })
  await client.connect()
  try {
    const existing = async (): Promise<IndexRow[]> =>
      (
        await client.query<IndexRow>(
          `SELECT c.relname, i.indisvalid FROM pg_class c JOIN pg_index i ON i.indexrelid = c.oid
           JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = current_schema() AND c.relname = ANY($1)`,
          [[...SCAN_INDEXES.map((i) => i.name), ...RETIRED_INDEXES]],
        )
      ).rows
    const done = (rows: IndexRow[]) =>
      SCAN_INDEXES.every((i) => rows.some((r) => r.relname === i.name && r.indisvalid)) && !rows.some((r) => RETIRED_INDEXES.includes(r.relname))
    const table = await client.query<{ t: string | null }>("SELECT to_regclass('nodes')::text AS t")
    if (table.rows[0]?.t == null || done(await existing())) return
    // Polled, not waited for: a session waiting on the lock would hold a snapshot the other's
    // concurrent build waits out.
    while (!(await client.query<{ ok: boolean }>('SELECT pg_try_advisory_lock($1) AS ok', [ONLINE_INDEX_LOCK_KEY])).rows[0]!.ok) await sleep(POLL_MS)
    try {
      const rows = await existing()
      for (const index of SCAN_INDEXES) {
        const row = rows.find((r) => r.relname === index.name)
        if (row?.indisvalid) continue
        // An invalid one is what an interrupted concurrent build leaves.
        if (row) await client.query(`DROP INDEX CONCURRENTLY IF EXISTS ${index.name}`)
        log?.info({ index: index.name }, 'storage: building an index without stopping writes')
        await client.query(`CREATE INDEX CONCURRENTLY IF NOT EXISTS ${index.name} ${index.definition}`)
      }
      for (const name of RETIRED_INDEXES) {
        if (rows.some((r) => r.relname === name)) await client.query(`DROP INDEX CONCURRENTLY IF EXISTS ${name}`)
      }
    } finally {
      await client.query('SELECT pg_advisory_unlock($1)', [ONLINE_INDEX_LOCK_KEY])
    }
  } finally {
    await client.end()
  }
}
