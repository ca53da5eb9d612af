import type * as Y from 'yjs'
import type { JsonValue } from '../../shared/json.js'
import { CONTENT_MAP } from '../../shared/merge-patch.js'
import { baseText } from '../sync/text-rebase.js'
import type { OutboxRow } from './db.js'

/**
 * Refused edits as a person thinks of them: one entry per run of edits of a node's field, holding
 * the field as the last refused edit of the run left it (13 refused keystrokes of offline typing
 * are one entry with the final text, not 13). The ids are every outbox entry of the run:
 * discarding the entry discards them all.
 *
 * [WEB80] A run ends where an edit did not build on the one before: a text edit whose field, as
 * it found it (`base`), no longer held the run's text (the doc was rebuilt from the server's
 * state between, e.g. after the first refusal, and the person typed again). Its text is a new
 * entry: a later refusal never hides an earlier refused text. Edits without a base (a value
 * replaced whole, entries stored before [WEB53]) carry on the run, as they always did.
 */
export interface RefusedGroup {
  /** `path`, `field` and the run's first entry id: one key. */
  key: string
  path: string
  field: string
  /** The field as the last refused edit left it; null when that edit removed it. */
  value: JsonValue | null
  ids: number[]
  /** The cause: the first refusal's own code, not the `invalid_update` of edits that only followed it. */
  code: string | null
  message: string | null
  /** When the last of them was made. */
  at: string
  /**
   * [WEB83] The edits could not be applied (`invalid_update`) and the field is gone from the node
   * as this device last had it from the server: someone removed it meanwhile.
   */
  fieldRemoved?: boolean
  /**
   * [SYNC22] The edits were of a node deleted while they were on their way, another node now at
   * its path: Try again would put them into that other node.
   */
  nodeReplaced?: boolean
}

/**
 * [SYNC22] Why an edit of a node replaced at its path meanwhile was refused: stored on the entry
 * (refuseEditsOfReplaced) and said by the refused list.
 */
export const NODE_REPLACED_MESSAGE =
  'This node was deleted while this edit was on its way, and another node was made in its place: the edit was not put into it. It was kept: copy it, or discard it.'

/** True when every character of `text` is in `within`, in order (others may have typed between). */
function heldIn(text: string, within: string): boolean {
  if (text.length > within.length) return false
  let j = 0
  for (let i = 0; i < within.length && j < text.length; i++) if (within[i] === text[j]) j++
  return j === text.length
}

/** [WEB80] Whether `row`'s edit of `field` built on `previous` (the run's text so far). */
function buildsOn(row: OutboxRow, field: string, previous: JsonValue | null): boolean {
  const b = row.base?.[field]
  const value = (row.patch as Record<string, JsonValue> | undefined)?.[field]
  if (!b || typeof value !== 'string') return true
  const found = baseText(value, b)
  if (found === null) return true
  return typeof previous === 'string' && heldIn(previous, found)
}

export function groupRefused(rows: readonly OutboxRow[]): RefusedGroup[] {
  const groups: (RefusedGroup & { causeFound: boolean })[] = []
  /** The current run of each `path` and `field`. */
  const runs = new Map<string, RefusedGroup & { causeFound: boolean }>()
  const ordered = [...rows].filter((r) => r.status === 'refused' && r.id !== undefined).sort((a, b) => a.id! - b.id!)
  for (const row of ordered) {
    const patch = row.patch && typeof row.patch === 'object' && !Array.isArray(row.patch) ? row.patch : {}
    const fields = Object.keys(patch)
    for (const field of fields.length ? fields : ['']) {
      const runKey = `${row.path}\n${field}`
      let g = runs.get(runKey)
      if (!g || (field && !buildsOn(row, field, g.value))) {
        g = { key: `${runKey}\n${row.id}`, path: row.path, field, value: null, ids: [], code: null, message: null, at: row.at, causeFound: false }
        runs.set(runKey, g)
        groups.push(g)
      }
      g.value = field ? ((patch as Record<string, JsonValue>)[field] ?? null) : null
      g.ids.push(row.id!)
      if (row.nodeReplaced) g.nodeReplaced = true
      g.at = row.at
      if (!g.causeFound && row.code && row.code !== 'invalid_update') {
        g.code = row.code
        g.message = row.message ?? null
        g.causeFound = true
      } else if (!g.code) {
        g.code = row.code ?? null
        g.message = row.message ?? null
      }
    }
  }
  // An edit refused only because an earlier one of the same node was (Yjs clocks of one client
  // are contiguous) is told the earlier one's cause.
  const causeOf = new Map<string, { code: string; message: string | null }>()
  for (const row of ordered) {
    if (row.code && row.code !== 'invalid_update' && !causeOf.has(row.path)) causeOf.set(row.path, { code: row.code, message: row.message ?? null })
  }
  return groups.map(({ causeFound, ...g }) => {
    const cause = causeFound ? null : causeOf.get(g.path)
    return cause ? { ...g, code: cause.code, message: cause.message } : g
  })
}

/** What Copy puts on the clipboard: the text itself for a text field, JSON otherwise. */
export function refusedText(g: RefusedGroup): string {
  return typeof g.value === 'string' ? g.value : JSON.stringify(g.value, null, 2)
}

/** [WEB83] Edits the server could not apply to a field: the field may have been removed meanwhile (markRemovedFields tells). */
export function mayBeRemovedField(g: RefusedGroup): g is RefusedGroup & { field: string } {
  return g.code === 'invalid_update' && !!g.field
}

/**
 * [WEB83] Marks the groups whose edits the server could not apply (`invalid_update`: after the
 * replay on a rebuilt doc, [WEB53]) to a field the node no longer has on this device (rebuilt from
 * the server's state): someone removed the field meanwhile. The server says so only in words for
 * developers ("writes into a deleted type", "refers to content the server has garbage-collected"),
 * and the error codes are a public contract, so this device reads it from the node itself.
 */
export async function markRemovedFields(groups: RefusedGroup[], loadDoc: (path: string) => Promise<Y.Doc>): Promise<RefusedGroup[]> {
  const docs = new Map<string, Promise<Y.Doc>>()
  return Promise.all(
    groups.map(async (g) => {
      if (!mayBeRemovedField(g)) return g
      let doc = docs.get(g.path)
      if (!doc) docs.set(g.path, (doc = loadDoc(g.path)))
      return (await doc).getMap(CONTENT_MAP).has(g.field) ? g : { ...g, fieldRemoved: true }
    }),
  )
}
