import { LitElement, css, html, nothing } from 'lit'
import { EMPTY, catchError, filter, from, merge, of, switchMap, throttleTime } from 'rxjs'
import type { MeshNode } from '../../shared/index.js'
import { ObservableController } from '../controllers/index.js'
import { app } from '../app-context.js'
import type { IndexRow } from '../store/index.js'
import './run-row.js'

/** Runs listed at once: one line each. */
const SHOWN = 30

/** Newest first across parents: an activity's name segment starts with its creation time. */
const newestFirst = (a: string, b: string) => {
  const ka = a.slice(a.lastIndexOf('/') + 1)
  const kb = b.slice(b.lastIndexOf('/') + 1)
  return ka < kb ? 1 : ka > kb ? -1 : 0
}

/**
 * The activities hosted by a node (`{path}/_Activity/*`), newest first: a strip on every node
 * page. With `mine` (a user's home), the activity feed: also the runs this user started wherever
 * they landed (a space, a Code node's ActivityParentPath), asked of the server when the feed
 * announces a new run, and kept as last seen while offline. With `code` (a Code node), every run
 * of that code the caller may read. Each entry is one line (weft-run-row) linking to the run's
 * page: number, status, started by, when, duration.
 */
export class WeftActivityStrip extends LitElement {
  static override properties = { path: {}, heading: {}, mine: { type: Boolean }, code: { type: Boolean }, own: {}, empty: {} }
  declare path: string
  declare heading: string
  declare mine: boolean
  /** `path` is a Code node: its runs, wherever they landed (asked of the server by CodePath). */
  declare code: boolean
  /**
   * [WEB52] A run the page made (its "Your run"): listed at once. The list learns of runs that
   * land elsewhere (a space's `_Activity`) when the change feed announces them, which may be later;
   * a person's own new run was missing from the list under it.
   */
  declare own: string
  /** Said under the heading when there is no run (unset: a list of none is not shown at all). */
  declare empty: string
  private readonly ownRuns = new Set<string>()
  private ownOf = ''
  private readonly list = new ObservableController<IndexRow[]>(this)
  private readonly started = new ObservableController<MeshNode[]>(this)

  static override styles = css`
    :host { display: block; }
    ul { list-style: none; padding: 0; margin: 0; border: 1px solid #e3e6ee; border-radius: 6px; background: #fff; overflow: hidden; }
    h3 { margin: 0.6em 0 0.4em; }
    .empty { color: #555; margin: 0; }
  `

  constructor() {
    super()
    this.path = ''
    this.heading = 'Runs'
    this.mine = false
    this.code = false
    this.own = ''
    this.empty = ''
  }

  override willUpdate() {
    if (!this.path) return
    if (this.ownOf !== this.path) {
      this.ownOf = this.path
      this.ownRuns.clear()
    }
    if (this.own) this.ownRuns.add(this.own)
    const parent = `${this.path}/_Activity`
    this.list.watch(parent, () => app().streams.query$({ parent, limit: 50 }))
    if (!this.mine && !this.code) return
    const [field, value] = this.code ? ['CodePath', this.path] : ['CreatedBy', app().session.userId]
    this.started.watch(`${field}=${value}`, () => {
      const client = app().client
      const announced = client.feed$.pipe(filter((c) => c.nodeType === 'ActivityLog' && c.kind !== 'Updated'))
      return merge(of(null), announced).pipe(
        throttleTime(500, undefined, { leading: true, trailing: true }),
        switchMap(() => from(client.api.queryByField('ActivityLog', field, value, 200)).pipe(catchError(() => EMPTY))),
      )
    })
  }

  override render() {
    const hosted = (this.list.value ?? []).filter((r) => r.nodeType === 'ActivityLog').map((r) => r.path)
    const elsewhere = this.mine || this.code ? (this.started.value ?? []).map((n) => n.path as string) : []
    const rows = [...new Set([...hosted, ...elsewhere, ...this.ownRuns])].sort(newestFirst)
    // [WEB54] Where a list of none says what would be here (the home), it keeps its heading.
    if (rows.length === 0) return this.empty ? html`<section aria-label=${this.heading}><h3>${this.heading}</h3><p class="empty">${this.empty}</p></section>` : nothing
    // The runs of one Code node are numbered oldest first (#1 its first run), shown newest first.
    // A list of several codes' runs is not: a run had two numbers in two lists (stop 42).
    return html`<section aria-label=${this.heading}>
      <h3>${this.heading}</h3>
      <ul class="runs">
        ${rows.slice(0, SHOWN).map((path, i) => html`<li><weft-run-row path=${path} .number=${this.code ? rows.length - i : 0}></weft-run-row></li>`)}
      </ul>
      ${rows.length > SHOWN ? html`<p>${rows.length - SHOWN} older runs not shown.</p>` : nothing}
    </section>`
  }
}

customElements.define('weft-activity-strip', WeftActivityStrip)
