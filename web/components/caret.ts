/** A Yjs text delta (retain / insert / delete), positions in the old text. */
export type Delta = { retain?: number; insert?: unknown; delete?: number }[]

/**
 * Where a caret index lands after a change described as a Yjs delta (positions in the old
 * text). Text inserted exactly at the caret goes after it: the caret stays where the person
 * left it.
 */
export function transformIndex(index: number, delta: Delta): number {
  let pos = 0
  let shift = 0
  for (const op of delta) {
    if (pos > index) break
    if (op.retain !== undefined) pos += op.retain
    else if (op.insert !== undefined) {
      if (pos < index) shift += typeof op.insert === 'string' ? op.insert.length : 1
    } else if (op.delete !== undefined) {
      const end = pos + op.delete
      if (end <= index) shift -= op.delete
      else if (pos < index) shift -= index - pos
      pos = end
    }
  }
  return Math.max(0, index + shift)
}
