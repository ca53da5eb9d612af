import pino from 'pino'
import { Observable, Subject, throwError } from 'rxjs'
import { describe, expect, it } from 'vitest'
import type { ChangeRecord, MeshNode, NodePath } from '../../../shared/index.js'
import type { LiveChange } from '../../nodes/index.js'
import { afterFailure, delayMs, isDue, retryStateOf } from './backoff.js'
import { VirtualClock, every } from './clock.js'
import { FeedFollower } from './feed-follower.js'
import { KeyedWorker } from './keyed-worker.js'
import { Pacer } from './pacer.js'
import { untilGone } from './node-watcher.js'
import { Reconciler, concatPages, pageKey } from './reconciler.js'

const log = pino({ level: 'silent' })

function deferred(): { promise: Promise<void>; resolve: () => void } {
  let resolve!: () => void
  const promise = new Promise<void>((r) => (resolve = r))
  return { promise, resolve }
}

describe('[KIT4] kit/clock: virtual time fires timers in order, only when advanced', () => {
  it('advance fires what is due, in time order, and those they set', async () => {
    const clock = new VirtualClock(0)
    const fired: string[] = []
    clock.setTimeout(() => fired.push('b@20'), 20)
    clock.setTimeout(() => {
      fired.push('a@10')
      clock.setTimeout(() => fired.push('c@15'), 5)
    }, 10)
    const cancel = clock.setTimeout(() => fired.push('never'), 12)
    cancel()
    await clock.advance(9)
    expect(fired).toEqual([])
    await clock.advance(11)
    expect(fired).toEqual(['a@10', 'c@15', 'b@20'])
    expect(clock.now()).toBe(20)
  })
  it('every repeats until cancelled', async () => {
    const clock = new VirtualClock(0)
    let n = 0
    const stop = every(clock, 100, () => n++)
    await clock.advance(1_000)
    stop()
    await clock.advance(1_000)
    expect(n).toBe(10)
  })
})

describe('[KIT5] kit/keyed-worker: one job per key, rerun when dirtied, a global limit', () => {
  it('kicks while running coalesce into one rerun; never two jobs of a key at once; at most `concurrency` keys', async () => {
    const gates = new Map<string, ReturnType<typeof deferred>>()
    const runs: string[] = []
    let live = 0
    let peak = 0
    const perKey = new Map<string, number>()
    const worker = new KeyedWorker<string>(
      async (key) => {
        live++
        peak = Math.max(peak, live)
        perKey.set(key, (perKey.get(key) ?? 0) + 1)
        expect(perKey.get(key)).toBe(1)
        runs.push(key)
        const g = deferred()
        gates.set(key, g)
        await g.promise
        perKey.set(key, perKey.get(key)! - 1)
        live--
      },
      { concurrency: 2, onError: () => undefined },
    )
    worker.kick('a')
    worker.kick('b')
    worker.kick('c') // waits for a slot
    worker.kick('a') // dirty
    worker.kick('a') // coalesced
    await Promise.resolve()
    await Promise.resolve()
    expect(runs).toEqual(['a', 'b'])
    gates.get('a')!.resolve()
    await new Promise((r) => setImmediate(r))
    gates.get('b')!.resolve()
    await new Promise((r) => setImmediate(r))
    for (const k of ['a', 'c']) gates.get(k)!.resolve()
    await new Promise((r) => setImmediate(r))
    gates.get('a')!.resolve()
    gates.get('c')!.resolve()
    await worker.idle()
    expect(runs.filter((k) => k === 'a')).toHaveLength(2)
    expect(runs.sort()).toEqual(['a', 'a', 'b', 'c'])
    expect(peak).toBe(2)
  })
})

