import { LitElement, html, nothing, type TemplateResult } from 'lit'
import { app } from '../app-context.js'
import type { NodeReplica } from '../sync/index.js'
import { toStorableText, storableText } from '../../shared/storable-text.js'
import { humanError, unstorableProblem, type FieldProblem } from './error-text.js'
import { fieldLabel } from './labels.js'
import { TextInputBinding } from './text-input-binding.js'
import { publishSelection, remoteSelectionsIn, selectionRuns, type RemoteSelection } from './remote-carets.js'

/**
 * One text field bound to the node's Y.Text itself (docs/decisions/0008-text-fields.md): every
 * keystroke is a merge patch applied as a text diff, so it is one small Yjs edit; remote edits
 * are applied into the input under the caret without moving it (index transform of the Yjs
 * delta), merged with what was typed and not applied yet (TextInputBinding, [WEB49]). The other
 * people's carets and selections in the field (from the room's awareness, in y-codemirror.next's
 * format, so the Code editor and these fields share them) are painted on an overlay over the
 * input; the person's own caret is published the same way. Light DOM, so the node page's
 * <label for> names it.
 */
export class WeftTextField extends LitElement {
  static override properties = { path: {}, key: {}, fieldId: {}, describedBy: {}, multiline: { type: Boolean }, initial: {}, readonly: { type: Boolean }, remotes: { state: true } }
  declare path: string
  declare key: string
  declare fieldId: string
  /** [WEB102] The id of the field's refusal shown beside it (same root: this element is light DOM), if any. */
  declare describedBy: string
  declare multiline: boolean
  declare initial: string
  /** The user's role cannot write the node: shown, not editable [WEB8]. */
  declare readonly: boolean
  private replica: NodeReplica | null = null
  private binding: TextInputBinding | null = null
  private held: string | null = null
  /** The others' carets in this field (single-line fields; a long text is CodeMirror's). */
  declare remotes: RemoteSelection[]

  constructor() {
    super()
    this.path = ''
    this.key = ''
    this.fieldId = ''
    this.describedBy = ''
    this.multiline = false
    this.initial = ''
    this.readonly = false
    this.remotes = []
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
    const path = this.path
    this.binding = new TextInputBinding(replica, this.key, {
      input: () => this.input,
      isFocused: () => this.isFocused(),
      textChanged: this.onAwareness,
      patch: (read) => app().client.patch(path, read),
    })
    replica.awareness.on('change', this.onAwareness)
  }

  private unbind() {
    const text = this.binding?.text
    if (this.replica) {
      this.replica.awareness.off('change', this.onAwareness)
      if (text && this.ownerDocument.activeElement && this.isFocused()) publishSelection(this.replica.awareness, text, null)
    }
    this.binding?.dispose()
    this.binding = null
    if (this.held) app().client.release(this.held)
    this.held = null
    this.replica = null
  }

  private isFocused(): boolean {
    const el = this.input
    return !!el && (this.ownerDocument.activeElement === el || (this.getRootNode() as ShadowRoot).activeElement === el)
  }

  /** The room's carets changed (or the text did, which moves them): repaint the others'. */
  private readonly onAwareness = () => {
    const text = this.binding?.text
    const awareness = this.replica?.awareness
    const next = text && awareness && !this.multiline ? remoteSelectionsIn(text, awareness) : []
    if (next.length || this.remotes.length) this.remotes = next
  }

  /** Where my caret is, for the others (the Code editor's format); nowhere once I leave the field. */
  private readonly onSelect = (ev: Event) => {
    const el = this.input
    const text = this.binding?.text
    const awareness = this.replica?.awareness
    if (!el || !text || !awareness) return
    if (ev.type === 'blur') return publishSelection(awareness, text, null)
    const start = el.selectionStart ?? 0
    const end = el.selectionEnd ?? start
    const backwards = el.selectionDirection === 'backward'
    publishSelection(awareness, text, { anchor: backwards ? end : start, head: backwards ? start : end })
  }

  private readonly onScroll = () => {
    const line = this.querySelector<HTMLElement>('.tf-line')
    if (line && this.input) line.style.transform = `translateX(${-this.input.scrollLeft}px)`
  }

  private onInput() {
    const el = this.input
    const binding = this.binding
    if (!el || !binding) return
    this.dispatchEvent(new CustomEvent<FieldProblem>('field-error', { detail: { key: this.key, message: '' }, bubbles: true, composed: true }))
    this.onAwareness()
    const typed = el.value
    binding.applyInput().catch((e: unknown) => {
      // [STO10] Pasted text holding a NUL or half an emoji: what was pasted is not lost, one click
      // saves it with those characters replaced (they cannot be seen to be removed by hand).
      const detail: FieldProblem = storableText(typed) ? { key: this.key, message: `${fieldLabel(this.key)}: ${humanError(e)}` } : unstorableProblem(this.key, () => this.saveStorable(typed))
      this.dispatchEvent(new CustomEvent('field-error', { detail, bubbles: true, composed: true }))
    })
  }

