import { LitElement, css, html, nothing } from 'lit'
import { ADMIN_PARTITION, isDescendantOrSelf, parentPath, type NodePath } from '../../shared/path.js'
import { keptPlace, type KeptPlace } from '../../shared/move-rules.js'
import { app } from '../app-context.js'
import type { NodeView } from '../streams/index.js'
import { liveStoreQuery, type OpRow } from '../store/index.js'
import { ObservableController } from '../controllers/index.js'
import { codeOf, humanError } from './error-text.js'
import { segmentForName } from './names.js'
import { nodeHref, trashHref } from './route.js'
import { showToast } from './toast.js'
import { refusedOpLine, type RefusedOp } from './refused-ops.js'
import './toast.js'

/**
 * [MOVE8] `<weft-node-title>`: the page's heading, renamed in place. Renaming changes the name
 * only; the path (and every link to the node) stays. Hidden for a role without Update.
 */
export class WeftNodeTitle extends LitElement {
  static override properties = { view: { attribute: false }, canRename: { type: Boolean }, editing: { state: true }, error: { state: true } }
  declare view: NodeView
  declare canRename: boolean
  declare editing: boolean
  declare error: string
  private saving = false
  /** [WEB131] Whether a rename waits to be sent; [WEB132] renames of this node the server refused. */
  private readonly ops = new ObservableController<{ queued: boolean; refused: RefusedOp[] }>(this)

  static override styles = css`
    :host { display: inline-flex; flex-wrap: wrap; align-items: baseline; gap: 0.4em; min-width: 0; }
    h1 { margin: 0; font-size: 1.5em; overflow-wrap: anywhere; }
    input { font: inherit; font-size: 1.3em; font-weight: 700; padding: 0.1em 0.3em; min-width: 0; max-width: 100%; border: 1px solid #8aa; border-radius: 6px; }
    button { font: inherit; font-size: 0.85em; border: 1px solid transparent; background: none; color: #445; border-radius: 6px; padding: 0.15em 0.4em; cursor: pointer; }
    button:hover, button:focus-visible { border-color: #bbc; }
    .error { color: #b00; font-size: 0.9em; flex-basis: 100%; }
    .queued { color: #555; font-style: italic; font-size: 0.85em; }
    .refused { color: #b00; font-size: 0.9em; flex-basis: 100%; }
  `

  constructor() {
    super()
    this.canRename = false
    this.editing = false
    this.error = ''
  }

  override willUpdate() {
    const path = this.view.path
    this.ops.watch(`rename-ops:${path}`, () => {
      const { store } = app().client
      return liveStoreQuery(store.db, ['ops'], async () => {
        const ops: OpRow[] = (await store.db.ops.where('path').equals(path).toArray()).filter((o) => o.kind === 'rename')
        return { queued: ops.some((o) => !o.refusal), refused: ops.filter((o): o is RefusedOp => !!o.refusal) }
      })
    })
  }

  private start(name = this.view.name) {
    this.editing = true
    this.error = ''
    void this.updateComplete.then(() => {
      const input = this.renderRoot.querySelector('input')
      if (!input) return
      input.value = name
      input.focus()
      input.select()
    })
  }

  /**
   * [WEB131] Renames; offline (or before the node reached the server) the rename is queued with
   * the other operations and the name is shown here at once.
   */
  private async save(ev: Event) {
    ev.preventDefault()
    const input = this.renderRoot.querySelector('input')
    if (!input || this.saving) return
    const name = input.value.trim()
    if (!name || name === this.view.name) {
      this.editing = false
      return
    }
    this.saving = true
    try {
      await app().client.renameNode(this.view.path, name)
      this.editing = false
    } catch (e) {
      this.error = humanError(e)
    } finally {
      this.saving = false
    }
  }

  /** [WEB132] A refused rename: the name typed stays readable (and can be tried again) until dismissed. */
  private renderRefused(op: RefusedOp) {
    return html`<span class="refused" role="alert" data-rename-refused>
      ${refusedOpLine(op, this.view.name)}
      ${this.canRename ? html`<button type="button" @click=${() => this.start(op.kind === 'rename' ? op.name : this.view.name)}>Rename to “${op.kind === 'rename' ? op.name : ''}” again</button>` : nothing}
      <button type="button" @click=${() => void app().client.store.discardOp(op.id)}>Dismiss</button>
    </span>`
  }

  override render() {
    const refused = this.ops.value?.refused ?? []
    const queued = this.ops.value?.queued
      ? html`<span class="queued" role="status" data-rename-queued>Renamed on this device; sent once the server can be reached.</span>`
      : nothing
    if (this.editing) {
      return html`<form @submit=${this.save} aria-label="Rename">
          <input aria-label="New name" .value=${this.view.name} @keydown=${(e: KeyboardEvent) => e.key === 'Escape' && (this.editing = false)} @blur=${this.save} />
        </form>
        ${this.error ? html`<span class="error" role="alert">${this.error}</span>` : nothing}`
    }
    if (!this.canRename) return html`<h1>${this.view.name}</h1>${refused.map((op) => this.renderRefused(op))}`
    return html`<h1>${this.view.name}</h1>
      <button type="button" title="Rename" aria-label=${`Rename ${this.view.name}`} @click=${() => this.start()}>✎ Rename</button>
      ${queued} ${refused.map((op) => this.renderRefused(op))}`
  }
}
customElements.define('weft-node-title', WeftNodeTitle)

