import { isValidSegment } from './path.js'

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
