import { resolve } from 'node:path'
import { describeLocation, takeBackup } from '../backup/index.js'
import { EXIT, locationFromEnv, progressPrinter } from './location.js'

/** `weft backup <file>` ([BAK1]): a consistent snapshot of the storage, taken while the server runs. */
export const usage = 'weft backup <file>        a consistent snapshot of the storage, taken while the server runs'

export async function run(args: readonly string[]): Promise<number> {
  if (args.length !== 1 || args[0]!.startsWith('-')) {
    process.stderr.write(`usage: ${usage}\n  storage from DATA_DIR (SQLite) or DATABASE_URL (PostgreSQL), as the server reads them\n`)
    return args[0] === '--help' || args[0] === '-h' ? EXIT.ok : EXIT.usage
  }
  const file = resolve(args[0]!)
  const from = locationFromEnv()
  const started = Date.now()
  try {
    const { header } = await takeBackup(from, file, progressPrinter('backup'))
    const mb = header.bodyBytes / 1e6
    process.stderr.write(
      `backup: wrote ${file} from ${describeLocation(from)}: ${header.counts.nodes ?? 0} nodes, ${header.counts.changes ?? 0} changes, head version ${header.headVersion}, ` +
        `incarnation ${header.incarnation}, ${mb.toFixed(1)} MB in ${((Date.now() - started) / 1000).toFixed(1)} s\n`,
    )
    process.stdout.write(`${JSON.stringify({ file, ...header })}\n`)
    return EXIT.ok
  } catch (error) {
    process.stderr.write(`backup: ${(error as Error).message}\n`)
    return EXIT.failed
  }
}
