/**
 * Threads at scale (issue 18), two parts (`THREADS_SCALE_PARTS=stream,load`, default both):
 *
 *  - stream: one round streams 10,000 tokens (6 characters each) into one response cell; a stock
 *    y-websocket watcher (a second user) is joined to the cell. Figures: bytes the watcher is sent
 *    per token and bytes the data directory grows per token, each over the first 1,000 tokens and
 *    over the last 1,000 (stored: tokens 1,000–2,000, past the WAL's growth; the slope is last /
 *    first: 1 = constant per token), and the watcher's latency from
 *    the agent's emit to the token in its Y.Text, p50 / p99. The directory's growth over a stream
 *    this fast is SQLite's page allocation (pages are taken in steps and reused), so the bytes the
 *    database keeps for the cell are counted too: its Yjs snapshot and update log, read from the
 *    file through a second connection once the writes of the tokens so far have landed (the agent
 *    waits at each mark), over tokens 1,000–2,000 and the last 1,000.
 *  - load: 1,000 threads, each with a round in flight at once: the built-in agent's `/sleep`
 *    holds every round (a round clock the bench releases) until all 1,000 are claimed and
 *    Executing; then all are released together and stream their answers a word at a time and
 *    end. Figures: the event-loop delay p99 while the 1,000 posts are made (50 at a time, the
 *    HTTP client in this process too), while the 1,000 rounds are held (one quiet second), and
 *    from the release to the last round's end (the goal); rounds per second over that stretch.
 *
 * Run alone: `npx tsx test/bench/threads-scale-bench.ts` prints JSON.
 */
import Database from 'better-sqlite3'
import { mkdtemp, readdir, rm, stat } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { monitorEventLoopDelay, performance } from 'node:perf_hooks'
import { pathToFileURL } from 'node:url'
import type * as Y from 'yjs'
import { startServer } from '../../sync-server/server.js'
import { createThreadsEngine, type Agent, type Clock, type ThreadsEngine } from '../../sync-server/engines/threads/index.js'
import { api, createSpace, grantRole, nodeUrlPath, signup, stockProvider, waitFor } from '../helpers/index.js'
import { percentile, round } from './stats.js'
import type { Goal } from './run.js'

export const GOALS: Record<string, Goal> = {
  streamWatcherP99Ms: { op: '<', value: 50, unit: 'ms' },
  streamSentBytesPerTokenSlope: { op: '<=', value: 1.5, unit: '×' },
  streamKeptYjsBytesPerTokenSlope: { op: '<=', value: 1.5, unit: '×' },
  loadEventLoopP99Ms: { op: '<', value: 50, unit: 'ms' },
}

const TOKENS = Number(process.env.THREADS_STREAM_TOKENS ?? 10_000)
const THREADS = Number(process.env.THREADS_LOAD_THREADS ?? 1_000)

async function dirBytes(dir: string): Promise<number> {
  let total = 0
  for (const f of await readdir(dir, { withFileTypes: true })) {
    if (f.isFile()) total += (await stat(join(dir, f.name))).size
    else if (f.isDirectory()) total += await dirBytes(join(dir, f.name))
  }
  return total
}

const token = (i: number) => `t${i.toString(36).padStart(4, '0')} `

/** The bytes the database keeps for a node's Yjs state (snapshot and update log), read-only. */
function yjsBytes(dir: string, path: string): number {
  const db = new Database(join(dir, 'weft.db'), { readonly: true, fileMustExist: true })
  try {
    const row = db
      .prepare(`SELECT (SELECT ifnull(length(snapshot), 0) FROM nodes WHERE path = ?) + (SELECT ifnull(sum(length(data)), 0) FROM node_updates WHERE path = ?) AS b`)
      .get(path, path) as { b: number | null }
    return row.b ?? 0
  } finally {
    db.close()
  }
}

/** yjsBytes once it holds still (the writes of what was emitted have landed): two equal reads 30 ms apart. */
async function settledYjsBytes(dir: string, path: string): Promise<number> {
  let last = yjsBytes(dir, path)
  for (let i = 0; i < 200; i++) {
    await new Promise((r) => setTimeout(r, 30))
    const now = yjsBytes(dir, path)
    if (now === last && now > 0) return now
    last = now
  }
  return last
}

