import { LitElement, css, html, nothing, type ReactiveController, type ReactiveControllerHost } from 'lit'
import { createContextualClient, type ContextualClient, type DeadLetter, type ListedConsumer, type SubscriptionConsumers } from '../../shared/index.js'
import { app } from '../app-context.js'
import { NodeNames } from '../controllers/node-names.js'
import { codeOf, humanError } from './error-text.js'
import { MY_CONSUMERS_HREF, nodeHref } from './route.js'
import { formatWhen } from './run-text.js'
import { showError, showToast } from './toast.js'

/**
 * [WEB123] What the page reads beyond ListedConsumer where the server gives it: `current` false
 * for a consumer made for an earlier definition of the subscription (its leased events and dead
 * letters stay with it), and [CTX65] when each dead letter died (absent from an older server).
 */
type Listed = Omit<ListedConsumer, 'deadLetters' | 'current'> & { current?: boolean; deadLetters: Array<Omit<DeadLetter, 'diedAt'> & { diedAt?: string | null }> }

/** How often the page re-reads the consumers while it is open and visible. */
const REFRESH_MS = 3_000

/** Calls `tick` every `ms` while the host is connected and the tab is visible (and at once on return). */
class PollController implements ReactiveController {
  private timer: ReturnType<typeof setInterval> | null = null
  private readonly onVisible = () => {
    if (document.visibilityState === 'visible') this.tick()
  }
  constructor(
    host: ReactiveControllerHost,
    private readonly ms: number,
    private readonly tick: () => void,
  ) {
    host.addController(this)
  }
  hostConnected() {
    this.timer = setInterval(() => document.visibilityState === 'visible' && this.tick(), this.ms)
    document.addEventListener('visibilitychange', this.onVisible)
  }
  hostDisconnected() {
    if (this.timer) clearInterval(this.timer)
    this.timer = null
    document.removeEventListener('visibilitychange', this.onVisible)
  }
}

/**
 * [CTX38] `<weft-contextual-page subscription>`: each consumer of a ContextualSubscription (yours,
 * or every one for its Admins, with whose it is) with pending, leased, acked and dead counts, the
 * changes since its last pull, and the dead letters with their last error; an Admin re-drives them. Refreshes every few
 * seconds while visible.
 */
export class WeftContextualPage extends LitElement {
  static override properties = { subscription: {}, data: { state: true }, error: { state: true }, busy: { state: true } }
  declare subscription: string
  declare data: SubscriptionConsumers | null
  declare error: string
  declare busy: ReadonlySet<string>
  private client: ContextualClient | null = null
  private loading = false
  /**
   * [CTX55] The subscription is not there (or not readable): asking again every few seconds only
   * logs a 404 each time (and counts as a refusal on the operator's page). Asked again when the
   * page is opened for a subscription anew.
   */
  private gone = false
  private readonly names = new NodeNames(this)

  static override styles = css`
    :host { display: block; }
    .consumers { list-style: none; padding: 0; margin: 0; display: grid; gap: 1em; }
    .consumer { border: 1px solid #d5d9e3; border-radius: 8px; padding: 0.8em 1em; }
    .consumer h2 { font-size: 1.05em; margin: 0 0 0.5em; overflow-wrap: anywhere; }
    dl.counts { display: flex; flex-wrap: wrap; gap: 0.5em 1.5em; margin: 0 0 0.6em; }
    dl.counts div { min-width: 5.5em; }
    dt { color: #555; font-size: 0.85em; }
    dd { margin: 0; font-size: 1.25em; font-variant-numeric: tabular-nums; }
    dd.bad { color: #b00; font-weight: 600; }
    .dead { list-style: none; padding: 0; margin: 0.4em 0; }
    .dead li { padding: 0.4em 0; border-top: 1px solid #eceef3; display: flex; flex-wrap: wrap; gap: 0.2em 1em; }
    .dead a { overflow-wrap: anywhere; flex: 1 1 14em; }
    .dead .err { color: #b00; flex-basis: 100%; overflow-wrap: anywhere; }
    .meta { color: #555; font-size: 0.9em; }
    .actions { display: flex; flex-wrap: wrap; gap: 0.5em; margin-top: 0.4em; }
    .error { color: #b00; }
    .consumer.stale { border-style: dashed; background: #fffaf2; }
    .stale-mark { color: #8a4b00; font-weight: normal; font-size: 0.9em; }
    .only-admin { margin: 0; align-self: center; }
    .visually-hidden { position: absolute; width: 1px; height: 1px; overflow: hidden; clip-path: inset(50%); white-space: nowrap; }
  `

  constructor() {
    super()
    this.subscription = ''
    this.data = null
    this.error = ''
    this.busy = new Set()
    new PollController(this, REFRESH_MS, () => void (this.gone || this.load()))
  }

