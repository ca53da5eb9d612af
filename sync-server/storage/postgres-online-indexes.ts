import { setTimeout as sleep } from 'node:timers/promises'
import pg from 'pg'
import type { Logger } from 'pino'

/**
 * [STO11] Indexes a release adds to a database that already holds nodes are built `CONCURRENTLY`
 * before the schema's transaction, and the indexes they replace dropped the same way: a plain
 * `CREATE INDEX` holds a lock that stops every write to `nodes` for the whole build (minutes on a
 * large data set), and the other instances of a rolling upgrade are still serving. On an empty or
 * new database the schema's own `CREATE INDEX IF NOT EXISTS` builds them (nothing to wait for).
 *
 * A retired index's name stays taken by an empty index (`WHERE false`, never written): a release
 * from before [STO10] that restarts during the rolling upgrade runs `CREATE INDEX IF NOT EXISTS`
 * of its whole-value index, which would otherwise be rebuilt, with a plain build, and refuse the
 * long values this release stores.
 */

/** [KIT7] [STO10] Engine scans (queryFields, exact): a value's first 200 characters. */
export const SCAN_INDEXES: readonly { name: string; definition: string }[] = [
  { name: 'nodes_scan_status_prefix', definition: "ON nodes (node_type, left(content ->> 'Status', 200))" },
  { name: 'nodes_scan_requested_prefix', definition: "ON nodes (node_type, left(content ->> 'RequestedStatus', 200))" },
  { name: 'nodes_scan_pending_prefix', definition: "ON nodes (node_type, left(content ->> 'HasPending', 200))" },
]

/**
 * [FEED6] The change log by path in "C" order: a Denied that ends marks the records of its scope
 * and below ([FEED5]) by a bytewise prefix range, under the version counter's lock; `changes.path`
 * has the database's collation, so without this index that range scanned the whole log (150–350
 * ms at a million records, every commit waiting). Created after the `changes` table.
 */
export const FEED_INDEXES: readonly { name: string; definition: string }[] = [
  { name: 'changes_path_c', definition: 'ON changes ((path COLLATE "C"), version)' },
]

/** Every index built online, in the order the schema creates their tables. */
const ONLINE_INDEXES = [...SCAN_INDEXES, ...FEED_INDEXES]

/** Whole-value btree entries, which refused a value over ~2.7 kB that does not compress. */
export const RETIRED_INDEXES: readonly string[] = ['nodes_scan_status', 'nodes_scan_requested', 'nodes_scan_pending']

/** What holds a retired index's name: an index no row is ever in. */
const PLACEHOLDER = 'ON nodes (path) WHERE false'

/** The schema transaction's statements for the same indexes (no-ops once built online). */
export const SCAN_INDEX_SQL = [
  ...SCAN_INDEXES.map((i) => `CREATE INDEX IF NOT EXISTS ${i.name} ${i.definition};`),
  ...RETIRED_INDEXES.map((name) => `CREATE INDEX IF NOT EXISTS ${name} ${PLACEHOLDER};`),
].join('\n')

/** The same for the change log's (after its table). */
export const FEED_INDEX_SQL = FEED_INDEXES.map((i) => `CREATE INDEX IF NOT EXISTS ${i.name} ${i.definition};`).join('\n')

/** The advisory lock's keys: a constant ("WEFI") and the schema's hash. One instance builds at a time. */
const LOCK_KEY = `SELECT ${0x57_45_46_49}::int AS a, hashtext(current_schema())::int AS b`
const POLL_MS = 250
/** Tries of a build that PostgreSQL cancelled (a deadlock with another release's schema work). */
const BUILD_ATTEMPTS = 5

interface IndexRow {
  relname: string
  indisvalid: boolean
  placeholder: boolean
}

export async function buildIndexesOnline(connectionString: string, sessionOptions: string, log?: Logger): Promise<void> {
  // A connection of its own, not pipelined: CONCURRENTLY runs outside any transaction block. No
  // timeout of the role or database applies: a build that waits blocks nobody, and one cancelled
  // would start over at every boot.
  const client = new pg.Client({ connectionString, options: `${sessionOptions} -c statement_timeout=0 -c lock_timeout=0` })
  client.on('error', (err) => log?.warn({ err }, 'storage: the index build connection failed'))
  await client.connect()
  try {
    const existing = async (): Promise<IndexRow[]> =>
      (
        await client.query<IndexRow>(
          `SELECT c.relname, i.indisvalid, i.indpred IS NOT NULL AS placeholder FROM pg_class c JOIN pg_index i ON i.indexrelid = c.oid
           JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = current_schema() AND c.relname = ANY($1)`,
          [[...ONLINE_INDEXES.map((i) => i.name), ...RETIRED_INDEXES]],
        )
      ).rows
    const done = (rows: IndexRow[]) =>
      ONLINE_INDEXES.every((i) => rows.some((r) => r.relname === i.name && r.indisvalid)) &&
      RETIRED_INDEXES.every((name) => rows.some((r) => r.relname === name && r.indisvalid && r.placeholder))
    const table = await client.query<{ t: string | null }>("SELECT to_regclass('nodes')::text AS t")
    if (table.rows[0]?.t == null || done(await existing())) return
    const key = (await client.query<{ a: number; b: number }>(LOCK_KEY)).rows[0]!
    // Polled, not waited for: a session waiting on the lock would hold a snapshot the other's
    // concurrent build waits out.
    while (!(await client.query<{ ok: boolean }>('SELECT pg_try_advisory_lock($1, $2) AS ok', [key.a, key.b])).rows[0]!.ok) await sleep(POLL_MS)
    try {
      for (let attempt = 1; ; attempt++) {
        try {
          await build(client, await existing(), log)
          return
        } catch (err) {
          // 40P01: a deadlock, e.g. with the schema transaction of an older release's instance.
          if ((err as { code?: string }).code !== '40P01' || attempt >= BUILD_ATTEMPTS) throw err
          log?.warn({ err, attempt }, 'storage: an index build was cancelled; building it again')
          await sleep(POLL_MS * attempt)
        }
      }
    } finally {
      await client.query('SELECT pg_advisory_unlock($1, $2)', [key.a, key.b])
    }
  } finally {
    await client.end().catch(() => undefined)
  }
}

async function build(client: pg.Client, rows: IndexRow[], log?: Logger): Promise<void> {
  const replace = async (name: string, definition: string, row: IndexRow | undefined) => {
    // An invalid one is what an interrupted concurrent build leaves.
    if (row) await client.query(`DROP INDEX CONCURRENTLY IF EXISTS ${name}`)
    log?.info({ index: name }, 'storage: building an index without stopping writes')
    await client.query(`CREATE INDEX CONCURRENTLY IF NOT EXISTS ${name} ${definition}`)
  }
  for (const index of ONLINE_INDEXES) {
    const row = rows.find((r) => r.relname === index.name)
    if (!row?.indisvalid) await replace(index.name, index.definition, row)
  }
  for (const name of RETIRED_INDEXES) {
    const row = rows.find((r) => r.relname === name)
    if (!row?.indisvalid || !row.placeholder) await replace(name, PLACEHOLDER, row)
  }
}
