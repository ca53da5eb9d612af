import { LitElement, css, html, nothing } from 'lit'
import { Compartment, EditorState, Prec, type Extension } from '@codemirror/state'
import { drawSelection, dropCursor, EditorView, highlightActiveLine, highlightActiveLineGutter, highlightSpecialChars, keymap, lineNumbers } from '@codemirror/view'
import { defaultKeymap, indentWithTab } from '@codemirror/commands'
import { bracketMatching, defaultHighlightStyle, indentOnInput, LanguageSupport, syntaxHighlighting } from '@codemirror/language'
import { javascriptLanguage, typescriptLanguage } from '@codemirror/lang-javascript'
import { markdownLanguage } from '@codemirror/lang-markdown'
import { YTextEditorController } from './y-text-editor-controller.js'

/**
 * A code editor (CodeMirror 6) on one text field of a node, shared live with everyone in the
 * node's room: y-codemirror.next binds it to the field's Y.Text, and the others' carets and
 * selections show in their colours (YTextEditorController). JavaScript or TypeScript
 * highlighting. Read-only for a role without Update [WEB8].
 *
 * No CodeMirror history: undo is y-codemirror's, which takes back one's own edits only (a
 * history of the editor's transactions would also undo what others typed).
 */
export class WeftCodeEditor extends LitElement {
  static override properties = { path: {}, key: {}, language: {}, readonly: { type: Boolean }, initial: {}, label: {} }
  declare path: string
  declare key: string
  /** 'typescript', 'markdown' (prose: wrapped lines, no line numbers) or anything else (JavaScript). */
  declare language: string
  declare readonly: boolean
  /** Shown until the node's doc is loaded. */
  declare initial: string
  /** The accessible name of the editable content. */
  declare label: string
  private view: EditorView | null = null
  private readonly languageConf = new Compartment()
  private readonly editableConf = new Compartment()
  private readonly labelConf = new Compartment()
  private readonly text = new YTextEditorController(this, () => ({ path: this.path, key: this.key, readonly: this.readonly }))

  static override styles = css`
    :host { display: block; min-width: 0; }
    .editor { border: 1px solid var(--wa-color-neutral-80, #bbc); border-radius: var(--wa-border-radius-m, 6px); overflow: hidden; background: #fff; }
    .editor.readonly { background: var(--wa-color-neutral-95, #f4f6fb); }
    .error { color: #b00; margin: 0.3em 0 0; }
  `

  constructor() {
    super()
    this.path = ''
    this.key = 'Source'
    this.language = 'javascript'
    this.readonly = false
    this.initial = ''
    this.label = 'Source'
  }

  override connectedCallback() {
    super.connectedCallback()
    if (this.hasUpdated && !this.view) this.createView()
  }

  override disconnectedCallback() {
    // The controller unbinds first (while the view is alive), then the view goes: its
    // listeners on the window would outlive the element.
    super.disconnectedCallback()
    this.text.attach(null)
    this.view?.destroy()
    this.view = null
  }

  override firstUpdated() {
    this.createView()
  }

  override updated(changed: Map<string, unknown>) {
    const view = this.view
    if (!view) return
    const effects = []
    if (changed.has('language')) effects.push(this.languageConf.reconfigure(languageOf(this.language)))
    if (changed.has('readonly')) effects.push(this.editableConf.reconfigure(editableOf(this.readonly)))
    if (changed.has('label')) effects.push(this.labelConf.reconfigure(EditorView.contentAttributes.of({ 'aria-label': this.label })))
    if (effects.length) view.dispatch({ effects })
  }

  private createView() {
    const parent = this.renderRoot.querySelector('.editor')
    if (!parent) return
    this.view = new EditorView({
      parent,
      state: EditorState.create({
        doc: this.initial,
        extensions: [
          this.language === 'markdown' ? [EditorView.lineWrapping, Prec.highest(proseTheme)] : [lineNumbers(), highlightActiveLineGutter()],
          highlightSpecialChars(),
          drawSelection(),
          dropCursor(),
          indentOnInput(),
          bracketMatching(),
          highlightActiveLine(),
          syntaxHighlighting(defaultHighlightStyle, { fallback: true }),
          keymap.of([...defaultKeymap, indentWithTab]),
          this.languageConf.of(languageOf(this.language)),
          this.editableConf.of(editableOf(this.readonly)),
          this.labelConf.of(EditorView.contentAttributes.of({ 'aria-label': this.label })),
          theme,
          this.text.extension,
        ],
      }),
    })
    this.text.attach(this.view)
  }

  override render() {
    return html`<div class="editor ${this.readonly ? 'readonly' : ''}" data-binding=${this.text.binding}></div>
      ${this.text.error ? html`<p class="error" role="alert" data-error="source">${this.text.error}</p>` : nothing}`
  }
}

/**
 * The parser alone (highlighting, indentation, brackets), not `javascript()`: that adds
 * completion sources, and with them @codemirror/autocomplete (~90 KB) for a popup this editor
 * does not offer.
 */
function languageOf(language: string): Extension {
  return new LanguageSupport(language === 'typescript' ? typescriptLanguage : language === 'markdown' ? markdownLanguage : javascriptLanguage)
}

export function editableOf(readonly: boolean): Extension {
  return [EditorState.readOnly.of(readonly), EditorView.editable.of(!readonly)]
}

/** Long text reads as prose: the page's font, a shorter editor. */
const proseTheme = EditorView.theme({
  '.cm-scroller': { fontFamily: 'inherit' },
  '.cm-content, .cm-gutter': { minHeight: '6em' },
})

export const theme = EditorView.theme({
  '&': { fontSize: '0.9em', maxHeight: '70vh' },
  '.cm-scroller': { fontFamily: 'ui-monospace, SFMono-Regular, Menlo, monospace' },
  // On the gutter too, so the line-number column runs the editor's full height.
  '.cm-content, .cm-gutter': { minHeight: '12em' },
  // Room above the first line for a remote caret's name label (the scroller clips it otherwise).
  '.cm-content': { paddingTop: '1em' },
  '&.cm-focused': { outline: 'none' },
  '&.cm-editor.cm-focused': { boxShadow: 'inset 0 0 0 2px #36c' },
  // The name label of a remote caret is always shown (not only on hover): who is where.
  '.cm-ySelectionInfo': { opacity: '1', fontFamily: 'inherit', borderRadius: '3px 3px 3px 0' },
})

customElements.define('weft-code-editor', WeftCodeEditor)