  private api(): ContextualClient {
    this.client ??= createContextualClient({ baseUrl: location.origin, token: app().session.token })
    return this.client
  }

  override willUpdate(changed: Map<string, unknown>) {
    if (changed.has('subscription') && this.subscription) {
      this.data = null
      this.gone = false
      void this.load()
    }
  }

  private async load() {
    if (this.loading || !this.subscription) return
    this.loading = true
    try {
      this.data = await this.api().consumers(this.subscription)
      this.error = ''
    } catch (e) {
      this.gone = codeOf(e) === 'not_found'
      this.error = this.gone ? 'There is no contextual subscription here that you can read.' : humanError(e)
    } finally {
      this.loading = false
    }
  }

  /** Runs `act` on consumer `c` (or one of its dead letters: `key`) with its buttons busy; its answer is told in a toast, and the page reloaded. */
  private async act(c: Pick<ListedConsumer, 'consumerId'>, act: () => Promise<string>, key = c.consumerId) {
    this.busy = new Set(this.busy).add(key)
    try {
      showToast(await act())
      await this.load()
    } catch (e) {
      // [WEB123] A consumer the server no longer finds (one of an earlier definition, on a server
      // that does not offer those yet): its own sentence ("No consumer …"), not "does not exist".
      showError(codeOf(e) === 'not_found' && e instanceof Error && e.message ? e.message : humanError(e))
      // [WEB129] What the refusal answers is stale on the page: read it again now, not at the next tick.
      if (codeOf(e) === 'contextual_not_dead_letter') await this.load()
    } finally {
      const next = new Set(this.busy)
      next.delete(key)
      this.busy = next
    }
  }

  private redrive(c: Listed) {
    return this.act(c, async () => {
      const { redriven } = await this.api().redrive(c.consumerId)
      return `Re-drove ${redriven} dead letter${redriven === 1 ? '' : 's'} of ${c.name}.`
    })
  }

  /** [WEB128] Re-drives one dead letter of consumer `c` (the others stay dead). */
  private redriveOne(c: Listed, d: Listed['deadLetters'][number]) {
    return this.act(
      c,
      async () => {
        await this.api().redrive(c.consumerId, { eventId: d.eventId })
        return `Re-drove the dead letter of ${this.names.nameOf(d.path)} (${c.name}).`
      },
      `${c.consumerId}\n${d.eventId}`,
    )
  }

  /** [CTX46] Deletes a consumer (yours, or any for an Admin), after asking: its events are forgotten. */
  private deleteConsumer(c: Listed) {
    const open = c.pending + c.leased + c.dead
    const whose = c.owner === app().session.userId ? '' : ` of ${ownerWords(c)}`
    const ask = `Delete consumer “${c.name}”${whose} and forget its ${open} open event${open === 1 ? '' : 's'}? Its workers' leases end now; a worker that pulls under this name again starts from new events only.`
    if (!confirm(ask)) return
    return this.act(c, async () => {
      await this.api().delete(c.consumerId)
      return `Deleted consumer ${c.name}.`
    })
  }

  /**
   * [CTX65] [WEB128] One dead letter: its node, what happened to it, its attempts, when it died in
   * words (unknown for one that died before the server kept the time), its last error, and for an
   * Admin a re-drive of this letter alone, named by its node for a screen reader.
   */
  private renderDeadLetter(c: Listed, d: Listed['deadLetters'][number], canRedrive: boolean) {
    const name = this.names.nameOf(d.path)
    const died = d.diedAt
      ? html`<span data-died=${d.diedAt} title=${d.diedAt}>died ${formatWhen(d.diedAt)}</span>`
      : d.diedAt === null
        ? html`<span data-died="unknown">died at an unknown time</span>`
        : nothing
    return html`<li data-dead=${d.eventId}>
      <a href=${nodeHref(d.path)} title=${d.path}>${name}</a>
      <span class="meta">${eventWords(d.kind)}${d.attempt} attempt${d.attempt === 1 ? '' : 's'}${died === nothing ? nothing : html` · ${died}`}</span>
      ${canRedrive
        ? html`<wa-button size="s" appearance="outlined" data-redrive-one ?loading=${this.busy.has(`${c.consumerId}\n${d.eventId}`)} ?disabled=${this.busy.has(c.consumerId)} @click=${() => this.redriveOne(c, d)}>Re-drive<span class="visually-hidden"> the dead letter of ${name}</span></wa-button>`
        : nothing}
      <span class="err">Last error: ${d.lastError ?? 'none recorded'}</span>
    </li>`
  }

