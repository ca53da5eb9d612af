import { isValidSegment, joinPath, lastSegment, type NodePath } from './path.js'
import { isJsonObject, type JsonObject } from './json.js'

/**
 * The pure parts of the thread model (DESIGN.md "Threads (contract)", [THR1]) that the engine
 * and the thread page share, so the page's reading of a thread cannot drift from the engine's.
 */

/** Statuses in which no round is in flight. */
export const RESTING: ReadonlySet<string> = new Set(['Idle', 'Cancelled', 'Done'])

/** A posted message id: a plain path segment a person chooses (or the server generates). */
export const MESSAGE_ID = /^[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}$/

export function isMessageId(id: unknown): id is string {
  return typeof id === 'string' && MESSAGE_ID.test(id) && isValidSegment(id)
}

/** The strings of a list field (anything else is no list). */
export function strings(v: unknown): string[] {
  return Array.isArray(v) ? v.filter((x): x is string => typeof x === 'string') : []
}

/**
 * [THR26] The posted ids of a thread's `Posted` map (id → its posting ordinal) that `skip` does not
 * hold, in posting order (ordinal, then id: two instances enqueuing at once give the same
 * ordinal). A map, not a list: each enqueue adds its own key, and keys of one Y.Map written on two
 * instances' copies both survive the merge, where a list is one value and the merge keeps one
 * writer's whole. Only what is left after `skip` is sorted: on a long thread that is a few ids.
 */
export function postedIds(c: JsonObject, skip: (id: string) => boolean = () => false): string[] {
  if (!isJsonObject(c.Posted)) return []
  const posted = c.Posted
  const left: [string, number][] = []
  for (const id of Object.keys(posted)) {
    if (skip(id)) continue
    const n = posted[id]
    left.push([id, typeof n === 'number' && Number.isFinite(n) ? n : Number.MAX_SAFE_INTEGER])
  }
  left.sort((a, b) => a[1] - b[1] || (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0))
  return left.map(([id]) => id)
}

/** [THR26] The keys of a thread's `Posted` map, unsorted (none when it has no map). */
export function postedKeys(c: JsonObject): string[] {
  return isJsonObject(c.Posted) ? Object.keys(c.Posted) : []
}

/** [THR26] Every id a thread knows as posted: listed in `UserMessageIds` or a key of `Posted`. */
export function knownMessageIds(c: JsonObject): Set<string> {
  return new Set([...strings(c.UserMessageIds), ...postedKeys(c)])
}

/**
 * [THR3] [THR25] [THR26] The input the next round takes, as cell paths: every posted id
 * (`UserMessageIds` in posting order, then the `Posted` ids not listed there, then any pending
 * cell not listed in either) not yet in `IngestedMessageIds`. Derived from the ids, not from
 * `PendingUserMessages` alone: with several instances an enqueue (any instance) and a claim (the
 * owner) may each rewrite a list on a copy that has not seen the other's write, and the merge
 * keeps one of them whole. `IngestedMessageIds` is written by the owner only, each id once; the
 * `Posted` map loses no key to a merge. The thread page shows the same list as waiting.
 */
export function roundInputs(thread: NodePath, c: JsonObject): NodePath[] {
  return [...waiting(c)].map(([id, cell]) => cell ?? joinPath(thread, id))
}

/** Whether a round has input waiting (`roundInputs` is not empty). */
export function hasWaitingInput(c: JsonObject): boolean {
  return inputState(c).waiting
}

/**
 * [THR26] In one pass over the thread's ids (it runs at every change of a thread): whether a round
 * has input waiting (as `roundInputs`), and whether `Posted` holds more ids than `UserMessageIds`
 * lists (so one at least is missing from the list: every listed id was posted, each once).
 */
export function inputState(c: JsonObject): { waiting: boolean; unlisted: boolean } {
  const ingested = new Set(strings(c.IngestedMessageIds))
  const listed = strings(c.UserMessageIds)
  const posted = postedKeys(c)
  const unlisted = posted.length > listed.length
  const open = (id: string) => !ingested.has(id) && isMessageId(id)
  const waiting = strings(c.PendingUserMessages).some((p) => !ingested.has(lastSegment(p as NodePath))) || listed.some(open) || posted.some(open)
  return { waiting, unlisted }
}

/** The ids `roundInputs` takes, in its order, each with its pending cell path when one is listed. */
function waiting(c: JsonObject): Map<string, NodePath | null> {
  const ingested = new Set(strings(c.IngestedMessageIds))
  const pending = new Map<string, NodePath>()
  for (const p of strings(c.PendingUserMessages)) {
    const id = lastSegment(p as NodePath)
    if (!ingested.has(id) && !pending.has(id)) pending.set(id, p as NodePath)
  }
  const ordered = new Map<string, NodePath | null>()
  const listed = strings(c.UserMessageIds)
  for (const id of listed) {
    if (!ingested.has(id) && !ordered.has(id) && isMessageId(id)) ordered.set(id, pending.get(id) ?? null)
  }
  // Only the posted ids neither ingested nor listed are sorted (a long thread's are a few).
  for (const id of postedIds(c, (id) => ingested.has(id) || ordered.has(id))) if (isMessageId(id)) ordered.set(id, pending.get(id) ?? null)
  for (const [id, p] of pending) if (!ordered.has(id)) ordered.set(id, p)
  return ordered
}
