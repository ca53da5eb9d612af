import { LitElement, css, html, nothing } from 'lit'
import { Compartment, EditorState, Prec } from '@codemirror/state'
import { drawSelection, EditorView, highlightSpecialChars, keymap, lineNumbers } from '@codemirror/view'
import { defaultKeymap, history, historyKeymap, indentWithTab } from '@codemirror/commands'
import { bracketMatching, defaultHighlightStyle, indentOnInput, syntaxHighlighting } from '@codemirror/language'
import { json } from '@codemirror/lang-json'
import { jsonEqual, type JsonValue } from '../../shared/json.js'
import { commitEvent, formatValue, parseJsonResult } from './field-kinds.js'
import { editableOf, theme } from './code-editor.js'
import { fieldLabel } from './labels.js'
import { confirmDefinitionChange, nodePathOf } from './definition-change.js'

/**
 * A JSON field (an object, a list of objects, null) in CodeMirror with JSON highlighting.
 * What is typed is a draft until it is saved (Save, Ctrl/Cmd+Enter or leaving the editor);
 * text that is not JSON is refused inline with the parser's message and never sent. A remote
 * change replaces the shown value only while there is no draft [WEB2]; with one, it is named
 * beside it. The field's value is replaced whole by a merge patch (the node page's write path):
 * the page listens for `field-commit` and writes it.
 */
export class WeftJsonField extends LitElement {
  static override properties = { key: {}, value: { attribute: false }, readonly: { type: Boolean }, error: { state: true }, dirty: { state: true } }
  declare key: string
  declare value: JsonValue
  declare readonly: boolean
  declare error: string
  declare dirty: boolean
  private view: EditorView | null = null
  /** The value the draft started from: a different `value` now means someone else changed it. */
  private base: JsonValue = null
  private readonly editable = new Compartment()

  static override styles = css`
    :host { display: block; min-width: 0; }
    .editor { border: 1px solid var(--wa-color-neutral-80, #bbc); border-radius: var(--wa-border-radius-m, 6px); overflow: hidden; background: #fff; }
    .editor.invalid { border-color: #b00; }
    .row { display: flex; flex-wrap: wrap; gap: 0.5em; align-items: baseline; margin-top: 0.25em; font-size: 0.9em; }
    .error { color: #b00; overflow-wrap: anywhere; }
    .changed { color: #8a5a00; }
    button { font: inherit; padding: 0.15em 0.6em; border: 1px solid var(--wa-color-neutral-80, #bbc); border-radius: var(--wa-border-radius-m, 6px); background: var(--wa-color-neutral-95, #f4f6fb); cursor: pointer; }
  `

  constructor() {
    super()
    this.key = ''
    this.value = null
    this.readonly = false
    this.error = ''
    this.dirty = false
  }

  override firstUpdated() {
    const parent = this.renderRoot.querySelector('.editor')!
    this.base = this.value
    this.view = new EditorView({
      parent,
      state: EditorState.create({
        doc: formatValue(this.value),
        extensions: [
          lineNumbers(),
          highlightSpecialChars(),
          drawSelection(),
          history(),
          indentOnInput(),
          bracketMatching(),
          syntaxHighlighting(defaultHighlightStyle, { fallback: true }),
          json(),
          keymap.of([{ key: 'Mod-Enter', run: () => (this.saveSoon(), true) }, ...defaultKeymap, ...historyKeymap, indentWithTab]),
          this.editable.of(editableOf(this.readonly)),
          // [WEB77] Named as its label reads ("Extra data"), not by its key.
          EditorView.contentAttributes.of({ 'aria-label': fieldLabel(this.key) }),
          EditorView.updateListener.of((u) => {
            if (u.docChanged && !this.dirty) this.dirty = true
            if (u.focusChanged && !u.view.hasFocus && this.dirty) this.saveSoon()
          }),
          theme,
          // A value, not a script: as tall as it is (the code editor's minimum is for a page of code).
          Prec.highest(EditorView.theme({ '.cm-content, .cm-gutter': { minHeight: '3em' }, '.cm-content': { paddingTop: '0.3em' } })),
        ],
      }),
    })
  }

  override disconnectedCallback() {
    super.disconnectedCallback()
    this.view?.destroy()
    this.view = null
  }

  override updated(changed: Map<string, unknown>) {
    const view = this.view
    if (!view) return
    if (changed.has('readonly')) view.dispatch({ effects: this.editable.reconfigure(editableOf(this.readonly)) })
    // Someone else's value is shown only while the person has nothing unsaved here.
    if (changed.has('value') && !this.dirty) this.show(this.value)
  }

  private show(value: JsonValue) {
    const view = this.view!
    this.base = value
    const text = formatValue(value)
    if (view.state.doc.toString() !== text) view.dispatch({ changes: { from: 0, to: view.state.doc.length, insert: text } })
    this.dirty = false
  }

  /** A save asked for while the definition warning is open (one question at a time). */
  private asking = false

  private async save() {
    const view = this.view
    if (!view || this.readonly || this.asking) return
    const parsed = parseJsonResult(view.state.doc.toString())
    if (!parsed.ok) {
      this.error = `Not valid JSON, not saved: ${parsed.message}`
      return
    }
    this.error = ''
    if (!jsonEqual(parsed.value, this.value)) {
      this.asking = true
      try {
        // [WEB122] Declined: the draft stays, unsaved.
        if (!(await confirmDefinitionChange(nodePathOf(this), this.key))) return
      } finally {
        this.asking = false
      }
    }
    this.dirty = false
    this.base = parsed.value
    if (!jsonEqual(parsed.value, this.value)) this.dispatchEvent(commitEvent(this.key, parsed.value))
  }

  private saveSoon() {
    void this.save()
  }

  override render() {
    const changedElsewhere = this.dirty && !jsonEqual(this.base, this.value)
    return html`<div class="editor ${this.error ? 'invalid' : ''}"></div>
      <div class="row">
        ${this.dirty && !this.readonly ? html`<button type="button" class="save" @click=${() => this.saveSoon()}>Save</button><span>Unsaved (Ctrl+Enter saves)</span>` : nothing}
        ${this.error ? html`<span class="error" role="alert" data-error="json">${this.error}</span>` : nothing}
        ${changedElsewhere
          ? html`<span class="changed" data-changed-remotely=${this.key}>Changed by someone else; your version is kept until you save it.
              <button type="button" @click=${() => ((this.error = ''), this.show(this.value))}>Use theirs</button></span>`
          : nothing}
      </div>`
  }
}

customElements.define('weft-json-field', WeftJsonField)