  private renderConsumer(c: Listed, canRedrive: boolean) {
    const stale = c.current === false
    const count = (label: string, n: number, bad = false, unit = '') =>
      html`<div><dt>${label}</dt><dd class=${bad && n > 0 ? 'bad' : ''} data-count=${label}>${n}${unit ? html` <small>${unit}${n === 1 ? '' : 's'}</small>` : nothing}</dd></div>`
    return html`<li class="consumer ${stale ? 'stale' : ''}" data-consumer=${c.name} data-consumer-id=${c.consumerId} data-current=${stale ? 'false' : 'true'}>
      <h2>${c.name}${stale ? html` <span class="stale-mark">· from an earlier definition</span>` : nothing}</h2>
      ${stale ? html`<p class="meta stale-why">Made before the subscription's definition was changed: it gets no new events. Its leased events and dead letters stay here until they are re-driven or it is deleted.</p>` : nothing}
      <p class="meta" data-owner=${c.owner}>${c.owner === app().session.userId ? 'Your worker' : `${ownerWords(c)}’s worker`}</p>
      <dl class="counts" aria-label="State of ${c.name}">
        ${count('Pending', c.pending)} ${count('Leased', c.leased)} ${count('Acked', c.acked)} ${count('Dead letters', c.dead, true)}
      </dl>
      <p class="meta" data-since-pull=${c.lag}>${sinceLastPull(c.lag)}</p>
      ${c.deadLetters.length
        ? html`<ul class="dead" aria-label="Dead letters of ${c.name}">
            ${c.deadLetters.map((d) => this.renderDeadLetter(c, d, canRedrive))}
          </ul>`
        : nothing}
      <div class="actions">
        ${canRedrive && c.dead > 0
          ? html`<wa-button size="s" variant="brand" ?loading=${this.busy.has(c.consumerId)} @click=${() => this.redrive(c)}>Re-drive ${c.dead} dead letter${c.dead === 1 ? '' : 's'}</wa-button>`
          : nothing}
        ${!canRedrive && c.dead > 0 ? html`<p class="meta only-admin" data-only-admin>Only an Admin of the subscription can re-drive dead letters.</p>` : nothing}
        <wa-button size="s" variant="danger" appearance="outlined" ?disabled=${this.busy.has(c.consumerId)} @click=${() => this.deleteConsumer(c)}>Delete consumer ${c.name}</wa-button>
      </div>
    </li>`
  }

  override render() {
    if (this.error && !this.data) return html`<p class="error" role="alert">${this.error}</p>`
    if (!this.data) return html`<p aria-busy="true">Reading the consumers…</p>`
    const { canRedrive } = this.data
    // [WEB123] The current consumers first, then those of earlier definitions (the same name twice
    // reads apart: one is marked).
    const consumers = [...(this.data.consumers as Listed[])].sort((a, b) => Number(a.current === false) - Number(b.current === false))
    // [WEB125] "All your consumers" only for someone who has one here.
    const me = app().session.userId
    const hasOwn = consumers.some((c) => c.owner === me)
    return html`
      <p class="meta"><a href=${nodeHref(this.subscription)} title=${this.subscription}>${this.names.nameOf(this.subscription)}</a> · ${canRedrive ? 'every consumer (you are an Admin)' : 'your consumers'} · refreshes every few seconds${hasOwn ? html` · <a href=${MY_CONSUMERS_HREF}>all your consumers</a>` : nothing}</p>
      ${this.error ? html`<p class="error" role="alert">${this.error}</p>` : nothing}
      ${consumers.length === 0
        ? html`<p>No consumers yet: a worker makes one with its first <code>next</code>.</p>`
        : html`<ul class="consumers" aria-label="Consumers">${consumers.map((c) => this.renderConsumer(c, canRedrive))}</ul>`}
    `
  }
}

/** Whose a consumer is, by name (an account whose profile is gone has none). */
function ownerWords(c: Pick<ListedConsumer, 'ownerName'>): string {
  return c.ownerName ?? 'an account without a profile'
}

/**
 * [CTX55] The changes since the consumer's last pull, which is not lag: most changes are other
 * nodes', and its own events among them become pending when it next pulls.
 */
function sinceLastPull(changes: number): string {
  if (changes === 0) return 'Has read every change so far.'
  return `${changes} change${changes === 1 ? '' : 's'} since its last pull; any that are its events become pending when it next pulls.`
}

/** [CTX55] What happened to the dead letter's node, in words (an older server sends no kind). */
function eventWords(kind: string | undefined): string {
  switch (kind) {
    case 'Created':
      return 'when it was created · '
    case 'Updated':
      return 'when it changed · '
    case 'Deleted':
      return 'when it was deleted · '
    default:
      return ''
  }
}

customElements.define('weft-contextual-page', WeftContextualPage)
