import { LitElement, css, html, nothing } from 'lit'
// Runtime imports name shared/ modules directly: shared/index.js also pulls the zod node-type
// schemas, which the browser never needs and which cost cold-start parse time.
import { joinPath, parentPath, type NodePath } from '../../shared/path.js'
import type { JsonValue } from '../../shared/json.js'
import { ObservableController } from '../controllers/index.js'
import { app } from '../app-context.js'
import type { IndexRow, OutboxRow } from '../store/index.js'
import type { NodeView } from '../streams/index.js'
import type { PresenceUser, ReplicaState } from '../sync/index.js'
import { nodeHref } from './route.js'

const CHILD_LIMIT = 200
/**
 * Node types offered when creating a child. Static markup on purpose: a Lit expression inside
 * <select> breaks the template's part order in Chromium's current <select> parser (the form's
 * @submit ended up bound as the select's text).
 */
const typeSelect = html`<select name="nodeType">
  <option>Document</option>
  <option>Group</option>
  <option>Code</option>
  <option>Thread</option>
  <option>Post</option>
</select>`

function fieldId(key: string): string {
  return `field-${key.replace(/[^A-Za-z0-9_-]/g, '_')}`
}

/** Parses what the user typed back into JSON of the field's current kind. */
function parseFieldValue(raw: string, previous: JsonValue | undefined): JsonValue {
  if (typeof previous === 'number') {
    const n = Number(raw)
    return Number.isFinite(n) ? n : raw
  }
  if (typeof previous === 'string' || previous === undefined) return raw
  try {
    return JSON.parse(raw) as JsonValue
  } catch {
    return raw
  }
}

/**
 * A node page: a form bound directly to the node (each field edit is one merge patch; the
 * inputs render the node stream's value, there is no second copy), who else is here, pending
 * and refused edits, the children, and create/delete.
 */
export class WeftNodePage extends LitElement {
  static override properties = { path: {}, error: { state: true } }
  declare path: string
  declare error: string
  private readonly node = new ObservableController<NodeView | null>(this)
  private readonly outbox = new ObservableController<OutboxRow[]>(this)
  private readonly presence = new ObservableController<PresenceUser[]>(this)
  private readonly access = new ObservableController<ReplicaState>(this)
  private readonly childList = new ObservableController<IndexRow[]>(this)

  static override styles = css`
    :host { display: block; }
    header { display: flex; flex-wrap: wrap; align-items: baseline; gap: 0.6em; }
    h1 { margin: 0; font-size: 1.5em; }
    .type { background: #eef; border-radius: 3px; padding: 0 0.4em; font-size: 0.85em; }
    .path { color: #666; font-family: monospace; }
    .presence { margin: 0.5em 0; color: #235; }
    .fields { display: grid; grid-template-columns: max-content 1fr auto; gap: 0.4em 0.8em; align-items: center; }
    .fields textarea { font-family: monospace; min-height: 3em; }
    .refused { border: 1px solid #c33; background: #fff4f4; padding: 0.5em; margin: 0.5em 0; }
    .refused li { margin-bottom: 0.4em; }
    .denied, .error { color: #b00; }
    .pending { color: #a60; }
    .readonly { color: #555; font-style: italic; }
    section { margin-top: 1.2em; }
    form.inline { display: flex; flex-wrap: wrap; gap: 0.4em; align-items: end; }
  `

  constructor() {
    super()
    this.path = ''
    this.error = ''
  }

  override willUpdate() {
    const path = this.path
    if (!path) return
    const { streams } = app()
    this.node.watch(path, () => streams.node$(path))
    this.outbox.watch(path, () => streams.outbox$(path))
    this.presence.watch(path, () => streams.presence$(path))
    this.access.watch(path, () => streams.access$(path))
    this.childList.watch(path, () => streams.query$({ parent: path, limit: CHILD_LIMIT }))
  }

  private async patchField(key: string, value: JsonValue | null) {
    this.error = ''
    try {
      await app().client.patch(this.path, { [key]: value })
    } catch (e) {
      this.error = (e as Error).message
    }
  }

