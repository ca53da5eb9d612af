import type * as Y from 'yjs'
import type { Subscription } from 'rxjs'
import { simpleDiffString } from 'lib0/diff'
import type { NodeReplica } from '../sync/index.js'
import type { MergePatch } from '../../shared/merge-patch.js'
import { transformIndex, type Delta } from './caret.js'
import { TypedAhead } from './typed-ahead.js'

/** What the binding uses of an <input> or <textarea>. */
export interface TextInputLike {
  value: string
  readonly selectionStart: number | null
  readonly selectionEnd: number | null
  setSelectionRange(start: number, end: number): void
}

export interface TextInputHost {
  /** The input, once rendered. */
  input(): TextInputLike | null
  /** Whether the input has the focus (its caret is then kept where the person left it). */
  isFocused(): boolean
  /** The field's Y.Text was replaced (a swap, a plain string made a Y.Text) or changed under the input. */
  textChanged(): void
  /** Applies a patch to the node, `read` when it applies (the app's `client.patch`, which holds the replica meanwhile). */
  patch(read: () => MergePatch): Promise<void>
}

/**
 * Binds an input to a node's text field (weft-text-field): the input shows the field's value in
 * the doc, and each keystroke is a merge patch of the input's value, read when the patch applies
 * (docs/decisions/0008-text-fields.md).
 *
 * [WEB49] A patch applies later than its keystroke when it waits on the store: for the replica's
 * load, and for the node's type (an IndexedDB read per keystroke while the local index does not
 * know the type). Meanwhile the input is ahead of the doc by what was typed (`ahead`). A change
 * of the doc shown then (another person's keystroke, another tab's, the load, a plain string
 * made a Y.Text) is merged with it, never put in its place: the pending patch then reads both
 * and applies only what was typed.
 */
export class TextInputBinding {
  /** The field's Y.Text the input follows (null: the field is a plain string, or not there yet). */
  text: Y.Text | null = null
  /** The field's value in the doc as the input last took it (null: not shown yet). */
  private base: string | null = null
  /** Typed and not yet in the doc (null: the input shows the doc's value). */
  private ahead: TypedAhead | null = null
  private readonly sub: Subscription
  private disposed = false

  constructor(
    private readonly replica: NodeReplica,
    private readonly key: string,
    private readonly host: TextInputHost,
  ) {
    this.sub = replica.changed$.subscribe(() => this.follow())
    void replica.ready.then(() => this.follow())
  }

  /** The input was rendered showing `initial` (the value the page was given). */
  start(initial: string): void {
    const el = this.host.input()
    if (!el) return
    el.value = initial
    this.base = initial
    this.ahead = null
    this.follow()
  }

  /** The person changed the input: applies its value to the doc (rejects as the patch does). */
  applyInput(): Promise<void> {
    const key = this.key
    const el = this.host.input()
    if (!el) return Promise.resolve()
    if (this.base !== null) {
      if (el.value === this.base) this.ahead = null
      else (this.ahead ??= new TypedAhead(this.base)).typed(el.value)
    }
    return this.host
      .patch(() => ({ [key]: el.value }))
      .catch((e: unknown) => {
        // Refused on the device (too large, unstorable text): the input shows what is stored;
        // the caller reports what was typed.
        this.follow(true)
        throw e
      })
  }

  dispose(): void {
    this.disposed = true
    this.sub.unsubscribe()
    this.text?.unobserve(this.onText)
    this.text = null
  }

  /**
   * The doc changed or was swapped: follow the field's Y.Text and show its value. `reset`: what
   * the input holds beyond the doc is dropped (its patch failed).
   */
  follow(reset = false): void {
    if (this.disposed) return
    const text = this.replica.textOf(this.key)
    if (text !== this.text) {
      this.text?.unobserve(this.onText)
      this.text = text
      text?.observe(this.onText)
      this.host.textChanged()
    }
    const value = text ? text.toString() : this.replica.content[this.key]
    if (typeof value === 'string') this.show(value, null, reset)
  }

  private readonly onText = (event: Y.YTextEvent) => {
    if (event.transaction.origin === 'local') return
    this.show((event.target as Y.Text).toString(), event.delta as Delta, false)
    this.host.textChanged()
  }

  /**
   * The field's value in the doc is `next`. `delta`: the change from `base` to it, as Yjs told
   * it (the caret then moves exactly with it); else the caret follows a diff of the input.
   */
  private show(next: string, delta: Delta | null, reset: boolean): void {
    const el = this.host.input()
    if (!el) return
    const before = el.value
    const base = this.base
    this.base = next
    let shown = next
    let change: Delta | null = delta && before === base ? delta : null
    const ahead = this.ahead
    // A keystroke's own patch leaves the doc holding exactly what the input shows: nothing is
    // ahead any more.
    if (!ahead || reset || before === next) this.ahead = null
    else if (next === base) return
    else {
      ahead.typed(before)
      ;({ shown, change } = ahead.rebase(next, delta))
    }
    if (before === shown) return
    const start = el.selectionStart ?? 0
    const end = el.selectionEnd ?? 0
    el.value = shown
    if (!this.host.isFocused()) return
    const moved = change ?? diffDelta(before, shown)
    el.setSelectionRange(transformIndex(start, moved), transformIndex(end, moved))
  }
}

/** The one replacement that turns `from` into `to`, as a delta. */
function diffDelta(from: string, to: string): Delta {
  const d = simpleDiffString(from, to)
  return [{ retain: d.index }, { delete: d.remove }, { insert: d.insert }]
}
