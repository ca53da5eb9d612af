import { LitElement, html } from 'lit'
import type * as Y from 'yjs'
import type { Subscription } from 'rxjs'
import { simpleDiffString } from 'lib0/diff'
import { app } from '../app-context.js'
import type { NodeReplica } from '../sync/index.js'
import { humanError } from './error-text.js'
import { transformIndex, type Delta } from './caret.js'

/**
 * One text field bound to the node's Y.Text itself (docs/decisions/0008-text-fields.md): every
 * keystroke is a merge patch applied as a text diff, so it is one small Yjs edit; remote edits
 * are applied into the input under the caret without moving it (index transform of the Yjs
 * delta). Light DOM, so the node page's <label for> names it.
 */
export class WeftTextField extends LitElement {
  static override properties = { path: {}, key: {}, fieldId: {}, multiline: { type: Boolean }, initial: {}, readonly: { type: Boolean } }
  declare path: string
  declare key: string
  declare fieldId: string
  declare multiline: boolean
  declare initial: string
  /** The user's role cannot write the node: shown, not editable [WEB8]. */
  declare readonly: boolean
  private replica: NodeReplica | null = null
  private text: Y.Text | null = null
  private sub: Subscription | null = null
  private held: string | null = null

  constructor() {
    super()
    this.path = ''
    this.key = ''
    this.fieldId = ''
    this.multiline = false
    this.initial = ''
    this.readonly = false
  }

  override createRenderRoot() {
    return this
  }

  private get input(): HTMLInputElement | HTMLTextAreaElement | null {
    return this.querySelector('input, textarea')
  }

  override connectedCallback() {
    super.connectedCallback()
    this.bind()
  }

  override disconnectedCallback() {
    super.disconnectedCallback()
    this.unbind()
  }

  override willUpdate(changed: Map<string, unknown>) {
    if (changed.has('path') && this.isConnected && this.held !== this.path) {
      this.unbind()
      this.bind()
    }
  }

  private bind() {
    if (!this.path || this.replica) return
    const replica = app().client.acquire(this.path)
    this.replica = replica
    this.held = this.path
    replica.warmPolicy()
    this.sub = replica.changed$.subscribe(() => this.rebind())
    void replica.ready.then(() => this.rebind())
  }

  private unbind() {
    this.sub?.unsubscribe()
    this.sub = null
    this.text?.unobserve(this.onText)
    this.text = null
    if (this.held) app().client.release(this.held)
    this.held = null
    this.replica = null
  }

  /** The doc was swapped (rebuild, reload) or a plain string became a Y.Text: follow it. */
  private rebind() {
    const replica = this.replica
    if (!replica) return
    const text = replica.textOf(this.key)
    if (text !== this.text) {
      this.text?.unobserve(this.onText)
      this.text = text
      text?.observe(this.onText)
    }
    const value = text ? text.toString() : stringValue(replica.content[this.key])
    if (value !== null) this.showValue(value)
  }

  private readonly onText = (event: Y.YTextEvent) => {
    const el = this.input
    if (!el || event.transaction.origin === 'local') return
    const next = (event.target as Y.Text).toString()
    if (el.value === next) return
    const delta = event.delta as Delta
    const focused = this.ownerDocument.activeElement === el || (this.getRootNode() as ShadowRoot).activeElement === el
    const start = el.selectionStart ?? 0
    const end = el.selectionEnd ?? 0
    el.value = next
    if (focused) el.setSelectionRange(transformIndex(start, delta), transformIndex(end, delta))
  }

  /** Any other change (a plain string replaced, a doc swapped): diff what is shown to the value. */
  private showValue(value: string) {
    const el = this.input
    if (!el || el.value === value) return
    const start = el.selectionStart ?? 0
    const end = el.selectionEnd ?? 0
    const d = simpleDiffString(el.value, value)
    const delta: Delta = [{ retain: d.index }, { delete: d.remove }, { insert: d.insert }]
    el.value = value
    if (this.ownerDocument.activeElement === el || (this.getRootNode() as ShadowRoot).activeElement === el) {
      el.setSelectionRange(transformIndex(start, delta), transformIndex(end, delta))
    }
  }

  private onInput() {
    const el = this.input
    if (!el || !this.replica) return
    const key = this.key
    this.dispatchEvent(new CustomEvent('field-error', { detail: '', bubbles: true, composed: true }))
    app()
      .client.patch(this.path, () => ({ [key]: el.value }))
      .catch((e: unknown) => {
        this.dispatchEvent(new CustomEvent('field-error', { detail: `${this.key}: ${humanError(e)}`, bubbles: true, composed: true }))
        this.rebind()
      })
  }

  override firstUpdated() {
    const el = this.input
    if (el) el.value = this.initial
    this.rebind()
  }

  override render() {
    return this.multiline
      ? html`<textarea id=${this.fieldId} name=${this.key} rows="6" data-text-field ?readonly=${this.readonly} @input=${this.onInput}></textarea>`
      : html`<input id=${this.fieldId} name=${this.key} type="text" data-text-field ?readonly=${this.readonly} @input=${this.onInput} />`
  }
}

function stringValue(v: unknown): string | null {
  return typeof v === 'string' ? v : null
}

customElements.define('weft-text-field', WeftTextField)