  private onFieldChange(key: string, ev: Event) {
    const input = ev.target as HTMLInputElement | HTMLTextAreaElement
    const previous = this.node.value?.content[key]
    const value = input instanceof HTMLInputElement && input.type === 'checkbox' ? input.checked : parseFieldValue(input.value, previous)
    void this.patchField(key, value)
  }

  private onAddField(ev: SubmitEvent) {
    ev.preventDefault()
    const form = ev.target as HTMLFormElement
    const data = new FormData(form)
    const key = String(data.get('key') ?? '').trim()
    if (!key) return
    void this.patchField(key, parseFieldValue(String(data.get('value') ?? ''), undefined))
    form.reset()
  }

  private async onCreateChild(ev: SubmitEvent) {
    ev.preventDefault()
    const form = ev.target as HTMLFormElement
    const data = new FormData(form)
    const name = String(data.get('name') ?? '').trim()
    const nodeType = String(data.get('nodeType') ?? 'Document')
    if (!name) return
    this.error = ''
    try {
      const path = joinPath(this.path as NodePath, name.replace(/[^A-Za-z0-9_.@-]/g, '_'))
      await app().client.createNode(path, nodeType, name)
      form.reset()
    } catch (e) {
      this.error = (e as Error).message
    }
  }

  private async onDelete() {
    if (!confirm(`Delete ${this.path} and everything under it?`)) return
    const parent = parentPath(this.path as NodePath)
    try {
      await app().client.deleteNode(this.path)
      location.hash = nodeHref(parent ?? app().session.userId)
    } catch (e) {
      this.error = (e as Error).message
    }
  }

  private async copyRefused(row: OutboxRow) {
    const text = JSON.stringify(row.patch, null, 2)
    try {
      await navigator.clipboard.writeText(text)
    } catch {
      prompt('Copy the refused edit:', text)
    }
  }

  /**
   * Inputs bind `.value` without lit's `live()`: Lit then writes the DOM only when the node's
   * value changes, so a re-render for another reason (sync status, presence) never clobbers
   * what the user is typing.
   */
  private renderField(key: string, value: JsonValue) {
    const id = fieldId(key)
    const change = (ev: Event) => this.onFieldChange(key, ev)
    let input
    if (typeof value === 'boolean') input = html`<input id=${id} name=${key} type="checkbox" .checked=${value} @change=${change} />`
    else if (typeof value === 'number') input = html`<input id=${id} name=${key} type="number" .value=${String(value)} @change=${change} />`
    else if (typeof value === 'string') input = html`<input id=${id} name=${key} type="text" .value=${value} @change=${change} />`
    else input = html`<textarea id=${id} name=${key} .value=${JSON.stringify(value, null, 2)} @change=${change}></textarea>`
    return html`<label for=${id}>${key}</label>${input}
      <button type="button" aria-label=${`Remove field ${key}`} @click=${() => this.patchField(key, null)}>✕</button>`
  }

  private renderRefused(rows: OutboxRow[]) {
    if (rows.length === 0) return nothing
    return html`<div class="refused" role="alert" aria-label="Refused edits">
      <strong>The server refused ${rows.length === 1 ? 'an edit' : `${rows.length} edits`}; it was not saved.</strong>
      <ul>
        ${rows.map(
          (r) => html`<li data-refused-id=${r.id}>
            <code>${JSON.stringify(r.patch)}</code> — <span class="reason">${r.message ?? 'refused'} (${r.code ?? 'refused'})</span>
            <button type="button" @click=${() => this.copyRefused(r)}>Copy</button>
            <button type="button" @click=${() => app().client.discardRefused(r.id!)}>Discard</button>
          </li>`,
        )}
      </ul>
    </div>`
  }

