/**
 * The cost of `/metrics` ([OPS3], [OPS4], issue 20):
 *  - `hookNsPerUpdate`: what the write path adds per client update with METRICS_TOKEN set (the
 *    `update` and `acked` counter increments and the commit histogram's observe), median of 5
 *    batches of 200,000 on a `ServerMetrics` alone; `hookShareOfAck`: that over the mean time of
 *    one acked update measured below. Goal < 1 %.
 *  - `ackedPerSecWithMetrics` / `ackedPerSecWithout` / `ackRatioWithToWithout`: sequential
 *    one-field `/mux` Updates to one node, each awaited to its durable Ack (SQLite, fsync'd), on
 *    an in-process server with METRICS_TOKEN and one without, in alternating rounds (ROUNDS ×
 *    UPDATES each). Dominated by the commit; on a shared machine this ratio swings both ways
 *    (0.8–1.3 seen), so it carries no goal.
 *  - `scrapeP50Ms` / `scrapeP99Ms`: GET /metrics with LOADED loaded docs (gauges read on scrape).
 * The machine is shared: figures are noisy, the ratio less so. Run alone:
 * `npx tsx test/bench/metrics-bench.ts` prints JSON.
 */
import { performance } from 'node:perf_hooks'
import { pathToFileURL } from 'node:url'
import { SYSTEM, type NodePath } from '../../shared/index.js'
import { ServerMetrics } from '../../sync-server/metrics/index.js'
import { MuxClient, createDocument, createSpace, signup, startTestServer, type TestServer } from '../helpers/index.js'
import { percentile, round } from './stats.js'
import type { Goal } from './run.js'

export const GOALS: Record<string, Goal> = {
  hookShareOfAck: { op: '<', value: 0.01 },
}

const TOKEN = 'bench-metrics-token'
const ROUNDS = 4
const UPDATES = 500
const LOADED = 2_000
const SCRAPES = 50


async function prepare(ts: TestServer): Promise<{ client: MuxClient; path: string }> {
  const user = await signup(ts.url)
  const space = await createSpace(ts.url, user.token)
  const path = await createDocument(ts.url, user.token, `${space}/doc`, { n: 0 })
  const client = await MuxClient.connect(ts.url, user.token)
  const joined = await client.join(path)
  if (!joined.ok) throw new Error(`join failed: ${JSON.stringify(joined)}`)
  return { client, path }
}

async function updatesPerSec(c: { client: MuxClient; path: string }, start: number): Promise<number> {
  const t0 = performance.now()
  for (let i = 0; i < UPDATES; i++) {
    const r = await c.client.patch(c.path, { n: start + i })
    if (!r.ok) throw new Error(`refused: ${JSON.stringify(r)}`)
  }
  return UPDATES / ((performance.now() - t0) / 1000)
}

/** The write path's metric calls for one client update, timed on a registry alone. */
function hookNs(): number {
  const none = { connections: () => 0, loadedDocs: () => 0, rooms: () => 0, engineLag: async () => 0, engineLeaseHeld: () => true, enginePartitions: () => ({}), contextual: async () => ({ consumers: 0, pending: 0, leased: 0, dead: 0, maxLag: 0 }), contextualWaiting: () => 0 }
  const m = new ServerMetrics(none, { warn: () => undefined } as never)
  const N = 200_000
  const batches: number[] = []
  for (let b = 0; b < 5; b++) {
    const t0 = performance.now()
    for (let i = 0; i < N; i++) {
      m.update('mux')
      m.acked('mux')
      m.committed(0.002)
    }
    batches.push(((performance.now() - t0) * 1e6) / N)
  }
  return percentile(batches, 50)
}

export async function benchMetrics(): Promise<Record<string, number>> {
  const withM = await startTestServer({ config: { metricsToken: TOKEN } })
  const without = await startTestServer()
  try {
    const a = await prepare(withM)
    const b = await prepare(without)
    await updatesPerSec(a, 0)
    await updatesPerSec(b, 0)
    const rates: { with: number[]; without: number[] } = { with: [], without: [] }
    for (let r = 0; r < ROUNDS; r++) {
      rates.with.push(await updatesPerSec(a, (r + 1) * UPDATES))
      rates.without.push(await updatesPerSec(b, (r + 1) * UPDATES))
    }
    await a.client.close()
    await b.client.close()
    // Loaded docs for the scrape: nodes written by HTTP stay loaded until idle.
    const user = await signup(withM.url)
    const space = await createSpace(withM.url, user.token)
    for (let i = 0; i < LOADED; i++) await withM.server.nodes.put(SYSTEM, `${space}/n${i}` as NodePath, { nodeType: 'Document', content: { i } })
    const scrapes: number[] = []
    for (let i = 0; i < SCRAPES; i++) {
      const t0 = performance.now()
      const res = await fetch(`${withM.url}/metrics`, { headers: { authorization: `Bearer ${TOKEN}` } })
      await res.text()
      scrapes.push(performance.now() - t0)
    }
    const median = (xs: number[]) => percentile(xs, 50)
    const ns = hookNs()
    return {
      hookNsPerUpdate: round(ns, 0),
      hookShareOfAck: round(ns / (1e9 / median(rates.with)), 5),
      ackedPerSecWithMetrics: round(median(rates.with), 0),
      ackedPerSecWithout: round(median(rates.without), 0),
      ackRatioWithToWithout: round(median(rates.with) / median(rates.without)),
      loadedDocsAtScrape: withM.server.stats().loadedDocs,
      scrapeP50Ms: round(percentile(scrapes, 50)),
      scrapeP99Ms: round(percentile(scrapes, 99)),
    }
  } finally {
    await withM.cleanup()
    await without.cleanup()
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  benchMetrics().then(
    (f) => console.log(JSON.stringify(f, null, 2)),
    (err: unknown) => {
      console.error(err)
      process.exit(1)
    },
  )
}
