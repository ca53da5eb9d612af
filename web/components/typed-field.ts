import { css, html, nothing, type TemplateResult } from 'lit'
import type { JsonValue } from '../../shared/json.js'
import { background } from '../sync/background.js'
import { commitEvent, isNodeLink, isScalarList, type FieldKind } from './field-kinds.js'
import './list-field.js'
import './link-field.js'

/** What the node page knows about one field when it renders it. */
export interface TypedFieldArgs {
  path: string
  key: string
  value: JsonValue
  kind: FieldKind
  /** The element id the field's <label for> names. */
  id: string
  /** The caller may not write this field (role or field rule) [WEB8]. */
  readonly: boolean
  /** [WEB102] The id of the field's refusal shown beside it, if any (the input is described by it). */
  describedBy?: string
}

/** The CodeMirror editors are a few hundred KB: loaded when a page first shows such a field. */
const lazy: Partial<Record<'markdown' | 'json', Promise<unknown>>> = {}
function load(which: 'markdown' | 'json'): void {
  lazy[which] ??= which === 'markdown' ? import('./markdown-field.js') : import('./json-field.js')
  background(lazy[which])
}

/**
 * The editor of a typed field (issue 16): yes/no as a switch, a date picker (stored as ISO
 * `YYYY-MM-DD`), a list as chips, a link as the node's name with a picker, long text as Markdown
 * with a preview, other JSON in a JSON editor. Text and numbers stay the page's own (a Y.Text
 * bound input, a draft kept against remote changes). Each editor asks for its write with a
 * `field-commit` event; the page writes it as one merge patch. Null: not one of these kinds.
 */
export function renderTypedField(a: TypedFieldArgs): TemplateResult | null {
  const described = a.describedBy || nothing
  const invalid = a.describedBy ? 'true' : nothing
  const commit = (ev: Event, value: JsonValue) => ev.target!.dispatchEvent(commitEvent(a.key, value))
  switch (a.kind) {
    case 'checkbox':
      return html`<span class="switch"><input id=${a.id} name=${a.key} type="checkbox" role="switch" aria-describedby=${described} aria-invalid=${invalid} .checked=${a.value === true} ?disabled=${a.readonly}
          @change=${(e: Event) => commit(e, (e.target as HTMLInputElement).checked)} /><span class="track" aria-hidden="true"></span><span class="state">${a.value === true ? 'Yes' : 'No'}</span></span>`
    case 'date':
      return html`<input id=${a.id} name=${a.key} type="date" class="date" aria-describedby=${described} aria-invalid=${invalid} .value=${typeof a.value === 'string' ? a.value : ''} ?readonly=${a.readonly}
        @change=${(e: Event) => {
          const v = (e.target as HTMLInputElement).value
          if (v) commit(e, v) // a cleared picker is not a date: the field is removed with ✕, not emptied
        }} />`
    case 'list':
      return isScalarList(a.value) ? html`<weft-list-field id=${a.id} .key=${a.key} .items=${a.value} ?readonly=${a.readonly}></weft-list-field>` : null
    case 'link':
      return isNodeLink(a.value) ? html`<weft-link-field id=${a.id} .key=${a.key} .ref=${a.value.$ref} .base=${a.path} ?readonly=${a.readonly}></weft-link-field>` : null
    case 'longtext':
      load('markdown')
      return html`<weft-markdown-field .path=${a.path} .key=${a.key} .fieldId=${a.id} .initial=${typeof a.value === 'string' ? a.value : ''} ?readonly=${a.readonly}></weft-markdown-field>`
    case 'object':
      load('json')
      return html`<weft-json-field .key=${a.key} .value=${a.value} ?readonly=${a.readonly}></weft-json-field>`
    case 'text':
    case 'number':
      return null
    default:
      return a.kind satisfies never
  }
}

/** The switch and date styles, for the page that renders these fields in its shadow root. */
export const typedFieldStyles = css`
  span.switch { position: relative; display: inline-flex; align-items: center; gap: 0.5em; cursor: pointer; padding: 0.2em 0; font-weight: normal; }
  span.switch input { position: absolute; left: 0; top: 0; opacity: 0; width: 2.4em; height: 100%; margin: 0; cursor: pointer; z-index: 1; }
  span.switch input:disabled { cursor: not-allowed; }
  span.switch .track { position: relative; width: 2.4em; height: 1.4em; border-radius: 999px; background: var(--wa-color-neutral-80, #bbc); transition: background 0.15s; flex: none; }
  span.switch .track::after { content: ''; position: absolute; top: 0.15em; left: 0.15em; width: 1.1em; height: 1.1em; border-radius: 50%; background: #fff; box-shadow: 0 1px 2px rgba(0, 0, 0, 0.3); transition: transform 0.15s; }
  span.switch input:checked + .track { background: var(--wa-color-brand-50, #2f6fd1); }
  span.switch input:checked + .track::after { transform: translateX(1em); }
  span.switch input:focus-visible + .track { outline: var(--wa-focus-ring, 2px solid #36c); outline-offset: 2px; }
  span.switch input:disabled + .track { opacity: 0.55; }
    input.date { max-width: 12em; }
`
