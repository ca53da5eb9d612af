import { LitElement, css, html, nothing } from 'lit'
import { Subject, debounceTime, distinctUntilChanged, from, map, of, switchMap, catchError, type Subscription } from 'rxjs'
import type { SearchHit } from '../api/index.js'
import { SEARCH_MAX_QUERY_CHARS } from '../../shared/search-limits.js'
import { humanError } from './error-text.js'
import { typeLabel } from './labels.js'
import { nodeHref } from './route.js'
import { FIND_DEBOUNCE_MS, findOnDevice, searchOnline } from './find-nodes.js'

/** Keystrokes closer together than this are one request ([FIND2]'s server does the rest). */
const LIMIT = 20

interface Found {
  q: string
  items: SearchHit[]
  /** Answered from this device's index of names (offline, or the server unreachable). */
  isLocal: boolean
  error?: string
}

/**
 * Quick find (Ctrl+K / ⌘K, or the header's Search button): a dialog with a typeahead over
 * `GET /api/search` (debounced; only what the server lets the caller read), arrow keys and Enter
 * to open a node. Offline, it searches the nodes this device holds ([FIND7]), marked as offline results.
 */
export class WeftQuickFind extends LitElement {
  static override properties = { open: { state: true }, found: { state: true }, active: { state: true }, loaded: { state: true } }
  declare open: boolean
  declare found: Found | null
  declare active: number
  /** The dialog's module is loaded on first use: it costs the cold start nothing. */
  declare loaded: boolean
  private readonly queries = new Subject<string>()
  private sub: Subscription | null = null
  private readonly onKey = (ev: KeyboardEvent) => {
    if ((ev.ctrlKey || ev.metaKey) && !ev.altKey && !ev.shiftKey && ev.key.toLowerCase() === 'k') {
      ev.preventDefault()
      void this.show()
    }
  }

  static override styles = css`
    :host { display: contents; }
    wa-dialog { --width: min(40rem, calc(100vw - 1.5rem)); }
    wa-dialog::part(body) { padding-top: 0; }
    input { box-sizing: border-box; width: 100%; font: inherit; font-size: 1.05em; padding: 0.55em 0.7em; border: 1px solid #bbc; border-radius: 6px; }
    ul { list-style: none; margin: 0.6em 0 0; padding: 0; max-height: min(60vh, 28rem); overflow: auto; }
    li { padding: 0.45em 0.6em; border-radius: 6px; cursor: pointer; overflow-wrap: anywhere; }
    li[aria-selected='true'] { background: #e8efff; }
    .name { font-weight: 600; }
    .type { color: #667; font-size: 0.85em; margin-left: 0.4em; }
    .snippet { color: #445; font-size: 0.9em; margin-top: 0.15em; }
    .where { color: #667; font-size: 0.85em; }
    .note { color: #667; font-size: 0.9em; margin: 0.6em 0 0; }
  `

  constructor() {
    super()
    this.open = false
    this.found = null
    this.active = 0
    this.loaded = false
  }

  override connectedCallback() {
    super.connectedCallback()
    window.addEventListener('keydown', this.onKey)
    this.sub = this.queries
      .pipe(
        map((q) => q.trim()),
        distinctUntilChanged(),
        debounceTime(FIND_DEBOUNCE_MS),
        switchMap((q) => (q === '' ? of<Found | null>(null) : from(this.find(q)).pipe(catchError((e: unknown) => of<Found>({ q, items: [], isLocal: false, error: humanError(e, { typed: true }) }))))),
      )
      .subscribe((found) => {
        this.found = found
        this.active = 0
      })
  }

  override disconnectedCallback() {
    super.disconnectedCallback()
    window.removeEventListener('keydown', this.onKey)
    this.sub?.unsubscribe()
    this.sub = null
  }

  /**
   * The dialog's hide animation under way, if any: a show asked for meanwhile (Enter opened a
   * node, then Ctrl+K at once) waits for it, or the hide's end would close the dialog again.
   */
  private hiding: { done: Promise<void>; resolve: () => void } | null = null

