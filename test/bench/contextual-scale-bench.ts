/**
 * Contextual subscriptions at scale (issue 19, Benchmarks): the server as a child process
 * (SQLite, its own RSS and event loop), driven over HTTP from this process.
 *  - `commitToLeasableP50Ms` / `P99Ms`: one worker long-polls `next`; a `PUT` creates an event's
 *    node; the time from sending the `PUT` to the worker holding the leased item (the commit
 *    itself included; `putP50Ms` is the `PUT` alone, for reference). LATENCY_SAMPLES samples.
 *  - `consumers`: CONSUMERS consumers of one subscription, each long-polling `next`
 *    (`waitSeconds` 60) at once:
 *      `rssIdleMb` before they park, `rssParkedMb` with all of them parked, `kbPerParkedConsumer`;
 *      `parkedLoopP99Ms`: the server's event-loop delay p99 (prom-client's
 *      `nodejs_eventloop_lag_p99_seconds`, reset by each scrape) over PARK_MS of parked polls;
 *      `fanoutLoopP99Ms`: the same while FANOUT_EVENTS events are committed one a second, each
 *      leased, acked and polled again by every consumer; `fanoutAllLeasedP50Ms` / `P99Ms`: per
 *      event, from sending its `PUT` to the last consumer holding it.
 * Run alone: `npx tsx test/bench/contextual-scale-bench.ts` prints JSON
 * (CONTEXTUAL_SCALE_CONSUMERS, CONTEXTUAL_SCALE_EVENTS to change the sizes).
 */
import { setMaxListeners } from 'node:events'
import { readFileSync } from 'node:fs'
import { performance } from 'node:perf_hooks'
import { pathToFileURL } from 'node:url'
import { api, createSpace, expectStatus, grantRole, makeTempDir, removeDir, signup, spawnServer, type SpawnedServer } from '../helpers/index.js'
import { WAITING_PER_USER } from '../../sync-server/contextual/contextual-service.js'
import { percentile, round } from './stats.js'
import type { Goal } from './run.js'

export const GOALS: Record<string, Goal> = {}

const CONSUMERS = Number(process.env.CONTEXTUAL_SCALE_CONSUMERS ?? 1_000)
const FANOUT_EVENTS = Number(process.env.CONTEXTUAL_SCALE_EVENTS ?? 10)
const LATENCY_SAMPLES = 100
const PARK_MS = 5_000
const METRICS_TOKEN = 'contextual-scale-bench'

interface Item {
  event: { eventId: string; path: string }
  leaseToken: string
  attempt: number
}
interface NextAnswer {
  consumerId: string
  item: Item | null
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

function rssMb(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))
  return m ? Number(m[1]) / 1024 : NaN
}

/** The server's event-loop delay p99 since the last scrape (prom-client resets it on collect). */
async function loopP99Ms(url: string): Promise<number> {
  const text = await (await fetch(`${url}/metrics`, { headers: { Authorization: `Bearer ${METRICS_TOKEN}` } })).text()
  const m = /^nodejs_eventloop_lag_p99_seconds\s+([0-9.e+-]+)/m.exec(text)
  if (!m) throw new Error('no nodejs_eventloop_lag_p99_seconds in /metrics')
  return Number(m[1]) * 1000
}

class Worker {
  constructor(
    private readonly url: string,
    private readonly token: string,
    private readonly subscription: string,
    readonly name: string,
  ) {}

  private async post<T>(op: string, body: unknown, signal?: AbortSignal): Promise<T> {
    const res = await fetch(`${this.url}/api/contextual/${op}`, {
      method: 'POST',
      headers: { Authorization: `Bearer ${this.token}`, 'Content-Type': 'application/json' },
      body: JSON.stringify(body),
      ...(signal ? { signal } : {}),
    })
    const out = (await res.json()) as T
    if (!res.ok) throw new Error(`${op} ${res.status}: ${JSON.stringify(out)}`)
    return out
  }

