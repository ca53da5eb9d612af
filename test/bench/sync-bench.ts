/**
 * Sync server benchmarks (issue 2). Every server runs in its own child process
 * (test/bench/server-host.ts) so its CPU and RSS are its own; the clients run here, on the
 * other core.
 *
 *  (a) latency, one writer → one reader on /sync, stock providers, sequential single-field
 *      edits (send, wait until the reader sees it), ours and a bare y-protocols relay
 *      (server-relay.ts) interleaved in the same run: the ratio ours/relay at p50 is the figure.
 *  (b) fan-out, one writer → 200 readers of one node: time until ALL readers saw an edit, and
 *      each reader's own latency.
 *  (c) durable throughput with many writes in flight: HTTP PATCH (merge-patch) and /mux
 *      Update → Ack, on SQLite.
 *  (d) server RSS: before, with 10,000 nodes joined over /mux, and after they are left and the
 *      server's idle unload ran (with a short IDLE_UNLOAD_MS), then after a full GC.
 *
 * Run alone: `npx tsx test/bench/sync-bench.ts` prints JSON.
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { pathToFileURL } from 'node:url'
import {
  MuxClient,
  REPO_ROOT,
  api,
  createDocument,
  createSpace,
  expectStatus,
  makeTempDir,
  removeDir,
  signup,
  stockProvider,
  waitFor,
  withTimeout,
  type StockClient,
} from '../helpers/index.js'

const LATENCY_BLOCKS = 4
const LATENCY_EDITS_PER_BLOCK = 150
const LATENCY_WARMUP = 50
const LATENCY_SPACED_EDITS = 150
const LATENCY_SPACING_MS = 15
const FANOUT_READERS = 200
const FANOUT_EDITS = 100
const FANOUT_WARMUP = 10
const THROUGHPUT_NODES = 64
const THROUGHPUT_SECONDS = 4
// Overridable for exploring where the rate saturates: BENCH_MUX_WINDOW=32. Node flags for the server
// child (e.g. BENCH_SERVER_NODE_ARGS=--max-semi-space-size=1, to weigh a V8 flag's cost): below.
// Overridable for exploring where the rate saturates: BENCH_MUX_WINDOW=32.
const MUX_WINDOW_PER_NODE = Number(process.env.BENCH_MUX_WINDOW ?? 8)
const RSS_NODES = 10_000
const RSS_IDLE_UNLOAD_MS = 2_000

export type BenchResult = Record<string, number | string>

// ------------------------------------------------------------------ child servers

interface HostStats {
  rss: number
  heapUsed: number
  loadedDocs: number
  /** User + system CPU time of the server process so far. */
  cpuMicros: number
}

class Host {
  private constructor(
    readonly child: ChildProcess,
    readonly url: string,
  ) {}

  static async start(kind: 'weft' | 'relay', env: Record<string, string> = {}): Promise<Host> {
    const child = spawn(process.execPath, ['--expose-gc', ...(process.env.BENCH_SERVER_NODE_ARGS ?? '').split(' ').filter(Boolean), '--import', 'tsx', 'test/bench/server-host.ts'], {
      cwd: REPO_ROOT,
      env: { ...process.env, BENCH_SERVER: kind, ...env },
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    })
    const ready = await withTimeout(Host.next<{ url: string }>(child, 'ready'), 30_000, `${kind} host start`)
    return new Host(child, ready.url)
  }

  private static next<T>(child: ChildProcess, type: string): Promise<T> {
    return new Promise((resolve, reject) => {
      const onMessage = (m: { type: string }) => {
        if (m.type !== type) return
        child.off('message', onMessage)
        child.off('exit', onExit)
        resolve(m as T)
      }
      const onExit = (code: number | null) => reject(new Error(`bench host exited (${code}) while waiting for ${type}`))
      child.on('message', onMessage)
      child.once('exit', onExit)
    })
  }

  async request<T>(message: { type: string; [k: string]: unknown }, answer = message.type, timeoutMs = 60_000): Promise<T> {
    const reply = Host.next<T>(this.child, answer)
    this.child.send(message)
    return withTimeout(reply, timeoutMs, `bench host ${message.type}`)
  }

  stats(): Promise<HostStats> {
    return this.request<HostStats>({ type: 'stats' })
  }

  async stop(): Promise<void> {
    if (this.child.exitCode !== null) return
    const exited = new Promise((resolve) => this.child.once('exit', resolve))
    this.child.kill('SIGTERM')
    await withTimeout(exited, 15_000, 'bench host stop').catch(() => this.child.kill('SIGKILL'))
  }
}

// ------------------------------------------------------------------ statistics

function percentile(samples: number[], p: number): number {
  if (samples.length === 0) return NaN
  const sorted = [...samples].sort((a, b) => a - b)
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))
  return sorted[rank] as number
}

