import { existsSync } from 'node:fs'
import { join } from 'node:path'
import Database from 'better-sqlite3'
import pg from 'pg'
import { Flight, pgSql } from '../storage/index.js'
import type { DbRow, Dialect } from './tables.js'

/** Where a backup reads from or a restore writes to: the server's own settings. */
export type Location = { dataDir: string } | { databaseUrl: string; schema?: string }

/** One connection's statements, `?` placeholders in both dialects. */
export interface Exec {
  readonly dialect: Dialect
  all(sql: string, params?: readonly unknown[]): Promise<DbRow[]>
  run(sql: string, params?: readonly unknown[]): Promise<number>
  /**
   * A write whose answer nothing waits for: on PostgreSQL it goes out pipelined (the server runs
   * it in order while the file's next records are read and encoded), at most SEND_AHEAD at once;
   * on SQLite it runs now. Statements after it (reads included) see it. `settle` waits for all.
   */
  send(sql: string, params?: readonly unknown[]): Promise<void>
  /** Waits for every `send`; throws the first that failed (the statements after it only echo the abort). */
  settle(): Promise<void>
  close(): Promise<void>
}

/** Pipelined writes in flight at once (each a multi-row INSERT of up to 200 rows). */
const SEND_AHEAD = 8

export function sqliteFile(dataDir: string): string {
  return join(dataDir, 'weft.db')
}

export function describeLocation(at: Location): string {
  return 'dataDir' in at ? sqliteFile(at.dataDir) : `PostgreSQL${at.schema ? ` (schema ${at.schema})` : ''}`
}

/** A plain connection to the SQLite file: no schema changes, so it can read beside a running server. */
export function sqliteExec(file: string, opts: { mustExist: boolean }): Exec {
  if (opts.mustExist && !existsSync(file)) throw new Error(`No database at ${file} (DATA_DIR).`)
  const db = new Database(file)
  db.pragma('busy_timeout = 10000')
  const cache = new Map<string, Database.Statement>()
  const prepare = (sql: string) => {
    let s = cache.get(sql)
    if (!s) {
      s = db.prepare(sql)
      if (cache.size > 200) cache.clear()
      cache.set(sql, s)
    }
    return s
  }
  return {
    dialect: 'sqlite',
    all: (sql, params = []) => Promise.resolve(prepare(sql).all(...params) as DbRow[]),
    run: (sql, params = []) => {
      const s = prepare(sql)
      return Promise.resolve(s.reader ? (s.all(...params), 0) : s.run(...params).changes)
    },
    send: (sql, params = []) => {
      prepare(sql).run(...params)
      return Promise.resolve()
    },
    settle: () => Promise.resolve(),
    close: () => {
      if (db.open) db.close()
      return Promise.resolve()
    },
  }
}

export async function postgresExec(url: string, schema: string | undefined): Promise<Exec> {
  const client = new pg.Client({ connectionString: url, ...(schema ? { options: `-c search_path=${schema}` } : {}), pipeline: true })
  client.on('error', () => undefined)
  await client.connect()
  const flight = new Flight(client)
  // A statement that fails after a failed `send` only echoes it: the send's error is the one told.
  const cause = async <T>(p: Promise<T>): Promise<T> => {
    try {
      return await p
    } catch (error) {
      throw (await flight.failure()) ?? error
    }
  }
  return {
    dialect: 'postgres',
    all: async (sql, params = []) => (await cause(client.query(pgSql(sql), params as unknown[]))).rows as DbRow[],
    run: async (sql, params = []) => (await cause(client.query(pgSql(sql), params as unknown[]))).rowCount ?? 0,
    send: async (sql, params = []) => {
      flight.sendOnce(pgSql(sql), params as unknown[])
      if (flight.inFlight >= SEND_AHEAD) await flight.drainTo(SEND_AHEAD / 2)
    },
    settle: () => flight.settle(),
    close: () => client.end().catch(() => undefined),
  }
}

/** The tables that exist (an older database may lack some: they back up as empty). */
export async function existingTables(x: Exec): Promise<Set<string>> {
  const rows =
    x.dialect === 'sqlite'
      ? await x.all("SELECT name FROM sqlite_master WHERE type = 'table'")
      : await x.all('SELECT table_name AS name FROM information_schema.tables WHERE table_schema = current_schema()')
  return new Set(rows.map((r) => String(r.name)))
}
