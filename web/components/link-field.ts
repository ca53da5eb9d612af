import { LitElement, css, html, nothing } from 'lit'
import { repeat } from 'lit/directives/repeat.js'
import { catchError, from, map, of, switchMap, timer, type Observable } from 'rxjs'
import { ObservableController } from '../controllers/index.js'
import { NamesController } from '../controllers/names-controller.js'
import { app } from '../app-context.js'
import { liveStoreQuery, type IndexRow } from '../store/index.js'
import { commitEvent } from './field-kinds.js'
import { humanError } from './error-text.js'
import { nodeHref } from './route.js'
import { FIND_DEBOUNCE_MS, searchOnline } from './find-nodes.js'
import { background } from '../sync/background.js'
import { typeLabel } from './labels.js'

/** Suggestions shown at once: a picker, not a browser. */
const PICKS = 8

/** What the picker offers: a node's path, name and type. */
interface Pick {
  path: string
  name: string
  nodeType: string
}

interface Picks {
  rows: Pick[]
  /** Answered from this device's index (offline, the server unreachable, or nothing typed yet). */
  local: boolean
  error?: string
}

/**
 * [FIND6] The picker's suggestions for `q`: online, the server's quick find (`GET /api/search`,
 * only nodes the caller may read, anywhere in the mesh, opened on this device or not); offline
 * or unreachable, the nodes this device knows. With nothing typed, this device's neighbours of
 * the page (warmPicker lists them).
 */
function picks$(q: string): Observable<Picks> {
  const needle = q.trim()
  const local$ = candidates$(needle).pipe(map((rows): Picks => ({ rows, local: true })))
  if (needle === '' || !navigator.onLine) return local$
  // Each key resubscribes, dropping the last wait: keystrokes closer together are one request.
  return timer(FIND_DEBOUNCE_MS).pipe(
    switchMap(() => from(searchOnline(needle, PICKS))),
    switchMap((items) => (items ? of<Picks>({ rows: items, local: false }) : local$)),
    catchError((e: unknown) => of<Picks>({ rows: [], local: false, error: humanError(e) })),
  )
}

/**
 * Nodes of this device's index whose name (or path) holds `q`: every one came from a listing the
 * server filtered by access. With nothing typed, the places nearest the top first (spaces, then
 * what is in them), by name: the likeliest picks, not whatever the index holds first.
 */
function candidates$(q: string) {
  const { store } = app().client
  const needle = q.trim().toLowerCase()
  const shown = (r: IndexRow) => !r.localOnly && !/(^|\/)_/.test(r.path)
  if (!needle) {
    const depth = (r: IndexRow) => r.path.split('/').length
    return liveStoreQuery(store.db, ['nodes'], async () =>
      (await store.db.nodes.filter(shown).toArray()).sort((a, b) => depth(a) - depth(b) || a.name.localeCompare(b.name)).slice(0, PICKS),
    )
  }
  return liveStoreQuery(store.db, ['nodes'], () =>
    store.db.nodes
      .filter((r: IndexRow) => shown(r) && (r.name.toLowerCase().includes(needle) || r.path.toLowerCase().includes(needle)))
      .limit(PICKS)
      .toArray(),
  )
}

/**
 * Brings the places a link most likely points to into this device's index (the top level, the
 * page's space, its parent and its children), each listed by the server for this caller: what
 * the picker offers is what the caller may read.
 */
export async function warmPicker(base: string): Promise<void> {
  const { client } = app()
  const segments = base.split('/')
  const places = new Set(['', segments[0]!, segments.slice(0, -1).join('/'), base].filter((p, i) => i === 0 || p !== ''))
  await Promise.all([...places].map((p) => client.refreshChildren(p)))
}

/**
 * A link to a node (`{ "$ref": path }`, [WEB5]): shown as the node's name, opening it; "Change"
 * opens a picker over the nodes the caller may read ([FIND6]: the server's quick find online,
 * this device's nodes offline; names first, the path beside for two of the same name). Picking
 * one writes the link; the person never types a path.
 */
export class WeftLinkField extends LitElement {
  static override properties = { key: {}, ref: {}, base: {}, readonly: { type: Boolean }, chooser: {}, picking: { state: true }, query: { state: true } }
  declare key: string
  /** The page's node: its space and neighbours are listed first when the picker opens. */
  declare base: string
  declare ref: string
  declare readonly: boolean
  /**
   * [WEB54] Only a "Choose…" button and its picker, for a form that keeps the value itself (an
   * operation's `node` input): its text names the input the choice is for.
   */
  declare chooser: string
  declare picking: boolean
  declare query: string
  private readonly names = new NamesController(this)
  private readonly picks = new ObservableController<Picks>(this)

