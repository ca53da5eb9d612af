import { LitElement, css, html } from 'lit'
import type { JsonObject, JsonValue } from '../../shared/json.js'
import { ObservableController } from '../controllers/index.js'
import { app } from '../app-context.js'
import type { NodeView } from '../streams/index.js'
import './link-field.js'

interface Decl {
  Type?: string
  Label?: string
  Required?: boolean
}

/**
 * The operation form: generated from the Code node's declared Inputs and bound DIRECTLY to the
 * draft activity's Inputs (each edit is one merge patch of that node; no copy, no save loop).
 */
export class WeftActivityForm extends LitElement {
  static override properties = { path: {}, codePath: { attribute: 'code-path' }, error: { state: true } }
  declare path: string
  declare codePath: string
  declare error: string
  private readonly activity = new ObservableController<NodeView | null>(this)
  private readonly code = new ObservableController<NodeView | null>(this)

  static override styles = css`
    :host { display: block; }
    form { display: grid; grid-template-columns: max-content minmax(0, 1fr); gap: 0.4em 0.8em; }
    .node-input { display: flex; flex-wrap: wrap; gap: 0.4em; align-items: start; min-width: 0; }
    .node-input input { flex: 1 1 10em; min-width: 0; }
    .node-input weft-link-field { flex: 0 1 auto; }
    @media (max-width: 600px) { form { grid-template-columns: minmax(0, 1fr); } }
    .error { color: #b00; }
  `

  constructor() {
    super()
    this.path = ''
    this.codePath = ''
    this.error = ''
  }

  override willUpdate() {
    if (this.path) this.activity.watch(this.path, () => app().streams.node$(this.path))
    if (this.codePath) this.code.watch(this.codePath, () => app().streams.node$(this.codePath))
  }

  private async set(name: string, value: JsonValue) {
    this.error = ''
    try {
      await app().client.patch(this.path, { Inputs: { [name]: value } })
    } catch (e) {
      this.error = (e as Error).message
    }
  }

  private onChange(name: string, type: string, ev: Event) {
    const input = ev.target as HTMLInputElement | HTMLTextAreaElement
    let value: JsonValue = input.value
    if (type === 'boolean') value = (input as HTMLInputElement).checked
    else if (type === 'number') value = Number(input.value)
    else if (type === 'json') {
      try {
        value = JSON.parse(input.value) as JsonValue
      } catch {
        this.error = `${name} is not valid JSON.`
        return
      }
    }
    void this.set(name, value)
  }

  override render() {
    const decls = (this.code.value?.content.Inputs ?? {}) as Record<string, Decl>
    const inputs = (this.activity.value?.content.Inputs ?? {}) as JsonObject
    const started = this.activity.value?.content.Status !== undefined
    return html`<form aria-label="Inputs" @submit=${(e: Event) => e.preventDefault()}>
        ${Object.entries(decls).map(([name, d]) => {
          const type = d.Type ?? 'string'
          const v = inputs[name]
          const id = `in-${name}`
          const label = html`<label for=${id}>${d.Label ?? name}${d.Required ? ' *' : ''}</label>`
          const change = (e: Event) => this.onChange(name, type, e)
          if (type === 'boolean') return html`${label}<input id=${id} type="checkbox" ?disabled=${started} .checked=${v === true} @change=${change} />`
          if (type === 'number') return html`${label}<input id=${id} type="number" ?disabled=${started} .value=${v === undefined ? '' : String(v)} @change=${change} />`
          if (type === 'json') return html`${label}<textarea id=${id} ?disabled=${started} .value=${v === undefined ? '' : JSON.stringify(v)} @change=${change}></textarea>`
          if (type === 'node') {
            // [WEB54] A node is chosen by its name (the picker), or typed as a path.
            const chosen = (e: CustomEvent<{ value: { $ref?: string } | null }>) => {
              e.stopPropagation()
              const path = e.detail.value?.$ref
              if (typeof path === 'string') void this.set(name, path)
            }
            return html`${label}<span class="node-input">
                <input id=${id} type="text" placeholder="a node's path" ?disabled=${started} .value=${v === undefined ? '' : String(v)} @change=${change} />
                ${started ? '' : html`<weft-link-field .key=${name} chooser=${d.Label ?? name} @field-commit=${chosen}></weft-link-field>`}
              </span>`
          }
          return html`${label}<input id=${id} type="text" ?disabled=${started} .value=${v === undefined ? '' : String(v)} @change=${change} />`
        })}
      </form>
      ${this.error ? html`<p class="error" role="alert">${this.error}</p>` : ''}`
  }
}

customElements.define('weft-activity-form', WeftActivityForm)
