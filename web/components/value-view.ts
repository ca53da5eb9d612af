import { LitElement, css, html, nothing } from 'lit'
import type { JsonValue } from '../../shared/json.js'
import { NamesController } from '../controllers/names-controller.js'
import { isNodeLink } from './field-kinds.js'
import { nodeHref } from './route.js'

/**
 * [WEB16] A value as a person reads it: a list as chips, a link (`{ "$ref": path }`) as the
 * linked node's name (never its path), an object as its members; never clipped raw JSON.
 */
export class WeftValueView extends LitElement {
  static override properties = { value: { attribute: false }, prefix: {} }
  declare value: JsonValue | undefined
  /** Words before a link's name ("Open "). */
  declare prefix: string
  private readonly names = new NamesController(this)

  static override styles = css`
    :host { display: block; min-width: 0; overflow-wrap: anywhere; padding: 0.3em 0; }
    ul { list-style: none; display: flex; flex-wrap: wrap; gap: 0.3em; margin: 0; padding: 0; }
    li.chip { padding: 0.1em 0.6em; border-radius: 999px; background: var(--wa-color-brand-95, #e8efff); color: var(--wa-color-brand-20, #1d2f66); font-size: 0.9em; }
    dl { display: grid; grid-template-columns: max-content minmax(0, 1fr); gap: 0.2em 0.8em; margin: 0; }
    dt { color: #444; }
    dd { margin: 0; }
    a { color: var(--wa-color-brand-40, #1f4fbf); }
    .empty { color: #555; font-style: italic; }
  `

  constructor() {
    super()
    this.value = undefined
    this.prefix = ''
  }

  override willUpdate() {
    this.names.watch(collectLinks(this.value))
  }

  private renderValue(v: JsonValue | undefined): unknown {
    if (v === undefined || v === null) return html`<span class="empty">none</span>`
    if (isNodeLink(v)) {
      const name = this.names.value.find((n) => n.path === v.$ref)?.name ?? v.$ref
      return html`<a href=${nodeHref(v.$ref)} data-ref=${v.$ref}>${this.prefix}${name}</a>`
    }
    if (Array.isArray(v)) {
      if (!v.length) return html`<span class="empty">empty list</span>`
      return html`<ul class="chips">${v.map((item) => html`<li class="chip">${typeof item === 'object' && item !== null ? this.renderValue(item) : String(item)}</li>`)}</ul>`
    }
    if (typeof v === 'object') {
      const keys = Object.keys(v)
      if (!keys.length) return html`<span class="empty">empty</span>`
      return html`<dl>${keys.map((k) => html`<dt>${k}</dt><dd>${this.renderValue(v[k])}</dd>`)}</dl>`
    }
    return String(v)
  }

  override render() {
    return this.value === undefined ? nothing : this.renderValue(this.value)
  }
}

function collectLinks(v: JsonValue | undefined, out: string[] = []): string[] {
  if (isNodeLink(v)) out.push(v.$ref)
  else if (Array.isArray(v)) for (const item of v) collectLinks(item, out)
  else if (v && typeof v === 'object') for (const item of Object.values(v)) collectLinks(item, out)
  return out
}

if (!customElements.get('weft-value-view')) customElements.define('weft-value-view', WeftValueView)