  static override styles = css`
    :host { display: block; min-width: 0; }
    .row { display: flex; flex-wrap: wrap; gap: 0.5em; align-items: baseline; }
    a { overflow-wrap: anywhere; }
    button { font: inherit; padding: 0.15em 0.6em; border: 1px solid var(--wa-color-neutral-80, #bbc); border-radius: var(--wa-border-radius-m, 6px); background: var(--wa-color-neutral-95, #f4f6fb); cursor: pointer; }
    .picker { margin-top: 0.35em; border: 1px solid var(--wa-color-neutral-85, #ccd); border-radius: var(--wa-border-radius-m, 6px); padding: 0.35em; background: #fff; }
    input { width: 100%; box-sizing: border-box; font: inherit; padding: 0.25em 0.5em; border: 1px solid var(--wa-color-neutral-80, #bbc); border-radius: var(--wa-border-radius-m, 6px); }
    ul { list-style: none; margin: 0.3em 0 0; padding: 0; }
    li button { display: block; width: 100%; text-align: left; border: 0; background: transparent; padding: 0.3em 0.4em; overflow-wrap: anywhere; }
    li button:hover, li button:focus-visible { background: var(--wa-color-brand-95, #e8f0fe); }
    small { color: #666; }
    .none { color: #666; font-style: italic; padding: 0.3em 0.4em; }
    .note { color: #666; font-size: 0.9em; margin: 0.3em 0.4em 0; }
  `

  constructor() {
    super()
    this.key = ''
    this.ref = ''
    this.base = ''
    this.readonly = false
    this.chooser = ''
    this.picking = false
    this.query = ''
  }

  override willUpdate(changed: Map<string, unknown>) {
    this.names.watch(this.ref ? [this.ref] : [])
    // The target's name, asked of the server (as this caller) when this device has not listed it.
    if (changed.has('ref') && this.ref) {
      const ref = this.ref
      const { client } = app()
      background(client.store.getIndexRow(ref).then((row) => (row ? undefined : client.learnNode(ref))))
    }
    if (this.picking) {
      const q = this.query
      this.picks.watch(q, () => picks$(q))
    }
  }

  private pick(path: string) {
    this.picking = false
    this.query = ''
    if (path !== this.ref) this.dispatchEvent(commitEvent(this.key, { $ref: path }))
  }

  private renderPicker() {
    const found = this.picks.value
    const rows = found?.rows ?? []
    return html`<div class="picker">
      <input role="combobox" aria-expanded="true" aria-controls="picks" aria-label=${this.chooser ? 'Find a node by name' : `Link ${this.key} to`} placeholder="Find a node by name"
        .value=${this.query} @input=${(e: Event) => (this.query = (e.target as HTMLInputElement).value)}
        @keydown=${(e: KeyboardEvent) => {
          if (e.key === 'Escape') this.picking = false
          if (e.key === 'Enter' && rows[0]) {
            e.preventDefault()
            this.pick(rows[0].path)
          }
        }} />
      <ul id="picks" role="listbox" aria-label="Nodes">
        ${repeat(rows, (r) => r.path, (r) => html`<li role="option" aria-selected="false"><button type="button" data-pick=${r.path} @click=${() => this.pick(r.path)}>${r.name} <small>${typeLabel(r.nodeType)} · ${r.path}</small></button></li>`)}
        ${found && rows.length === 0 && !found.error ? html`<li class="none">${found.local ? 'No node of that name on this device.' : 'No node you can read has that name.'}</li>` : nothing}
      </ul>
      ${!found && this.query.trim() ? html`<p class="note" role="status">Looking…</p>` : nothing}
      ${found?.error ? html`<p class="note" role="alert">${found.error}</p>` : nothing}
      ${found?.local && this.query.trim() ? html`<p class="note" role="status" data-offline>Offline: only the nodes on this device.</p>` : nothing}
    </div>`
  }

  private toggle() {
    this.picking = !this.picking
    if (this.picking) background(warmPicker(this.base))
    if (this.picking) void this.updateComplete.then(() => this.renderRoot.querySelector('input')?.focus())
  }

  override render() {
    if (this.chooser) {
      return html`<button type="button" aria-expanded=${String(this.picking)} data-chooser=${this.chooser} @click=${this.toggle}>${this.picking ? 'Close the list' : 'Choose a node…'}</button>
        ${this.picking ? this.renderPicker() : nothing}`
    }
    const name = this.names.value[0]?.name ?? this.ref
    return html`<div class="row">
        ${this.ref ? html`<a href=${nodeHref(this.ref)} data-link=${this.ref} title=${this.ref}>${name}</a>` : html`<span>Not linked</span>`}
        ${this.readonly
          ? nothing
          : html`<button type="button" aria-expanded=${String(this.picking)} @click=${this.toggle}>${this.picking ? 'Close' : 'Change…'}</button>`}
      </div>
      ${this.picking ? this.renderPicker() : nothing}`
  }
}

customElements.define('weft-link-field', WeftLinkField)