describe('[KIT6] kit/backoff: attempts and the next retry live in node fields', () => {
  const policy = { baseMs: 200, maxMs: 1_000, maxAttempts: 4 }
  it('doubles from base, capped; gives up at maxAttempts; reads bad fields as none', () => {
    expect([1, 2, 3, 4, 5].map((a) => delayMs(policy, a))).toEqual([200, 400, 800, 1_000, 1_000])
    const first = afterFailure(policy, {}, 0)
    expect(first).toEqual({ kind: 'retry', at: 200, fields: { Attempts: 1, NextRetryAt: new Date(200).toISOString() } })
    const content = first.kind === 'retry' ? { ...first.fields } : {}
    expect(isDue(content, 199)).toBe(false)
    expect(isDue(content, 200)).toBe(true)
    expect(afterFailure(policy, { Attempts: 3 }, 0)).toEqual({ kind: 'exhausted', attempts: 4 })
    expect(retryStateOf({ Attempts: -1, NextRetryAt: 'soon' })).toEqual({ Attempts: 0, NextRetryAt: null })
  })
})

describe('[KIT7] kit/reconciler: pages, at boot and on the clock, never overlapping', () => {
  it('walks every item a page at a time; a request during a pass runs one more pass after it', async () => {
    const items = Array.from({ length: 23 }, (_, i) => `p${String(i).padStart(2, '0')}`)
    const limits: number[] = []
    let live = 0
    let peak = 0
    const seen: string[] = []
    const clock = new VirtualClock(0)
    const r = new Reconciler<string>({
      page: async (after, limit) => {
        limits.push(limit)
        live++
        peak = Math.max(peak, live)
        await new Promise((res) => setImmediate(res))
        live--
        return items.filter((p) => after === undefined || p > after).slice(0, limit)
      },
      keyOf: (p) => p,
      each: (p) => void seen.push(p),
      pageSize: 5,
      intervalMs: 1_000,
      clock,
      log,
      what: 'test',
    })
    await r.start()
    expect(seen).toEqual(items)
    expect(Math.max(...limits)).toBe(5)
    seen.length = 0
    await Promise.all([r.run(), r.run(), r.run()])
    await r.idle()
    expect(seen).toEqual([...items, ...items])
    expect(peak).toBe(1)
    seen.length = 0
    await clock.advance(1_000)
    await r.idle()
    expect(seen).toEqual(items)
    await r.stop()
  })
  it('concatPages resumes in the right source', async () => {
    const a = ['a1', 'a2', 'a3'].map((path) => ({ path }))
    const b = ['b1', 'b2'].map((path) => ({ path }))
    const src = (rows: { path: string }[]) => async (after: string | undefined, limit: number) => rows.filter((r) => after === undefined || r.path > after).slice(0, limit)
    const page = concatPages([src(a), src(b)])
    const out: string[] = []
    let after: string | undefined
    for (;;) {
      const p = await page(after, 2)
      out.push(...p.map((x) => x.row.path))
      if (p.length < 2) break
      after = pageKey(p[p.length - 1]!)
    }
    expect(out).toEqual(['a1', 'a2', 'a3', 'b1', 'b2'])
  })
})

function change(version: number, path = `n${version}`): LiveChange {
  return { version, path: path as NodePath, nodeType: 'T', kind: 'Updated', at: '', node: { path } as MeshNode, by: 'u', origin: 'http' } as unknown as LiveChange
}

describe('[KIT8] kit/feed-follower: boot then live; a gap replayed from the durable log', () => {
  it('events during boot are held and delivered after it; a jump in versions replays the missing ones', async () => {
    const feed = new Subject<LiveChange>()
    const log_: ChangeRecord[] = Array.from({ length: 10 }, (_, i) => ({ version: i + 1, path: `n${i + 1}`, nodeType: 'T', kind: 'Updated', at: '' }) as unknown as ChangeRecord)
    const seen: string[] = []
    const clock = new VirtualClock(0)
    const f = new FeedFollower({
      nodes: {
        changes$: feed,
        changesSince: async (_p, v, limit) => log_.filter((r) => r.version > v).slice(0, limit),
        get: async (_p, path) => ({ path }) as MeshNode,
      },
      onChange: (c) => seen.push(`${c.path}${c.version === 0 ? '*' : ''}`),
      clock,
      log,
      what: 'test',
    })
    await f.start(async () => {
      feed.next(change(1))
      seen.push('boot')
    })
    expect(seen).toEqual(['boot', 'n1'])
    feed.next(change(2))
    feed.next(change(6)) // 3..5 lost
    await clock.advance(10)
    await f.idle()
    expect(seen).toEqual(['boot', 'n1', 'n2', 'n6', 'n3*', 'n4*', 'n5*'])
    expect(f.replayed).toBe(3)
    await f.stop()
  })
})

