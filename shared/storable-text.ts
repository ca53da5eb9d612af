/**
 * [STO10] Text every storage holds alike: PostgreSQL's jsonb and text hold neither a NUL character
 * nor a lone UTF-16 surrogate (half of an emoji cut in two); SQLite stores both, and a backup of
 * them would not restore into PostgreSQL. No imports: the script workers use it too.
 */
import type { JsonObject, JsonValue } from './json.js'

/** A NUL character, or half of a UTF-16 surrogate pair without its other half. */
// eslint-disable-next-line no-control-regex
const UNSTORABLE = /\u0000|\p{Cs}/u

/**
 * Whether a string can be stored as written on every storage. Japanese, emoji and every other
 * character are fine, and so is the text `\u0000` (a backslash and five characters).
 */
export function storableText(s: string): boolean {
  return !UNSTORABLE.test(s)
}

const UNSTORABLE_ALL = new RegExp(UNSTORABLE.source, 'gu')

/**
 * Text the server writes of its own (a script's log lines and result, messages, names it makes):
 * each NUL and each lone surrogate replaced by U+FFFD, so what a script printed is kept, not
 * refused with the rest of its batch.
 */
export function toStorableText(s: string): string {
  return storableText(s) ? s : s.replace(UNSTORABLE_ALL, '\uFFFD')
}

/** A JSON value with every string and field name made storable (toStorableText). */
export function toStorableJson(v: JsonValue): JsonValue {
  if (typeof v === 'string') return toStorableText(v)
  if (Array.isArray(v)) return v.map(toStorableJson)
  if (v !== null && typeof v === 'object') {
    const out: JsonObject = {}
    for (const [k, x] of Object.entries(v)) Object.defineProperty(out, toStorableText(k), { value: toStorableJson(x), writable: true, enumerable: true, configurable: true })
    return out
  }
  return v
}

/** The first `max` UTF-16 units of `s`, one fewer where the cut would split a surrogate pair (half an emoji). */
export function cutText(s: string, max: number): string {
  if (s.length <= max) return s
  const last = s.charCodeAt(max - 1)
  return s.slice(0, last >= 0xd800 && last <= 0xdbff ? max - 1 : max)
}

/** Why `storableText` refused `s`, for a person. */
export function unstorableTextReason(s: string): string {
  return s.includes('\u0000') ? 'a NUL character (U+0000)' : 'half of a character (a lone UTF-16 surrogate, as when an emoji is cut in two)'
}
