import type { JsonValue } from '../../shared/json.js'

/**
 * The kinds a new field can have, and how what was typed becomes JSON of that kind. Numbers
 * and booleans are JSON numbers and booleans, never the text "3" or "true". A node link is
 * `{ "$ref": "<path>" }` (a string would be indistinguishable from text).
 */
export const FIELD_KINDS = ['text', 'longtext', 'number', 'checkbox', 'date', 'list', 'object', 'link'] as const
export type FieldKind = (typeof FIELD_KINDS)[number]

/** What the kind picker says for each kind (the option values stay the stored kinds' names). */
export const FIELD_KIND_LABELS: Readonly<Record<FieldKind, string>> = {
  text: 'Text',
  longtext: 'Long text (Markdown)',
  number: 'Number',
  checkbox: 'Yes/no',
  date: 'Date',
  list: 'List',
  object: 'JSON',
  link: 'Link to a node',
}

/** A date as people pick it and JSON keeps it: ISO 8601, day precision. */
const ISO_DATE = /^\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])$/

export function isIsoDate(v: unknown): v is string {
  return typeof v === 'string' && ISO_DATE.test(v) && !Number.isNaN(Date.parse(`${v}T00:00:00Z`))
}

/** A list the chips edit: every item a string, number or boolean (anything else is edited as JSON). */
export function isScalarList(v: JsonValue | undefined): v is (string | number | boolean)[] {
  return Array.isArray(v) && v.every((x) => typeof x === 'string' || typeof x === 'number' || typeof x === 'boolean')
}

/**
 * The editor a stored value gets, from the value itself (content is plain JSON: no kind is
 * stored beside it). `multiline` says a text field is long text (it has a line break or is long).
 */
export function kindOf(value: JsonValue | undefined, multiline: boolean): FieldKind {
  if (typeof value === 'boolean') return 'checkbox'
  if (typeof value === 'number') return 'number'
  if (typeof value === 'string') return isIsoDate(value) ? 'date' : multiline ? 'longtext' : 'text'
  if (isNodeLink(value)) return 'link'
  if (isScalarList(value)) return 'list'
  return 'object'
}

export type Parsed = { ok: true; value: JsonValue } | { ok: false; message: string }

export function isNodeLink(v: JsonValue | undefined): v is { $ref: string } {
  return !!v && typeof v === 'object' && !Array.isArray(v) && typeof (v as { $ref?: unknown }).$ref === 'string' && Object.keys(v).length === 1
}

export function parseAs(kind: FieldKind, raw: string): Parsed {
  const text = raw.trim()
  switch (kind) {
    case 'text':
      return { ok: true, value: raw }
    case 'longtext':
      // Ends with a line break, as Markdown files do: the field stays long text (kindOf) even
      // while its first line is short.
      return { ok: true, value: raw.endsWith('\n') ? raw : `${raw}\n` }
    case 'date':
      if (text === '') return { ok: true, value: new Date().toISOString().slice(0, 10) }
      return isIsoDate(text) ? { ok: true, value: text } : { ok: false, message: `“${raw}” is not a date (YYYY-MM-DD).` }
    case 'number': {
      const n = Number(text)
      if (text === '' || Number.isNaN(n)) return { ok: false, message: `“${raw}” is not a number.` }
      // [WEB93] JSON holds finite numbers only: 1e999 reads as Infinity.
      if (!Number.isFinite(n)) return { ok: false, message: `“${raw}” is not a finite number (too large to store); nothing was saved.` }
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
      const v = parseJsonResult(text)
      if (!v.ok) return { ok: false, message: `Not valid JSON: ${v.message}` }
      return v.value && typeof v.value === 'object' ? { ok: true, value: v.value } : { ok: false, message: 'JSON here is an object or a list, e.g. {"a": 1}.' }
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

/** JSON.parse with the parser's own message (it names the position) when the text is not JSON. */
export function parseJsonResult(text: string): Parsed {
  try {
    return { ok: true, value: JSON.parse(text) as JsonValue }
  } catch (e) {
    return { ok: false, message: (e as Error).message }
  }
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

/** What a field editor asks the page to write: `{ [key]: value }` as one merge patch. */
export interface FieldCommit {
  key: string
  value: JsonValue | null
}

export function commitEvent(key: string, value: JsonValue | null): CustomEvent<FieldCommit> {
  return new CustomEvent<FieldCommit>('field-commit', { detail: { key, value }, bubbles: true, composed: true })
}
