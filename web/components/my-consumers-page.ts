import { LitElement, css, html, nothing } from 'lit'
import { createContextualClient, type ContextualClient, type MyConsumer } from '../../shared/index.js'
import { app } from '../app-context.js'
import { NodeNames } from '../controllers/node-names.js'
import { humanError } from './error-text.js'
import { contextualHref } from './route.js'
import { formatWhen } from './run-text.js'
import { showError, showToast } from './toast.js'

interface Counts {
  pending: number
  leased: number
  dead: number
}

/** [WEB126] By name, then the newest first (two consumers of one name: the current one is usually the newer). */
function byNameThenNewest(a: MyConsumer, b: MyConsumer): number {
  return a.name.localeCompare(b.name) || b.createdAt.localeCompare(a.createdAt) || a.consumerId.localeCompare(b.consumerId)
}

/** [WEB126] Its pending, leased and dead counts, once its subscription's status is read. */
function countsWords(c: Counts | undefined) {
  if (!c) return nothing
  return html`<span class="meta counts" data-counts>${c.pending} pending · ${c.leased} leased · <span class=${c.dead > 0 ? 'bad' : ''}>${c.dead} dead</span></span>`
}

/** The bound on one account's consumers ([CTX46]); the page shows how close the account is. */
const CONSUMERS_BOUND = 1000

/**
 * [CTX49] `<weft-my-consumers-page>`: every contextual consumer of the signed-in person, over every
 * subscription, with those whose subscription is gone, changed or hidden marked (they get no more
 * work) and a delete button on each: the way to free places under the bound of 1,000 when the
 * subscription's own status page is gone with it.
 */
export class WeftMyConsumersPage extends LitElement {
  static override properties = { counts: { state: true }, consumers: { state: true }, total: { state: true }, next: { state: true }, error: { state: true }, busy: { state: true } }
  declare consumers: MyConsumer[] | null
  declare total: number
  declare next: string | null
  declare error: string
  declare busy: ReadonlySet<string>
  /** [WEB126] Each consumer's counts by id, from its subscription's status (`consumers`), asked once per subscription. */
  declare counts: ReadonlyMap<string, Counts>
  private readonly countsAsked = new Set<string>()
  private client: ContextualClient | null = null
  private loading = false
  private readonly names = new NodeNames(this)

  static override styles = css`
    :host { display: block; }
    ul { list-style: none; padding: 0; margin: 0.5em 0; }
    li { border-top: 1px solid #eceef3; padding: 0.6em 0; display: flex; flex-wrap: wrap; align-items: center; gap: 0.3em 1em; }
    .name { font-weight: 600; overflow-wrap: anywhere; }
    .sub { flex: 1 1 16em; overflow-wrap: anywhere; }
    .stale { color: #8a4b00; font-size: 0.9em; }
    .meta { color: #555; font-size: 0.9em; }
    .error { color: #b00; }
    .bad { color: #b00; font-weight: 600; }
  `

  constructor() {
    super()
    this.consumers = null
    this.total = 0
    this.next = null
    this.error = ''
    this.busy = new Set()
    this.counts = new Map()
  }

  private api(): ContextualClient {
    this.client ??= createContextualClient({ baseUrl: location.origin, token: app().session.token })
    return this.client
  }

  override connectedCallback() {
    super.connectedCallback()
    void this.load(false)
  }

  /** The first page, or (`more`) the page after the ones shown. */
  private async load(more: boolean) {
    // One page at a time (a double click on "Show more" asks once).
    if (this.loading) return
    this.loading = true
    try {
      const page = await this.api().mine(more && this.next ? { after: this.next } : {})
      const shown = new Set((this.consumers ?? []).map((c) => c.consumerId))
      this.consumers = more ? [...(this.consumers ?? []), ...page.consumers.filter((c) => !shown.has(c.consumerId))] : page.consumers
      this.total = page.total
      this.next = page.next
      this.error = ''
      void this.loadCounts(page.consumers)
    } catch (e) {
      this.error = humanError(e)
    } finally {
      this.loading = false
    }
  }

  /**
   * [WEB126] The counts of the consumers of current subscriptions not asked yet, one subscription
   * at a time (`mine` gives none). One that cannot be read shows none.
   */
  private async loadCounts(consumers: readonly MyConsumer[]) {
    const subs = [...new Set(consumers.filter((c) => c.current).map((c) => c.subscription))].filter((s) => !this.countsAsked.has(s))
    for (const sub of subs) {
      this.countsAsked.add(sub)
      try {
        const { consumers: listed } = await this.api().consumers(sub)
        const next = new Map(this.counts)
        for (const l of listed) next.set(l.consumerId, { pending: l.pending, leased: l.leased, dead: l.dead })
        this.counts = next
      } catch {
        // The counts are extra: the list stands without them.
      }
    }
  }

  private async deleteConsumer(c: MyConsumer) {
    if (!confirm(`Delete consumer “${c.name}” of ${c.current ? this.names.nameOf(c.subscription) : c.subscription} and forget its open events? Its workers' leases end now; a worker that pulls under this name again starts from new events only.`)) return
    this.busy = new Set(this.busy).add(c.consumerId)
    try {
      await this.api().delete(c.consumerId)
      this.consumers = (this.consumers ?? []).filter((x) => x.consumerId !== c.consumerId)
      this.total = Math.max(0, this.total - 1)
      showToast(`Deleted consumer ${c.name}.`)
    } catch (e) {
      showError(humanError(e))
    } finally {
      const busy = new Set(this.busy)
      busy.delete(c.consumerId)
      this.busy = busy
    }
  }

  override render() {
    if (this.error && !this.consumers) return html`<p class="error" role="alert">${this.error}</p>`
    if (!this.consumers) return html`<p aria-busy="true">Reading your consumers…</p>`
    const stale = this.consumers.filter((c) => !c.current).length
    return html`
      <p class="meta" data-total=${this.total}>${this.total} of at most ${CONSUMERS_BOUND.toLocaleString('en')} consumers${stale ? html` · ${stale} shown get no more work (their subscription is gone, changed or hidden from you)` : nothing}</p>
      ${this.error ? html`<p class="error" role="alert">${this.error}</p>` : nothing}
      ${this.consumers.length === 0
        ? html`<p>No consumers: an agent or worker makes one with its first <code>next</code> on a contextual subscription.</p>`
        : html`<ul aria-label="Your consumers">
            ${[...this.consumers].sort(byNameThenNewest).map(
              (c) => html`<li data-consumer=${c.consumerId}>
                <span class="name">${c.name}</span>
                <span class="sub">${c.current ? html`<a href=${contextualHref(c.subscription)} title=${c.subscription}>${this.names.nameOf(c.subscription)}</a>` : html`${c.subscription} <span class="stale">· no longer current</span>`}</span>
                <span class="meta" title=${c.createdAt}>made ${formatWhen(c.createdAt)}</span>
                ${countsWords(this.counts.get(c.consumerId))}
                <wa-button size="s" variant="danger" appearance="outlined" ?disabled=${this.busy.has(c.consumerId)} @click=${() => this.deleteConsumer(c)}>Delete consumer ${c.name}</wa-button>
              </li>`,
            )}
          </ul>`}
      ${this.next ? html`<wa-button size="s" @click=${() => this.load(true)}>Show more</wa-button>` : nothing}
    `
  }
}
customElements.define('weft-my-consumers-page', WeftMyConsumersPage)
