import { mkdir } from 'node:fs/promises'
import { join } from 'node:path'
import type { Logger } from 'pino'
import type { PostgresStorage, PostgresStorageOptions } from './postgres-adapter.js'
import { openSqliteStorage } from './sqlite-adapter.js'
import type { StorageAdapter } from './types.js'

export interface OpenStorageOptions {
  /** Where the SQLite file `weft.db` lives; created if missing. */
  dataDir: string
  /** `postgres://...`: use PostgreSQL instead of SQLite (DESIGN.md, `DATABASE_URL`). */
  databaseUrl?: string
  log?: Logger
}

export async function openStorage(opts: OpenStorageOptions): Promise<StorageAdapter> {
  if (opts.databaseUrl) {
    const storage = await openPostgresStorage({ connectionString: opts.databaseUrl, log: opts.log })
    opts.log?.info('storage: PostgreSQL')
    return storage
  }
  await mkdir(opts.dataDir, { recursive: true })
  const file = join(opts.dataDir, 'weft.db')
  const storage = openSqliteStorage({ file, log: opts.log })
  opts.log?.info({ file }, 'storage: SQLite')
  return storage
}

/**
 * [PROD3] The PostgreSQL storage and `pg` load when one is first opened (DATABASE_URL, a restore
 * into PostgreSQL): the embedded default never has them in memory.
 */
export async function openPostgresStorage(opts: PostgresStorageOptions): Promise<PostgresStorage> {
  const postgres = await import('./postgres-adapter.js')
  return postgres.openPostgresStorage(opts)
}
