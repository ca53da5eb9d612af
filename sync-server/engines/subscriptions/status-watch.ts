import { Subscription, type Observable } from 'rxjs'
import pino from 'pino'
import type { MeshNode, NodePath } from '../../../shared/index.js'
import { selfHealing, type Clock } from '../kit/index.js'
import { isResting, readFieldInsensitive, type Trigger } from './model.js'

type StatusTrigger = Extract<Trigger, { type: 'NodeStatus' }>

export interface StatusWatchHandlers {
  /** First non-resting value seen: persist it, so RequireActiveFirst survives a restart. */
  onActive(node: MeshNode): void
  /** The status entered a resting value (after an active one when required). */
  onResting(node: MeshNode): void
  /** The watched node is gone (or never existed): the watch has stopped for good. */
  onGone(reason: string): void
  /** A transient fault; the watch re-establishes itself after a back-off. */
  onFault(error: unknown, attempt: number): void
}

const BACKOFF = { baseMs: 100, maxMs: 30_000 }
/** Faults are reported through onFault; the kit's watcher needs a logger it will not use. */
const quiet = pino({ level: 'silent' })

/**
 * A self-healing watch of one node's status field (kit/node-watcher). A fault re-subscribes (with
 * back-off, reset on the next emission) and replays the current state; a node that is gone stops the watch without
 * re-subscribing (the anti-storm rule). It fires at most once. A resting status counts only when
 * the node's `HoldField` (if the subscription names one) is none of its `HoldValues`.
 */
export function watchStatus(node$: Observable<MeshNode | null>, trigger: StatusTrigger, handlers: StatusWatchHandlers, clock?: Clock): Subscription {
  const subscription = new Subscription()
  let sawNode = false
  let sawActive = trigger.observedActive
  let done = false
  const finish = () => {
    done = true
    subscription.unsubscribe()
  }
  // The kit's self-healing watcher (one with the activity control plane's): a null passes through.
  const inner = selfHealing(() => node$, trigger.watchPath as NodePath, { log: quiet, what: 'status watch', backoff: BACKOFF, onFault: handlers.onFault, ...(clock ? { clock } : {}) })
    .subscribe((node) => {
      if (done) return
      if (node === null) {
        finish()
        handlers.onGone(
          sawNode
            ? `Watched node ${trigger.watchPath} was deleted before reaching a resting ${trigger.statusField}.`
            : `Watched node ${trigger.watchPath} does not exist.`,
        )
        return
      }
      sawNode = true
      const value = readFieldInsensitive(node.content, trigger.statusField)
      if (isResting(value, trigger.restingValues)) {
        if (trigger.requireActiveFirst && !sawActive) return
        // [THR23] Resting on hold (a question asked, not an answer given): not done yet.
        if (trigger.holdField !== null && isResting(readFieldInsensitive(node.content, trigger.holdField), trigger.holdValues)) return
        finish()
        handlers.onResting(node)
        return
      }
      // Only a present, non-resting value counts as "it ran"; a missing field proves nothing.
      if (value !== undefined && value !== null && !sawActive) {
        sawActive = true
        handlers.onActive(node)
      }
    })
  subscription.add(inner)
  return subscription
}