  private saveStorable(typed: string) {
    const el = this.input
    if (!el) return
    el.value = toStorableText(typed)
    this.onInput()
  }

  override firstUpdated() {
    const el = this.input
    if (this.binding) this.binding.start(this.initial)
    else if (el) el.value = this.initial
  }

  override updated() {
    // The overlay is laid out like the input's text: same font, padding and border.
    const el = this.input
    const overlay = this.querySelector<HTMLElement>('.tf-carets')
    if (!el || !overlay || !this.remotes.length) return
    const cs = getComputedStyle(el)
    overlay.style.font = cs.font
    overlay.style.letterSpacing = cs.letterSpacing
    overlay.style.paddingLeft = `${parseFloat(cs.paddingLeft) + parseFloat(cs.borderLeftWidth)}px`
    overlay.style.paddingRight = `${parseFloat(cs.paddingRight) + parseFloat(cs.borderRightWidth)}px`
    // Room above the line for the name labels (the overlay clips sideways, like the input).
    overlay.style.paddingTop = `${LABEL_ROOM}px`
    overlay.style.lineHeight = `${el.clientHeight}px`
    overlay.style.height = `${el.clientHeight + LABEL_ROOM}px`
    overlay.style.top = `${parseFloat(cs.borderTopWidth) - LABEL_ROOM}px`
    this.onScroll()
  }

  /** The others' selections (tinted) and carets (a bar with the person's name), over the text. */
  private renderRemotes(): TemplateResult | typeof nothing {
    const value = this.input?.value ?? ''
    if (!this.remotes.length) return nothing
    const runs = selectionRuns(value.length, this.remotes)
    const carets = [...this.remotes].sort((a, b) => a.head - b.head)
    const parts: TemplateResult[] = []
    const caretsAt = (i: number) => {
      for (const c of carets) {
        if (Math.min(Math.max(c.head, 0), value.length) === i) {
          parts.push(html`<span class="tf-caret" data-remote-caret=${c.name} style="border-color: ${c.color}"><span class="tf-name" style="background: ${c.color}">${c.name}</span></span>`)
        }
      }
    }
    for (const run of runs) {
      let from = run.from
      for (const c of carets) {
        if (c.head > from && c.head < run.to) {
          parts.push(html`<span style=${run.background ? `background: ${run.background}` : ''} ?data-remote-selection=${!!run.background}>${value.slice(from, c.head)}</span>`)
          from = c.head
        }
        if (c.head === from) caretsAt(from)
      }
      parts.push(html`<span style=${run.background ? `background: ${run.background}` : ''} ?data-remote-selection=${!!run.background}>${value.slice(from, run.to)}</span>`)
    }
    caretsAt(value.length)
    return html`<div class="tf-carets" aria-hidden="true"><span class="tf-line">${parts}</span></div>`
  }

  override render() {
    const described = this.describedBy || nothing
    const invalid = this.describedBy ? 'true' : nothing
    if (this.multiline) return html`<textarea id=${this.fieldId} name=${this.key} rows="6" data-text-field aria-describedby=${described} aria-invalid=${invalid} ?readonly=${this.readonly} @input=${this.onInput}></textarea>`
    return html`<style>
        weft-text-field { display: block; position: relative; }
        weft-text-field .tf-carets { position: absolute; left: 0; right: 0; overflow: hidden; pointer-events: none; white-space: pre; color: transparent; box-sizing: border-box; }
        weft-text-field .tf-line { display: inline-block; }
        weft-text-field .tf-caret { position: relative; display: inline-block; width: 0; height: 1.2em; vertical-align: middle; border-left: 2px solid; margin-left: -1px; }
        weft-text-field .tf-name { position: absolute; left: -2px; bottom: 100%; font-size: 0.65em; line-height: 1.3; color: #fff; padding: 0 0.3em; border-radius: 3px 3px 3px 0; white-space: nowrap; }
      </style>
      <input id=${this.fieldId} name=${this.key} type="text" data-text-field aria-describedby=${described} aria-invalid=${invalid} ?readonly=${this.readonly} @input=${this.onInput}
        @select=${this.onSelect} @keyup=${this.onSelect} @mouseup=${this.onSelect} @focus=${this.onSelect} @blur=${this.onSelect} @selectionchange=${this.onSelect} @scroll=${this.onScroll} />
      ${this.renderRemotes()}`
  }
}

/** Pixels above a single-line field where the others' name labels show. */
const LABEL_ROOM = 14

customElements.define('weft-text-field', WeftTextField)
