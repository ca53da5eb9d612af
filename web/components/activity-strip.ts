import { LitElement, css, html, nothing } from 'lit'
import { ObservableController } from '../controllers/index.js'
import { app } from '../app-context.js'
import type { IndexRow } from '../store/index.js'
import { nodeHref } from './route.js'

/**
 * The activities hosted by a node (`{path}/_Activity/*`), newest first: a strip on every node
 * page, and the activity feed on a user's home. Each entry is a live panel bound to its node.
 */
export class WeftActivityStrip extends LitElement {
  static override properties = { path: {}, heading: {} }
  declare path: string
  declare heading: string
  private readonly list = new ObservableController<IndexRow[]>(this)

  static override styles = css`
    :host { display: block; }
    ul { list-style: none; padding: 0; }
  `

  constructor() {
    super()
    this.path = ''
    this.heading = 'Activities'
  }

  override willUpdate() {
    if (!this.path) return
    const parent = `${this.path}/_Activity`
    this.list.watch(parent, () => app().streams.query$({ parent, limit: 50 }))
  }

  override render() {
    const rows = (this.list.value ?? []).filter((r) => r.nodeType === 'ActivityLog').sort((a, b) => (a.path < b.path ? 1 : -1))
    if (rows.length === 0) return nothing
    return html`<section aria-label=${this.heading}>
      <h3>${this.heading}</h3>
      <ul>
        ${rows.slice(0, 10).map((r) => html`<li><weft-activity-panel path=${r.path}></weft-activity-panel></li>`)}
      </ul>
      ${rows.length > 10 ? html`<p>${rows.length - 10} more: <a href=${nodeHref(`${this.path}/_Activity`)}>all</a></p>` : nothing}
    </section>`
  }
}

customElements.define('weft-activity-strip', WeftActivityStrip)
