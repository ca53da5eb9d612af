import { isValidSegment } from '../../shared/path.js'

/**
 * A node's name is any Unicode text (any language, emoji); its path segment is derived from it
 * (DESIGN.md "Node model"): readable where the name is mostly Latin letters and digits
 * ("Über uns" → `Uber-uns`, "Café ☕ notes?" → `Cafe-notes`), else a short id derived from the
 * name ("日本語のメモ" → `n-1k9x0q`). People see names; the segment only has to be valid
 * (shared/path.ts: `[A-Za-z0-9_.@-]`, not starting with `_`, which is reserved) and stable for a
 * given name, so that two nodes of the same name collide and the next free name is offered.
 */

/** Letters NFKD does not take apart into a base letter and marks. */
const FOLD: Readonly<Record<string, string>> = {
  ß: 'ss', ẞ: 'SS', æ: 'ae', Æ: 'AE', œ: 'oe', Œ: 'OE', ø: 'o', Ø: 'O', ł: 'l', Ł: 'L', đ: 'd', Đ: 'D', þ: 'th', Þ: 'Th', ð: 'd', Ð: 'D', ı: 'i',
}

const MAX_SEGMENT = 60

/** FNV-1a over the name's UTF-16 units, as six base-36 characters. */
function shortId(name: string): string {
  let h = 0x811c9dc5
  for (let i = 0; i < name.length; i++) {
    h ^= name.charCodeAt(i)
    h = Math.imul(h, 0x01000193) >>> 0
  }
  return `n-${h.toString(36).padStart(6, '0').slice(-6)}`
}

export function segmentForName(name: string): string {
  const trimmed = name.trim()
  const folded = trimmed
    .normalize('NFKD')
    .replace(/\p{M}+/gu, '')
    .replace(/[^ -~]/g, (ch) => FOLD[ch] ?? ' ')
  const readable = folded
    .replace(/[^A-Za-z0-9_.@-]+/g, '-')
    .replace(/-{2,}/g, '-')
    .replace(/^[-_.]+|[-.]+$/g, '')
    .slice(0, MAX_SEGMENT)
    .replace(/[-.]+$/, '')
  // Readable only when it keeps most of what the name says: a name in Japanese with one Latin
  // word would otherwise become that word alone.
  const meaningful = (trimmed.match(/[\p{L}\p{N}]/gu) ?? []).length
  const kept = (readable.match(/[A-Za-z0-9]/g) ?? []).length
  if (readable && isValidSegment(readable) && kept * 2 >= meaningful) return readable
  return shortId(trimmed)
}

/**
 * "Week 1" → "Week 1 (2)", "Week 1 (3)", … until `isTaken` says the segment is free. A name
 * that already ends in " (n)" counts on from n.
 */
export async function nextFreeName(name: string, isTaken: (segment: string) => Promise<boolean>, maxTries = 50): Promise<string | null> {
  const trimmed = name.trim()
  const m = /^(.*) \((\d+)\)$/.exec(trimmed)
  const base = m ? m[1]! : trimmed
  let n = m ? Number(m[2]) + 1 : 2
  for (let i = 0; i < maxTries; i++, n++) {
    const candidate = `${base} (${n})`
    if (!(await isTaken(segmentForName(candidate)))) return candidate
  }
  return null
}

/**
 * [WEB62] A person's name from their User node: its FullName, which signing up and renaming both
 * write. Null until the node's content is here (its view's name is the account id till then).
 */
export function personName(view: { content: Readonly<Record<string, unknown>> } | null | undefined): string | null {
  const full = view?.content.FullName
  return typeof full === 'string' && full.trim() !== '' ? full : null
}
