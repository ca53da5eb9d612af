import { LitElement, css, html } from 'lit'
import { unsafeHTML } from 'lit/directives/unsafe-html.js'
import { ObservableController } from '../controllers/index.js'
import { app } from '../app-context.js'
import type { NodeView } from '../streams/index.js'
import { renderMarkdown } from './markdown-render.js'
import './code-editor.js'

/**
 * A long-text field: Markdown in CodeMirror, bound to the field's Y.Text like the Code editor
 * (the others' carets and selections in their colours, one's own undo), with a Preview toggle.
 * The preview is markdown-it with HTML off (markdown-render.ts): what anyone typed is text, never
 * markup, so a field cannot run script in its readers' pages. Read-only for who may not write
 * the field [WEB8]; a reader who cannot write starts on the preview.
 */
export class WeftMarkdownField extends LitElement {
  static override properties = { path: {}, key: {}, fieldId: {}, initial: {}, readonly: { type: Boolean }, preview: { state: true } }
  declare path: string
  declare key: string
  declare fieldId: string
  declare initial: string
  declare readonly: boolean
  declare preview: boolean | null
  private readonly node = new ObservableController<NodeView | null>(this)

  static override styles = css`
    :host { display: block; min-width: 0; }
    .bar { display: flex; gap: 0.3em; margin-bottom: 0.25em; }
    .bar button { font: inherit; font-size: 0.85em; padding: 0.15em 0.6em; border: 1px solid var(--wa-color-neutral-80, #bbc); border-radius: var(--wa-border-radius-m, 6px); background: #fff; cursor: pointer; }
    .bar button[aria-pressed='true'] { background: var(--wa-color-brand-95, #e8f0fe); border-color: var(--wa-color-brand-60, #36c); }
    .preview { border: 1px solid var(--wa-color-neutral-90, #dde); border-radius: var(--wa-border-radius-m, 6px); padding: 0.2em 0.8em; min-height: 3em; overflow-wrap: anywhere; background: #fff; }
    .preview pre { overflow: auto; background: #f6f7fa; padding: 0.4em; }
    .preview img { max-width: 100%; }
    [hidden] { display: none !important; }
  `

  constructor() {
    super()
    this.path = ''
    this.key = ''
    this.fieldId = ''
    this.initial = ''
    this.readonly = false
    this.preview = null
  }

  override willUpdate() {
    if (this.path) this.node.watch(this.path, () => app().streams.node$(this.path))
  }

  override render() {
    const value = this.node.value?.content[this.key]
    const text = typeof value === 'string' ? value : this.initial
    const previewing = this.preview ?? this.readonly
    // The editor stays mounted while the preview shows: its binding (and the caret the others
    // see) survives the toggle.
    return html`<div class="bar" role="group" aria-label=${`${this.key}: view`}>
        <button type="button" aria-pressed=${String(!previewing)} @click=${() => (this.preview = false)}>${this.readonly ? 'Source' : 'Write'}</button>
        <button type="button" aria-pressed=${String(previewing)} @click=${() => (this.preview = true)}>Preview</button>
      </div>
      <weft-code-editor ?hidden=${previewing} .path=${this.path} .key=${this.key} language="markdown" .initial=${text} .label=${this.key} ?readonly=${this.readonly}></weft-code-editor>
      <div class="preview" ?hidden=${!previewing} data-preview=${this.key} aria-label=${`${this.key} (preview)`}>${unsafeHTML(renderMarkdown(text))}</div>`
  }
}

customElements.define('weft-markdown-field', WeftMarkdownField)
