import { LitElement, css, html, nothing } from 'lit'
import type { MeshNode } from '../../shared/index.js'
import { app } from '../app-context.js'
import { NamesController } from '../controllers/names-controller.js'
import { humanError } from './error-text.js'
import { runCode } from './activity-api.js'
import { nodeHref } from './route.js'

/** The built-in operations' place (sync-server/engines/activities/templates.ts). */
const BUILT_IN = 'Admin/Operations'
const LISTED = 200

interface Declared {
  Required?: boolean
  Default?: unknown
}

function parentOf(op: MeshNode): string {
  return op.path.slice(0, op.path.lastIndexOf('/'))
}

/** An operation with a required input that has no default needs its form (on its page) first. */
function needsForm(op: MeshNode): boolean {
  const inputs = op.content.Inputs
  if (!inputs || typeof inputs !== 'object' || Array.isArray(inputs)) return false
  return Object.values(inputs as Record<string, Declared>).some((d) => d && d.Required === true && d.Default === undefined)
}

/**
 * [WEB18] "Operations" in the navigation: the built-in operations (Admin/Operations/*) and the
 * shared executable Code nodes the caller can read (Viewers hold Execute, so reading one is
 * being able to run it), each with its description and one Run button. An operation whose form
 * has a required input opens its page, where the form is; any other starts a run and opens it.
 */
export class WeftOperationsPage extends LitElement {
  static override properties = { ops: { state: true }, error: { state: true }, busy: { state: true } }
  declare ops: MeshNode[] | null
  declare error: string
  declare busy: string
  /** Where a shared script lives, by name (never its path). */
  private readonly places = new NamesController(this)

  static override styles = css`
    :host { display: block; }
    h1 { margin: 0 0 0.3em; font-size: 1.5em; }
    h2 { font-size: 1.1em; margin: 1.2em 0 0.5em; }
    ul { list-style: none; margin: 0; padding: 0; display: grid; gap: 0.6em; }
    li { display: flex; flex-wrap: wrap; gap: 0.4em 1em; align-items: center; justify-content: space-between; padding: 0.7em 0.9em; border: 1px solid #e3e6ee; border-radius: 8px; background: #fff; }
    .what { flex: 1 1 16em; min-width: 0; overflow-wrap: anywhere; }
    .what a { font-weight: 600; color: inherit; }
    .desc { color: #444; margin: 0.2em 0 0; }
    .where { color: #555; font-size: 0.85em; }
    .muted { color: #555; }
    .error { color: #b00; }
    .visually-hidden { position: absolute; width: 1px; height: 1px; overflow: hidden; clip-path: inset(50%); white-space: nowrap; }
  `

  constructor() {
    super()
    this.ops = null
    this.error = ''
    this.busy = ''
  }

  override connectedCallback() {
    super.connectedCallback()
    void this.load()
  }

  private async load() {
    try {
      const api = app().client.api
      const [builtIn, code] = await Promise.all([api.listChildren(BUILT_IN, LISTED), api.queryByType('Code', LISTED).catch(() => [])])
      const shared = code.filter((n) => !n.path.startsWith(`${BUILT_IN}/`) && n.content.IsExecutable === true)
      this.ops = [...builtIn.filter((n) => n.nodeType === 'Code'), ...shared]
    } catch (e) {
      this.error = humanError(e)
      this.ops = []
    }
  }

  override willUpdate() {
    this.places.watch([...new Set((this.ops ?? []).map(parentOf).filter((p) => p !== BUILT_IN))])
  }

  private async run(op: MeshNode) {
    if (needsForm(op)) {
      location.hash = nodeHref(op.path)
      return
    }
    this.busy = op.path
    this.error = ''
    try {
      location.hash = nodeHref(await runCode(op.path))
    } catch (e) {
      this.error = `${op.name}: ${humanError(e)}`
    } finally {
      this.busy = ''
    }
  }

  private renderOp(op: MeshNode) {
    const desc = typeof op.content.Description === 'string' ? op.content.Description : ''
    const builtIn = op.path.startsWith(`${BUILT_IN}/`)
    return html`<li data-operation=${op.path}>
      <div class="what">
        <a href=${nodeHref(op.path)}>${op.name}</a>
        ${builtIn ? nothing : html`<span class="where"> · in ${this.places.value.find((n) => n.path === parentOf(op))?.name ?? ''}</span>`}
        ${desc ? html`<p class="desc">${desc}</p>` : nothing}
      </div>
      <wa-button size="s" variant="brand" ?loading=${this.busy === op.path} @click=${() => this.run(op)}
        >Run<span class="visually-hidden"> ${op.name}</span></wa-button>
    </li>`
  }

  override render() {
    const ops = this.ops
    const builtIn = (ops ?? []).filter((o) => o.path.startsWith(`${BUILT_IN}/`))
    const shared = (ops ?? []).filter((o) => !o.path.startsWith(`${BUILT_IN}/`))
    return html`<h1>Operations</h1>
      <p class="muted">What you can run. A run acts as you: it can do only what you could.</p>
      ${this.error ? html`<p class="error" role="alert">${this.error}</p>` : nothing}
      ${ops === null
        ? html`<p aria-busy="true">Loading operations…</p>`
        : html`<section aria-labelledby="h-builtin">
              <h2 id="h-builtin">Built in</h2>
              <ul data-operations="built-in">${builtIn.map((o) => this.renderOp(o))}</ul>
            </section>
            <section aria-labelledby="h-shared">
              <h2 id="h-shared">Scripts in your spaces</h2>
              ${shared.length ? html`<ul data-operations="shared">${shared.map((o) => this.renderOp(o))}</ul>` : html`<p class="muted">No shared scripts yet: a Code node with IsExecutable in a space you can read is listed here.</p>`}
            </section>`}`
  }
}

customElements.define('weft-operations-page', WeftOperationsPage)