  next(waitSeconds: number, signal?: AbortSignal): Promise<NextAnswer> {
    return this.post<NextAnswer>('next', { subscription: this.subscription, consumer: this.name, waitSeconds }, signal)
  }

  ack(a: NextAnswer): Promise<unknown> {
    const i = a.item!
    return this.post('ack', { consumerId: a.consumerId, eventId: i.event.eventId, leaseToken: i.leaseToken, attempt: i.attempt })
  }
}

/** Runs `fn` over `xs` with at most `n` at once. */
async function pool<T>(xs: readonly T[], n: number, fn: (x: T) => Promise<unknown>): Promise<void> {
  let i = 0
  await Promise.all(Array.from({ length: Math.min(n, xs.length) }, async () => {
    while (i < xs.length) await fn(xs[i++]!)
  }))
}

async function latency(server: SpawnedServer, token: string, sub: string, prefix: string): Promise<Record<string, number>> {
  const w = new Worker(server.url, token, sub, 'latency')
  await w.next(0)
  const total: number[] = []
  const put: number[] = []
  const http = api(server.url, token)
  for (let i = 0; i < LATENCY_SAMPLES; i++) {
    const polled = w.next(30)
    await sleep(20) // the poll is parked on the server before the commit
    const t0 = performance.now()
    const created = http.putNode(`${prefix}/lat-${i}`, 'Document', { i }).then((r) => {
      put.push(performance.now() - t0)
      return r
    })
    const got = await polled
    total.push(performance.now() - t0)
    expectStatus(await created, 201)
    if (got.item?.event.path !== `${prefix}/lat-${i}`) throw new Error(`latency ${i}: leased ${JSON.stringify(got.item?.event.path)}`)
    await w.ack(got)
  }
  return {
    commitToLeasableP50Ms: round(percentile(total, 50), 1),
    commitToLeasableP99Ms: round(percentile(total, 99), 1),
    putP50Ms: round(percentile(put, 50), 1),
  }
}

/**
 * [CTX42] One user's long polls wait WAITING_PER_USER at most: the consumers belong to as many
 * users as that takes (Viewers of the space), as a pool of agents under several accounts would.
 */
async function pollers(server: SpawnedServer, owner: { token: string }, space: string): Promise<string[]> {
  const tokens: string[] = []
  for (let i = 0; i < Math.ceil(CONSUMERS / WAITING_PER_USER); i++) {
    const u = await signup(server.url)
    await grantRole(server.url, owner.token, space, u.userId, 'Viewer')
    tokens.push(u.token)
  }
  return tokens
}

