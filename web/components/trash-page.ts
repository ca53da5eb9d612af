import { LitElement, css, html, nothing } from 'lit'
import { app } from '../app-context.js'
import type { TrashEntry } from '../api/index.js'
import { NamesController } from '../controllers/names-controller.js'
import { codeOf, humanError } from './error-text.js'
import { typeLabel } from './labels.js'
import { nodeHref } from './route.js'
import { formatWhen } from './run-text.js'
import { openAction, showToast } from './toast.js'

/**
 * [MOVE6] `<weft-trash-page space>`: what was deleted in a space, newest first, with who and when
 * (its heading, [WEB76], names the space);
 * Restore puts it back where it was (or says why it cannot), Delete forever purges it. The
 * server shows a trash to the space's Admins only; anyone else reads why.
 */
export class WeftTrashPage extends LitElement {
  static override properties = { space: {}, items: { state: true }, error: { state: true }, notes: { state: true } }
  declare space: string
  declare items: TrashEntry[] | null
  declare error: string
  declare notes: ReadonlyMap<string, string>
  /** The space's name: the page says whose trash it is and leads back to it. */
  private readonly spaceName = new NamesController(this)

  static override styles = css`
    :host { display: block; }
    h1 { margin: 0 0 0.5em; font-size: 1.5em; overflow-wrap: anywhere; }
    ul { list-style: none; padding: 0; margin: 0; }
    li { display: flex; flex-wrap: wrap; gap: 0.4em 1em; align-items: center; padding: 0.6em 0; border-bottom: 1px solid #e3e6ee; }
    .name { font-weight: 600; overflow-wrap: anywhere; flex: 1 1 12em; }
    .meta { color: #555; font-size: 0.9em; flex: 1 1 14em; }
    .note { color: #b00; flex-basis: 100%; font-size: 0.9em; }
    .error { color: #b00; }
    .space { margin: 0 0 0.8em; color: #444; }
  `

  constructor() {
    super()
    this.space = ''
    this.items = null
    this.error = ''
    this.notes = new Map()
  }

  override willUpdate(changed: Map<string, unknown>) {
    if (changed.has('space') && this.space) void this.load()
    if (this.space) this.spaceName.watch([this.space])
  }

  private async load() {
    this.error = ''
    try {
      this.items = (await app().client.api.listTrash(this.space)).items
    } catch (e) {
      this.items = []
      this.error = codeOf(e) === 'forbidden' ? 'Only the Admins of this space see its trash.' : humanError(e)
    }
  }

  private async restore(entry: TrashEntry) {
    try {
      const client = app().client
      const { path } = await client.api.restoreNode(entry.path)
      await client.relocated(entry.path, path)
      showToast(`Restored “${entry.name}”.`, openAction(nodeHref(path)))
      await this.load()
    } catch (e) {
      // The server says why in words (the place is taken, or its parent is gone).
      this.notes = new Map(this.notes).set(entry.path, codeOf(e) === 'conflict' ? (e as Error).message : humanError(e))
    }
  }

  private async purge(entry: TrashEntry) {
    if (!confirm(`Delete “${entry.name}” and everything in it for good? This cannot be undone.`)) return
    try {
      await app().client.deleteNode(entry.path)
      await this.load()
    } catch (e) {
      this.notes = new Map(this.notes).set(entry.path, humanError(e))
    }
  }

  override render() {
    // [WEB76] The heading names the space, as the line under it does ("Trash" alone did not say whose).
    const name = this.spaceName.value[0]?.name ?? this.space
    return html`<h1>Trash of ${name}</h1>
      <p class="space" data-space=${this.space}>What was deleted in <a href=${nodeHref(this.space)}>${name}</a></p>
      ${this.renderItems()}`
  }

  private renderItems() {
    if (this.items === null) return html`<p aria-busy="true">Opening the trash…</p>`
    if (this.error) return html`<p class="error" role="alert">${this.error}</p>`
    if (this.items.length === 0) return html`<p>The trash is empty.</p>`
    return html`<ul aria-label="Deleted nodes">
      ${this.items.map(
        (e) => html`<li data-trash=${e.path}>
          <span class="name">${e.name}</span>
          <span class="meta">${typeLabel(e.nodeType)} · deleted by ${e.deletedBy === app().session.userId ? 'you' : (e.deletedByName ?? 'someone else')} · <span title=${e.deletedAt}>${formatWhen(e.deletedAt)}</span></span>
          <wa-button size="s" variant="brand" @click=${() => this.restore(e)}>Restore</wa-button>
          <wa-button size="s" variant="danger" appearance="outlined" @click=${() => this.purge(e)}>Delete forever</wa-button>
          ${this.notes.get(e.path) ? html`<span class="note" role="alert">${this.notes.get(e.path)}</span>` : nothing}
        </li>`,
      )}
    </ul>`
  }
}
customElements.define('weft-trash-page', WeftTrashPage)
