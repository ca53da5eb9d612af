/**
 * setTimeout takes at most 2^31-1 ms (~24.8 days); a larger delay fires at once. A far FireAt
 * is reached by chaining: each hop waits at most the maximum and re-reads the clock.
 */
export const MAX_TIMEOUT_MS = 2 ** 31 - 1

export type CancelTimer = () => void

export function scheduleAt(at: number, fire: () => void, now: () => number = Date.now): CancelTimer {
  let handle: ReturnType<typeof setTimeout> | undefined
  let cancelled = false
  const arm = () => {
    if (cancelled) return
    const delay = at - now()
    if (delay <= 0) {
      handle = undefined
      fire()
      return
    }
    handle = setTimeout(arm, Math.min(delay, MAX_TIMEOUT_MS))
    // A pending timer must not keep a stopping process (or a test worker) alive.
    handle.unref?.()
  }
  // A past-due FireAt fires on the next turn, not inside the caller's stack.
  handle = setTimeout(arm, 0)
  handle.unref?.()
  return () => {
    cancelled = true
    if (handle !== undefined) clearTimeout(handle)
  }
}
