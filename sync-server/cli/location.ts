import { configFromEnv } from '../config.js'
import type { Location } from '../backup/index.js'

/** The storage the server would open with this environment (DATA_DIR / DATABASE_URL). */
export function locationFromEnv(env: NodeJS.ProcessEnv = process.env): Location {
  const config = configFromEnv(env)
  return config.databaseUrl ? { databaseUrl: config.databaseUrl } : { dataDir: config.dataDir }
}

/** A progress line on stderr at most every `everyMs` (and always the last one of a phase). */
export function progressPrinter(command: string, everyMs = 500): (what: string, done: number, total: number) => void {
  let last = 0
  return (what, done, total) => {
    const now = Date.now()
    if (now - last < everyMs && done !== total) return
    last = now
    process.stderr.write(`${command}: ${what} ${done}${total >= 0 ? `/${total}` : ''}\n`)
  }
}

/** Exit codes of `weft backup` and `weft restore`. */
export const EXIT = { ok: 0, failed: 1, usage: 2, invalidBackup: 3, databaseInUse: 4 } as const