const ms = (x: number): number => Number(x.toFixed(2))
const mb = (bytes: number): number => Number((bytes / 1024 / 1024).toFixed(1))

// ------------------------------------------------------------------ (a) latency

interface Pair {
  writer: StockClient
  reader: StockClient
}

async function openPair(url: string, path: string, token: string): Promise<Pair> {
  const writer = stockProvider(url, path, token)
  const reader = stockProvider(url, path, token)
  await Promise.all([writer.synced(10_000), reader.synced(10_000)])
  return { writer, reader }
}

/** Resolves when `client` sees `Counter === value` (observer, not polling: exact timing). */
function seen(client: StockClient, value: number): Promise<void> {
  return new Promise((resolve) => {
    if (client.content.get('Counter') === value) return resolve()
    const check = () => {
      if (client.content.get('Counter') !== value) return
      client.content.unobserve(check)
      resolve()
    }
    client.content.observe(check)
  })
}

let counter = 0

async function timeEdits(pair: Pair, count: number, samples: number[] | null, spacingMs = 0): Promise<void> {
  for (let i = 0; i < count; i++) {
    if (spacingMs > 0) await new Promise((resolve) => setTimeout(resolve, spacingMs))
    const value = ++counter
    const arrived = seen(pair.reader, value)
    const t0 = performance.now()
    pair.writer.content.set('Counter', value)
    await withTimeout(arrived, 5_000, 'latency edit')
    samples?.push(performance.now() - t0)
  }
}

async function benchLatency(ours: Host, relay: Host, token: string, path: string): Promise<BenchResult> {
  const weftPair = await openPair(ours.url, path, token)
  const relayPair = await openPair(relay.url, 'bench-latency', 'none')
  try {
    await timeEdits(weftPair, LATENCY_WARMUP, null)
    await timeEdits(relayPair, LATENCY_WARMUP, null)
    const weft: number[] = []
    const bare: number[] = []
    // Interleaved blocks, so drift on the machine hits both sides alike.
    for (let b = 0; b < LATENCY_BLOCKS; b++) {
      await timeEdits(weftPair, LATENCY_EDITS_PER_BLOCK, weft)
      await timeEdits(relayPair, LATENCY_EDITS_PER_BLOCK, bare)
    }
    // Diagnostic: the same edits spaced out, so the server has finished the previous edit's
    // durable commit (and its fsync) before the next one arrives.
    const weftSpaced: number[] = []
    const bareSpaced: number[] = []
    await timeEdits(weftPair, LATENCY_SPACED_EDITS, weftSpaced, LATENCY_SPACING_MS)
    await timeEdits(relayPair, LATENCY_SPACED_EDITS, bareSpaced, LATENCY_SPACING_MS)
    return {
      latencyEdits: weft.length,
      syncP50Ms: ms(percentile(weft, 50)),
      syncP99Ms: ms(percentile(weft, 99)),
      relayP50Ms: ms(percentile(bare, 50)),
      relayP99Ms: ms(percentile(bare, 99)),
      syncP50RatioToRelay: Number((percentile(weft, 50) / percentile(bare, 50)).toFixed(2)),
      syncP99RatioToRelay: Number((percentile(weft, 99) / percentile(bare, 99)).toFixed(2)),
      syncSpacedP50Ms: ms(percentile(weftSpaced, 50)),
      relaySpacedP50Ms: ms(percentile(bareSpaced, 50)),
      syncSpacedP50RatioToRelay: Number((percentile(weftSpaced, 50) / percentile(bareSpaced, 50)).toFixed(2)),
    }
  } finally {
    for (const c of [weftPair.writer, weftPair.reader, relayPair.writer, relayPair.reader]) c.destroy()
  }
}

// ------------------------------------------------------------------ (b) fan-out

async function fanout(url: string, path: string, token: string): Promise<{ allSeen: number[]; perReader: number[] }> {
  // Each stock provider registers a process 'exit' listener: 201 of them are expected here.
  process.setMaxListeners(Math.max(process.getMaxListeners(), FANOUT_READERS + 20))
  const writer = stockProvider(url, path, token)
  const readers = Array.from({ length: FANOUT_READERS }, () => stockProvider(url, path, token))
  try {
    await Promise.all([writer, ...readers].map((c) => c.synced(30_000)))
    const allSeen: number[] = []
    const perReader: number[] = []
    let current = { value: -1, t0: 0, remaining: 0, done: () => {}, record: false }
    for (const reader of readers) {
      let last = -1
      reader.content.observe(() => {
        const value = reader.content.get('Counter')
        if (value !== current.value || last === value) return
        last = value
        if (current.record) perReader.push(performance.now() - current.t0)
        if (--current.remaining === 0) current.done()
      })
    }
    for (let i = 0; i < FANOUT_WARMUP + FANOUT_EDITS; i++) {
      const value = ++counter
      const record = i >= FANOUT_WARMUP
      const all = new Promise<void>((resolve) => {
        current = { value, t0: performance.now(), remaining: readers.length, done: resolve, record }
      })
      writer.content.set('Counter', value)
      await withTimeout(all, 10_000, 'fan-out edit')
      if (record) allSeen.push(performance.now() - current.t0)
    }
    return { allSeen, perReader }
  } finally {
    for (const c of [writer, ...readers]) c.destroy()
  }
}

