/**
 * Fresh server RSS (issue 20: goal < 100 MB). A server child on an empty data directory, read
 * from /proc/{pid}/status (VmRSS: the whole process, its SQLite writer and script worker threads
 * included) once `GET /healthz` answers ok, and again after SETTLE_MS (spare script workers load
 * their WASM in the background). Four kinds side by side, in alternating rounds, median of ROUNDS:
 *  - `compiled*`: `node dist-server/main.mjs` (the production build, built here first);
 *  - `tsx*`: `node --import tsx sync-server/main.ts` (`npm run serve`);
 *  - `...NoSpares*`: the compiled server with SCRIPT_SPARE_WORKERS=0 (what the warm script
 *    workers cost).
 * Run alone: `npx tsx test/bench/rss-bench.ts` prints JSON.
 */
import { execFileSync } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'
import { REPO_ROOT, makeTempDir, removeDir, spawnServer, waitFor } from '../helpers/index.js'
import { percentile, round } from './stats.js'
import type { Goal } from './run.js'

export const GOALS: Record<string, Goal> = {
  compiledSettledMb: { op: '<', value: 100, unit: 'MB' },
}

const ROUNDS = 3
const SETTLE_MS = 3_000

function rssMb(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))
  return m ? Number(m[1]) / 1024 : NaN
}

async function measure(entry: string | undefined, env: Record<string, string> = {}): Promise<{ ready: number; settled: number }> {
  const dir = await makeTempDir('weft-rss-')
  const server = await spawnServer({ dataDir: dir, env: { LOG_LEVEL: 'info', ...env }, ...(entry ? { compiledEntry: entry } : {}), startTimeoutMs: 60_000 })
  try {
    await waitFor(async () => (await fetch(`${server.url}/healthz`).catch(() => null))?.ok === true, { timeoutMs: 30_000, description: '/healthz ok' })
    const ready = rssMb(server.pid)
    await new Promise((r) => setTimeout(r, SETTLE_MS))
    return { ready, settled: rssMb(server.pid) }
  } finally {
    await server.kill('SIGKILL')
    await removeDir(dir)
  }
}

export async function benchRss(): Promise<Record<string, number>> {
  const outdir = join(REPO_ROOT, '.tmp', `rss-bench-${process.pid}`)
  execFileSync(process.execPath, ['sync-server/build.mjs', '--outdir', outdir], { cwd: REPO_ROOT, stdio: 'inherit' })
  const entry = join(outdir, 'main.mjs')
  const kinds = {
    compiled: () => measure(entry),
    tsx: () => measure(undefined),
    compiledNoSpares: () => measure(entry, { SCRIPT_SPARE_WORKERS: '0' }),
  }
  const seen: Record<string, { ready: number[]; settled: number[] }> = {}
  try {
    for (let r = 0; r < ROUNDS; r++) {
      for (const [name, run] of Object.entries(kinds)) {
        const m = await run()
        const s = (seen[name] ??= { ready: [], settled: [] })
        s.ready.push(m.ready)
        s.settled.push(m.settled)
      }
    }
  } finally {
    await removeDir(outdir)
  }
  const out: Record<string, number> = {}
  for (const [name, s] of Object.entries(seen)) {
    out[`${name}ReadyMb`] = round(percentile(s.ready, 50), 1)
    out[`${name}SettledMb`] = round(percentile(s.settled, 50), 1)
  }
  out.compiledToTsx = round(out.compiledSettledMb! / out.tsxSettledMb!, 2)
  return out
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  console.log(JSON.stringify(await benchRss(), null, 2))
}
