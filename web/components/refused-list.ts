import { LitElement, css, html, nothing } from 'lit'
import { ObservableController } from '../controllers/index.js'
import { NamesController } from '../controllers/names-controller.js'
import { app } from '../app-context.js'
import { of, switchMap } from 'rxjs'
import { NODE_REPLACED_MESSAGE, groupRefused, liveStoreQuery, markRemovedFields, mayBeRemovedField, refusedText, type RefusedGroup } from '../store/index.js'
import { humanMessage } from './error-text.js'
import { nodeHref } from './route.js'
import { fieldLabel } from './labels.js'
import { formatWhen } from './run-text.js'
import { refusedOpLine, refusedOps$, type RefusedOp } from './refused-ops.js'

/** Live refused groups of this device: every node's, or one node's. */
export function refusedGroups$(path = '') {
  const { store } = app().client
  const read = async () => groupRefused(await (path ? store.outboxFor(path) : store.refusedRows()))
  return liveStoreQuery(store.db, ['outbox'], read).pipe(
    // [WEB83] Whether a refused field is still in the node is read from its doc, so its stored
    // updates are watched too, but only while a refusal may be of a removed field: else every
    // update stored (anyone's keystroke) read the refused edits again.
    switchMap((groups) => (groups.some(mayBeRemovedField) ? liveStoreQuery(store.db, ['updates'], () => markRemovedFields(groups, (p) => store.loadDoc(p))) : of(groups))),
  )
}

async function copy(text: string) {
  try {
    await navigator.clipboard.writeText(text)
  } catch {
    prompt('Copy the refused edit:', text)
  }
}

/**
 * The edits the server refused, one entry per run of edits of a node's field ([WEB80]) with the
 * text as the person last typed it, each with Copy, Discard and Try again ([WEB82]), and Copy all
 * / Discard all. On a node page it lists that
 * node's; at `#/refused` (the status bar's count links there from any page) every node's.
 */
export class WeftRefusedList extends LitElement {
  static override properties = { path: {} }
  /** '' lists every node's refusals. */
  declare path: string
  private readonly groups = new ObservableController<RefusedGroup[]>(this)
  /** [SYNC24] Renames and deletions the server refused. */
  private readonly ops = new ObservableController<RefusedOp[]>(this)
  private readonly names = new NamesController(this)

  static override styles = css`
    :host { display: block; }
    .refused { border: 1px solid #c33; background: #fff4f4; padding: 0.5em 0.8em; margin: 0.5em 0; border-radius: 6px; }
    ul { list-style: none; padding: 0; margin: 0.5em 0 0; }
    li { margin-bottom: 0.6em; padding-bottom: 0.5em; border-bottom: 1px dashed #e6c0c0; overflow-wrap: anywhere; }
    li:last-child { border-bottom: none; }
    .what { font-weight: 500; }
    pre { white-space: pre-wrap; overflow-wrap: anywhere; background: #fff; border: 1px solid #eed; border-radius: 4px; padding: 0.3em 0.5em; margin: 0.3em 0; max-height: 12em; overflow: auto; font-size: 0.9em; }
    .reason { color: #700; font-size: 0.9em; }
    .actions { display: flex; flex-wrap: wrap; gap: 0.4em; margin-top: 0.3em; }
    .none { color: #555; }
  `

  constructor() {
    super()
    this.path = ''
  }

  override willUpdate() {
    const path = this.path
    this.groups.watch(`refused:${path}`, () => refusedGroups$(path))
    this.ops.watch(`refused-ops:${path}`, () => refusedOps$(path))
    this.names.watch([...new Set([...(this.groups.value ?? []), ...(this.ops.value ?? [])].map((g) => g.path))])
  }

  private discard(ids: number[]) {
    void app().client.discardRefusedMany(ids)
  }

  /** [WEB82] Sends the entries again (a role given back): saved if the server takes them now, else kept as refused again. */
  private retry(ids: number[]) {
    void app().client.retryRefused(ids)
  }

