import { afterEach, describe, expect, it, vi } from 'vitest'
import { SessionEnds } from './session-ends.js'

/** An AuthService's revocations, told by hand. */
function revocations() {
  const listeners = new Set<(hash: string) => void>()
  return {
    onRevoked(l: (hash: string) => void) {
      listeners.add(l)
      return () => listeners.delete(l)
    },
    revoke: (hash: string) => listeners.forEach((l) => l(hash)),
    get listening() {
      return listeners.size
    },
  }
}

describe('[AUTH8] SessionEnds', () => {
  afterEach(() => vi.useRealTimers())

  it('aborts the watches of a revoked token (unauthorized), no other token\'s', () => {
    const r = revocations()
    const ends = new SessionEnds(r)
    const far = Date.now() + 3_600_000
    const a1 = ends.watch({ tokenHash: 'a', expiresAt: far })
    const a2 = ends.watch({ tokenHash: 'a', expiresAt: far })
    const b = ends.watch({ tokenHash: 'b', expiresAt: far })
    r.revoke('a')
    expect([a1.signal.aborted, a2.signal.aborted, b.signal.aborted]).toEqual([true, true, false])
    expect(a1.signal.reason).toMatchObject({ code: 'unauthorized' })
    for (const w of [a1, a2, b]) w.release()
    expect(ends.watching).toBe(0)
    ends.stop()
    expect(r.listening).toBe(0)
  })

  it('aborts a watch when its session expires, also past the longest timer (a token living 30 days)', () => {
    vi.useFakeTimers({ now: 0 })
    const ends = new SessionEnds(revocations())
    const month = 30 * 24 * 3_600_000
    const w = ends.watch({ tokenHash: 'a', expiresAt: month })
    vi.advanceTimersByTime(2 ** 31 - 1)
    expect(w.signal.aborted).toBe(false)
    vi.advanceTimersByTime(month - (2 ** 31 - 1) - 1)
    expect(w.signal.aborted).toBe(false)
    vi.advanceTimersByTime(1)
    expect(w.signal.reason).toMatchObject({ code: 'unauthorized', message: expect.stringMatching(/expired/) })
    w.release()
  })

  it('a session expired already is ended at once; a released watch is told of nothing and holds no timer', () => {
    vi.useFakeTimers({ now: 1_000 })
    const r = revocations()
    const ends = new SessionEnds(r)
    expect(ends.watch({ tokenHash: 'a', expiresAt: 1_000 }).signal.aborted).toBe(true)
    const w = ends.watch({ tokenHash: 'b', expiresAt: 5_000 })
    w.release()
    w.release()
    expect(vi.getTimerCount()).toBe(0)
    r.revoke('b')
    vi.advanceTimersByTime(10_000)
    expect(w.signal.aborted).toBe(false)
  })
})
