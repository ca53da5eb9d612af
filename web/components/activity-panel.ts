import { LitElement, css, html, nothing } from 'lit'
import type { JsonValue } from '../../shared/json.js'
import { ObservableController } from '../controllers/index.js'
import { app } from '../app-context.js'
import type { NodeView } from '../streams/index.js'
import type { PresenceUser } from '../sync/index.js'
import { requestStatus, runCode } from './activity-api.js'
import { nodeHref } from './route.js'

/** Lines rendered at once: a 10,000-line log opens with its tail, older lines on request. */
const TAIL = 200

interface Message {
  Level: string
  Text: string
  At: string
}

/**
 * The result panel of an activity, bound to the activity node itself (seed: "one subscription,
 * one switch, all states handled"): status badge, progress, live messages, output or error,
 * Cancel while running, Start for a draft, Re-run when finished, and who else is watching.
 */
export class WeftActivityPanel extends LitElement {
  static override properties = { path: {}, showAll: { state: true }, error: { state: true } }
  declare path: string
  declare showAll: boolean
  declare error: string
  private readonly node = new ObservableController<NodeView | null>(this)
  private readonly presence = new ObservableController<PresenceUser[]>(this)

  static override styles = css`
    :host { display: block; border: 1px solid #ccd; border-radius: 4px; padding: 0.6em; margin: 0.6em 0; }
    .badge { border-radius: 3px; padding: 0 0.5em; font-weight: bold; }
    .Running { background: #def; } .Succeeded { background: #dfd; } .Warning { background: #ffd; }
    .Failed { background: #fdd; } .Cancelled { background: #eee; } .Draft { background: #f4f4ff; }
    progress { width: 100%; }
    ol { font-family: monospace; font-size: 0.85em; max-height: 24em; overflow: auto; padding-left: 3.5em; }
    .Warning-line { color: #960; } .Error-line { color: #b00; }
    pre { background: #f6f6f6; padding: 0.4em; overflow: auto; }
    .error { color: #b00; }
  `

  constructor() {
    super()
    this.path = ''
    this.showAll = false
    this.error = ''
  }

  override willUpdate() {
    if (!this.path) return
    const path = this.path
    this.node.watch(path, () => app().streams.node$(path))
    this.presence.watch(path, () => app().streams.presence$(path))
  }

  private async act(fn: () => Promise<unknown>) {
    this.error = ''
    try {
      await fn()
    } catch (e) {
      this.error = (e as Error).message
    }
  }

  /** The output, downloadable: Markdown when the operation returned `{ Markdown }`, JSON otherwise. */
  private renderOutput(name: string, value: JsonValue) {
    const md = value && typeof value === 'object' && !Array.isArray(value) && typeof value.Markdown === 'string' ? value.Markdown : null
    const text = md ?? JSON.stringify(value, null, 2)
    const shown = text.length > 20_000 ? `${text.slice(0, 20_000)}\n… (${text.length} characters; download for the rest)` : text
    const download = () => {
      const a = document.createElement('a')
      a.href = URL.createObjectURL(new Blob([text], { type: md ? 'text/markdown' : 'application/json' }))
      a.download = `${name}.${md ? 'md' : 'json'}`
      a.click()
      setTimeout(() => URL.revokeObjectURL(a.href), 10_000)
    }
    return html`<h4>Output <button class="download" @click=${download}>Download (${text.length} bytes)</button></h4><pre>${shown}</pre>`
  }

  override render() {
    const view = this.node.value
    if (!view) return html`<p aria-busy="true">Loading activity…</p>`
    const c = view.content
    const status = typeof c.Status === 'string' ? c.Status : 'Draft'
    const messages = (Array.isArray(c.Messages) ? c.Messages : []) as unknown as Message[]
    const shown = this.showAll ? messages : messages.slice(-TAIL)
    const progress = c.Progress as { Fraction?: number; Text?: string } | undefined
    const me = app().session.userId
    const others = (this.presence.value ?? []).filter((u) => u.id !== me)
    const codePath = typeof c.CodePath === 'string' ? c.CodePath : null
    return html`
      <header>
        <span class="badge ${status}" data-status=${status}>${status}</span>
        <a href=${nodeHref(view.path)}>${view.name}</a>
        ${c.RequestedStatus && c.RequestedStatus !== c.Status && status !== 'Draft' && status === 'Running' ? html`<small>requested: ${String(c.RequestedStatus)}</small>` : nothing}
      </header>
      <p class="watchers">${others.length ? html`Also watching: ${others.map((u) => u.name).join(', ')}` : 'Nobody else is watching.'}</p>
      ${progress && typeof progress.Fraction === 'number'
        ? // A run that succeeded is done, whatever fraction its script last reported.
          html`<progress max="1" aria-label="Progress" .value=${status === 'Succeeded' ? 1 : progress.Fraction}></progress> <small>${progress.Text ?? ''}</small>`
        : nothing}
      ${messages.length > shown.length
        ? html`<button @click=${() => (this.showAll = true)}>Show ${messages.length - shown.length} earlier lines</button>`
        : nothing}
      <ol start=${messages.length - shown.length + 1} aria-label="Messages">
        ${shown.map((m) => html`<li class="${m.Level}-line">${m.Text}</li>`)}
      </ol>
      ${c.ReturnValue !== undefined ? this.renderOutput(view.name, c.ReturnValue) : nothing}
      ${c.Error ? html`<p class="error" role="alert">${String(c.Error)}</p>` : nothing}
      ${this.error ? html`<p class="error" role="alert">${this.error}</p>` : nothing}
      <div class="actions">
        ${status === 'Draft' && c.RequestedStatus !== 'Running' ? html`<button @click=${() => this.act(() => requestStatus(this.path, 'Running'))}>Start</button>` : nothing}
        ${status === 'Running' || (status === 'Draft' && c.RequestedStatus === 'Running')
          ? html`<button class="cancel" @click=${() => this.act(() => requestStatus(this.path, 'Cancelled'))} ?disabled=${c.RequestedStatus === 'Cancelled'}>Cancel</button>`
          : nothing}
        ${status !== 'Draft' && status !== 'Running' && codePath
          ? html`<button class="rerun" @click=${() => this.act(async () => this.dispatchEvent(new CustomEvent('rerun', { detail: await runCode(codePath, { inputs: (c.Inputs ?? {}) as Record<string, unknown> }), bubbles: true, composed: true })))}>Re-run</button>`
          : nothing}
      </div>
    `
  }
}

customElements.define('weft-activity-panel', WeftActivityPanel)