  /** [WEB80] `runs`: how many entries this node and field have (several: each says when it was last typed). */
  private renderGroup(g: RefusedGroup, nameOf: Map<string, string>, runs: number) {
    // [SYNC22] The sentence stored with the refusal (refuseEditsOfReplaced).
    const reason = g.nodeReplaced
      ? (g.message ?? NODE_REPLACED_MESSAGE)
      : g.fieldRemoved
      ? `Someone removed ${fieldLabel(g.field)} while this edit was on its way, so the server could not apply it. It was kept: Try again to add the field back with this text, or copy it, or discard it.`
      : g.code === 'already_exists' && g.message
        ? g.message
        : humanMessage(g.code, g.message ?? undefined)
    const edits = g.ids.length === 1 ? '' : ` (${g.ids.length} edits)`
    return html`<li data-refused-key=${g.key} data-refused-count=${g.ids.length}>
      <span class="what">${this.path ? nothing : html`<a href=${nodeHref(g.path)}>${nameOf.get(g.path) ?? g.path}</a> · `}${g.field ? fieldLabel(g.field) : 'the node'}${edits}${runs > 1 ? ` · last typed ${formatWhen(g.at)}` : ''}</span>
      ${g.value === null ? html`<p>removed the field</p>` : html`<pre>${refusedText(g)}</pre>`}
      <span class="reason">${reason} (${g.code ?? 'refused'})</span>
      <div class="actions">
        <wa-button size="s" appearance="outlined" @click=${() => copy(refusedText(g))}>Copy</wa-button>
        <wa-button size="s" appearance="outlined" @click=${() => this.discard(g.ids)}>Discard</wa-button>
        ${g.nodeReplaced
          ? nothing
          : html`<wa-button size="s" appearance="outlined" class="retry" title="Send it again: saved if your role now allows it, else kept here" @click=${() => this.retry(g.ids)}>Try again</wa-button>`}
      </div>
    </li>`
  }

  /** [SYNC24] A refused rename or deletion: what it asked (a rename's typed name, to copy), why, Discard. */
  private renderOp(op: RefusedOp, nameOf: Map<string, string>) {
    const name = nameOf.get(op.path) ?? op.path
    return html`<li data-refused-op=${op.kind}>
      <span class="what">${this.path ? nothing : html`<a href=${nodeHref(op.path)}>${name}</a> · `}${op.kind === 'rename' ? 'its name' : op.kind === 'delete' ? 'deleting it' : 'creating it'}</span>
      ${op.kind === 'rename' ? html`<pre>${op.name}</pre>` : nothing}
      <span class="reason">${refusedOpLine(op, name)} (${op.refusal.code})</span>
      <div class="actions">
        ${op.kind === 'rename' ? html`<wa-button size="s" appearance="outlined" @click=${() => copy(op.name)}>Copy</wa-button>` : nothing}
        <wa-button size="s" appearance="outlined" @click=${() => void app().client.store.discardOp(op.id)}>Discard</wa-button>
      </div>
    </li>`
  }

  override render() {
    const groups = this.groups.value ?? []
    const ops = this.ops.value ?? []
    if (groups.length === 0 && ops.length === 0) return this.path ? nothing : html`<p class="none">Nothing was refused. Every change on this device was saved or is waiting to be sent.</p>`
    const nameOf = new Map(this.names.value.map((n) => [n.path, n.name]))
    const all = groups.flatMap((g) => g.ids)
    const count = groups.length + ops.length
    const runsOf = new Map<string, number>()
    for (const g of groups) runsOf.set(`${g.path}\n${g.field}`, (runsOf.get(`${g.path}\n${g.field}`) ?? 0) + 1)
    const copyAll = () => copy(groups.map((g) => `${this.path ? '' : `${nameOf.get(g.path) ?? g.path} · `}${g.field}:\n${refusedText(g)}`).join('\n\n'))
    return html`<div class="refused" role="alert" aria-label="Refused edits">
      <strong>The server refused ${count === 1 ? 'a change' : `${count} changes`}; ${count === 1 ? 'it was' : 'they were'} not saved. Copy what you need, then discard.</strong>
      ${groups.length > 1
        ? html`<div class="actions">
            <wa-button size="s" appearance="outlined" class="copy-all" @click=${copyAll}>Copy all</wa-button>
            <wa-button size="s" appearance="outlined" class="discard-all" @click=${() => this.discard(all)}>Discard all</wa-button>
          </div>`
        : nothing}
      <ul>
        ${ops.map((op) => this.renderOp(op, nameOf))}
        ${groups.map((g) => this.renderGroup(g, nameOf, runsOf.get(`${g.path}\n${g.field}`) ?? 1))}
      </ul>
    </div>`
  }
}

customElements.define('weft-refused-list', WeftRefusedList)
