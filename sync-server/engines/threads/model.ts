import { joinPath, lastSegment, strings, type JsonObject, type MeshNode, type NodePath } from '../../../shared/index.js'
import { realClock, type Clock as KitClock } from '../kit/index.js'

/**
 * The thread model (DESIGN.md "Threads (contract)", [THR1]): a `Thread` node holds the round
 * state, each message is a `ThreadMessage` child. Engine-made children use reserved segments
 * (`_r.`, `_sub.`, `_t.`) so no posted id can collide with them.
 */

export { RESTING, MESSAGE_ID, isMessageId, strings } from '../../../shared/index.js'

export function cellPath(thread: NodePath, id: string): NodePath {
  return joinPath(thread, id)
}

/** The one response cell of the round whose first input is `firstId`. */
export function responsePath(thread: NodePath, firstId: string): NodePath {
  return joinPath(thread, `_r.${firstId}`)
}

/** The sub-thread a round that starts with `firstId` delegates to. */
export function subThreadPath(thread: NodePath, firstId: string): NodePath {
  return joinPath(thread, `_sub.${firstId}`)
}

export function idOf(cell: string): string {
  return lastSegment(cell as NodePath)
}


export function statusOf(node: MeshNode): string {
  return typeof node.content.Status === 'string' ? node.content.Status : 'Idle'
}

/**
 * [THR3] The input the next round takes: every posted id (`UserMessageIds`, in posting order, then
 * any pending cell not listed there) not yet in `IngestedMessageIds`, as cell paths. Derived from
 * the ids, not from `PendingUserMessages` alone: with several instances an enqueue (any instance)
 * and a claim (the owner) may each rewrite that array on a copy that has not seen the other's
 * write, and the merge keeps one of them whole: a drained cell comes back, or a posted one goes.
 * `IngestedMessageIds` is written by the owner only, and each id is ingested once.
 */
export function roundInputs(thread: NodePath, c: JsonObject): NodePath[] {
  const ingested = new Set(strings(c.IngestedMessageIds))
  const out = new Map<string, NodePath>()
  for (const p of strings(c.PendingUserMessages)) {
    const id = idOf(p)
    if (!ingested.has(id) && !out.has(id)) out.set(id, p as NodePath)
  }
  const ordered = new Map<string, NodePath>()
  for (const id of strings(c.UserMessageIds)) {
    if (!ingested.has(id) && !ordered.has(id)) ordered.set(id, out.get(id) ?? cellPath(thread, id))
  }
  for (const [id, p] of out) if (!ordered.has(id)) ordered.set(id, p)
  return [...ordered.values()]
}

/** A round may be dispatched: resting as Idle or Cancelled (or never run) with input waiting (or a stale pending list to clear). */
export function needsDispatch(node: MeshNode): boolean {
  return restingWithInput(node.path, node.content)
}

/** [THR3] `needsDispatch` of a thread's content at `thread` (the engine's watch reads content only). */
export function restingWithInput(thread: NodePath, c: JsonObject): boolean {
  const s = typeof c.Status === 'string' ? c.Status : 'Idle'
  return (s === 'Idle' || s === 'Cancelled') && (c.HasPending === true || strings(c.PendingUserMessages).length > 0 || roundInputs(thread, c).length > 0)
}

export interface RoundState {
  Response: string
  Inputs: string[]
}

export function roundOf(content: JsonObject): RoundState | null {
  const r = content.Round
  if (!r || typeof r !== 'object' || Array.isArray(r)) return null
  const o = r as JsonObject
  return typeof o.Response === 'string' ? { Response: o.Response, Inputs: strings(o.Inputs) } : null
}

/**
 * A round's time (what an agent sees: `/sleep`, timestamps), made from the engine's kit `Clock`
 * by `roundClockOf`, so a round on the test mesh sleeps on virtual time.
 */
export interface Clock {
  now(): Date
  /** Resolves after `ms`; rejects with the signal's reason when `signal` aborts first. */
  sleep(ms: number, signal: AbortSignal): Promise<void>
}

/** The round clock on a kit clock: `sleep` is one timer of `clock`, cancelled by the signal. */
export function roundClockOf(clock: KitClock): Clock {
  return {
    now: () => new Date(clock.now()),
    sleep: (ms, signal) =>
      new Promise<void>((resolve, reject) => {
        if (signal.aborted) return reject(signal.reason as Error)
        const onAbort = () => {
          cancel()
          reject(signal.reason as Error)
        }
        const cancel = clock.setTimeout(() => {
          signal.removeEventListener('abort', onAbort)
          resolve()
        }, ms)
        signal.addEventListener('abort', onAbort, { once: true })
      }),
  }
}

export const systemClock: Clock = roundClockOf(realClock)

/** Removes `keys` from a content object (a field left out of a draft is removed by the write). */
export function without(content: JsonObject, ...keys: string[]): JsonObject {
  const out: JsonObject = { ...content }
  for (const k of keys) delete out[k]
  return out
}
