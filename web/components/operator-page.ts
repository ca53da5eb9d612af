import { LitElement, css, html, nothing, type ReactiveController, type ReactiveControllerHost } from 'lit'
import { runName, type AdminOverview } from '../../shared/index.js'
import { app } from '../app-context.js'
import { NamesController } from '../controllers/names-controller.js'
import { codeOf, codeWords, humanError, humanMessage } from './error-text.js'
import { contextualHref, HOME_HREF, nodeHref } from './route.js'
import { NodeNames } from '../controllers/node-names.js'
import { lineTime } from './run-log-text.js'
import { formatWhen } from './run-text.js'

/** How often the page reads the overview again: live enough to watch, light on the server. */
const POLL_MS = 2_000

interface Reading {
  overview: AdminOverview
  /** Per second, from this reading and the one before (null on the first). */
  updatesPerSec: number | null
  acksPerSec: number | null
}

/**
 * [OPS10] Reads `GET /api/admin/overview` while the page is shown and turns two readings' totals
 * into rates. A 403 stops it: the caller is no operator.
 */
class OverviewController implements ReactiveController {
  reading: Reading | null = null
  error = ''
  forbidden = false
  private timer: ReturnType<typeof setInterval> | undefined

  constructor(private readonly host: ReactiveControllerHost) {
    host.addController(this)
  }

  hostConnected(): void {
    void this.read()
    this.timer = setInterval(() => void this.read(), POLL_MS)
  }

  hostDisconnected(): void {
    clearInterval(this.timer)
  }

  private async read(): Promise<void> {
    try {
      const overview = await app().client.api.adminOverview()
      const prev = this.reading?.overview
      const seconds = prev ? (Date.parse(overview.at) - Date.parse(prev.at)) / 1000 : 0
      const rate = (now: number, before: number | undefined) => (prev && seconds > 0 && before !== undefined ? Math.max(0, now - before) / seconds : null)
      this.reading = { overview, updatesPerSec: rate(overview.figures.updates, prev?.figures.updates), acksPerSec: rate(overview.figures.acks, prev?.figures.acks) }
      this.error = ''
    } catch (e) {
      if (codeOf(e) === 'forbidden') {
        this.forbidden = true
        clearInterval(this.timer)
      } else this.error = humanError(e)
    }
    this.host.requestUpdate()
  }
}

const count = new Intl.NumberFormat(undefined, { maximumFractionDigits: 1 })

function ms(seconds: number | null): string {
  if (seconds === null) return '—'
  return seconds < 1 ? `${count.format(seconds * 1000)} ms` : `${count.format(seconds)} s`
}

function duration(millis: number): string {
  const minutes = Math.floor(millis / 60_000)
  if (minutes < 1) return `${Math.floor(millis / 1000)} s`
  if (minutes < 120) return `${minutes} min`
  return `${count.format(minutes / 60)} h`
}

/**
 * [OPS10] `#/operator`: the figures of `/metrics`, live, and what a person acts on (dead letters,
 * stuck runs, lagging consumers), each with a link to its node. Operators only; anyone else
 * reads why and sees no figure.
 */
export class WeftOperatorPage extends LitElement {
  private readonly data = new OverviewController(this)
  private readonly names = new NamesController(this)

  static override styles = css`
    :host { display: block; }
    h1 { margin: 0 0 0.3em; font-size: 1.5em; }
    h2 { font-size: 1.1em; margin: 1.4em 0 0.5em; }
    .muted { color: #555; }
    .error { color: #b00; }
    dl { display: grid; grid-template-columns: repeat(auto-fill, minmax(10.5em, 1fr)); gap: 0.6em; margin: 0; }
    dl > div { border: 1px solid #e3e6ee; border-radius: 8px; background: #fff; padding: 0.55em 0.75em; min-width: 0; }
    dt { color: #444; font-size: 0.85em; }
    dd { margin: 0.15em 0 0; font-size: 1.25em; font-weight: 600; overflow-wrap: anywhere; }
    dd small { font-size: 0.7em; font-weight: 400; color: #444; }
    .alert { border-color: #d88; background: #fff6f6; }
    ul { list-style: none; margin: 0; padding: 0; display: grid; gap: 0.5em; }
    li { border: 1px solid #e3e6ee; border-radius: 8px; background: #fff; padding: 0.55em 0.75em; overflow-wrap: anywhere; }
    li a { font-weight: 600; color: inherit; }
    .meta { color: #444; font-size: 0.9em; }
    .alert-text { color: #9b1c1c; }
    code { font-size: 0.9em; }
  `

