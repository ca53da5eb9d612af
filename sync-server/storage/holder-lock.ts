import Database from 'better-sqlite3'
import type pg from 'pg'
import { WeftError } from '../../shared/index.js'

/**
 * [BAK6] Who holds a database: every open storage (a server, a test, `weft backup`'s read is not
 * one) holds a SHARED holder lock for as long as it is open; `weft restore` takes it EXCLUSIVE, so
 * a restore refuses to start while anything has the database open, and a storage that opens
 * while a restore runs waits for it (then fails with `unavailable`). Both locks are the
 * database's own, released by the operating system or PostgreSQL when the process dies
 * (`kill -9` included): no stale pid file to clean up.
 *
 *  - SQLite: a read transaction on the file `<db>-holders` (a rollback-journal database, where
 *    readers block an exclusive writer; the data file's WAL mode would not).
 *  - PostgreSQL: a session advisory lock keyed by the schema, shared by every instance of a
 *    cluster, exclusive for a restore.
 */
export interface HolderLock {
  release(): Promise<void>
}

/** The two keys of the advisory lock: a constant ("WEFR") and the schema's hash. */
const ADVISORY_CLASS = 0x57_45_46_52

export function sqliteHoldersFile(dbFile: string): string {
  return `${dbFile}-holders`
}

function openHolders(dbFile: string, busyTimeoutMs: number): Database.Database {
  const db = new Database(sqliteHoldersFile(dbFile))
  db.pragma(`busy_timeout = ${Math.floor(busyTimeoutMs)}`)
  return db
}

const isBusy = (e: unknown) => e instanceof Database.SqliteError && /^SQLITE_(BUSY|LOCKED)/.test(e.code)

/** A shared hold on a SQLite data file, waiting up to `busyTimeoutMs` for a running restore. */
export function holdSqlite(dbFile: string, busyTimeoutMs: number): HolderLock {
  const db = openHolders(dbFile, busyTimeoutMs)
  try {
    db.exec('BEGIN')
    db.prepare('SELECT count(*) FROM sqlite_master').get()
  } catch (error) {
    db.close()
    if (isBusy(error)) throw new WeftError('unavailable', `${dbFile} is being restored (weft restore holds it); start again when it is done.`)
    throw error
  }
  return {
    release: () => {
      if (db.open) db.close()
      return Promise.resolve()
    },
  }
}

/** The exclusive hold of a restore; null when something holds the database. */
export function holdSqliteExclusive(dbFile: string): HolderLock | null {
  const db = openHolders(dbFile, 0)
  try {
    db.exec('BEGIN EXCLUSIVE')
  } catch (error) {
    db.close()
    if (isBusy(error)) return null
    throw error
  }
  return {
    release: () => {
      if (db.open) db.close()
      return Promise.resolve()
    },
  }
}

/** [PROD3] `pg` loads with the first PostgreSQL hold: a SQLite server never loads it. */
async function clientFor(connectionString: string, schema: string | undefined): Promise<pg.Client> {
  const { default: Pg } = await import('pg')
  const client = new Pg.Client({ connectionString, ...(schema ? { options: `-c search_path=${schema}` } : {}) })
  client.on('error', () => undefined)
  return client
}

const LOCK_KEY = `SELECT ${ADVISORY_CLASS}::int AS a, hashtext(current_schema())::int AS b`

/** A shared hold on a PostgreSQL schema (its own connection, for the storage's lifetime). */
export async function holdPostgres(connectionString: string, schema: string | undefined, waitMs: number): Promise<HolderLock> {
  const client = await clientFor(connectionString, schema)
  await client.connect()
  try {
    const key = (await client.query<{ a: number; b: number }>(LOCK_KEY)).rows[0]!
    const deadline = Date.now() + waitMs
    for (;;) {
      const got = (await client.query<{ ok: boolean }>('SELECT pg_try_advisory_lock_shared($1, $2) AS ok', [key.a, key.b])).rows[0]!.ok
      if (got) break
      if (Date.now() >= deadline) throw new WeftError('unavailable', 'The database is being restored (weft restore holds it); start again when it is done.')
      await new Promise((r) => setTimeout(r, 100))
    }
  } catch (error) {
    await client.end().catch(() => undefined)
    throw error
  }
  return { release: () => client.end().catch(() => undefined) }
}

/** The exclusive hold of a restore on its own connection; null when something holds the schema. */
export async function holdPostgresExclusive(connectionString: string, schema: string | undefined): Promise<HolderLock | null> {
  const client = await clientFor(connectionString, schema)
  await client.connect()
  const key = (await client.query<{ a: number; b: number }>(LOCK_KEY)).rows[0]!
  const got = (await client.query<{ ok: boolean }>('SELECT pg_try_advisory_lock($1, $2) AS ok', [key.a, key.b])).rows[0]!.ok
  if (!got) {
    await client.end().catch(() => undefined)
    return null
  }
  return { release: () => client.end().catch(() => undefined) }
}