async function benchFanout(ours: Host, relay: Host, token: string, path: string): Promise<BenchResult> {
  const weft = await fanout(ours.url, path, token)
  const bare = await fanout(relay.url, 'bench-fanout', 'none')
  return {
    fanoutReaders: FANOUT_READERS,
    fanoutEdits: FANOUT_EDITS,
    fanoutAllSeenP50Ms: ms(percentile(weft.allSeen, 50)),
    fanoutAllSeenP99Ms: ms(percentile(weft.allSeen, 99)),
    fanoutPerReaderP99Ms: ms(percentile(weft.perReader, 99)),
    relayFanoutAllSeenP99Ms: ms(percentile(bare.allSeen, 99)),
    relayFanoutPerReaderP99Ms: ms(percentile(bare.perReader, 99)),
  }
}

// ------------------------------------------------------------------ (c) throughput

async function benchHttpPatches(url: string, token: string, paths: string[], seconds = THROUGHPUT_SECONDS): Promise<number> {
  const http = api(url, token)
  let acked = 0
  const deadline = performance.now() + seconds * 1000
  const start = performance.now()
  await Promise.all(
    paths.map(async (path, w) => {
      let n = 0
      while (performance.now() < deadline) {
        expectStatus(await http.patchNode(path, { Counter: n++, Worker: w }), 200)
        acked++
      }
    }),
  )
  return acked / ((performance.now() - start) / 1000)
}

async function benchMuxUpdates(url: string, token: string, paths: string[], seconds = THROUGHPUT_SECONDS): Promise<number> {
  // Two sockets, as two browser tabs would be; each node has a window of updates in flight.
  const clients = [await MuxClient.connect(url, token), await MuxClient.connect(url, token)]
  try {
    const owned = paths.map((path, i) => ({ path, client: clients[i % clients.length] as MuxClient }))
    await Promise.all(owned.map(async ({ path, client }) => expect((await client.join(path)).ok, `join ${path}`)))
    let acked = 0
    const deadline = performance.now() + seconds * 1000
    const start = performance.now()
    await Promise.all(
      owned.flatMap(({ path, client }) =>
        Array.from({ length: MUX_WINDOW_PER_NODE }, async (_, lane) => {
          let n = 0
          while (performance.now() < deadline) {
            const res = await client.edit(path, (content) => content.set(`Lane${lane}`, n++))
            if (!res.ok) throw new Error(`update refused: ${res.code} ${res.message}`)
            acked++
          }
        }),
      ),
    )
    return acked / ((performance.now() - start) / 1000)
  } finally {
    await Promise.all(clients.map((c) => c.close()))
  }
}

function expect(condition: boolean, what: string): void {
  if (!condition) throw new Error(`bench set-up failed: ${what}`)
}

// ------------------------------------------------------------------ (d) RSS

async function benchRss(): Promise<BenchResult> {
  const dataDir = await makeTempDir('weft-bench-rss-')
  const host = await Host.start('weft', { DATA_DIR: dataDir, IDLE_UNLOAD_MS: String(RSS_IDLE_UNLOAD_MS) })
  try {
    await host.request({ type: 'gc' })
    const fresh = await host.stats()
    const user = await signup(host.url)
    const space = await createSpace(host.url, user.token)
    const seeded = await host.request<{ ms: number }>({ type: 'seed', prefix: space, count: RSS_NODES }, 'seeded', 120_000)
    // Seeding loaded every doc; wait for the idle unload, then measure the baseline.
    await waitFor(async () => (await host.stats()).loadedDocs <= 5, { timeoutMs: 30_000, intervalMs: 250, description: 'seeded docs unloaded' })
    await host.request({ type: 'gc' })
    const before = await host.stats()

    const mux = await MuxClient.connect(host.url, user.token)
    const joinStart = performance.now()
    const joined = await Promise.all(Array.from({ length: RSS_NODES }, (_, i) => mux.join(`${space}/n${i}`)))
    const joinMs = performance.now() - joinStart
    expect(joined.every((j) => j.ok), 'every join ok')
    const loaded = await host.stats()
    await mux.close()

    const leftAt = performance.now()
    await waitFor(async () => (await host.stats()).loadedDocs <= 5, { timeoutMs: 60_000, intervalMs: 250, description: 'joined docs unloaded' })
    const unloadMs = performance.now() - leftAt
    const afterUnload = await host.stats()
    // Left idle a while longer without forcing GC: what an operator would see.
    await new Promise((resolve) => setTimeout(resolve, 3_000))
    const idle = await host.stats()
    await host.request({ type: 'gc' })
    const afterGc = await host.stats()
    return {
      rssNodes: RSS_NODES,
      rssSeedMs: Math.round(seeded.ms),
      rssJoin10kMs: Math.round(joinMs),
      rssFreshServerMb: mb(fresh.rss),
      rssBeforeMb: mb(before.rss),
      rssLoadedMb: mb(loaded.rss),
      rssLoadedDocs: loaded.loadedDocs,
      heapLoadedMb: mb(loaded.heapUsed),
      rssUnloadMs: Math.round(unloadMs),
      rssAfterUnloadMb: mb(afterUnload.rss),
      rssIdle3sMb: mb(idle.rss),
      rssAfterGcMb: mb(afterGc.rss),
      heapAfterGcMb: mb(afterGc.heapUsed),
      rssLoadedDocsAfter: afterGc.loadedDocs,
    }
  } finally {
    await host.stop()
    await removeDir(dataDir)
  }
}

