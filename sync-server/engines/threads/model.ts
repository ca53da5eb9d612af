import { inputState, isJsonObject, joinPath, lastSegment, postedIds, roundInputs, strings, type JsonObject, type MeshNode, type NodePath } from '../../../shared/index.js'
import { realClock, type Clock as KitClock } from '../kit/index.js'

/**
 * The thread model (DESIGN.md "Threads (contract)", [THR1]): a `Thread` node holds the round
 * state, each message is a `ThreadMessage` child. Engine-made children use reserved segments
 * (`_r.`, `_sub.`, `_t.`) so no posted id can collide with them.
 */

export { RESTING, MESSAGE_ID, isMessageId, postedIds, roundInputs, strings } from '../../../shared/index.js'

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

/** [THR26] The ordinal the next posted id gets: past every listed and every posted one. */
export function nextOrdinal(c: JsonObject): number {
  let n = strings(c.UserMessageIds).length
  const posted = isJsonObject(c.Posted) ? c.Posted : {}
  for (const v of Object.values(posted)) if (typeof v === 'number' && Number.isFinite(v) && v >= n) n = v + 1
  return n
}

/**
 * [THR27] Who among a round's authors did not choose the agent it would run: the author of an
 * input posted before the thread's `Agent` last changed (its ordinal below `AgentSince`), unless
 * she made that change herself (`AgentSetBy`). Null: every author posted to this agent. An input
 * whose ordinal is not known counts as posted before (the check fails closed).
 */
export function unchosenBy(c: JsonObject, inputs: readonly { id: string; authors: readonly string[] }[]): string | null {
  const since = typeof c.AgentSince === 'number' ? c.AgentSince : 0
  if (since <= 0) return null
  const setBy = typeof c.AgentSetBy === 'string' ? c.AgentSetBy : null
  const posted = isJsonObject(c.Posted) ? c.Posted : {}
  const listed = strings(c.UserMessageIds)
  for (const input of inputs) {
    const o = Object.hasOwn(posted, input.id) ? posted[input.id] : undefined
    const ordinal = typeof o === 'number' ? o : listed.indexOf(input.id)
    if (ordinal >= since) continue
    const other = input.authors.find((a) => a !== setBy)
    if (other !== undefined) return other
  }
  return null
}

/**
 * [THR2] [THR26] The thread's content with cell `id` enqueued, or null when it is posted already.
 * The id goes into `Posted` (its own key: two instances enqueuing at once both keep theirs), into
 * `UserMessageIds` and the pending list (the contract's lists, which such a merge may cut), and
 * `HasPending` is set.
 */
export function enqueuedContent(thread: NodePath, c: JsonObject, id: string): JsonObject | null {
  const ids = strings(c.UserMessageIds)
  const posted = isJsonObject(c.Posted) ? c.Posted : {}
  if (ids.includes(id) || Object.hasOwn(posted, id) || strings(c.IngestedMessageIds).includes(id)) return null
  const n = nextOrdinal(c)
  return {
    ...c,
    Posted: { ...posted, [id]: n },
    UserMessageIds: [...ids, id],
    PendingUserMessages: [...strings(c.PendingUserMessages), cellPath(thread, id)],
    HasPending: true,
  }
}

/**
 * [THR3] The claim's write: Status → StartingExecution with every input of `roundInputs` drained
 * into one round (Messages gets them and the round's one response cell, IngestedMessageIds their
 * ids), `UserMessageIds` completed from `Posted`; with only stale pending entries, those cleared
 * and no round. Null when the thread needs no dispatch.
 */
export function claimedContent(thread: NodePath, c: JsonObject, at: string): { content: JsonObject; round: RoundState | null } | null {
  if (!restingWithInput(c)) return null
  const inputs = roundInputs(thread, c)
  const ids = strings(c.UserMessageIds)
  const listed = new Set(ids)
  const userMessageIds = [...ids, ...postedIds(c, (id) => listed.has(id))]
  if (inputs.length === 0) return { content: { ...c, UserMessageIds: userMessageIds, PendingUserMessages: [], HasPending: false }, round: null }
  const response = responsePath(thread, idOf(inputs[0]!))
  const round: RoundState = { Response: response, Inputs: inputs }
  const content: JsonObject = {
    ...without(c, 'Disposition', 'Question'),
    // A thread made before the map gets it here, at its first round (its enqueues then add keys).
    Posted: isJsonObject(c.Posted) ? c.Posted : {},
    Status: 'StartingExecution',
    ExecutionStartedAt: at,
    PendingUserMessages: [],
    HasPending: false,
    UserMessageIds: userMessageIds,
    IngestedMessageIds: [...strings(c.IngestedMessageIds), ...inputs.map(idOf)],
    Messages: [...strings(c.Messages), ...inputs, response],
    Round: { Response: response, Inputs: inputs },
  }
  return { content, round }
}

/** A round may be dispatched: resting as Idle or Cancelled (or never run) with input waiting (or a stale pending list to clear). */
export function needsDispatch(node: MeshNode): boolean {
  return restingWithInput(node.content)
}

/**
 * [THR3] `needsDispatch` of a thread's content (the engine's watch reads content only).
 * [THR26] Also a `UserMessageIds` list missing a posted id: the list is one value, and an enqueue
 * its writer had not seen may win the merge over it, so the owner lists the ids again.
 */
export function restingWithInput(c: JsonObject): boolean {
  const s = typeof c.Status === 'string' ? c.Status : 'Idle'
  if (s !== 'Idle' && s !== 'Cancelled') return false
  // (A pending list of stale entries too: the claim clears it.)
  if (c.HasPending === true || strings(c.PendingUserMessages).length > 0) return true
  // Input waiting, or more posted ids than listed ones (a thread's ids from before the map are
  // listed only, so there a missing one waits for the thread's next claim).
  const { waiting, unlisted } = inputState(c)
  return waiting || unlisted
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