async function streamPart(): Promise<Record<string, number>> {
  const dir = await mkdtemp(join(tmpdir(), 'weft-thr-stream-'))
  const emitted: number[] = []
  let go: () => void = () => undefined
  const started = new Promise<void>((r) => (go = r))
  const marks: Record<number, number> = {}
  const yjsMarks: Record<number, number> = {}
  let cellPath = ''
  let paused = 0
  const agent: Agent = async (io) => {
    await started
    marks[0] = await dirBytes(dir)
    for (let i = 0; i < TOKENS; i++) {
      emitted[i] = performance.now()
      await io.emit(token(i))
      if (i + 1 === 1_000 || i + 1 === 2_000 || i + 1 === TOKENS - 1_000 || i + 1 === TOKENS) {
        marks[i + 1] = await dirBytes(dir)
        const t = performance.now()
        yjsMarks[i + 1] = await settledYjsBytes(dir, cellPath)
        paused += performance.now() - t
      }
    }
    return { disposition: 'Completed' }
  }
  const server = await startServer({ port: 0, host: '127.0.0.1', logLevel: 'silent', dataDir: dir, engines: [createThreadsEngine({ agent, llm: null })] })
  try {
    const user = await signup(server.url)
    const watcherUser = await signup(server.url)
    const space = await createSpace(server.url, user.token)
    await grantRole(server.url, user.token, space, watcherUser.userId, 'Viewer')
    const http = api(server.url, user.token)
    const thread = `${space}/stream`
    await http.putNode(thread, 'Thread', { Agent: { Kind: 'builtin' } })
    await http.post(`/api/nodes/${nodeUrlPath(thread)}/messages`, { id: 'm', text: 'stream' })
    const cell = `${thread}/_r.m`
    cellPath = cell
    await waitFor(async () => (await http.getNode(cell)).status === 200, 10_000)
    const watcher = stockProvider(server.url, cell, watcherUser.token)
    await watcher.synced()
    const text = await waitFor(() => watcher.content.get('Text') as Y.Text | undefined, 10_000)
    const seenAt: number[] = []
    let seen = 0
    text.observe(() => {
      const now = performance.now()
      const n = Math.floor(text.length / 6)
      for (; seen < n; seen++) seenAt[seen] = now
    })
    let bytes = 0
    const sentAt: Record<number, number> = {}
    const ws = watcher.provider.ws as unknown as { addEventListener(t: 'message', f: (e: { data: ArrayBuffer }) => void): void }
    ws.addEventListener('message', (e) => {
      bytes += e.data.byteLength
      for (const m of [1_000, TOKENS - 1_000, TOKENS]) if (sentAt[m] === undefined && seen >= m) sentAt[m] = bytes
    })
    const t0 = performance.now()
    go()
    await waitFor(() => seen >= TOKENS, { timeoutMs: 600_000, intervalMs: 20 })
    const secs = (performance.now() - t0 - paused) / 1000
    await waitFor(async () => (await http.getNode(thread)).body.content.Status === 'Idle', 30_000)
    watcher.destroy()
    const lat = seenAt.map((t, i) => t - emitted[i]!)
    const firstSent = sentAt[1_000]! / 1_000
    const lastSent = (sentAt[TOKENS]! - sentAt[TOKENS - 1_000]!) / 1_000
    // Stored: tokens 1,000–2,000 against the last 1,000 (the first 1,000 also grow SQLite's WAL
    // file to its working size, which later writes reuse: not a per-token cost).
    const firstStored = ((marks[2_000] ?? 0) - (marks[1_000] ?? 0)) / 1_000
    const lastStored = ((marks[TOKENS] ?? 0) - (marks[TOKENS - 1_000] ?? 0)) / 1_000
    const firstYjs = ((yjsMarks[2_000] ?? 0) - (yjsMarks[1_000] ?? 0)) / 1_000
    const lastYjs = ((yjsMarks[TOKENS] ?? 0) - (yjsMarks[TOKENS - 1_000] ?? 0)) / 1_000
    return {
      streamTokens: TOKENS,
      streamTokensPerSec: Math.round(TOKENS / secs),
      streamWatcherP50Ms: round(percentile(lat, 50)),
      streamWatcherP99Ms: round(percentile(lat, 99)),
      streamSentBytesPerTokenFirst1k: Number(firstSent.toFixed(1)),
      streamSentBytesPerTokenLast1k: Number(lastSent.toFixed(1)),
      streamSentBytesPerTokenSlope: Number((lastSent / firstSent).toFixed(2)),
      streamStoredBytesPerTokenSecond1k: Number(firstStored.toFixed(1)),
      streamStoredBytesPerTokenLast1k: Number(lastStored.toFixed(1)),
      streamStoredBytesPerTokenSlope: Number((lastStored / Math.max(1, firstStored)).toFixed(2)),
      streamDataDirBytesAtEnd: marks[TOKENS] ?? 0,
      streamKeptYjsBytesPerTokenSecond1k: Number(firstYjs.toFixed(1)),
      streamKeptYjsBytesPerTokenLast1k: Number(lastYjs.toFixed(1)),
      streamKeptYjsBytesPerTokenSlope: Number((lastYjs / Math.max(1, firstYjs)).toFixed(2)),
      streamKeptYjsBytesAtEnd: yjsMarks[TOKENS] ?? 0,
    }
  } finally {
    await server.close()
    await rm(dir, { recursive: true, force: true })
  }
}

