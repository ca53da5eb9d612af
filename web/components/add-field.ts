import { html, type TemplateResult } from 'lit'
import type { FieldKind } from './field-kinds.js'

/**
 * The kind picker of "Add a field" (labels: field-kinds.ts FIELD_KIND_LABELS). Static markup on
 * purpose: a Lit expression inside <select> breaks the template's part order in Chromium's
 * current <select> parser (one on the <select> itself is fine).
 */
export const kindSelect: TemplateResult = html`<select name="kind">
  <option value="text">Text</option>
  <option value="longtext">Long text (Markdown)</option>
  <option value="number">Number</option>
  <option value="checkbox">Yes/no</option>
  <option value="date">Date</option>
  <option value="list">List</option>
  <option value="link">Link to a node</option>
  <option value="object">JSON</option>
</select>`

const yesNo = html`<select name="value">
  <option value="yes">Yes</option>
  <option value="no">No</option>
</select>`

const HINTS: Partial<Record<FieldKind, string>> = {
  list: 'a, b, c',
  link: 'a node’s name or path',
  object: '{"key": "value"}',
  number: '0',
}

/** The value box of "Add a field", shaped by the kind chosen: one step, name + kind + value. */
export function valueInput(kind: FieldKind): TemplateResult {
  switch (kind) {
    case 'checkbox':
      return yesNo
    case 'date':
      return html`<input name="value" type="date" />`
    case 'longtext':
    case 'object':
      return html`<textarea name="value" rows="2" placeholder=${HINTS[kind] ?? ''}></textarea>`
    default:
      return html`<input name="value" placeholder=${HINTS[kind] ?? ''} />`
  }
}