async function scale(server: SpawnedServer, token: string, sub: string, prefix: string, tokens: string[]): Promise<Record<string, number>> {
  const workers = Array.from({ length: CONSUMERS }, (_, i) => new Worker(server.url, tokens[Math.floor(i / WAITING_PER_USER)]!, sub, `w${i}`))
  // Each consumer made (its cursor at the head) before the polls park.
  await pool(workers, 16, (w) => w.next(0))
  await sleep(1_000)
  const rssIdle = rssMb(server.pid)
  const stop = new AbortController()
  setMaxListeners(0, stop.signal) // one listener per poll in flight
  // seen[e][w]: when consumer w held event e.
  const sent: number[] = []
  const seen = new Map<string, number[]>()
  let polls = 0
  const errors: string[] = []
  const loops = workers.map(async (w) => {
    while (!stop.signal.aborted) {
      polls++
      const a = await w.next(60, stop.signal).catch((e: unknown) => {
        if (!stop.signal.aborted) errors.push(`next ${w.name}: ${String((e as Error).cause ?? e)}`)
        return null
      })
      if (!a?.item) continue
      const at = performance.now()
      const list = seen.get(a.item.event.path) ?? []
      list.push(at)
      seen.set(a.item.event.path, list)
      await w.ack(a).catch((e: unknown) => errors.push(`ack ${w.name}: ${String((e as Error).cause ?? e)}`))
    }
  })
  await sleep(2_000)
  const rssParked = rssMb(server.pid)
  await loopP99Ms(server.url) // resets the histogram
  await sleep(PARK_MS)
  const parkedLoop = await loopP99Ms(server.url)
  const parkedPolls = polls
  const http = api(server.url, token)
  for (let e = 0; e < FANOUT_EVENTS; e++) {
    sent[e] = performance.now()
    expectStatus(await http.putNode(`${prefix}/fan-${e}`, 'Document', { e }), 201)
    await sleep(1_000)
  }
  // Every consumer has every event (or the bench says who did not).
  const deadline = performance.now() + 60_000
  while ([...Array(FANOUT_EVENTS).keys()].some((e) => (seen.get(`${prefix}/fan-${e}`)?.length ?? 0) < CONSUMERS)) {
    if (performance.now() > deadline) throw new Error(`fan-out incomplete: ${[...seen.values()].map((l) => l.length).join(',')}; ${errors.length} errors: ${errors.slice(0, 5).join('; ')}`)
    await sleep(100)
  }
  const fanoutLoop = await loopP99Ms(server.url)
  stop.abort()
  await Promise.allSettled(loops)
  const allLeased = [...Array(FANOUT_EVENTS).keys()].map((e) => Math.max(...seen.get(`${prefix}/fan-${e}`)!) - sent[e]!)
  return {
    consumers: CONSUMERS,
    rssIdleMb: round(rssIdle, 1),
    rssParkedMb: round(rssParked, 1),
    kbPerParkedConsumer: round(((rssParked - rssIdle) * 1024) / CONSUMERS, 1),
    parkedPollsExtra: parkedPolls - CONSUMERS,
    parkedLoopP99Ms: round(parkedLoop, 1),
    fanoutEvents: FANOUT_EVENTS,
    fanoutLoopP99Ms: round(fanoutLoop, 1),
    fanoutAllLeasedP50Ms: round(percentile(allLeased, 50), 1),
    fanoutAllLeasedP99Ms: round(percentile(allLeased, 99), 1),
  }
}

export async function benchContextualScale(): Promise<Record<string, number | string>> {
  const dir = await makeTempDir('weft-ctxscale-')
  const server = await spawnServer({ dataDir: dir, env: { METRICS_TOKEN }, startTimeoutMs: 90_000 })
  try {
    const owner = await signup(server.url)
    const space = await createSpace(server.url, owner.token)
    const prefix = `${space}/inbox`
    expectStatus(await api(server.url, owner.token).putNode(prefix, 'Document', {}), 201)
    const sub = `${space}/scale`
    expectStatus(
      await api(server.url, owner.token).putNode(sub, 'ContextualSubscription', {
        Operation: 'scale',
        Events: { NodeTypes: ['Document'], Kinds: ['Created'], PathPrefix: prefix },
        Reactions: { annotate: { Command: 'patch', Target: '{event.path}', Parameters: { Note: { Type: 'string' } } } },
        Limits: { LeaseSeconds: 60, MaxInFlight: 1, MaxAttempts: 3 },
      }),
      201,
    )
    const load = (await import('node:os')).loadavg().map((x) => round(x, 2)).join(' ')
    const tokens = await pollers(server, owner, space)
    return { load, ...(await latency(server, owner.token, sub, prefix)), ...(await scale(server, owner.token, sub, prefix, tokens)) }
  } catch (e) {
    console.error(server.output().slice(-3000))
    throw e
  } finally {
    await server.kill('SIGKILL')
    await removeDir(dir)
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  benchContextualScale().then(
    (r) => console.log(JSON.stringify(r, null, 2)),
    (e: unknown) => {
      console.error(e)
      process.exit(1)
    },
  )
}
