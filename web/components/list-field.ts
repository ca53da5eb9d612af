import { LitElement, css, html, nothing } from 'lit'
import { repeat } from 'lit/directives/repeat.js'
import { commitEvent } from './field-kinds.js'

type Item = string | number | boolean

/**
 * A list field as chips: each item with ✕ to remove it, and a box to add one (Enter or Add;
 * a number typed into a list of numbers stays a number). Every change writes the whole list
 * (arrays replace whole in a merge patch, RFC 7396), built from the list as it is now.
 */
export class WeftListField extends LitElement {
  static override properties = { key: {}, items: { attribute: false }, readonly: { type: Boolean } }
  declare key: string
  declare items: Item[]
  declare readonly: boolean

  static override styles = css`
    :host { display: block; min-width: 0; }
    ul { list-style: none; display: flex; flex-wrap: wrap; gap: 0.35em; margin: 0; padding: 0; }
    li { display: inline-flex; align-items: center; gap: 0.2em; max-width: 100%; padding: 0.1em 0.25em 0.1em 0.6em; border-radius: 999px; background: var(--wa-color-brand-95, #e8f0fe); border: 1px solid var(--wa-color-brand-80, #b9cdf5); overflow-wrap: anywhere; }
    li.readonly { padding-right: 0.6em; }
    li button { border: 0; background: transparent; cursor: pointer; font: inherit; padding: 0 0.3em; border-radius: 999px; line-height: 1.4; }
    li button:hover, li button:focus-visible { background: rgba(0, 0, 0, 0.1); }
    .empty { color: #666; font-style: italic; }
    form { display: flex; gap: 0.35em; margin-top: 0.35em; }
    input { flex: 1; min-width: 0; font: inherit; padding: 0.25em 0.5em; border: 1px solid var(--wa-color-neutral-80, #bbc); border-radius: var(--wa-border-radius-m, 6px); }
    form button { font: inherit; padding: 0.25em 0.7em; border: 1px solid var(--wa-color-neutral-80, #bbc); border-radius: var(--wa-border-radius-m, 6px); background: var(--wa-color-neutral-95, #f4f6fb); cursor: pointer; }
  `

  constructor() {
    super()
    this.key = ''
    this.items = []
    this.readonly = false
  }

  private write(next: Item[]) {
    this.dispatchEvent(commitEvent(this.key, next))
  }

  private onAdd(ev: Event) {
    ev.preventDefault()
    const input = this.renderRoot.querySelector('input')!
    const raw = input.value.trim()
    if (!raw) return
    const numeric = this.items.length > 0 && this.items.every((x) => typeof x === 'number') && Number.isFinite(Number(raw))
    this.write([...this.items, numeric ? Number(raw) : raw])
    input.value = ''
  }

  override render() {
    const items = this.items
    return html`<ul aria-label=${`${this.key} (list)`} data-list=${this.key}>
        ${items.length === 0 ? html`<li class="empty readonly">No items</li>` : nothing}
        ${repeat(
          items,
          (_x, i) => i,
          (x, i) => html`<li class=${this.readonly ? 'readonly' : ''} data-chip=${String(x)}><span class="text">${String(x)}</span>${this.readonly
            ? nothing
            : html`<button type="button" aria-label=${`Remove ${String(x)} from ${this.key}`} @click=${() => this.write(items.filter((_y, j) => j !== i))}>✕</button>`}</li>`,
        )}
      </ul>
      ${this.readonly
        ? nothing
        : html`<form @submit=${this.onAdd}><input aria-label=${`Add to ${this.key}`} placeholder="Add an item" /><button type="submit">Add</button></form>`}`
  }
}

customElements.define('weft-list-field', WeftListField)