  override willUpdate() {
    const o = this.data.reading?.overview
    if (o) this.names.watch([...new Set([...o.deadLetters.map((d) => d.path), ...o.stuckRuns.flatMap((r) => (r.codePath ? [r.codePath] : []))])])
  }

  /** [WEB127] Asked of the server for a node this device has not seen (an operator reads names, not path segments). */
  private readonly asked = new NodeNames(this)

  private name(path: string): string {
    return this.names.value.find((n) => n.path === path && n.name !== path.slice(path.lastIndexOf('/') + 1))?.name ?? this.asked.nameOf(path)
  }

  private figure(label: string, value: unknown, opts: { alert?: boolean; id?: string } = {}) {
    return html`<div class=${opts.alert ? 'alert' : ''} data-figure=${opts.id ?? label}><dt>${label}</dt><dd>${value}</dd></div>`
  }

  private renderFigures(r: Reading) {
    const f = r.overview.figures
    const refused = Object.entries(f.refusals).sort((a, b) => b[1] - a[1])
    const refusedTotal = refused.reduce((n, [, v]) => n + v, 0)
    const rate = (v: number | null) => (v === null ? '—' : count.format(v))
    return html`<dl aria-label="Figures of this instance">
      ${this.figure('Connections', count.format(f.connections), { id: 'connections' })}
      ${this.figure('Rooms', count.format(f.rooms), { id: 'rooms' })}
      ${this.figure('Loaded documents', count.format(f.loadedDocs), { id: 'loaded-docs' })}
      ${this.figure('Updates per second', rate(r.updatesPerSec), { id: 'updates-per-sec' })}
      ${this.figure('Acks per second', rate(r.acksPerSec), { id: 'acks-per-sec' })}
      ${this.figure('Commit latency', html`${ms(f.commits.meanSeconds)} <small>mean · p99 ≤ ${ms(f.commits.p99Seconds)}</small>`, { id: 'commit-latency' })}
      ${this.figure('Refused', html`${count.format(refusedTotal)}${refused.length ? html` <small>${refused.slice(0, 4).map(([code, n], i) => html`${i ? ' · ' : ''}<span title=${humanMessage(code)} data-refusal=${code}>${codeWords(code)} ${count.format(n)}</span>`)}</small>` : nothing}`, { id: 'refusals' })}
      ${this.figure('Engine lag', html`${count.format(f.engineLagVersions)} <small>versions</small>`, { alert: f.engineLagVersions > 0, id: 'engine-lag' })}
      ${this.figure('Engines', f.enginePartitions.length === 0 ? 'elsewhere' : html`run here <small>${f.enginePartitions.join(' · ')}</small>`, { id: 'engine-lease' })}
      ${this.figure('Dead letters', count.format(f.contextual.dead), { alert: f.contextual.dead > 0, id: 'dead-letters' })}
      ${this.figure('Consumers', html`${count.format(f.contextual.consumers)} <small>${count.format(f.contextual.pending)} waiting · ${count.format(f.contextual.leased)} leased</small>`, { id: 'consumers' })}
      ${this.figure('Event-loop delay', html`${ms(f.eventLoopDelaySeconds.mean)} <small>mean · p99 ${ms(f.eventLoopDelaySeconds.p99)}</small>`, { id: 'event-loop' })}
    </dl>`
  }