/** A round clock whose sleeps end together when the bench says so: every round held in flight at once. */
function heldRounds(): { clock: Clock; release(): void; held(): number } {
  const waiting = new Set<() => void>()
  return {
    clock: {
      now: () => new Date(),
      sleep: (_ms, signal) =>
        new Promise<void>((resolve, reject) => {
          if (signal.aborted) return reject(signal.reason as Error)
          const done = () => {
            waiting.delete(done)
            resolve()
          }
          waiting.add(done)
          signal.addEventListener('abort', () => {
            waiting.delete(done)
            reject(signal.reason as Error)
          }, { once: true })
        }),
    },
    release: () => {
      for (const d of [...waiting]) d()
    },
    held: () => waiting.size,
  }
}

async function loadPart(): Promise<Record<string, number>> {
  const dir = await mkdtemp(join(tmpdir(), 'weft-thr-load-'))
  const rounds = heldRounds()
  const server = await startServer({ port: 0, host: '127.0.0.1', logLevel: 'silent', dataDir: dir, engines: [createThreadsEngine({ roundClock: rounds.clock, llm: null })] })
  try {
    const user = await signup(server.url)
    const space = await createSpace(server.url, user.token)
    const http = api(server.url, user.token)
    const threads = Array.from({ length: THREADS }, (_, i) => `${space}/load${i}`)
    for (let i = 0; i < threads.length; i += 50) {
      await Promise.all(threads.slice(i, i + 50).map((t) => http.putNode(t, 'Thread', { Agent: { Kind: 'builtin' } })))
    }
    const engine = (server.engines.find((e) => e.name === 'threads') as ThreadsEngine).engine
    const h = monitorEventLoopDelay({ resolution: 1 })
    h.enable()
    const t0 = performance.now()
    for (let i = 0; i < threads.length; i += 50) {
      await Promise.all(threads.slice(i, i + 50).map(async (t) => {
        const res = await http.post(`/api/nodes/${nodeUrlPath(t)}/messages`, { id: 'm', text: '/sleep 1000' })
        if (res.status !== 201) throw new Error(`post answered ${res.status}`)
      }))
    }
    const postedMs = performance.now() - t0
    // Every round claimed and held (its /sleep waits for the release): THREADS rounds in flight at once.
    await waitFor(() => rounds.held() === THREADS, { timeoutMs: 600_000, intervalMs: 50 })
    const posting = { p99: h.percentile(99) / 1e6 }
    h.reset()
    // Held: what 1,000 live rounds cost while they wait (watchers, timers): a quiet second.
    await new Promise((r) => setTimeout(r, 1_000))
    const holding = { p99: h.percentile(99) / 1e6 }
    h.reset()
    // Released together: every round streams its answer and ends (asked of the engine: no HTTP
    // polling in the measured process), then each is checked once.
    const t1 = performance.now()
    rounds.release()
    await waitFor(() => engine.liveRounds().length === 0, { timeoutMs: 600_000, intervalMs: 20 })
    const releasedSecs = (performance.now() - t1) / 1000
    const inFlight = { p99: h.percentile(99) / 1e6, max: h.max / 1e6 }
    h.disable()
    for (let i = 0; i < threads.length; i += 100) {
      const rows = await Promise.all(threads.slice(i, i + 100).map((t) => http.getNode(t)))
      const open = rows.filter((r) => r.body.content.Disposition !== 'Completed' || r.body.content.Status !== 'Idle')
      if (open.length > 0) throw new Error(`${open.length} threads did not complete their round`)
    }
    return {
      loadThreads: THREADS,
      loadPostAllMs: Math.round(postedMs),
      loadRoundsPerSec: Number((THREADS / releasedSecs).toFixed(1)),
      loadEventLoopP99WhilePostingMs: Number(posting.p99.toFixed(2)),
      loadEventLoopP99WhileHeldMs: Number(holding.p99.toFixed(2)),
      loadEventLoopP99Ms: Number(inFlight.p99.toFixed(2)),
      loadEventLoopMaxMs: Number(inFlight.max.toFixed(2)),
    }
  } finally {
    await server.close()
    await rm(dir, { recursive: true, force: true })
  }
}

export async function benchThreadsScale(): Promise<Record<string, number>> {
  const parts = new Set((process.env.THREADS_SCALE_PARTS ?? 'stream,load').split(',').map((s) => s.trim()))
  return {
    ...(parts.has('stream') ? await streamPart() : {}),
    ...(parts.has('load') ? await loadPart() : {}),
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  benchThreadsScale().then((r) => console.log(JSON.stringify(r, null, 2)), (e: unknown) => {
    console.error(e)
    process.exit(1)
  })
}
