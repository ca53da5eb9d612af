import { describe, expect, it } from 'vitest'
import pino from 'pino'
import { Observable, Subject } from 'rxjs'
import type { MeshNode, NodePath } from '../../shared/index.js'
import { watchControlPlane, watchSubmission } from '../../sync-server/engines/activities/index.js'
import { VirtualClock, settle } from '../../sync-server/engines/kit/index.js'

const log = pino({ level: 'silent' })
const path = 'space/_Activity/a' as NodePath
const node = (content: Record<string, unknown>): MeshNode =>
  ({ path, nodeType: 'ActivityLog', name: 'a', content, createdBy: 'system', createdAt: '', updatedAt: '', version: 1, state: 'Active' }) as MeshNode

/** A node$ whose subscriptions can be faulted; counts how often it was subscribed. */
function fakeNodes() {
  let feed = new Subject<MeshNode | null>()
  let subscriptions = 0
  let current: MeshNode | null = node({})
  return {
    node$: (_p: NodePath) =>
      new Observable<MeshNode | null>((s) => {
        subscriptions++
        s.next(current)
        return feed.subscribe(s)
      }),
    emit(n: MeshNode | null) {
      current = n
      feed.next(n)
    },
    fault() {
      const old = feed
      feed = new Subject()
      old.error(new Error('boom'))
    },
    get subscriptions() {
      return subscriptions
    },
  }
}

/** Lets pending promise chains settle (no wall time: the watchers' backoff runs on a VirtualClock). */
const tick = () => settle()

describe('[ACT2] watchControlPlane', () => {
  it('delivers RequestedStatus transitions only, distinct until changed', () => {
    const nodes = fakeNodes()
    const seen: unknown[] = []
    const sub = watchControlPlane(nodes, path, (r) => seen.push(r), { log })
    nodes.emit(node({ RequestedStatus: 'Running' }))
    nodes.emit(node({ RequestedStatus: 'Running', Messages: [1] }))
    nodes.emit(node({ RequestedStatus: 'Cancelled' }))
    nodes.emit(node({ RequestedStatus: 'Cancelled', Status: 'Cancelled' }))
    expect(seen).toEqual([null, 'Running', 'Cancelled'])
    sub.unsubscribe()
  })

  it('re-establishes itself after a fault, without re-delivering an unchanged value', async () => {
    const nodes = fakeNodes()
    const seen: unknown[] = []
    const clock = new VirtualClock()
    watchControlPlane(nodes, path, (r) => seen.push(r), { log, clock })
    nodes.emit(node({ RequestedStatus: 'Running' }))
    nodes.fault()
    // The re-subscription waits for its backoff (50 ms) on the clock: not before.
    await tick()
    expect(nodes.subscriptions).toBe(1)
    await clock.advance(50)
    expect(nodes.subscriptions).toBe(2)
    nodes.emit(node({ RequestedStatus: 'Cancelled' }))
    expect(seen).toEqual([null, 'Running', 'Cancelled'])
  })

  it('stops for good when the node is gone', async () => {
    const nodes = fakeNodes()
    let gone = 0
    const seen: unknown[] = []
    const sub = watchControlPlane(nodes, path, (r) => seen.push(r), { log, onGone: () => gone++ })
    nodes.emit(null)
    await tick()
    expect(gone).toBe(1)
    expect(sub.closed).toBe(true)
    expect(nodes.subscriptions).toBe(1)
  })

  it('stops first on shutdown: nothing is delivered after the signal', () => {
    const nodes = fakeNodes()
    const abort = new AbortController()
    const seen: unknown[] = []
    const sub = watchControlPlane(nodes, path, (r) => seen.push(r), { log, signal: abort.signal })
    abort.abort()
    nodes.emit(node({ RequestedStatus: 'Cancelled' }))
    expect(seen).toEqual([null])
    expect(sub.closed).toBe(true)
  })

  it('a throwing handler does not kill the watch', () => {
    const nodes = fakeNodes()
    const seen: unknown[] = []
    watchControlPlane(nodes, path, (r) => {
      seen.push(r)
      throw new Error('handler bug')
    }, { log })
    nodes.emit(node({ RequestedStatus: 'Running' }))
    expect(seen).toEqual([null, 'Running'])
  })
})

describe('[ACT2] watchSubmission', () => {
  it('one dispatch in flight; a state that arrives meanwhile is dispatched after it settles', async () => {
    const nodes = fakeNodes()
    let inFlight = 0
    let maxInFlight = 0
    const dispatched: unknown[] = []
    let release: () => void = () => undefined
    watchSubmission(
      nodes,
      path,
      (n) => (n.content.N as number) ?? null,
      (n) => typeof n.content.N === 'number',
      async (n) => {
        inFlight++
        maxInFlight = Math.max(maxInFlight, inFlight)
        dispatched.push(n.content.N)
        await new Promise<void>((r) => (release = r))
        inFlight--
      },
      { log },
    )
    nodes.emit(node({ N: 1 }))
    await tick()
    nodes.emit(node({ N: 2 }))
    nodes.emit(node({ N: 3 }))
    await tick()
    expect(dispatched).toEqual([1])
    release()
    await tick()
    expect(dispatched).toEqual([1, 3])
    release()
    await tick()
    expect(maxInFlight).toBe(1)
  })

  it('correctness is the re-check inside update, never the flag: two watchers, one claim', async () => {
    const nodes = fakeNodes()
    // The node state and an update that re-checks it (serialised like NodeService.update).
    let status: string | undefined
    let claims = 0
    const claim = async () => {
      await new Promise<void>((r) => setImmediate(r))
      if (status !== undefined) return
      status = 'Running'
      claims++
    }
    const opts = { log }
    for (let i = 0; i < 2; i++) {
      watchSubmission(nodes, path, (n) => (n.content.RequestedStatus as string) ?? null, (n) => n.content.RequestedStatus === 'Running', claim, opts)
    }
    nodes.emit(node({ RequestedStatus: 'Running' }))
    await tick()
    expect(claims).toBe(1)
  })
})
