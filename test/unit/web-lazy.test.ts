import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import { RETRY_ONLINE_MS, loadOrRetryOnline } from '../../web/components/lazy.js'

/**
 * A module load that fails is tried again (web/components/lazy.ts): when the browser comes back
 * online, or, when it says it is online already (the connection came back before the failure
 * reached the page: what failed CI at stop 37; or the server failed the fetch), after a pause.
 * A browser's `window` and `navigator` stood in by an EventTarget and a flag, on fake timers.
 */
describe('loadOrRetryOnline', () => {
  let online = true
  const win = new EventTarget()
  beforeEach(() => {
    vi.useFakeTimers()
    vi.stubGlobal('window', win)
    vi.stubGlobal('navigator', {
      get onLine() {
        return online
      },
    })
    vi.spyOn(console, 'warn').mockImplementation(() => undefined)
  })
  afterEach(() => {
    vi.useRealTimers()
    vi.unstubAllGlobals()
    vi.restoreAllMocks()
  })

  /** A load failing its first `failures` calls. */
  function flaky(failures: number) {
    let calls = 0
    const load = vi.fn(async () => {
      calls++
      if (calls <= failures) throw new TypeError('Failed to fetch dynamically imported module')
      return 'module'
    })
    return load
  }

  it('offline: waits for the online event, then loads', async () => {
    online = false
    const load = flaky(1)
    const failed = vi.fn()
    loadOrRetryOnline(load, failed)
    await vi.advanceTimersByTimeAsync(60_000)
    expect([load.mock.calls.length, failed.mock.calls.length]).toEqual([1, 1])
    online = true
    win.dispatchEvent(new Event('online'))
    await vi.advanceTimersByTimeAsync(0)
    expect(load).toHaveBeenCalledTimes(2)
    await expect(load.mock.results[1]!.value).resolves.toBe('module')
  })

  it('a failure seen while online (the online event came before it) is tried again after a pause, doubling, bounded', async () => {
    online = true
    const load = flaky(7)
    loadOrRetryOnline(load)
    await vi.advanceTimersByTimeAsync(0)
    expect(load).toHaveBeenCalledTimes(1)
    // No online event comes: the pauses alone bring the retries: 1, 2, 4, 8, 16, 30, 30 s.
    let waited = 0
    for (const [i, pause] of [1, 2, 4, 8, 16, 30, 30].entries()) {
      await vi.advanceTimersByTimeAsync(pause * 1000 - 1)
      expect(load, `not before the pause of ${pause} s`).toHaveBeenCalledTimes(i + 1)
      await vi.advanceTimersByTimeAsync(1)
      expect(load).toHaveBeenCalledTimes(i + 2)
      waited += pause * 1000
    }
    expect(waited).toBe(91_000)
    expect(RETRY_ONLINE_MS.most).toBe(30_000)
    await expect(load.mock.results.at(-1)!.value).resolves.toBe('module')
    // Loaded: nothing more is tried.
    await vi.advanceTimersByTimeAsync(120_000)
    expect(load).toHaveBeenCalledTimes(8)
  })
})
