import { LitElement, css, html, nothing } from 'lit'
import { EMPTY, catchError, filter, from, merge, of, switchMap, throttleTime } from 'rxjs'
import type { MeshNode } from '../../shared/index.js'
import { ObservableController } from '../controllers/index.js'
import { app } from '../app-context.js'
import type { IndexRow } from '../store/index.js'
import { nodeHref } from './route.js'

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
 * announces a new run, and kept as last seen while offline. Each entry is a live panel bound to
 * its node.
 */
export class WeftActivityStrip extends LitElement {
  static override properties = { path: {}, heading: {}, mine: { type: Boolean } }
  declare path: string
  declare heading: string
  declare mine: boolean
  private readonly list = new ObservableController<IndexRow[]>(this)
  private readonly started = new ObservableController<MeshNode[]>(this)

  static override styles = css`
    :host { display: block; }
    ul { list-style: none; padding: 0; }
  `

  constructor() {
    super()
    this.path = ''
    this.heading = 'Activities'
    this.mine = false
  }

  override willUpdate() {
    if (!this.path) return
    const parent = `${this.path}/_Activity`
    this.list.watch(parent, () => app().streams.query$({ parent, limit: 50 }))
    if (!this.mine) return
    const me = app().session.userId
    this.started.watch(me, () => {
      const client = app().client
      const announced = client.feed$.pipe(filter((c) => c.nodeType === 'ActivityLog' && c.kind !== 'Updated'))
      return merge(of(null), announced).pipe(
        throttleTime(500, undefined, { leading: true, trailing: true }),
        switchMap(() => from(client.api.queryByField('ActivityLog', 'CreatedBy', me, 200)).pipe(catchError(() => EMPTY))),
      )
    })
  }

  override render() {
    const hosted = (this.list.value ?? []).filter((r) => r.nodeType === 'ActivityLog').map((r) => r.path)
    const elsewhere = this.mine ? (this.started.value ?? []).map((n) => n.path as string) : []
    const rows = [...new Set([...hosted, ...elsewhere])].sort(newestFirst).map((path) => ({ path }))
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
