import { WeftError } from '../../shared/index.js'

/** [AUTH3] How failed logins slow down further tries. Every number is a setting (README). */
export interface LoginThrottleLimits {
  /** Failed logins an account takes before it is locked (LOGIN_FREE_FAILURES_PER_ACCOUNT). */
  freePerAccount: number
  /** Failed logins one address makes, over every account, before it is locked (LOGIN_FREE_FAILURES_PER_ADDRESS). */
  freePerAddress: number
  /** The first lockout; each further failure doubles it (LOGIN_LOCKOUT_BASE_MS). */
  lockoutBaseMs: number
  /** The longest lockout; failures are also forgotten this long after the last one (LOGIN_LOCKOUT_MAX_MS). */
  lockoutMaxMs: number
}

export const DEFAULT_LOGIN_LIMITS: LoginThrottleLimits = {
  freePerAccount: 5,
  freePerAddress: 20,
  lockoutBaseMs: 1_000,
  lockoutMaxMs: 15 * 60_000,
}

/**
 * Keys remembered at most: an address or email flood cannot grow memory without bound. Past it
 * the key whose last failure is oldest goes first (a key under attack keeps failing, so it stays).
 */
const MAX_KEYS = 100_000

interface Failures {
  count: number
  /** Attempts of this key being checked right now (their password is being hashed). */
  inFlight: number
  last: number
  lockedUntil: number
}

/** One login attempt admitted by the throttle: settle it exactly once. */
export interface LoginAttempt {
  /** The password was wrong (or the account unknown): counts against both keys. */
  failed(): void
  /** The password was right: the account's failures are forgotten. */
  succeeded(): void
  /** Neither (the attempt broke on something else): nothing is counted. */
  abandoned(): void
}

/**
 * [AUTH3] Failed logins per account (the email, whether or not an account has it, so the answer
 * never tells which emails exist) and per client address, in memory. A key's `free` failures
 * are answered at once; the free-th locks the key for `lockoutBaseMs`, and each failure after
 * doubles the lockout, up to `lockoutMaxMs`. While either key is locked, a login is answered 429 `rate_limited` with
 * `Retry-After` before the password is even hashed. Attempts in flight count: once a key's free
 * failures may be used up, it has at most one attempt at a time, so a burst of concurrent
 * guesses gets no further than guesses sent one after another. A success clears the account's
 * failures (not the address's: logging in to an account of one's own must not buy more guesses
 * at others).
 */
export class LoginThrottle {
  private readonly keys = new Map<string, Failures>()

  constructor(
    private readonly limits: LoginThrottleLimits = DEFAULT_LOGIN_LIMITS,
    private readonly now: () => number = Date.now,
  ) {}

  /** Admits an attempt, or throws `rate_limited` (with the seconds to wait) while a key is locked. */
  begin(email: string, address: string): LoginAttempt {
    const at = this.now()
    const account = accountKey(email)
    const from = addressKey(address)
    const wait = Math.max(this.waitFor(account, this.limits.freePerAccount, at), this.waitFor(from, this.limits.freePerAddress, at))
    if (wait > 0) {
      const seconds = Math.max(1, Math.ceil(wait / 1000))
      throw new RateLimited(`Too many failed logins; try again in ${seconds} s.`, seconds)
    }
    const a = this.entry(account, at)
    const b = this.entry(from, at)
    a.inFlight++
    b.inFlight++
    let settled = false
    const settle = (outcome: 'failed' | 'succeeded' | 'abandoned') => {
      if (settled) return
      settled = true
      a.inFlight--
      b.inFlight--
      const now = this.now()
      if (outcome === 'failed') {
        this.count(account, a, this.limits.freePerAccount, now)
        this.count(from, b, this.limits.freePerAddress, now)
      } else if (outcome === 'succeeded') {
        this.keys.delete(account)
      }
    }
    return { failed: () => settle('failed'), succeeded: () => settle('succeeded'), abandoned: () => settle('abandoned') }
  }

  /** Keys held (diagnostics and tests: the map is bounded). */
  get size(): number {
    return this.keys.size
  }

  /** How long the key must wait before another attempt (0: it may try now). */
  private waitFor(key: string, free: number, at: number): number {
    const f = this.keys.get(key)
    if (!f) return 0
    if (f.inFlight === 0 && at - f.last > this.limits.lockoutMaxMs) {
      this.keys.delete(key)
      return 0
    }
    const locked = f.lockedUntil - at
    if (locked > 0) return locked
    // Past the free failures, one attempt at a time: its outcome decides the next lockout.
    if (f.inFlight > 0 && f.count + f.inFlight >= free) return this.limits.lockoutBaseMs
    return 0
  }

  private entry(key: string, at: number): Failures {
    let f = this.keys.get(key)
    if (!f) {
      f = { count: 0, inFlight: 0, last: at, lockedUntil: 0 }
      this.keys.set(key, f)
      if (this.keys.size > MAX_KEYS) this.keys.delete(this.keys.keys().next().value as string)
    }
    return f
  }

  private count(key: string, f: Failures, free: number, at: number): void {
    if (at - f.last > this.limits.lockoutMaxMs) f.count = 0
    f.count++
    f.last = at
    // The free-th failure locks for the base time, each one after doubles it. 2^30 passes any
    // sane maximum; the exponent is capped so the number stays finite.
    const over = f.count - free
    if (over >= 0) f.lockedUntil = at + Math.min(this.limits.lockoutMaxMs, this.limits.lockoutBaseMs * 2 ** Math.min(over, 30))
    // Most recently failed last: the bound drops the stalest key. (An entry the bound or a
    // success dropped meanwhile is put back: its failure still counts.)
    this.keys.delete(key)
    this.keys.set(key, f)
    if (this.keys.size > MAX_KEYS) this.keys.delete(this.keys.keys().next().value as string)
  }
}

/** 429 `rate_limited`, carrying what `Retry-After` says. */
export class RateLimited extends WeftError {
  constructor(
    message: string,
    readonly retryAfterSeconds: number,
  ) {
    super('rate_limited', message, { retryAfterSeconds })
  }
}

function accountKey(email: string): string {
  return `a:${email.trim().toLowerCase()}`
}

function addressKey(address: string): string {
  return `i:${address}`
}
