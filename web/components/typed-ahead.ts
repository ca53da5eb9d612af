import * as Y from 'yjs'
import { simpleDiffString } from 'lib0/diff'
import * as random from 'lib0/random'
import type { Delta } from './caret.js'

/** One change of a string: `remove` characters at `index` replaced by `insert`. */
interface Edit {
  index: number
  remove: number
  insert: string
}

/**
 * [WEB49] What a person typed into an input that the doc does not hold yet, merged with the
 * changes the doc takes meanwhile as Yjs merges two people's edits: both keep their characters.
 * The person's edits are kept one per input event (each exact, where a diff of two strings
 * spanning several edits would take the text between them for typed), and replayed into a Yjs
 * text only if a change of the doc arrives before they are applied (rare: a keystroke waits on
 * the store for a moment at most).
 */
export class TypedAhead {
  /** What the input shows, as far as this knows. */
  shown: string
  private readonly edits: Edit[] = []
  /** Once a change arrived: the doc's value (theirs) and the input's (ours), one Yjs history. */
  private texts: { theirs: Y.Text; ours: Y.Text } | null = null

  /** `base`: the field's value in the doc, which the input showed before the person typed. */
  constructor(private readonly base: string) {
    this.shown = base
  }

  /** The person changed the input to `value`. */
  typed(value: string): void {
    if (value === this.shown) return
    const edit = diffEdit(this.shown, value)
    this.shown = value
    if (this.texts) applyEdit(this.texts.ours, edit)
    else this.edits.push(edit)
  }

  /**
   * The field's value in the doc became `next`; `delta`: how, as Yjs told it (from the value
   * before). Returns what the input shows now, and how its text moved (for the caret).
   */
  rebase(next: string, delta: Delta | null): { shown: string; change: Delta } {
    const { theirs, ours } = (this.texts ??= this.replay())
    const update = capture(theirs, () => {
      if (delta) theirs.applyDelta(delta, { sanitize: false })
      // Never trusted blindly: what the doc holds now is what the input must merge with.
      const now = theirs.toString()
      if (now !== next) applyEdit(theirs, diffEdit(now, next))
    })
    let change: Delta = []
    const observer = (event: Y.YTextEvent) => {
      change = event.delta as Delta
    }
    ours.observe(observer)
    if (update) Y.applyUpdate(ours.doc!, update)
    ours.unobserve(observer)
    this.shown = ours.toString()
    return { shown: this.shown, change }
  }

  /** The base in one doc, copied into another that takes the person's edits so far. */
  private replay(): { theirs: Y.Text; ours: Y.Text } {
    const origin = new Y.Doc()
    origin.getText().insert(0, this.base)
    const state = Y.encodeStateAsUpdate(origin)
    const theirsDoc = new Y.Doc()
    const oursDoc = new Y.Doc()
    // Three writers: two sharing a client id would be one history, not a merge.
    while (theirsDoc.clientID === origin.clientID) theirsDoc.clientID = random.uint32()
    while (oursDoc.clientID === origin.clientID || oursDoc.clientID === theirsDoc.clientID) oursDoc.clientID = random.uint32()
    Y.applyUpdate(theirsDoc, state)
    Y.applyUpdate(oursDoc, state)
    const ours = oursDoc.getText()
    for (const edit of this.edits.splice(0)) applyEdit(ours, edit)
    return { theirs: theirsDoc.getText(), ours }
  }
}

/** The change `run` makes to `text`'s doc, as an update (null: none). */
function capture(text: Y.Text, run: () => void): Uint8Array | null {
  let update: Uint8Array | null = null
  const onUpdate = (u: Uint8Array) => {
    update = update ? Y.mergeUpdates([update, u]) : u
  }
  text.doc!.on('update', onUpdate)
  try {
    text.doc!.transact(run)
  } finally {
    text.doc!.off('update', onUpdate)
  }
  return update
}

function applyEdit(text: Y.Text, edit: Edit): void {
  if (edit.remove > 0) text.delete(edit.index, edit.remove)
  if (edit.insert) text.insert(edit.index, edit.insert)
}

/** The one replacement that turns `from` into `to` (common prefix and suffix kept, surrogate-safe). */
function diffEdit(from: string, to: string): Edit {
  const d = simpleDiffString(from, to)
  return { index: d.index, remove: d.remove, insert: d.insert }
}
