import type { JsonValue } from '../../shared/json.js'

/**
 * The kinds a new field can have, and how what was typed becomes JSON of that kind. Numbers
 * and booleans are JSON numbers and booleans, never the text "3" or "true". A node link is
 * `{ "$ref": "<path>" }` (a string would be indistinguishable from text).
 */
export const FIELD_KINDS = ['text', 'number', 'checkbox', 'list', 'object', 'link'] as const
export type FieldKind = (typeof FIELD_KINDS)[number]

export type Parsed = { ok: true; value: JsonValue } | { ok: false; message: string }

export function isNodeLink(v: JsonValue | undefined): v is { $ref: string } {
  return !!v && typeof v === 'object' && !Array.isArray(v) && typeof (v as { $ref?: unknown }).$ref === 'string' && Object.keys(v).length === 1
}

export function parseAs(kind: FieldKind, raw: string): Parsed {
  const text = raw.trim()
  switch (kind) {
    case 'text':
      return { ok: true, value: raw }
    case 'number': {
      const n = Number(text)
      if (text === '' || !Number.isFinite(n)) return { ok: false, message: `“${raw}” is not a number.` }
      return { ok: true, value: n }
    }
    case 'checkbox':
      if (/^(true|yes|on|1|checked|x)$/i.test(text)) return { ok: true, value: true }
      if (/^(false|no|off|0|)$/i.test(text)) return { ok: true, value: false }
      return { ok: false, message: `“${raw}” is not yes or no.` }
    case 'list': {
      if (text === '') return { ok: true, value: [] }
      if (text.startsWith('[')) {
        const v = parseJson(text)
        return Array.isArray(v) ? { ok: true, value: v } : { ok: false, message: 'A list is written as [1, 2] or as items separated by commas.' }
      }
      return { ok: true, value: text.split(',').map((s) => s.trim()).filter((s) => s !== '') }
    }
    case 'object': {
      if (text === '') return { ok: true, value: {} }
      const v = parseJson(text)
      return v && typeof v === 'object' && !Array.isArray(v) ? { ok: true, value: v } : { ok: false, message: 'An object is written as JSON, e.g. {"a": 1}.' }
    }
    case 'link':
      if (!/^[A-Za-z0-9_.@-]+(\/[A-Za-z0-9_.@-]+)*$/.test(text)) return { ok: false, message: `“${raw}” is not a node path (e.g. Space/Notes).` }
      return { ok: true, value: { $ref: text } }
    default:
      return kind satisfies never
  }
}

/** An edit of an existing non-text field, parsed back into that field's current kind. */
export function parseLike(previous: JsonValue | undefined, raw: string): Parsed {
  if (typeof previous === 'number') return parseAs('number', raw)
  if (typeof previous === 'boolean') return parseAs('checkbox', raw)
  if (typeof previous === 'string' || previous === undefined) return { ok: true, value: raw }
  const v = parseJson(raw)
  if (v === undefined) return { ok: false, message: 'Not valid JSON; nothing was saved.' }
  return { ok: true, value: v }
}

function parseJson(text: string): JsonValue | undefined {
  try {
    return JSON.parse(text) as JsonValue
  } catch {
    return undefined
  }
}

export function formatValue(v: JsonValue | undefined): string {
  if (v === undefined) return ''
  if (typeof v === 'string') return v
  if (typeof v === 'number' || typeof v === 'boolean') return String(v)
  return JSON.stringify(v, null, 2)
}
