import type { Subscription} from 'rxjs';
import { defer, Observable, retry, takeWhile } from 'rxjs'
import type { Logger } from 'pino'
import type { MeshNode, NodePath } from '../../../shared/index.js'
import { delayMs, type BackoffPolicy } from './backoff.js'
import { realClock, type Clock } from './clock.js'

/**
 * The self-healing node watcher (issue 17; was two near-twins in activities/control-plane.ts and
 * subscriptions/status-watch.ts): `node$(path)` that re-subscribes after a fault, with the kit's
 * backoff on the injected clock (reset by the next emission), replaying the current state.
 * `selfHealing` passes a null (gone) through; `untilGone` completes at the first null, so a
 * deleted node stops its watcher for good (no storm of re-subscriptions).
 */
export interface HealOptions {
  log: Logger
  what: string
  clock?: Clock
  backoff?: Pick<BackoffPolicy, 'baseMs' | 'maxMs'>
  onFault?: (error: unknown, attempt: number) => void
}

const DEFAULT_BACKOFF = { baseMs: 50, maxMs: 10_000 }

/** Waits `ms` on `clock`, as an observable (rxjs `timer`, on an injected clock). */
function wait(clock: Clock, ms: number): Observable<0> {
  return new Observable<0>((subscriber) =>
    clock.setTimeout(() => {
      subscriber.next(0)
      subscriber.complete()
    }, ms),
  )
}

export function selfHealing(source: () => Observable<MeshNode | null>, path: NodePath, opts: HealOptions): Observable<MeshNode | null> {
  const clock = opts.clock ?? realClock
  const policy = { ...DEFAULT_BACKOFF, ...opts.backoff, maxAttempts: Infinity }
  return defer(source).pipe(
    retry({
      resetOnSuccess: true,
      delay: (error: unknown, attempt: number) => {
        if (opts.onFault) opts.onFault(error, attempt)
        else opts.log.warn({ err: error, path, attempt }, `${opts.what} faulted; re-establishing`)
        return wait(clock, delayMs(policy, attempt))
      },
    }),
  )
}

/** `selfHealing`, completing when the node is gone. */
export function untilGone(source: () => Observable<MeshNode | null>, path: NodePath, opts: HealOptions): Observable<MeshNode> {
  return selfHealing(source, path, opts).pipe(takeWhile((node): node is MeshNode => node !== null))
}

/** Ties a subscription to a shutdown signal: aborting unsubscribes before anything else runs. */
export function bindToSignal(sub: Subscription, signal: AbortSignal | undefined): Subscription {
  if (!signal) return sub
  if (signal.aborted) {
    sub.unsubscribe()
    return sub
  }
  const onAbort = () => sub.unsubscribe()
  signal.addEventListener('abort', onAbort, { once: true })
  sub.add(() => signal.removeEventListener('abort', onAbort))
  return sub
}