interface PickerRow {
  path: string
  name: string
}

/**
 * [MOVE1] [MOVE5] `<weft-node-actions>`: Move… (a dialog to pick the new parent among the nodes the
 * caller can read) and Delete (to the trash of its space, with Undo). Both need the right to
 * delete the node where it is; without it they are not offered, and the reason is said. A space's
 * Admins get its Trash page.
 */
export class WeftNodeActions extends LitElement {
  static override properties = {
    view: { attribute: false },
    canDelete: { type: Boolean },
    canManage: { type: Boolean },
    at: { state: true },
    rows: { state: true },
    error: { state: true },
    busy: { state: true },
    picking: { state: true },
  }
  declare view: NodeView
  declare canDelete: boolean
  declare canManage: boolean
  /** The picker's current folder ('' = the top level). */
  declare at: string
  declare rows: PickerRow[]
  declare error: string
  declare busy: boolean
  /** The dialog is open: its contents exist only then (a closed picker adds nothing to the page). */
  declare picking: boolean
  private atName = new Map<string, string>()

  static override styles = css`
    :host { display: flex; flex-wrap: wrap; gap: 0.5em; align-items: center; }
    .reason-off { color: #555; font-style: italic; font-size: 0.9em; }
    dialog { width: min(32em, calc(100vw - 2em)); box-sizing: border-box; border: 1px solid #ccd; border-radius: 10px; padding: 1em; }
    dialog h2 { margin: 0 0 0.5em; font-size: 1.15em; overflow-wrap: anywhere; }
    .where { font-size: 0.9em; color: #445; margin-bottom: 0.4em; overflow-wrap: anywhere; }
    .where button, ul button { font: inherit; background: none; border: none; color: #1d4ed8; cursor: pointer; padding: 0.15em 0.2em; text-align: left; }
    ul { list-style: none; padding: 0; margin: 0 0 0.8em; max-height: 16em; overflow: auto; border: 1px solid #e3e6ee; border-radius: 6px; }
    li { padding: 0.2em 0.4em; border-bottom: 1px solid #f0f1f5; overflow-wrap: anywhere; }
    li[aria-disabled='true'] { color: #888; }
    .row { display: flex; flex-wrap: wrap; gap: 0.5em; justify-content: flex-end; }
    .error { color: #b00; }
    a { color: #1d4ed8; }
  `

  constructor() {
    super()
    this.canDelete = false
    this.canManage = false
    this.at = ''
    this.rows = []
    this.error = ''
    this.busy = false
    this.picking = false
  }

  private get dialog(): HTMLDialogElement {
    return this.renderRoot.querySelector('dialog')!
  }

  private async openMove() {
    this.error = ''
    this.picking = true
    this.dialog.showModal()
    await this.browse(parentPath(this.view.path as NodePath) ?? '')
  }

  private async browse(path: string) {
    this.at = path
    try {
      const items = await app().client.api.listChildren(path, 200)
      this.rows = items.filter((n) => !n.path.split('/').some((s) => s.startsWith('_'))).map((n) => ({ path: n.path, name: n.name }))
      for (const r of this.rows) this.atName.set(r.path, r.name)
    } catch (e) {
      this.error = humanError(e)
    }
  }

  private async moveHere() {
    const from = this.view.path
    const to = `${this.at}/${segmentForName(this.view.name)}`
    this.busy = true
    this.error = ''
    try {
      await app().client.api.moveNode(from, to)
      await app().client.relocated(from, to)
      this.dialog.close()
      showToast(`Moved “${this.view.name}” to “${this.atName.get(this.at) ?? this.at}”.`)
      location.hash = nodeHref(to)
    } catch (e) {
      const code = codeOf(e)
      this.busy = false
      this.error =
        code === 'conflict' && !(e as Error).message.includes('running')
          ? 'Something with this name is already there. Rename one of them first.'
          : code === 'forbidden'
            ? 'You cannot move it there: your role there does not let you create nodes (or here, delete them).'
            : code === 'conflict'
              ? 'A run inside it is still going; cancel it or wait until it ends.'
              : humanError(e)
    } finally {
      this.busy = false
    }
  }

  private async trash() {
    const { path, name } = this.view
    const parent = parentPath(path as NodePath)
    try {
      const client = app().client
      const { trashPath } = await client.api.trashNode(path)
      await client.relocated(path, trashPath)
      location.hash = nodeHref(parent ?? app().session.userId)
      showToast(`Moved “${name}” to the trash.`, {
        label: 'Undo',
        run: async () => {
          const { path: back } = await client.api.restoreNode(trashPath)
          await client.relocated(trashPath, back)
          location.hash = nodeHref(back)
        },
      })
    } catch (e) {
      this.error = humanError(e)
    }
  }

