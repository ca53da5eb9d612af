/**
 * The one clock of an engine (issue 17): every `now()`, every delay and every periodic tick of the
 * kit goes through an injected `Clock`, so the test mesh (test/sim/) runs an engine on virtual
 * time: no sleeps, a backoff of an hour passes in one `advance`.
 */

export type CancelTimer = () => void

export interface Clock {
  /** Milliseconds since the epoch. */
  now(): number
  /** Runs `fn` once, `ms` from now (never inside the caller's stack). */
  setTimeout(fn: () => void, ms: number): CancelTimer
}

/** setTimeout takes at most 2^31-1 ms; a longer wait is chained, re-reading the clock each hop. */
export const MAX_TIMEOUT_MS = 2 ** 31 - 1

/** Wall time. Timers are unref'd: a pending one never keeps a stopping process alive. */
export const realClock: Clock = {
  now: () => Date.now(),
  setTimeout(fn, ms) {
    const at = Date.now() + Math.max(0, ms)
    let handle: ReturnType<typeof setTimeout> | undefined
    let cancelled = false
    const arm = () => {
      if (cancelled) return
      const delay = at - Date.now()
      if (delay > 0) {
        handle = setTimeout(arm, Math.min(delay, MAX_TIMEOUT_MS))
        handle.unref?.()
        return
      }
      fn()
    }
    handle = setTimeout(arm, Math.min(Math.max(0, ms), MAX_TIMEOUT_MS))
    handle.unref?.()
    return () => {
      cancelled = true
      if (handle !== undefined) clearTimeout(handle)
    }
  },
}

/** Repeats `fn` every `ms` on `clock` until the returned function is called. */
export function every(clock: Clock, ms: number, fn: () => void): CancelTimer {
  let cancel: CancelTimer = () => undefined
  let stopped = false
  const tick = () => {
    if (stopped) return
    cancel = clock.setTimeout(tick, ms)
    fn()
  }
  cancel = clock.setTimeout(tick, ms)
  return () => {
    stopped = true
    cancel()
  }
}

interface Pending {
  at: number
  seq: number
  fn: () => void
}

/**
 * Virtual time for tests: nothing fires until `advance` moves the clock. Timers due at the same
 * instant fire in the order they were set; between two timers every pending promise settles
 * (`settle`), so the work a timer starts is done before the next one fires.
 */
export class VirtualClock implements Clock {
  private t: number
  private seq = 0
  private readonly pending: Pending[] = []

  constructor(start = Date.UTC(2026, 0, 1)) {
    this.t = start
  }

  now(): number {
    return this.t
  }

  setTimeout(fn: () => void, ms: number): CancelTimer {
    const p: Pending = { at: this.t + Math.max(0, ms), seq: this.seq++, fn }
    this.pending.push(p)
    return () => {
      const i = this.pending.indexOf(p)
      if (i >= 0) this.pending.splice(i, 1)
    }
  }

  /** Timers not yet fired. */
  get timers(): number {
    return this.pending.length
  }

  /** Moves time forward by `ms`, firing every timer due on the way (and those they set). */
  async advance(ms: number): Promise<void> {
    const until = this.t + ms
    for (;;) {
      await settle()
      const next = this.earliest()
      if (!next || next.at > until) break
      this.pending.splice(this.pending.indexOf(next), 1)
      this.t = Math.max(this.t, next.at)
      next.fn()
    }
    this.t = until
    await settle()
  }

  /** Fires timers until none is left (or `limit` have fired): "let everything happen". */
  async runAll(limit = 10_000): Promise<number> {
    let fired = 0
    for (; fired < limit; fired++) {
      await settle()
      const next = this.earliest()
      if (!next) break
      this.pending.splice(this.pending.indexOf(next), 1)
      this.t = Math.max(this.t, next.at)
      next.fn()
    }
    await settle()
    return fired
  }

  private earliest(): Pending | undefined {
    let best: Pending | undefined
    for (const p of this.pending) if (!best || p.at < best.at || (p.at === best.at && p.seq < best.seq)) best = p
    return best
  }
}

/**
 * Lets every promise chain that can settle without real time settle: macrotask turns (setImmediate)
 * until a turn passes with nothing new, bounded. Storage and worker threads answer on real I/O, so
 * callers that wait for them use the engine's own `idle()`.
 */
export async function settle(turns = 20): Promise<void> {
  for (let i = 0; i < turns; i++) await new Promise<void>((resolve) => setImmediate(resolve))
}