describe('[KIT8] [THR28] kit/feed-follower: bootReplay', () => {
  it('at start, the latest records are replayed after the boot pass (a node changed several times read once), the older ones not', async () => {
    const feed = new Subject<LiveChange>()
    const paths = ['a', 'b', 'c', 'd', 'c', 'e', 'c']
    const log_: ChangeRecord[] = paths.map((p, i) => ({ version: i + 1, path: p, nodeType: 'T', kind: 'Updated', at: '' }) as unknown as ChangeRecord)
    const reads: string[] = []
    const seen: string[] = []
    const f = new FeedFollower({
      nodes: {
        changes$: feed,
        changesSince: async (_p, v, limit) => log_.filter((r) => r.version > v).slice(0, limit),
        get: async (_p, path) => {
          reads.push(path)
          return { path } as MeshNode
        },
        headVersion: async () => log_.length,
      },
      bootReplay: 4,
      onChange: (c) => seen.push(`${c.path}${c.version === 0 ? '*' : ''}`),
      clock: new VirtualClock(0),
      log,
      what: 'test',
    })
    await f.start(async () => {
      feed.next(change(8, 'live'))
      seen.push('boot')
    })
    // Versions 4..7 (d, c, e, c): c once; a, b before them are not looked at again.
    expect(seen).toEqual(['boot', 'live', 'd*', 'c*', 'e*'])
    expect(reads).toEqual(['d', 'c', 'e'])
    await f.stop()
  })
})

describe('[KIT9] kit/node-watcher: heals after a fault on the clock, stops for good when gone', () => {
  it('re-subscribes after a backoff; completes at the first null', async () => {
    const clock = new VirtualClock(0)
    let subscribes = 0
    const node = { path: 'x' } as MeshNode
    const source = () => {
      subscribes++
      if (subscribes === 1) return throwError(() => new Error('fault'))
      return new Observable<MeshNode | null>((s) => {
        s.next(node)
        s.next(null)
        s.next(node)
      })
    }
    const seen: unknown[] = []
    let done = false
    untilGone(source, 'x' as NodePath, { log, what: 'w', clock, backoff: { baseMs: 100, maxMs: 100 } }).subscribe({ next: (n) => seen.push(n), complete: () => (done = true) })
    expect(subscribes).toBe(1)
    await clock.advance(99)
    expect(subscribes).toBe(1)
    await clock.advance(1)
    expect(subscribes).toBe(2)
    expect(seen).toEqual([node])
    expect(done).toBe(true)
  })
})

describe('[KIT11] kit/pacer: many ready steps spread over turns of the event loop', () => {
  const turn = () => new Promise<void>((resolve) => setImmediate(resolve))

  it('admits at most perTurn callers a turn, in arrival order; timers get in between', async () => {
    const pacer = new Pacer(3)
    const admitted: number[] = []
    const all = Array.from({ length: 8 }, (_, i) => pacer.turn().then(() => admitted.push(i)))
    await Promise.resolve()
    expect(admitted).toEqual([0, 1, 2])
    expect(pacer.queued).toBe(5)
    // A timer due now runs before the next batch: the loop got a turn.
    let timerRan = false
    setTimeout(() => (timerRan = true), 0)
    await new Promise((r) => setTimeout(r, 1))
    expect(timerRan).toBe(true)
    await Promise.all(all)
    expect(admitted).toEqual([0, 1, 2, 3, 4, 5, 6, 7])
    expect(pacer.queued).toBe(0)
  })

  it('a lone caller is admitted at once, and again after the queue drained', async () => {
    const pacer = new Pacer(2)
    let done = false
    void pacer.turn().then(() => (done = true))
    await Promise.resolve()
    expect(done).toBe(true)
    for (let i = 0; i < 3; i++) await turn()
    let again = false
    void pacer.turn().then(() => (again = true))
    await Promise.resolve()
    expect(again).toBe(true)
  })
})