  private renderPicker() {
    const self = this.view.path as NodePath
    const canHere = this.at !== '' && !isDescendantOrSelf(this.at as NodePath, self) && this.at !== parentPath(self)
    return html`<dialog aria-label=${`Move ${this.view.name}`} @close=${() => ((this.error = ''), (this.picking = false))}>
      ${this.picking ? this.renderPickerBody(self, canHere) : nothing}
    </dialog>`
  }

  private renderPickerBody(self: NodePath, canHere: boolean) {
    const crumbs: { path: string; name: string }[] = [{ path: '', name: 'All spaces' }]
    if (this.at) {
      const parts = this.at.split('/')
      for (let i = 1; i <= parts.length; i++) {
        const p = parts.slice(0, i).join('/')
        crumbs.push({ path: p, name: this.atName.get(p) ?? parts[i - 1]! })
      }
    }
    return html`
      <h2>Move “${this.view.name}”</h2>
      <nav class="where" aria-label="Where">${crumbs.map((c, i) => html`${i ? ' › ' : ''}<button type="button" @click=${() => this.browse(c.path)}>${c.name}</button>`)}</nav>
      <ul aria-label="Places">
        ${this.rows.length === 0 ? html`<li>Nothing inside.</li>` : nothing}
        ${this.rows.map((r) => {
          const inside = isDescendantOrSelf(r.path as NodePath, self)
          return html`<li aria-disabled=${inside ? 'true' : 'false'}>
            ${inside ? html`${r.name} <small>(this node)</small>` : html`<button type="button" @click=${() => this.browse(r.path)}>${r.name} ›</button>`}
          </li>`
        })}
      </ul>
      ${this.error ? html`<p class="error" role="alert">${this.error}</p>` : nothing}
      <div class="row">
        <wa-button size="s" appearance="outlined" @click=${() => this.dialog.close()}>Cancel</wa-button>
        <wa-button size="s" variant="brand" ?disabled=${!canHere || this.busy} @click=${this.moveHere}
          >${this.at === '' ? 'Choose a place' : `Move into “${this.atName.get(this.at) ?? this.at}”`}</wa-button
        >
      </div>`
  }

  /** Permanent: a space (its Admins), or a system child such as a run (nothing to restore it into). */
  private async deleteForGood() {
    if (!confirm(`Delete “${this.view.name}” and everything in it for good? This cannot be undone.`)) return
    const parent = parentPath(this.view.path as NodePath)
    try {
      await app().client.deleteNode(this.view.path)
      location.hash = nodeHref(parent ?? app().session.userId)
    } catch (e) {
      this.error = humanError(e)
    }
  }

  /**
   * [WEB72] [WEB73] What is offered follows the server's rule (shared/move-rules.ts): Move… and
   * Delete (to the trash, with Undo) where a node may go; where it keeps its place, the delete the
   * server allows there, or a sentence saying why there is none.
   */
  private renderButtons(kept: KeptPlace | null, path: NodePath, nodeType: string) {
    // [WEB54] Without the right, the buttons are not offered (greyed-out red buttons read as a
    // warning); the reason is said in words instead.
    const reason = (what: string) => html`<span class="reason-off">Only an Admin can ${what} this node.</span>`
    const forGood = (label: string) => (this.canDelete ? html`<wa-button size="s" variant="danger" appearance="outlined" @click=${this.deleteForGood}>${label}</wa-button>` : reason('delete'))
    switch (kept) {
      case null:
        return this.canDelete
          ? html`<wa-button size="s" appearance="outlined" @click=${this.openMove}>Move…</wa-button>
              <wa-button size="s" variant="danger" appearance="outlined" @click=${this.trash}>Delete</wa-button>`
          : reason('move or delete')
      case 'top':
        // [WEB73] A home is its user's; the Admin area holds the server's own records (its
        // operators, invitations, operations): neither is deleted from the app.
        return nodeType === 'User' || path === ADMIN_PARTITION ? nothing : forGood('Delete space…')
      case 'system':
        // [WEB72] A sub-thread goes with the thread that delegated to it (that thread's round and
        // its hand-back name it by its path): the server trashes it with that thread only.
        if (nodeType === 'Thread') return html`<span class="reason-off" data-reason="sub-thread">A sub-thread stays with the thread that delegated to it: deleting that thread (to the trash, with Undo) takes this one along.</span>`
        return forGood('Delete…')
      case 'admin':
      case 'trash':
        return forGood('Delete…')
      default:
        return kept satisfies never
    }
  }

  override render() {
    const { path, nodeType } = this.view
    const kept = keptPlace(path as NodePath)
    return html`
      ${this.renderButtons(kept, path as NodePath, nodeType)}
      ${kept === 'top' && this.canManage && path !== ADMIN_PARTITION ? html`<a href=${trashHref(path)}>Trash</a>` : nothing}
      ${this.error && !this.picking ? html`<p class="error" role="alert">${this.error}</p>` : nothing}
      ${kept === null ? this.renderPicker() : nothing}
    `
  }
}
customElements.define('weft-node-actions', WeftNodeActions)