  private renderLists(o: AdminOverview) {
    return html`<section aria-labelledby="h-dead">
        <h2 id="h-dead">Dead letters</h2>
        ${o.deadLetters.length === 0
          ? html`<p class="muted">None: every contextual event was handled or is still being tried.</p>`
          : html`<ul data-list="dead-letters">
              ${o.deadLetters.map(
                (d) => html`<li data-dead-letter=${d.eventId}>
                  <a href=${nodeHref(d.path)}>${this.name(d.path)}</a>
                  <div class="meta">for <a href=${contextualHref(d.subscriptionPath)}>${d.name || this.name(d.subscriptionPath)}</a> · ${d.attempt} ${d.attempt === 1 ? 'attempt' : 'attempts'}${d.diedAt ? html` · <span data-died=${d.diedAt} title=${d.diedAt}>died ${formatWhen(d.diedAt)}</span>` : d.diedAt === null ? ' · died at an unknown time' : nothing}${d.lastError ? html` · <span>${d.lastError}</span>` : nothing}</div>
                </li>`,
              )}
            </ul>`}
      </section>
      <section aria-labelledby="h-stuck">
        <h2 id="h-stuck">Stuck runs</h2>
        ${o.stuckRuns.length === 0
          ? html`<p class="muted">None: no run has been running for more than ${duration(o.stuckRunMs)}.</p>`
          : html`<ul data-list="stuck-runs">
              ${o.stuckRuns.map(
                (r) => html`<li data-stuck-run=${r.path}>
                  <a href=${nodeHref(r.path)}>${runName(r.name, r.codePath ? this.name(r.codePath) : null) ?? r.category ?? 'Run'}</a>
                  <div class="meta">running for ${duration(r.runningMs)}${r.startedBy ? html` · started by <span>${r.startedByName ?? 'someone without a profile'}</span>` : nothing}</div>
                </li>`,
              )}
            </ul>`}
      </section>
      <section aria-labelledby="h-engines">
        <h2 id="h-engines">Engines</h2>
        <ul data-list="engines">
          ${o.engines.map(
            (e) => html`<li data-engine=${e.partition}>
              <strong>${e.partition}</strong>
              <div class="meta">${e.instance === null
                ? html`<span class="alert-text">not running: another instance takes it over within seconds</span>`
                : html`on <code>${e.instance}</code>${e.instance === o.instance ? ' (this instance)' : nothing}`}</div>
            </li>`,
          )}
        </ul>
      </section>
      <section aria-labelledby="h-lag">
        <h2 id="h-lag">Lagging consumers</h2>
        ${o.laggingConsumers.length === 0
          ? html`<p class="muted">None: no consumer has events waiting.</p>`
          : html`<ul data-list="lagging-consumers">
              ${o.laggingConsumers.map(
                (c) => html`<li data-consumer=${c.consumerId}>
                  <a href=${contextualHref(c.subscriptionPath)}>${c.name || this.name(c.subscriptionPath)}</a>
                  <div class="meta">${count.format(c.waiting)} ${c.waiting === 1 ? 'event' : 'events'} waiting</div>
                </li>`,
              )}
            </ul>`}
      </section>`
  }

  override render() {
    const { reading, error, forbidden } = this.data
    if (forbidden) {
      return html`<h1>Operator</h1>
        <p class="error" role="alert">This page is for the people who run this Weft server: it shows how the server is doing. Your account is not one of theirs; ask them if you need its figures.</p>
        <p><a href=${HOME_HREF}>Go to your home page</a></p>`
    }
    return html`<h1>Operator</h1>
      ${reading
        ? html`<p class="muted">Instance <code>${reading.overview.instance}</code> · updated ${lineTime(reading.overview.at)}</p>`
        : html`<p aria-busy="true">Reading the figures…</p>`}
      ${error ? html`<p class="error" role="alert">${error}</p>` : nothing}
      ${reading ? html`${this.renderFigures(reading)}${this.renderLists(reading.overview)}` : nothing}`
  }
}

customElements.define('weft-operator-page', WeftOperatorPage)
