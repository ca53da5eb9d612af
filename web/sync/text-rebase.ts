import { simpleDiffString } from 'lib0/diff'

/**
 * A three-way merge of two single-span edits of one string: `ours` and `theirs` were both made
 * from `base`. Used when two replicas turned the same plain string into a Y.Text at once
 * (docs/decisions/0008): one Y.Text wins the map entry, and the loser's typing is carried over
 * onto the winner instead of disappearing. Edits at different places both apply; overlapping
 * ones keep their text too (ours inserted where it was typed).
 */
export function mergeTextEdits(base: string, ours: string, theirs: string): string {
  const a = simpleDiffString(base, ours)
  const b = simpleDiffString(base, theirs)
  const aNoop = a.remove === 0 && a.insert === ''
  const bNoop = b.remove === 0 && b.insert === ''
  if (aNoop) return theirs
  if (bNoop) return ours
  const apply = (s: string, d: { index: number; remove: number; insert: string }) => s.slice(0, d.index) + d.insert + s.slice(d.index + d.remove)
  if (a.index + a.remove <= b.index) return apply(apply(base, b), a)
  if (b.index + b.remove <= a.index) return apply(apply(base, a), b)
  // Overlapping: theirs, with what we inserted kept at our place (clamped to their text).
  const at = Math.min(a.index, theirs.length)
  return theirs.slice(0, at) + a.insert + theirs.slice(at)
}

/** One change of a text: at `index` (UTF-16 units), take out `remove` units, then insert `insert`. */
export interface TextSplice {
  index: number
  remove: number
  insert: string
}

/**
 * [WEB53] How the text an edit found (`base`) differs from the text it left (`result`), as an
 * outbox entry keeps it (small, beside the whole text it left): the splice making `base` of `result`.
 */
export function textBaseOf(result: string, base: string): TextSplice {
  return simpleDiffString(result, base)
}

/** The text an edit found, from the text it left and textBaseOf's splice (null: not one, e.g. a damaged row). */
export function baseText(result: string, b: TextSplice): string | null {
  if (typeof b?.index !== 'number' || typeof b.remove !== 'number' || typeof b.insert !== 'string') return null
  if (b.index < 0 || b.remove < 0 || b.index + b.remove > result.length) return null
  return result.slice(0, b.index) + b.insert + result.slice(b.index + b.remove)
}

/** Beyond this many differences a character diff is not tried (its cost grows with their square). */
const MAX_DIFFERENCES = 2000

/**
 * How `to` is `from` changed, by characters (code points, so a surrogate pair is never split):
 * which characters of `from` it keeps, and what it inserts in each gap (gap i is before
 * `from[i]`, the last one after the end). A shortest edit script (Myers). Null when the two
 * differ in more than MAX_DIFFERENCES places.
 */
function align(from: readonly string[], to: readonly string[]): { kept: boolean[]; inserted: string[] } | null {
  let pre = 0
  while (pre < from.length && pre < to.length && from[pre] === to[pre]) pre++
  let suf = 0
  while (suf < from.length - pre && suf < to.length - pre && from[from.length - 1 - suf] === to[to.length - 1 - suf]) suf++
  const a = from.slice(pre, from.length - suf)
  const b = to.slice(pre, to.length - suf)
  const n = a.length
  const m = b.length
  // match[i]: the index in b of a[i], or -1 (taken out).
  const match = new Int32Array(n).fill(-1)
  const off = MAX_DIFFERENCES + 1
  const v = new Int32Array(2 * MAX_DIFFERENCES + 3)
  const trace: Int32Array[] = []
  let found = -1
  outer: for (let d = 0; d <= MAX_DIFFERENCES; d++) {
    trace.push(v.slice(off - d - 1, off + d + 2))
    for (let k = -d; k <= d; k += 2) {
      let x = k === -d || (k !== d && v[off + k - 1]! < v[off + k + 1]!) ? v[off + k + 1]! : v[off + k - 1]! + 1
      let y = x - k
      while (x < n && y < m && a[x] === b[y]) {
        x++
        y++
      }
      v[off + k] = x
      if (x >= n && y >= m) {
        found = d
        break outer
      }
    }
  }
  if (found < 0) return null
  let x = n
  let y = m
  for (let d = found; d > 0; d--) {
    // trace[d] holds v[-d-1 .. d+1] as it was before step d.
    const at = (k: number) => trace[d]![k + d + 1]!
    const k = x - y
    const prevK = k === -d || (k !== d && at(k - 1) < at(k + 1)) ? k + 1 : k - 1
    const prevX = at(prevK)
    const prevY = prevX - prevK
    while (x > prevX && y > prevY) match[--x] = --y
    x = prevX
    y = prevY
  }
  while (x > 0 && y > 0) match[--x] = --y
  const kept: boolean[] = []
  const inserted: string[] = []
  for (let i = 0; i < pre; i++) {
    kept.push(true)
    inserted.push('')
  }
  let j = 0
  for (let i = 0; i < n; i++) {
    if (match[i]! < 0) {
      kept.push(false)
      inserted.push('')
      continue
    }
    inserted.push(b.slice(j, match[i]).join(''))
    kept.push(true)
    j = match[i]! + 1
  }
  inserted.push(b.slice(j).join(''))
  for (let i = 0; i < suf; i++) {
    kept.push(true)
    inserted.push('')
  }
  return { kept, inserted }
}

/**
 * [WEB53] An edit that turned `base` into `ours`, carried onto `current` (what the text is now:
 * `base` as others changed it since): the steps that make of `current` what the edit would have
 * made of it. What others inserted stays, once; what they took out stays out; the edit inserts
 * what it inserted and takes out only characters of `base` still there. A replayed edit of a
 * text field uses this, so it never takes out someone else's typing (a whole-field intent did).
 * Null when the texts differ too much for a character diff (then mergeTextEdits is the fallback).
 */
export function rebaseTextEdit(base: string, ours: string, current: string): TextSplice[] | null {
  const from = Array.from(base)
  const o = align(from, Array.from(ours))
  const t = o && align(from, Array.from(current))
  if (!o || !t) return null
  const steps: TextSplice[] = []
  let at = 0
  for (let g = 0; g <= from.length; g++) {
    at += t.inserted[g]!.length
    const ins = o.inserted[g]!
    const ch = from[g]
    // Ours taking out a character of base still in current: merged with an insert at the same place.
    const remove = ch !== undefined && t.kept[g] && !o.kept[g] ? ch.length : 0
    if (ins.length > 0 || remove > 0) {
      const last = steps[steps.length - 1]
      if (last && last.index + last.insert.length === at && ins.length === 0) last.remove += remove
      else steps.push({ index: at, remove, insert: ins })
      at += ins.length
    }
    if (ch !== undefined && t.kept[g] && o.kept[g]) at += ch.length
  }
  return steps
}
