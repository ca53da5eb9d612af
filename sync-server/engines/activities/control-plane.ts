import { distinctUntilChanged, map, Subscription, type Observable } from 'rxjs'
import type { Logger } from 'pino'
import { ActivityStatus, SYSTEM, jsonEqual, type JsonValue, type MeshNode, type NodePath } from '../../../shared/index.js'
import type { NodeApi } from '../../nodes/index.js'
import { bindToSignal, RECONCILE_PAGE, untilGone, type Clock } from '../kit/index.js'

/**
 * The activity control plane (seed "activity-control-plane"): callers patch RequestedStatus, the
 * owning engine watches its node and reacts. Both watchers here are self-healing (a fault
 * re-subscribes and replays the current state), stop for good when the node is gone (no storm
 * of re-subscriptions on a deleted node), and stop first thing on shutdown (`signal`), after
 * which they deliver nothing.
 */

export interface WatchOptions {
  log: Logger
  /** Aborted at the first instant of shutdown: the watcher unsubscribes and delivers nothing more. */
  signal?: AbortSignal
  /** The node is gone (deleted, or never existed): the watcher has stopped for good. */
  onGone?: () => void
  /** The clock of the re-subscription backoff (default wall time; tests pass a virtual one). */
  clock?: Clock
}

type NodeSource = Pick<NodeApi, 'node$'>

/** node$ that re-establishes itself after a fault and completes once the node is gone (the kit's watcher). */
function selfHealing(nodes: NodeSource, path: NodePath, opts: WatchOptions, what: string): Observable<MeshNode> {
  return untilGone(() => nodes.node$(path), path, { log: opts.log, what, backoff: { baseMs: 50, maxMs: 10_000 }, ...(opts.clock ? { clock: opts.clock } : {}) })
}

/** The RequestedStatus of an ActivityLog node's content (null when none is pending or it is not a status name). */
export function requestedStatusOf(node: MeshNode): ActivityStatus | null {
  const v = node.content.RequestedStatus
  return ActivityStatus.isMember(v) ? v : null
}

/**
 * [ACT2] Calls `handler` on each transition of the activity's RequestedStatus (distinct until
 * changed, the current value first; null = nothing pending). A handler that throws is logged and
 * the watch goes on.
 */
export function watchControlPlane(
  nodes: NodeSource,
  path: NodePath,
  handler: (requested: ActivityStatus | null, node: MeshNode) => void,
  opts: WatchOptions,
): Subscription {
  const sub = new Subscription()
  bindToSignal(sub, opts.signal)
  if (sub.closed) return sub
  let last: MeshNode | null = null
  sub.add(
    selfHealing(nodes, path, opts, 'control-plane watch')
      .pipe(
        map((node) => {
          last = node
          return requestedStatusOf(node)
        }),
        distinctUntilChanged(),
      )
      .subscribe({
        next: (requested) => {
          if (sub.closed || opts.signal?.aborted) return
          try {
            handler(requested, last!)
          } catch (err) {
            opts.log.error({ err, path }, 'control-plane handler failed')
          }
        },
        complete: () => {
          if (sub.closed || opts.signal?.aborted) return
          sub.unsubscribe()
          opts.onGone?.()
        },
      }),
  )
  return sub
}

/**
 * [ACT2] The general "needs work" trigger: on each distinct `fingerprint` of the node where
 * `needsDispatch` holds, runs `dispatch`, one at a time. The in-flight flag only coalesces:
 * correctness comes from the re-check `dispatch` makes inside `nodes.update` (a second dispatch
 * of the same state finds it claimed and does nothing). A state that arrives while a dispatch is
 * in flight is not lost: once it settles, the latest node is dispatched if its fingerprint
 * differs from the one that was dispatched.
 */
