import { resolve } from 'node:path'
import { DatabaseInUse, InvalidBackup, describeLocation, restoreBackup } from '../backup/index.js'
import { EXIT, locationFromEnv, progressPrinter } from './location.js'

/** `weft restore <file>` ([BAK3]–[BAK6]): verified, all or nothing, with the servers stopped; bumps the history incarnation. */
export const usage = 'weft restore <file>       a verified restore that bumps the history incarnation'

export async function run(args: readonly string[]): Promise<number> {
  if (args.length !== 1 || args[0]!.startsWith('-')) {
    process.stderr.write(`usage: ${usage}\n  into DATA_DIR (SQLite) or DATABASE_URL (PostgreSQL); stop every server on it first\n`)
    return args[0] === '--help' || args[0] === '-h' ? EXIT.ok : EXIT.usage
  }
  const file = resolve(args[0]!)
  const to = locationFromEnv()
  const started = Date.now()
  try {
    const r = await restoreBackup(file, to, progressPrinter('restore'))
    process.stderr.write(
      `restore: restored ${file} into ${describeLocation(to)} (${r.mode}): ${r.nodes} nodes, ${r.forwarded} written forward, ${r.deleted} deleted; ` +
        `incarnation ${r.incarnation}, head version ${r.headVersion}, in ${((Date.now() - started) / 1000).toFixed(1)} s\n`,
    )
    process.stdout.write(`${JSON.stringify({ file, mode: r.mode, nodes: r.nodes, forwarded: r.forwarded, deleted: r.deleted, incarnation: r.incarnation, databaseId: r.databaseId, headVersion: r.headVersion })}\n`)
    return EXIT.ok
  } catch (error) {
    // [OPS11] A refusal prints its stable code and message, never a stack.
    if (error instanceof InvalidBackup) {
      process.stderr.write(`restore: refused, nothing changed: ${error.code}: ${error.message} Restore another backup file.\n`)
      return EXIT.invalidBackup
    }
    if (error instanceof DatabaseInUse) {
      process.stderr.write(`restore: refused, nothing changed: ${error.code}: ${error.message}\n`)
      return EXIT.databaseInUse
    }
    process.stderr.write(`restore: failed, nothing changed (one transaction): ${(error as Error).message}\n`)
    return EXIT.failed
  }
}