// ------------------------------------------------------------------ entry

/** `BENCH_SYNC_PARTS=latency,fanout,throughput,rss` runs a subset (default: all). */
function wants(part: string): boolean {
  const parts = process.env.BENCH_SYNC_PARTS
  return !parts || parts.split(',').includes(part)
}

export async function benchSync(): Promise<BenchResult> {
  const dataDir = await makeTempDir('weft-bench-sync-')
  const [ours, relay] = await Promise.all([Host.start('weft', { DATA_DIR: dataDir }), Host.start('relay')])
  const result: BenchResult = {}
  try {
    const user = await signup(ours.url)
    const space = await createSpace(ours.url, user.token)
    const latencyDoc = await createDocument(ours.url, user.token, `${space}/latency`, { Counter: 0 })
    const fanoutDoc = await createDocument(ours.url, user.token, `${space}/fanout`, { Counter: 0 })
    if (wants('latency')) Object.assign(result, await benchLatency(ours, relay, user.token, latencyDoc))
    if (wants('fanout')) Object.assign(result, await benchFanout(ours, relay, user.token, fanoutDoc))
    if (wants('throughput')) Object.assign(result, await benchThroughput(ours, user.token, space))
  } finally {
    await Promise.all([ours.stop(), relay.stop()])
    await removeDir(dataDir)
  }
  if (wants('rss')) Object.assign(result, await benchRss())
  return result
}

/** Rate, plus the CPU share (of one core) the server and this client process used meanwhile. */
async function withCpu(host: Host, run: () => Promise<number>): Promise<{ rate: number; serverCpuPct: number; clientCpuPct: number }> {
  const s0 = await host.stats()
  const c0 = process.cpuUsage()
  const t0 = performance.now()
  const rate = await run()
  const wallMicros = (performance.now() - t0) * 1000
  const s1 = await host.stats()
  const c1 = process.cpuUsage(c0)
  return {
    rate: Math.round(rate),
    serverCpuPct: Math.round(((s1.cpuMicros - s0.cpuMicros) / wallMicros) * 100),
    clientCpuPct: Math.round(((c1.user + c1.system) / wallMicros) * 100),
  }
}

async function benchThroughput(host: Host, token: string, space: string): Promise<BenchResult> {
  const url = host.url
  const httpPaths = await Promise.all(Array.from({ length: THROUGHPUT_NODES }, (_, i) => createDocument(url, token, `${space}/http${i}`, {})))
  const muxPaths = await Promise.all(Array.from({ length: THROUGHPUT_NODES }, (_, i) => createDocument(url, token, `${space}/mux${i}`, {})))
  // The server's first writes are much slower (JIT, statement caches, docs loading): warm up untimed.
  await benchHttpPatches(url, token, httpPaths, 1.5)
  await benchMuxUpdates(url, token, muxPaths, 1.5)
  const httpRun = await withCpu(host, () => benchHttpPatches(url, token, httpPaths))
  const muxRun = await withCpu(host, () => benchMuxUpdates(url, token, muxPaths))
  return {
    httpInFlight: THROUGHPUT_NODES,
    httpPatchesPerSec: httpRun.rate,
    httpServerCpuPct: httpRun.serverCpuPct,
    httpClientCpuPct: httpRun.clientCpuPct,
    muxInFlight: THROUGHPUT_NODES * MUX_WINDOW_PER_NODE,
    muxUpdatesAckedPerSec: muxRun.rate,
    muxServerCpuPct: muxRun.serverCpuPct,
    muxClientCpuPct: muxRun.clientCpuPct,
  }
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  console.log(JSON.stringify(await benchSync(), null, 2))
  process.exit(0)
}
