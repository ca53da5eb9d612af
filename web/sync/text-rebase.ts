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