  private renderExtension(view: NodeView) {
    switch (view.nodeType) {
      case 'Space':
        return html`<section><weft-members-panel path=${view.path}></weft-members-panel></section>`
      case 'Group':
        return html`<section><weft-group-invite-dialog path=${view.path}></weft-group-invite-dialog></section>`
      // Activities (issue 11): web/components/code-page.ts, activity-*.ts.
      case 'Code':
        return html`<section><weft-code-page path=${view.path}></weft-code-page></section>`
      case 'ActivityLog':
        return html`<section><weft-activity-panel path=${view.path}></weft-activity-panel></section>`
      case 'User':
        return html`<section><weft-activity-strip path=${view.path} heading="My activity"></weft-activity-strip></section>`
      default:
        return html`<section><weft-activity-strip path=${view.path}></weft-activity-strip></section>`
    }
  }

  /** User-timing marks (read by the benchmarks): the first render of a node's fields and children. */
  private marked = new Set<string>()
  override updated() {
    const view = this.node.value
    if (!view) return
    const mark = (name: string) => {
      if (this.marked.has(name)) return
      this.marked.add(name)
      performance.mark(name)
    }
    mark(`weft:node-rendered:${view.path}`)
    if ((this.childList.value?.length ?? 0) > 0) mark(`weft:list-rendered:${view.path}`)
  }

  override render() {
    const view = this.node.value
    const access = this.access.value
    const outbox = this.outbox.value ?? []
    const refused = outbox.filter((r) => r.status === 'refused')
    const others = this.presence.value ?? []
    if (access?.denied && !view) {
      return html`<p class="denied" role="alert">You cannot open ${this.path}: ${access.denied.message} (${access.denied.code}).</p>`
    }
    if (!view) return html`<p aria-busy="true">Loading ${this.path}… (not stored on this device yet)</p>`
    const keys = Object.keys(view.content).sort()
    const kids = this.childList.value ?? []
    return html`
      <header>
        <h1>${view.name}</h1>
        <span class="type">${view.nodeType}</span>
        <span class="path">${view.path}</span>
        ${view.pending > 0 ? html`<span class="pending" data-pending=${view.pending}>${view.pending} unsaved change${view.pending === 1 ? '' : 's'}</span>` : nothing}
        ${view.localOnly ? html`<span class="pending">created offline</span>` : nothing}
      </header>
      <p class="presence" aria-live="polite" data-presence=${others.map((u) => u.name).join(',')}>
        ${others.length ? html`Also here: ${others.map((u) => u.name).join(', ')}` : 'Nobody else is here.'}
      </p>
      ${access?.denied ? html`<p class="denied" role="alert">Access removed: ${access.denied.message} (${access.denied.code}).</p>` : nothing}
      ${access?.permissions && !access.permissions.has('Update')
        ? html`<p class="readonly">You can view this node; the server will refuse edits to it.</p>`
        : nothing}
      ${this.renderRefused(refused)}
      ${this.error ? html`<p class="error" role="alert">${this.error}</p>` : nothing}
      <section aria-label="Content">
        <form class="fields" aria-label=${`Fields of ${view.name}`} @submit=${(e: Event) => e.preventDefault()}>
          ${keys.map((k) => this.renderField(k, view.content[k]!))}
        </form>
        <form class="inline" aria-label="Add a field" @submit=${this.onAddField}>
          <label>Field <input name="key" required /></label>
          <label>Value <input name="value" /></label>
          <button type="submit">Add field</button>
        </form>
      </section>
      ${this.renderExtension(view)}
      <section aria-label="Children">
        <h2>Children</h2>
        <ul class="children">
          ${kids.map((k) => html`<li><a href=${nodeHref(k.path)}>${k.name}</a> <small>${k.nodeType}</small>${k.pending ? html` <span class="pending">•</span>` : nothing}</li>`)}
        </ul>
        ${kids.length >= CHILD_LIMIT ? html`<p>Showing the first ${CHILD_LIMIT}.</p>` : nothing}
        <form class="inline" aria-label="New child node" @submit=${this.onCreateChild}>
          <label>Name <input name="name" required /></label>
          <label>Type ${typeSelect}</label>
          <button type="submit">Create</button>
        </form>
      </section>
      <section>
        <button type="button" class="danger" @click=${this.onDelete}>Delete node</button>
      </section>
    `
  }
}
customElements.define('weft-node-page', WeftNodePage)
