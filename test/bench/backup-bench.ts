/**
 * `weft backup` / `weft restore` of BACKUP_BENCH_NODES (default 100,000) Document nodes, each a
 * real Yjs log and a ~200-byte body ([BAK1] [BAK3], issue 20):
 *
 *  1. seeded into SQLite through the storage's commits (not timed);
 *  2. `sqliteBackup*`: backup of that SQLite file; `sqliteRestore*`: restore into a fresh DATA_DIR;
 *  3. `pgRestore*`: the same file restored into a fresh PostgreSQL database (cross-backend, which
 *     is also how the PostgreSQL set is made); `pgBackup*`: backup of that database;
 *  4. `pgDump*`: `pg_dump` of the same database, custom format (-Fc, compressed, the usual
 *     choice) and plain SQL (-Fp), for scale;
 *     `pgRestoreOfDump*`: `pg_restore --single-transaction` of the custom dump into a fresh
 *     database, beside `pgRestore*` (`weft restore` into a fresh database);
 *  5. `pgForwardRestore*`: the PostgreSQL backup restored over its own database (forward mode:
 *     every node compared with the target's, none differs).
 *
 * MB/s = the backup file's body bytes (or pg_dump's output) over the wall time. Run alone:
 * `npx tsx test/bench/backup-bench.ts` prints JSON.
 */
import { execFile } from 'node:child_process'
import { stat } from 'node:fs/promises'
import { join } from 'node:path'
import { performance } from 'node:perf_hooks'
import { pathToFileURL } from 'node:url'
import { promisify } from 'node:util'
import { restoreBackup, takeBackup } from '../../sync-server/backup/index.js'
import { openSqliteStorage } from '../../sync-server/storage/index.js'
import { seedNodes } from '../helpers/backup-fixtures.js'
import { freshDatabase, makeTempDir, removeDir } from '../helpers/index.js'
import { round } from './stats.js'

const NODES = Number(process.env.BACKUP_BENCH_NODES ?? 100_000)
const run = promisify(execFile)

async function timed<T>(fn: () => Promise<T>): Promise<{ ms: number; value: T }> {
  const t0 = performance.now()
  const value = await fn()
  return { ms: performance.now() - t0, value }
}

const mbps = (bytes: number, ms: number) => round(bytes / 1e6 / (ms / 1000), 1)

export async function benchBackup(): Promise<Record<string, number | string>> {
  const dir = await makeTempDir('weft-backup-bench-')
  const db = await freshDatabase('weft_backup_bench_')
  try {
    const storage = openSqliteStorage({ file: join(dir, 'weft.db') })
    await seedNodes(storage, 'Bench', NODES)
    await storage.close()
    const sqliteFile = join(dir, 'sqlite.weftbak')
    const sb = await timed(() => takeBackup({ dataDir: dir }, sqliteFile))
    const bytes = sb.value.header.bodyBytes
    const sr = await timed(() => restoreBackup(sqliteFile, { dataDir: join(dir, 'copy') }))
    const pr = await timed(() => restoreBackup(sqliteFile, { databaseUrl: db.url }))
    const pgFile = join(dir, 'pg.weftbak')
    const pb = await timed(() => takeBackup({ databaseUrl: db.url }, pgFile))
    const pgBytes = pb.value.header.bodyBytes
    const dumpC = join(dir, 'pg.dump')
    const dumpP = join(dir, 'pg.sql')
    const dc = await timed(() => run('pg_dump', ['-Fc', '-f', dumpC, db.url]))
    const dp = await timed(() => run('pg_dump', ['-Fp', '-f', dumpP, db.url]))
    const dumpCBytes = (await stat(dumpC)).size
    const dumpPBytes = (await stat(dumpP)).size
    // pg_restore of that dump into a fresh database, one transaction (as `weft restore` is).
    const other = await freshDatabase('weft_backup_bench_')
    const pgr = await timed(() => run('pg_restore', ['--single-transaction', '-d', other.url, dumpC])).finally(() => other.drop().catch(() => undefined))
    const fwd = await timed(() => restoreBackup(pgFile, { databaseUrl: db.url }))
    return {
      nodes: NODES,
      fileMB: round(bytes / 1e6, 1),
      sqliteBackupMs: round(sb.ms, 0),
      sqliteBackupMBps: mbps(bytes, sb.ms),
      sqliteRestoreMs: round(sr.ms, 0),
      sqliteRestoreMBps: mbps(bytes, sr.ms),
      pgRestoreMs: round(pr.ms, 0),
      pgRestoreMBps: mbps(bytes, pr.ms),
      pgBackupMs: round(pb.ms, 0),
      pgBackupMBps: mbps(pgBytes, pb.ms),
      pgDumpCustomMs: round(dc.ms, 0),
      pgDumpCustomMB: round(dumpCBytes / 1e6, 1),
      pgDumpCustomMBps: mbps(dumpCBytes, dc.ms),
      pgDumpPlainMs: round(dp.ms, 0),
      pgDumpPlainMB: round(dumpPBytes / 1e6, 1),
      pgDumpPlainMBps: mbps(dumpPBytes, dp.ms),
      pgBackupToDumpCustomTime: round(pb.ms / dc.ms),
      pgRestoreOfDumpMs: round(pgr.ms, 0),
      pgRestoreToPgRestoreTime: round(pr.ms / pgr.ms),
      pgForwardRestoreMs: round(fwd.ms, 0),
      pgForwardRestoreForwarded: fwd.value.forwarded,
    }
  } finally {
    await db.drop().catch(() => undefined)
    await removeDir(dir)
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  benchBackup().then(
    (f) => console.log(JSON.stringify(f, null, 2)),
    (err: unknown) => {
      console.error(err)
      process.exit(1)
    },
  )
}
