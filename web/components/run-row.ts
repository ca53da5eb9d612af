import { LitElement, css, html, nothing } from 'lit'
import type { JsonValue } from '../../shared/json.js'
import { ObservableController } from '../controllers/index.js'
import { PeopleController } from '../controllers/people-controller.js'
import { app } from '../app-context.js'
import type { NodeView } from '../streams/index.js'
import { nodeHref } from './route.js'
import { formatWhen, runDuration, runStatusWord } from './run-text.js'

const str = (v: JsonValue | undefined): string | null => (typeof v === 'string' && v !== '' ? v : null)

/**
 * One line of a run list (a Code node's runs, a space's, a home's): number, status, what ran,
 * who started it, when, how long. The run's page (a click) has the rest; a list never shows
 * full panels (a space's documents started 2,760 px down).
 */
export class WeftRunRow extends LitElement {
  static override properties = { path: {}, number: { type: Number } }
  declare path: string
  /** Its place in the list, oldest first (#1 is the first run listed). */
  declare number: number
  private readonly node = new ObservableController<NodeView | null>(this)
  private readonly people = new PeopleController(this)

  static override styles = css`
    :host { display: block; }
    a.row { display: grid; grid-template-columns: 3.2em 6.5em minmax(0, 1fr) auto; gap: 0.2em 0.6em; align-items: baseline; padding: 0.35em 0.5em; border-bottom: 1px solid #eceef3; color: inherit; text-decoration: none; }
    a.row:hover, a.row:focus-visible { background: #f3f6fd; }
    .num { color: #667; font-variant-numeric: tabular-nums; }
    .badge { border-radius: 3px; padding: 0 0.4em; font-weight: 600; font-size: 0.9em; justify-self: start; }
    .Running { background: #def; } .Succeeded { background: #dfd; } .Warning { background: #ffd; }
    .Failed { background: #fdd; } .Cancelled { background: #eee; } .Draft { background: #f4f4ff; }
    .what { overflow-wrap: anywhere; }
    .who { color: #555; font-size: 0.9em; }
    .when { color: #555; font-size: 0.9em; text-align: right; white-space: nowrap; }
    a.row.plain { grid-template-columns: 6.5em minmax(0, 1fr) auto; }
    @media (max-width: 600px) {
      a.row { grid-template-columns: 2.6em auto minmax(0, 1fr); }
      .when { grid-column: 2 / -1; text-align: left; white-space: normal; }
      a.row.plain { grid-template-columns: auto minmax(0, 1fr); }
      a.row.plain .when { grid-column: 1 / -1; }
    }
  `

  constructor() {
    super()
    this.path = ''
    this.number = 0
  }

  override willUpdate() {
    if (!this.path) return
    const path = this.path
    this.node.watch(path, () => app().streams.node$(path))
    this.people.setPath(path)
  }

  override render() {
    const view = this.node.value
    const c = view?.content ?? {}
    const status = view ? (typeof c.Status === 'string' ? c.Status : 'Draft') : '…'
    const starter = str(c.StartedBy) ?? (status !== 'Draft' ? str(c.CreatedBy) : null)
    const codePath = str(c.CodePath)
    const what = view?.name ?? this.path.slice(this.path.lastIndexOf('/') + 1)
    const start = str(c.Start)
    const took = runDuration(c.Start, c.End)
    const stopping = status === 'Running' && c.RequestedStatus === 'Cancelled'
    return html`<a class="row ${this.number > 0 ? '' : 'plain'}" href=${nodeHref(this.path)} data-status=${status} title=${codePath ?? ''}>
      ${this.number > 0 ? html`<span class="num">#${this.number}</span>` : nothing}
      <span class="badge ${status}">${stopping ? 'Stopping…' : runStatusWord(status)}</span>
      <span class="what">${what}${starter ? html` <span class="who">· started by ${this.people.nameOf(starter)}</span>` : nothing}</span>
      <span class="when">${start ? formatWhen(start) : ''}${took ? ` · ${status === 'Running' ? `for ${took}` : took}` : ''}</span>
    </a>`
  }
}

customElements.define('weft-run-row', WeftRunRow)