  private hide(): void {
    if (!this.open) return
    let resolve!: () => void
    const done = new Promise<void>((r) => (resolve = r))
    this.hiding = { done, resolve }
    this.open = false
  }

  private onHidden(): void {
    this.open = false
    this.hiding?.resolve()
    this.hiding = null
  }

  /** Opens the dialog with the input focused (also the header button's action). */
  async show(): Promise<void> {
    // At most a second: a hide whose end event never comes does not keep the dialog shut.
    if (this.hiding) await Promise.race([this.hiding.done, new Promise((r) => setTimeout(r, 1000))])
    this.hiding = null
    if (!this.loaded) {
      await import('@awesome.me/webawesome/dist/components/dialog/dialog.js')
      this.loaded = true
    }
    this.open = true
    await this.updateComplete
    const input = this.renderRoot.querySelector('input')
    input?.focus()
    input?.select()
  }

  private async find(q: string): Promise<Found> {
    const online = await searchOnline(q, LIMIT)
    if (online) return { q, items: online, isLocal: false }
    // [FIND7] Offline: the nodes this device holds (every one was readable when it synced).
    return { q, items: await findOnDevice(q, LIMIT), isLocal: true }
  }

  private go(hit: SearchHit | undefined): void {
    if (!hit) return
    this.hide()
    location.hash = nodeHref(hit.path)
  }

  private onInputKey(ev: KeyboardEvent): void {
    const n = this.found?.items.length ?? 0
    if (ev.key === 'ArrowDown' && n) {
      ev.preventDefault()
      this.active = (this.active + 1) % n
    } else if (ev.key === 'ArrowUp' && n) {
      ev.preventDefault()
      this.active = (this.active - 1 + n) % n
    } else if (ev.key === 'Enter') {
      ev.preventDefault()
      this.go(this.found?.items[this.active])
    }
  }

  override updated(): void {
    this.renderRoot.querySelector('li[aria-selected="true"]')?.scrollIntoView({ block: 'nearest' })
  }

  override render() {
    if (!this.loaded) return nothing
    const found = this.found
    return html`
      <wa-dialog label="Find a node" ?open=${this.open} @wa-after-hide=${(e: Event) => e.target === e.currentTarget && this.onHidden()}>
        <input
          type="search"
          role="combobox"
          aria-label="Find a node by name or text"
          aria-controls="quick-find-results"
          aria-expanded=${found?.items.length ? 'true' : 'false'}
          aria-activedescendant=${found?.items.length ? `qf-${this.active}` : nothing}
          placeholder="Search names and text…"
          autocomplete="off"
          maxlength=${SEARCH_MAX_QUERY_CHARS}
          @input=${(e: Event) => this.queries.next((e.target as HTMLInputElement).value)}
          @keydown=${this.onInputKey}
        />
        ${found?.isLocal ? html`<p class="note" role="status" data-offline>Offline results: the names and text of the nodes on this device.</p>` : nothing}
        ${found?.error ? html`<p class="note" role="alert">${found.error}</p>` : nothing}
        ${found && !found.error && found.items.length === 0 ? html`<p class="note" role="status">Nothing found for “${found.q}”.</p>` : nothing}
        <ul id="quick-find-results" role="listbox" aria-label="Results">
          ${(found?.items ?? []).map(
            (hit, i) => html`<li
              id="qf-${i}"
              role="option"
              aria-selected=${i === this.active ? 'true' : 'false'}
              data-path=${hit.path}
              ?data-offline=${found?.isLocal}
              @click=${() => this.go(hit)}
              @mousemove=${() => (this.active = i)}
            >
              <span class="name">${hit.name}</span><span class="type">${typeLabel(hit.nodeType)}</span>
              ${hit.where?.length ? html`<div class="where">in ${hit.where.join(' › ')}</div>` : nothing}
              ${hit.snippet ? html`<div class="snippet">${hit.snippet}</div>` : nothing}
            </li>`,
          )}
        </ul>
      </wa-dialog>
    `
  }
}
customElements.define('weft-quick-find', WeftQuickFind)
