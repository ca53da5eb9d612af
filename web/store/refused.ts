import type { JsonValue } from '../../shared/json.js'
import type { OutboxRow } from './db.js'

/**
 * Refused edits as a person thinks of them: one entry per node and field, holding the field as
 * the last refused edit left it (13 refused keystrokes of offline typing are one entry with the
 * final text, not 13). The ids are every outbox entry that touched the field: discarding the
 * entry discards them all.
 */
export interface RefusedGroup {
  /** `path` and `field`, one key. */
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
}

export function groupRefused(rows: readonly OutboxRow[]): RefusedGroup[] {
  const groups = new Map<string, RefusedGroup & { causeFound: boolean }>()
  const ordered = [...rows].filter((r) => r.status === 'refused' && r.id !== undefined).sort((a, b) => a.id! - b.id!)
  for (const row of ordered) {
    const patch = row.patch && typeof row.patch === 'object' && !Array.isArray(row.patch) ? row.patch : {}
    const fields = Object.keys(patch)
    for (const field of fields.length ? fields : ['']) {
      const key = `${row.path}\n${field}`
      let g = groups.get(key)
      if (!g) {
        g = { key, path: row.path, field, value: null, ids: [], code: null, message: null, at: row.at, causeFound: false }
        groups.set(key, g)
      }
      g.value = field ? ((patch as Record<string, JsonValue>)[field] ?? null) : null
      g.ids.push(row.id!)
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
  return [...groups.values()].map(({ causeFound, ...g }) => {
    const cause = causeFound ? null : causeOf.get(g.path)
    return cause ? { ...g, code: cause.code, message: cause.message } : g
  })
}

/** What Copy puts on the clipboard: the text itself for a text field, JSON otherwise. */
export function refusedText(g: RefusedGroup): string {
  return typeof g.value === 'string' ? g.value : JSON.stringify(g.value, null, 2)
}
