import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import { Subject } from 'rxjs'
import type { MeshNode, NodePath } from '../../shared/index.js'
import { MAX_TIMEOUT_MS } from '../../sync-server/engines/kit/index.js'
import { scheduleAt } from '../../sync-server/engines/subscriptions/long-timer.js'
import { watchStatus } from '../../sync-server/engines/subscriptions/status-watch.js'
import { WorkQueue } from '../../sync-server/engines/subscriptions/work-queue.js'

describe('long timers', () => {
  beforeEach(() => vi.useFakeTimers())
  afterEach(() => vi.useRealTimers())

  it('a past-due FireAt fires on the next turn', async () => {
    const fired = vi.fn()
    scheduleAt(Date.now() - 1000, fired)
    expect(fired).not.toHaveBeenCalled()
    await vi.advanceTimersByTimeAsync(0)
    expect(fired).toHaveBeenCalledTimes(1)
  })
  it('a FireAt beyond 2^31-1 ms is reached by chaining, not fired at once', async () => {
    const fired = vi.fn()
    const at = Date.now() + MAX_TIMEOUT_MS * 2 + 5_000
    scheduleAt(at, fired)
    await vi.advanceTimersByTimeAsync(MAX_TIMEOUT_MS)
    expect(fired).not.toHaveBeenCalled()
    await vi.advanceTimersByTimeAsync(MAX_TIMEOUT_MS)
    expect(fired).not.toHaveBeenCalled()
    await vi.advanceTimersByTimeAsync(5_001)
    expect(fired).toHaveBeenCalledTimes(1)
  })
  it('cancel stops it', async () => {
    const fired = vi.fn()
    const cancel = scheduleAt(Date.now() + 100, fired)
    cancel()
    await vi.advanceTimersByTimeAsync(1000)
    expect(fired).not.toHaveBeenCalled()
  })
})

function statusNode(status: string | null, extra: Record<string, string> = {}): MeshNode {
  const at = new Date().toISOString()
  return { path: 'T/sub' as NodePath, nodeType: 'Thread', name: 'sub', content: status === null ? {} : { Status: status, ...extra }, createdBy: 'system', createdAt: at, updatedAt: at, version: 1, state: 'Active' }
}

describe('status watch', () => {
  const trigger = (requireActiveFirst: boolean, observedActive = false, holdField: string | null = null) => ({
    type: 'NodeStatus' as const, watchPath: 'T/sub', statusField: 'status', restingValues: ['Idle', 'Done'], requireActiveFirst, observedActive,
    holdField, holdValues: holdField === null ? [] : ['AwaitingInput'],
  })
  const handlers = () => ({ onActive: vi.fn(), onResting: vi.fn(), onGone: vi.fn(), onFault: vi.fn() })

  it('RequireActiveFirst: an initial resting value does not fire; Running then Idle does', () => {
    const node$ = new Subject<MeshNode | null>()
    const h = handlers()
    watchStatus(node$, trigger(true), h)
    node$.next(statusNode('Idle'))
    expect(h.onResting).not.toHaveBeenCalled()
    node$.next(statusNode('Running'))
    expect(h.onActive).toHaveBeenCalledTimes(1)
    node$.next(statusNode('Idle'))
    expect(h.onResting).toHaveBeenCalledTimes(1)
    node$.next(statusNode('Running'))
    node$.next(statusNode('Done'))
    expect(h.onResting).toHaveBeenCalledTimes(1)
  })
  it('without RequireActiveFirst, or with a persisted observation, a resting node fires at once', () => {
    for (const t of [trigger(false), trigger(true, true)]) {
      const node$ = new Subject<MeshNode | null>()
      const h = handlers()
      watchStatus(node$, t, h)
      node$.next(statusNode('done'))
      expect(h.onResting).toHaveBeenCalledTimes(1)
    }
  })
  it('[THR23] HoldField: resting while on hold does not fire; resting off hold does, once', () => {
    const node$ = new Subject<MeshNode | null>()
    const h = handlers()
    watchStatus(node$, trigger(true, false, 'disposition'), h)
    node$.next(statusNode('Running'))
    node$.next(statusNode('Idle', { Disposition: 'AwaitingInput' }))
    expect(h.onResting).not.toHaveBeenCalled()
    node$.next(statusNode('Running'))
    node$.next(statusNode('Idle', { Disposition: 'Completed' }))
    expect(h.onResting).toHaveBeenCalledTimes(1)
    // Without a HoldField the same question fires (old subscriptions keep their behaviour).
    const plain$ = new Subject<MeshNode | null>()
    const p = handlers()
    watchStatus(plain$, trigger(true, true), p)
    plain$.next(statusNode('Idle', { Disposition: 'AwaitingInput' }))
    expect(p.onResting).toHaveBeenCalledTimes(1)
  })
  it('a deleted node stops the watch for good, with a named reason', () => {
    const node$ = new Subject<MeshNode | null>()
    const h = handlers()
    const sub = watchStatus(node$, trigger(true), h)
    node$.next(statusNode('Running'))
    node$.next(null)
    expect(h.onGone).toHaveBeenCalledWith(expect.stringContaining('T/sub was deleted'))
    expect(sub.closed).toBe(true)
    expect(node$.observed).toBe(false)
  })
  it('a fault re-establishes the watch and keeps what it saw', async () => {
    vi.useFakeTimers()
    try {
      let current = new Subject<MeshNode | null>()
      let subscriptions = 0
      const node$ = new (await import('rxjs')).Observable<MeshNode | null>((s) => {
        subscriptions++
        current = new Subject<MeshNode | null>()
        return current.subscribe(s)
      })
      const h = handlers()
      watchStatus(node$, trigger(true), h)
      current.next(statusNode('Running'))
      current.error(new Error('storage hiccup'))
      expect(h.onFault).toHaveBeenCalledTimes(1)
      await vi.advanceTimersByTimeAsync(200)
      expect(subscriptions).toBe(2)
      current.next(statusNode('Idle'))
      expect(h.onResting).toHaveBeenCalledTimes(1)
    } finally {
      vi.useRealTimers()
    }
  })
})

describe('work queue', () => {
  it('bounds concurrency and reports idle', async () => {
    const q = new WorkQueue(2, () => {})
    let running = 0
    let peak = 0
    for (let i = 0; i < 10; i++) {
      q.push(async () => {
        running++
        peak = Math.max(peak, running)
        await new Promise((r) => setTimeout(r, 2))
        running--
      })
    }
    await q.onIdle()
    expect(peak).toBe(2)
    expect(q.pending).toBe(0)
  })
})
