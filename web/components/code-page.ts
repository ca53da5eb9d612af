import { LitElement, css, html, nothing } from 'lit'
import { ObservableController } from '../controllers/index.js'
import { app } from '../app-context.js'
import type { NodeView } from '../streams/index.js'
import { requestStatus, runCode } from './activity-api.js'
import './activity-form.js'
import './activity-panel.js'

/**
 * A Code node's page (seed: operations as scripts): the source editor bound to the node's
 * Source, the operation form bound to a draft activity's Inputs, Run, and the result panel of
 * the latest run (LastActivityPath).
 *
 * The editor is a textarea patching Source on change. Source is a text field (a Y.Text,
 * shared/text-fields.ts) since issue 10, so CodeMirror with y-codemirror.next can bind here to
 * the text itself: still to do (issue 11).
 */
export class WeftCodePage extends LitElement {
  static override properties = { path: {}, draft: { state: true }, error: { state: true } }
  declare path: string
  declare draft: string
  declare error: string
  private readonly node = new ObservableController<NodeView | null>(this)

  static override styles = css`
    :host { display: block; }
    textarea { width: 100%; min-height: 16em; font-family: monospace; }
    .error { color: #b00; }
  `

  constructor() {
    super()
    this.path = ''
    this.draft = ''
    this.error = ''
  }

  override willUpdate() {
    if (this.path) this.node.watch(this.path, () => app().streams.node$(this.path))
  }

  private async act(fn: () => Promise<unknown>) {
    this.error = ''
    try {
      await fn()
    } catch (e) {
      this.error = (e as Error).message
    }
  }

  override render() {
    const view = this.node.value
    if (!view) return nothing
    const c = view.content
    const hasInputs = c.Inputs && typeof c.Inputs === 'object' && Object.keys(c.Inputs).length > 0
    const last = typeof c.LastActivityPath === 'string' ? c.LastActivityPath : null
    return html`
      <section aria-label="Source">
        <h3>Source <small>${String(c.Language ?? 'javascript')}</small></h3>
        <textarea aria-label="Source" .value=${String(c.Source ?? '')} @change=${(e: Event) => this.act(() => app().client.patch(this.path, { Source: (e.target as HTMLTextAreaElement).value }))}></textarea>
      </section>
      <section aria-label="Run">
        ${hasInputs && !this.draft
          ? html`<button @click=${() => this.act(async () => (this.draft = await runCode(this.path, { start: false })))}>New run…</button>`
          : nothing}
        ${this.draft
          ? html`<weft-activity-form path=${this.draft} code-path=${this.path}></weft-activity-form>
              <button class="run" @click=${() => this.act(async () => {
                await requestStatus(this.draft, 'Running')
                this.draft = ''
              })}>Run</button>`
          : hasInputs
            ? nothing
            : html`<button class="run" @click=${() => this.act(() => runCode(this.path))}>Run</button>`}
        ${this.error ? html`<p class="error" role="alert">${this.error}</p>` : nothing}
      </section>
      ${this.draft ? html`<weft-activity-panel path=${this.draft}></weft-activity-panel>` : nothing}
      ${last && last !== this.draft ? html`<section aria-label="Latest run"><h3>Latest run</h3><weft-activity-panel path=${last}></weft-activity-panel></section>` : nothing}
    `
  }
}

customElements.define('weft-code-page', WeftCodePage)
