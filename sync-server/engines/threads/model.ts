import { setTimeout as sleepFor } from 'node:timers/promises'
import { joinPath, lastSegment, strings, type JsonObject, type MeshNode, type NodePath } from '../../../shared/index.js'

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

/** A round may be dispatched: resting as Idle or Cancelled (or never run) with input waiting. */
export function needsDispatch(node: MeshNode): boolean {
  const s = statusOf(node)
  return (s === 'Idle' || s === 'Cancelled') && strings(node.content.PendingUserMessages).length > 0
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

/** Time for the engine: injectable, so tests and the kit's Clock can drive it. */
export interface Clock {
  now(): Date
  /** Resolves after `ms`; rejects with an AbortError when `signal` aborts first. */
  sleep(ms: number, signal: AbortSignal): Promise<void>
}

export const systemClock: Clock = {
  now: () => new Date(),
  sleep: (ms, signal) => sleepFor(ms, undefined, { signal }),
}

/** Removes `keys` from a content object (a field left out of a draft is removed by the write). */
export function without(content: JsonObject, ...keys: string[]): JsonObject {
  const out: JsonObject = { ...content }
  for (const k of keys) delete out[k]
  return out
}
