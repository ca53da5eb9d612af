import { LitElement, css, html, nothing } from 'lit'
import { ObservableController } from '../controllers/index.js'
import { NamesController } from '../controllers/names-controller.js'
import { app } from '../app-context.js'
import type { NodeView } from '../streams/index.js'
import { runCode } from './activity-api.js'
import './activity-panel.js'
import './activity-strip.js'
import { background } from '../sync/background.js'
import { VIEWER_SENTINEL } from '../../shared/activity.js'

/**
 * A Code node's page (seed: operations as scripts): the source editor bound to the node's
 * Source, Run (or "New run…": a draft whose panel holds the form bound to its Inputs and one
 * Start), the run this page started ("Your run", live), and every run of this code the caller
 * may read as a compact list (number, status, started by, when, duration).
 *
 * Source is a text field (a Y.Text, shared/text-fields.ts): the editor is CodeMirror bound to
 * that Y.Text with y-codemirror.next (<weft-code-editor>, code-editor.ts), so several people
 * edit one script at once and see each other's carets; every keystroke is stored and sent like
 * any local edit (NodeReplica.bindTextEditor). Read-only for a role without Update [WEB8].
 * The editor's module (CodeMirror, a few hundred KB) loads when a Code page first opens, not
 * with the app.
 */
export class WeftCodePage extends LitElement {
  static override properties = { path: {}, readonly: { type: Boolean }, draft: { state: true }, error: { state: true } }
  declare path: string
  /** The user's role cannot write the node [WEB8]. */
  declare readonly: boolean
  /** The run this page started (a draft while its form is being filled). */
  declare draft: string
  declare error: string
  private readonly node = new ObservableController<NodeView | null>(this)
  /** The syntax check the server keeps at `{path}/_Check` [ACT16]. */
  private readonly check = new ObservableController<NodeView | null>(this)
  /** The draft this page made, while its form is being filled: one Start is offered, not New run… beside it [WEB26]. */
  private readonly draftNode = new ObservableController<NodeView | null>(this)
  /** The name of the code's space, for who sees its runs [WEB47]. */
  private readonly spaceName = new NamesController(this)

  static override styles = css`
    :host { display: block; }
    h3 { margin: 0.4em 0; }
    .error { color: #b00; }
    .who-sees { margin: 0.4em 0 0; color: #555; font-size: 0.9em; }
    details.source { margin-top: 1em; }
    details.source > summary { cursor: pointer; color: #345; margin: 0.4em 0; }
    .check { margin: 0.3em 0; font-size: 0.9em; }
    .check[data-check='Passed'] { color: #176b2c; }
    .check[data-check='Failed'] { color: #b00; }
    .check ul { margin: 0.2em 0; padding-left: 1.2em; font-family: ui-monospace, monospace; }
  `

  constructor() {
    super()
    this.path = ''
    this.readonly = false
    this.draft = ''
    this.error = ''
  }

  override connectedCallback() {
    super.connectedCallback()
    background(import('./code-editor.js').then(() => undefined))
  }

  override willUpdate(changed: Map<string, unknown>) {
    // The run this page started belongs to the Code node it was started from.
    if (changed.has('path') && changed.get('path') !== undefined) this.draft = ''
    if (this.path) {
      this.node.watch(this.path, () => app().streams.node$(this.path))
      const checkPath = `${this.path}/_Check`
      this.check.watch(checkPath, () => app().streams.node$(checkPath))
    }
    if (this.path) this.spaceName.watch([this.path.split('/')[0]!])
    const draft = this.draft
    if (draft) this.draftNode.watch(draft, () => app().streams.node$(draft))
  }

  private async act(fn: () => Promise<unknown>) {
    this.error = ''
    try {
      await fn()
    } catch (e) {
      this.error = (e as Error).message
    }
  }

  /** The page's draft has not been started: its panel's Start is the one action. */
  private fillingDraft(): boolean {
    const c = this.draft ? this.draftNode.value?.content : undefined
    return !!c && c.Status === undefined && c.RequestedStatus !== 'Running'
  }

  private renderCheck() {
    const check = this.check.value?.content
    const status = typeof check?.Status === 'string' ? check.Status : null
    if (!status) return nothing
    const errors = Array.isArray(check!.Errors) ? (check!.Errors as { Line?: unknown; Column?: unknown; Text?: unknown }[]) : []
    const label = status === 'Passed' ? 'No syntax errors.' : status === 'Failed' ? `${errors.length} syntax error${errors.length === 1 ? '' : 's'}:` : 'Checking…'
    return html`<div class="check" role="status" aria-live="polite" data-check=${status}>
      ${label}
      ${status === 'Failed'
        ? html`<ul>${errors.slice(0, 5).map((e) => html`<li>Line ${String(e.Line)}, column ${String(e.Column)}: ${String(e.Text)}</li>`)}</ul>`
        : nothing}
    </div>`
  }

  /**
   * [WEB47] Who will see a run before it is made (decision 0015): runs routed to `{viewer}` stay in
   * the runner's home; any other run lands in the code's space, where everyone who reads there
   * reads it, with its inputs and what it returned.
   */
  private renderWhoSees(parent: unknown) {
    const home = typeof parent === 'string' && parent.includes(VIEWER_SENTINEL)
    const space = this.spaceName.value[0]?.name ?? this.path.split('/')[0]
    return html`<p class="who-sees" data-who-sees=${home ? 'home' : 'space'}>
      ${home ? 'Your runs are kept in your home: only you see them.' : `Runs are kept in ${space}: everyone who can read there may see each run, with its inputs and result.`}
    </p>`
  }

  override render() {
    const view = this.node.value
    if (!view) return nothing
    const c = view.content
    const hasInputs = c.Inputs && typeof c.Inputs === 'object' && Object.keys(c.Inputs).length > 0
    const language = String(c.Language ?? 'javascript')
    const source = html`<weft-code-editor .path=${this.path} .key=${'Source'} .language=${language} .initial=${String(c.Source ?? '')} ?readonly=${this.readonly}></weft-code-editor>
        ${this.renderCheck()}`
    const lines = String(c.Source ?? '').split('\n').length
    // [WEB54] A reader who cannot change the script runs it first; its source is one click away.
    return html`
      ${this.readonly
        ? nothing
        : html`<section class="source">
            <h3>Source <small>${language}</small></h3>
            ${source}
          </section>`}
      <section aria-label="Run">
        ${hasInputs && !this.fillingDraft()
          ? html`<wa-button size="s" variant="brand" class="new-run" @click=${() => this.act(async () => (this.draft = await runCode(this.path, { start: false })))}>New run…</wa-button>`
          : nothing}
        ${hasInputs ? nothing : html`<wa-button size="s" variant="brand" class="run" @click=${() => this.act(async () => (this.draft = await runCode(this.path)))}>Run</wa-button>`}
        ${this.error ? html`<p class="error" role="alert">${this.error}</p>` : nothing}
        ${this.renderWhoSees(c.ActivityParentPath)}
      </section>
      ${this.draft ? html`<section aria-label="Your run"><h3>Your run</h3><weft-activity-panel path=${this.draft} @rerun=${(e: CustomEvent<string>) => { e.preventDefault(); this.draft = e.detail }}></weft-activity-panel></section>` : nothing}
      <weft-activity-strip path=${this.path} code heading="Runs" .own=${this.draft}></weft-activity-strip>
      ${this.readonly
        ? html`<details class="source"><summary>The script · ${lines} line${lines === 1 ? '' : 's'} of ${language}</summary>${source}</details>`
        : nothing}
    `
  }
}

customElements.define('weft-code-page', WeftCodePage)
