import * as Y from 'yjs'
import type { Awareness } from 'y-protocols/awareness'
import { isSafeColor } from '../../shared/presence.js'

/** Another person's caret and selection in one text, as indices into it. */
export interface RemoteSelection {
  clientId: number
  name: string
  color: string
  colorLight: string
  /** Where the selection starts and where its caret is (equal when nothing is selected). */
  anchor: number
  head: number
}

interface CursorState {
  anchor?: unknown
  head?: unknown
}

/**
 * The other people's selections in `text`, from the room's awareness. The format is
 * y-codemirror.next's (`cursor: { anchor, head }` as Yjs relative positions, `user: { name,
 * color, colorLight }`), so a text field and a CodeMirror editor on the same node see each
 * other's carets. A position that resolves into another Y.Text (another field of the node)
 * is not this field's.
 */
export function remoteSelectionsIn(text: Y.Text, awareness: Awareness): RemoteSelection[] {
  const doc = text.doc
  if (!doc) return []
  const out: RemoteSelection[] = []
  awareness.getStates().forEach((state, clientId) => {
    if (clientId === awareness.clientID) return
    const cursor = state.cursor as CursorState | null | undefined
    if (!cursor || cursor.anchor == null || cursor.head == null) return
    let anchor: Y.AbsolutePosition | null
    let head: Y.AbsolutePosition | null
    try {
      anchor = Y.createAbsolutePositionFromRelativePosition(Y.createRelativePositionFromJSON(cursor.anchor), doc)
      head = Y.createAbsolutePositionFromRelativePosition(Y.createRelativePositionFromJSON(cursor.head), doc)
    } catch {
      return // a peer's malformed state shows no caret rather than breaking the field
    }
    if (!anchor || !head || anchor.type !== text || head.type !== text) return
    const user = (state.user ?? {}) as { name?: unknown; color?: unknown; colorLight?: unknown }
    // The server passes only plain colours ([SYNC5]); checked again, they go into style attributes.
    const color = isSafeColor(user.color) ? user.color : '#30bced'
    out.push({
      clientId,
      name: typeof user.name === 'string' ? user.name : 'Someone',
      color,
      colorLight: isSafeColor(user.colorLight) ? user.colorLight : `${color}33`,
      anchor: anchor.index,
      head: head.index,
    })
  })
  return out
}

/** Tells the room where my caret is in `text` (null: not in it), in the format above. */
export function publishSelection(awareness: Awareness, text: Y.Text, sel: { anchor: number; head: number } | null): void {
  const local = awareness.getLocalState()
  if (!local) return
  if (!sel) {
    if (local.cursor != null) awareness.setLocalStateField('cursor', null)
    return
  }
  const anchor = Y.createRelativePositionFromTypeIndex(text, sel.anchor)
  const head = Y.createRelativePositionFromTypeIndex(text, sel.head)
  const current = local.cursor as CursorState | null | undefined
  if (
    current?.anchor != null &&
    current.head != null &&
    Y.compareRelativePositions(Y.createRelativePositionFromJSON(current.anchor), anchor) &&
    Y.compareRelativePositions(Y.createRelativePositionFromJSON(current.head), head)
  ) {
    return
  }
  awareness.setLocalStateField('cursor', { anchor, head })
}

/** A stretch of the text and the selection colour over it ('' for none). */
export interface Run {
  from: number
  to: number
  background: string
}

/**
 * The text cut into runs by the selections (the first selection listed wins where two
 * overlap), for an overlay that paints them under the person's own text.
 */
export function selectionRuns(length: number, selections: readonly RemoteSelection[]): Run[] {
  const cuts = new Set<number>([0, length])
  const ranges = selections.map((s) => ({ from: clamp(Math.min(s.anchor, s.head), length), to: clamp(Math.max(s.anchor, s.head), length), background: s.colorLight }))
  for (const r of ranges) cuts.add(r.from).add(r.to)
  const points = [...cuts].sort((a, b) => a - b)
  const runs: Run[] = []
  for (let i = 0; i + 1 < points.length; i++) {
    const from = points[i]!
    const to = points[i + 1]!
    const over = ranges.find((r) => r.from <= from && to <= r.to && r.from < r.to)
    const background = over ? over.background : ''
    const last = runs.at(-1)
    if (last && last.background === background) last.to = to
    else runs.push({ from, to, background })
  }
  return runs
}

function clamp(i: number, length: number): number {
  return Math.max(0, Math.min(length, i))
}
