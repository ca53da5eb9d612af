import type { JsonObject } from '../../../shared/index.js'

/**
 * The one retry policy of every engine (issue 17). What a retry needs to survive a restart lives
 * ON THE NODE, in two fields the engine writes with its claim: `Attempts` (failures so far) and
 * `NextRetryAt` (ISO time before which the work is not retried). Nothing is kept in memory, so a
 * restart neither forgets a count nor retries early; the reconciler finds work whose time has
 * come. Delay: `baseMs · 2^(attempts-1)`, capped at `maxMs`.
 */
export interface BackoffPolicy {
  baseMs: number
  maxMs: number
  /** Failures after which the work gives up (the engine ends it Failed). */
  maxAttempts: number
}

export interface RetryState {
  Attempts: number
  NextRetryAt: string | null
}

export function retryStateOf(content: JsonObject): RetryState {
  const a = content.Attempts
  const at = content.NextRetryAt
  return {
    Attempts: typeof a === 'number' && Number.isInteger(a) && a >= 0 ? a : 0,
    NextRetryAt: typeof at === 'string' && !Number.isNaN(Date.parse(at)) ? at : null,
  }
}

export function delayMs(policy: BackoffPolicy, attempts: number): number {
  return Math.min(policy.maxMs, policy.baseMs * 2 ** Math.max(0, attempts - 1))
}

/**
 * After a failure: the fields to write with it (`retry`), or `exhausted` when this failure was
 * the last one allowed (then the engine writes its terminal state, with `Attempts`).
 */
export function afterFailure(policy: BackoffPolicy, content: JsonObject, now: number): { kind: 'retry'; fields: RetryState; at: number } | { kind: 'exhausted'; attempts: number } {
  const attempts = retryStateOf(content).Attempts + 1
  if (attempts >= policy.maxAttempts) return { kind: 'exhausted', attempts }
  const at = now + delayMs(policy, attempts)
  return { kind: 'retry', at, fields: { Attempts: attempts, NextRetryAt: new Date(at).toISOString() } }
}

/** Whether the work may run now; a node without retry fields always may. */
export function isDue(content: JsonObject, now: number): boolean {
  const at = retryStateOf(content).NextRetryAt
  return at === null || Date.parse(at) <= now
}

/** Milliseconds until the next retry (0 when due). */
export function waitMs(content: JsonObject, now: number): number {
  const at = retryStateOf(content).NextRetryAt
  return at === null ? 0 : Math.max(0, Date.parse(at) - now)
}
