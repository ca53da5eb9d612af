/**
 * [STO5] What a long log costs the disk while it grows slowly: a run logs 60,000 lines at once
 * (a row of ~3 MB; unpaced, [ACT21], as the setup it is), then a line every 20 ms for 20 s. Figure: bytes the process wrote to disk
 * (`/proc/self/io` write_bytes: the SQLite writer thread is in this process) per slow line. The
 * row's coalesced rewrite costs its whole JSON; rewritten every second, that is ~3 MB a second
 * for 50 lines, however few they are (contentFlushDelay: a big row waits in proportion).
 *
 * Run alone: `npx tsx test/bench/row-flush-bench.ts` prints JSON.
 */
import { mkdtemp, readFile, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'
import { SYSTEM, type NodePath } from '../../shared/index.js'
import { startServer } from '../../sync-server/server.js'
import { createActivitiesEngine } from '../../sync-server/engines/activities/index.js'
import { api, createSpace, nodeUrlPath, signup, waitFor } from '../helpers/index.js'

async function writeBytes(): Promise<number> {
  const io = await readFile('/proc/self/io', 'utf8')
  return Number(/write_bytes: (\d+)/.exec(io)?.[1] ?? Number.NaN)
}

export async function benchRowFlush(): Promise<Record<string, number>> {
  const dir = await mkdtemp(join(tmpdir(), 'weft-row-flush-'))
  const server = await startServer({ port: 0, host: '127.0.0.1', dataDir: dir, logLevel: 'silent', engines: [createActivitiesEngine({ spares: 1, maxConcurrent: 4, seedTemplates: false, logLinesPerSecond: 0 })] })
  try {
    const user = await signup(server.url)
    const space = await createSpace(server.url, user.token)
    const http = api(server.url, user.token)
    const SLOW_MS = 20_000
    const source = `for (let i = 0; i < 60000; i++) Log.info("early line " + i + " of the long log")
Progress(0.5)
const until = Date.now() + ${SLOW_MS}
let n = 0
while (Date.now() < until) { Log.info("slow line " + n++); await sleep(20) }
return n`
    await http.putNode(`${space}/long`, 'Code', { Language: 'javascript', Source: source, IsExecutable: true })
    const run = (await http.post<{ path: string }>(`/api/nodes/${nodeUrlPath(`${space}/long`)}/run`, {})).body.path as NodePath
    const content = async () => (await server.nodes.get(SYSTEM, run))?.content
    await waitFor(async () => { const c = await content(); if (c?.Status === "Failed") throw new Error(JSON.stringify(c.Error)); return (c?.Progress as { Fraction?: number } | undefined)?.Fraction === 0.5 }, { timeoutMs: 60_000, intervalMs: 20 })
    const before = await writeBytes()
    await waitFor(async () => (await content())?.Status === 'Succeeded', { timeoutMs: 120_000, intervalMs: 100 })
    const after = await writeBytes()
    const slow = Number((await content())?.ReturnValue ?? 0)
    return { rowFlushSlowLines: slow, rowFlushDiskBytesPerSlowLine: Math.round((after - before) / Math.max(1, slow)), rowFlushDiskMBDuringSlowPhase: Number(((after - before) / 1e6).toFixed(1)) }
  } finally {
    await server.close()
    await rm(dir, { recursive: true, force: true })
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  console.log(JSON.stringify(await benchRowFlush(), null, 2))
}