export function watchSubmission(
  nodes: NodeSource,
  path: NodePath,
  fingerprint: (node: MeshNode) => JsonValue,
  needsDispatch: (node: MeshNode) => boolean,
  dispatch: (node: MeshNode) => Promise<unknown>,
  opts: WatchOptions,
): Subscription {
  const sub = new Subscription()
  bindToSignal(sub, opts.signal)
  if (sub.closed) return sub
  let inFlight = false
  let latest: MeshNode | null = null
  let dispatchedPrint: JsonValue | undefined
  const run = (node: MeshNode) => {
    if (sub.closed || opts.signal?.aborted || !needsDispatch(node)) return
    if (inFlight) return
    inFlight = true
    const print = fingerprint(node)
    dispatchedPrint = print
    Promise.resolve()
      .then(() => dispatch(node))
      .catch((err: unknown) => opts.log.error({ err, path }, 'dispatch failed; the next state change retries'))
      .finally(() => {
        inFlight = false
        const next = latest
        if (next && !jsonEqual(fingerprint(next), print)) run(next)
      })
  }
  sub.add(
    selfHealing(nodes, path, opts, 'submission watch')
      .pipe(distinctUntilChanged((a, b) => jsonEqual(fingerprint(a), fingerprint(b))))
      .subscribe({
        next: (node) => {
          latest = node
          if (dispatchedPrint !== undefined && inFlight) return
          run(node)
        },
        complete: () => {
          if (sub.closed || opts.signal?.aborted) return
          sub.unsubscribe()
          opts.onGone?.()
        },
      }),
  )
  return sub
}

/** A field of a node's content, as JSON (undefined → null), for fingerprints. */
export function field(node: MeshNode, name: string): JsonValue {
  const v = node.content[name]
  return v === undefined ? null : v
}

export interface ReRequestSpec {
  /** The owner nodes: every node of this type is looked at once. */
  nodeType: string
  /** The owner's status field (e.g. `Status` of a CodeCheck, the seed's `CompilationStatus`). */
  field: string
  /** The in-progress value a live executor would be driving ("Compiling", "Checking"). */
  inProgress: string
  /** The request value its watcher dispatches on ("Pending"). */
  requested: string
}

/**
 * [ACT16] Owner-state re-request (seed "Activities — recover from the owner's own state"), for an
 * owner whose work runs elsewhere (an executor it does not host): at boot the owner has no work in
 * flight, so an owner still saying `inProgress` was interrupted, and flips itself back to
 * `requested` so its own watcher dispatches a fresh run. It reads the owner's OWN stored state
 * (never the executor's), and the flip is a compare-and-set inside `update`: a node that moved on
 * meanwhile is left alone. Never for an executor's own status (a hub that runs its work is
 * legitimately in progress as it comes up): that is [ACT9]'s supervisor. Returns the paths flipped.
 */
export async function reRequestInterrupted(
  nodes: Pick<NodeApi, 'query' | 'update'>,
  spec: ReRequestSpec,
  opts: { log: Logger; signal?: AbortSignal },
): Promise<NodePath[]> {
  const flipped: NodePath[] = []
  // Paged by path: a flipped node leaves the condition, so the next page starts after the last seen.
  let after: string | undefined
  for (;;) {
    const found = await nodes.query(SYSTEM, { nodeType: spec.nodeType, where: { [spec.field]: spec.inProgress }, limit: RECONCILE_PAGE, ...(after !== undefined ? { after } : {}) })
    for (const n of found) {
      if (opts.signal?.aborted) break
      await nodes.update(
        SYSTEM,
        n.path,
        (cur) => {
          if (!cur || cur.nodeType !== spec.nodeType || cur.content[spec.field] !== spec.inProgress) return undefined
          flipped.push(n.path)
          return { nodeType: cur.nodeType, name: cur.name, content: { ...cur.content, [spec.field]: spec.requested } }
        },
        'engine',
      )
    }
    if (found.length < RECONCILE_PAGE || opts.signal?.aborted) break
    after = found[found.length - 1]!.path
  }
  if (flipped.length > 0) opts.log.info({ count: flipped.length, nodeType: spec.nodeType }, `re-requested ${spec.field}: ${spec.inProgress} → ${spec.requested} after a restart`)
  return flipped
}
