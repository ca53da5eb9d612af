import { LitElement, css, html, nothing } from 'lit'
import { repeat } from 'lit/directives/repeat.js'
import { isJsonObject, type JsonObject } from '../../shared/json.js'
import { ObservableController } from '../controllers/index.js'
import { NamesController } from '../controllers/names-controller.js'
import { FollowEndController } from '../controllers/follow-end-controller.js'
import { app } from '../app-context.js'
import { HttpError, NetworkError } from '../api/index.js'
import type { IndexRow } from '../store/index.js'
import type { NodeView } from '../streams/index.js'
import type { ReplicaState, SyncStatus } from '../sync/index.js'
import { humanError } from './error-text.js'
import { nodeHref } from './route.js'
import { formatWhen } from './run-text.js'
import { knownMessageIds, roundInputs, strings } from '../../shared/threads.js'
import type { NodePath } from '../../shared/path.js'
import { agentName, answeredDecision, lastStoppedCell, newMessageId, pendingApproval, threadState, type PendingApproval } from './thread-text.js'
import type { CellNote } from './thread-cell.js'
import './thread-cell.js'
import './thread-link.js'

/** Children of a thread this page reads (its cells and sub-threads). */
const CHILD_LIMIT = 500

interface Shown {
  path: string
  note: CellNote
}

function idOf(path: string): string {
  return path.slice(path.lastIndexOf('/') + 1)
}

/**
 * A thread's page ([WEB30]–[WEB38], DESIGN.md "Threads (contract)"): its messages in order, the
 * agent's answer streaming into its cell, the state in words ("Thinking…", "Stopping…",
 * "Waiting for your answer" and the question), Stop, the approval the agent waits for, the
 * sub-threads it delegated to (live), and a composer that works offline: online it posts
 * (`POST /api/nodes/{thread}/messages` with an id made here), offline it creates the person's
 * own user cell on this device, which reaches the server (and is ingested by its id, once)
 * when the device is back online. Who else is here is the node page's line above.
 */
export class WeftThreadPage extends LitElement {
  static override properties = { path: {}, error: { state: true }, sent: { state: true }, draft: { state: true } }
  declare path: string
  declare error: string
  /** Messages posted from this page the thread does not list yet (path → text). */
  declare sent: ReadonlyMap<string, string>
  declare draft: string
  /**
   * [WEB41] A send the server answered with a 5xx (or whose connection failed): its id and text.
   * Sending the same text again reuses the id, so a post the server did (or half did) before its
   * answer was lost (a proxy's 502/504, a 503 after the message's cell) is completed once, not
   * posted twice; once the thread lists the id, it went through after all: the error and the
   * restored text go.
   */
  private unsettled: { id: string; text: string } | null = null
  private readonly node = new ObservableController<NodeView | null>(this)
  private readonly access = new ObservableController<ReplicaState>(this)
  private readonly kids = new ObservableController<IndexRow[]>(this)
  private readonly status = new ObservableController<SyncStatus>(this)
  private readonly parent = new NamesController(this)
  /** [WEB70] The page opens at its latest messages and follows them while the reader is there. */
  private readonly end = new FollowEndController(this)

  static override styles = css`
    :host { display: block; min-width: 0; }
    /* [WEB70] The thread's state, Stop and the composer stay at the bottom of the viewport (the
       window scrolls; weft-app's main is no scroll container, so sticky holds to the viewport). */
    .dock { position: sticky; bottom: 0; z-index: 1; margin-top: 1em; padding: 0.5em 0; background: #fafbfd; border-top: 1px solid #e3e6ee; display: flex; flex-direction: column; gap: 0.4em; }
    .state { display: flex; flex-wrap: wrap; gap: 0.4em 0.8em; align-items: center; }
    .badge { border-radius: 4px; padding: 0.1em 0.55em; font-weight: 600; background: #eef0f5; }
    .badge[data-kind='thinking'], .badge[data-kind='queued'] { background: #dde9ff; }
    .badge[data-kind='stopping'] { background: #fff1d6; color: #6b4300; }
    .badge[data-kind='asking'], .badge[data-kind='approval'] { background: #fff4cc; color: #5c4500; }
    .badge[data-kind='failed'] { background: #fdd; color: #7a1010; }
    .badge[data-kind='cancelled'] { background: #e9e9ee; }
    .badge[data-kind='answered'], .badge[data-kind='done'] { background: #dff3df; color: #15501f; }
    .agent { color: #555566; font-size: 0.9em; }
    .parent { margin: 0 0 0.6em; color: #333; overflow-wrap: anywhere; }
    .question { border-left: 4px solid #d9a400; background: #fffbea; padding: 0.5em 0.8em; border-radius: 4px; margin: 0.8em 0 0; overflow-wrap: anywhere; }
    .approval { border: 1px solid #e6c36a; background: #fffbea; border-radius: 8px; padding: 0.6em 0.8em; margin: 0.8em 0 0; }
    .approval h3 { margin: 0 0 0.3em; font-size: 1em; }
    .approval code, .approval pre { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; }
    .approval pre { background: #fff; border: 1px solid #eadfb8; border-radius: 4px; padding: 0.4em; overflow: auto; max-height: 12em; font-size: 0.85em; margin: 0.3em 0; white-space: pre-wrap; overflow-wrap: anywhere; }
    .approval .buttons { display: flex; flex-wrap: wrap; gap: 0.5em; align-items: center; }
    ol.messages { list-style: none; margin: 0; padding: 0; display: flex; flex-direction: column; gap: 0.6em; }
    ol.messages li.from-user { margin-left: min(3em, 8%); }
    ol.messages li.from-agent { margin-right: min(3em, 8%); }
    .empty, .reason-off { color: #555; font-style: italic; }
    .dock .reason-off, .dock .error { margin: 0; }
    section.subs { margin-top: 1em; }
    section.subs h3 { font-size: 1em; margin: 0 0 0.4em; }
    section.subs ul { list-style: none; margin: 0; padding: 0; display: flex; flex-direction: column; gap: 0.4em; }
    form.composer { display: flex; flex-direction: column; gap: 0.4em; }
    form.composer label { font-weight: 500; }
    form.composer textarea { font: inherit; width: 100%; box-sizing: border-box; min-height: 3.2em; max-height: 40vh; resize: vertical; padding: 0.45em 0.6em; border: 1px solid var(--wa-color-neutral-80, #bbc); border-radius: var(--wa-border-radius-m, 6px); background: #fff; color: inherit; }
    form.composer textarea:focus-visible { outline: var(--wa-focus-ring, 2px solid #36c); outline-offset: 1px; }
    .row { display: flex; flex-wrap: wrap; gap: 0.5em; align-items: center; }
    .hint { color: #555566; font-size: 0.85em; flex: 1 1 14em; }
    .offline { color: #7a4f00; }
    .error { color: #a40000; overflow-wrap: anywhere; }
  `

  constructor() {
    super()
    this.path = ''
    this.error = ''
    this.sent = new Map()
    this.draft = ''
  }

  override willUpdate(changed: Map<string, unknown>) {
    const path = this.path
    if (!path) return
    if (changed.has('path')) {
      this.error = ''
      this.sent = new Map()
      this.draft = ''
      this.unsettled = null
      this.end.follow()
    }
    const { streams } = app()
    this.node.watch(path, () => streams.node$(path))
    this.access.watch(path, () => streams.access$(path))
    this.kids.watch(path, () => streams.query$({ parent: path, limit: CHILD_LIMIT }))
    this.status.watch('status', () => streams.status$)
    const parent = this.node.value?.content.ParentPath
    this.parent.watch(typeof parent === 'string' && parent ? [parent] : [])
    // [WEB41] The send answered with a 5xx is posted after all (the thread lists its id): it went through.
    const u = this.unsettled
    const c = this.node.value?.content
    if (u && c && knownMessageIds(c).has(u.id)) {
      this.unsettled = null
      if (this.draft === u.text) this.draft = ''
      this.error = ''
    }
  }

  private can(p: 'Thread' | 'Update'): boolean {
    const perms = this.access.value?.permissions
    return !!perms && perms.has(p)
  }

  private async act(fn: () => Promise<unknown>) {
    this.error = ''
    try {
      await fn()
    } catch (e) {
      this.error = humanError(e)
    }
  }

  /**
   * [WEB33] Online: POST with an id made here (the same id again adds nothing). Offline, or when
   * the server cannot be reached: the person's own user cell is created on this device and its
   * creation replayed when online; the engine ingests it by its id, once.
   */
  private async send(text: string) {
    const { client, session } = app()
    // A reused id is never sent to the offline path: its cell may be on the server already, half
    // done, and a queued creation of it would be taken as done there (nothing would enqueue it).
    const reused = this.unsettled?.text === text
    const id = reused && this.unsettled ? this.unsettled.id : newMessageId()
    const cell = `${this.path}/${id}`
    this.sent = new Map(this.sent).set(cell, text)
    this.draft = ''
    this.error = ''
    // What one sends is read where it lands, and the answer under it.
    this.end.follow()
    try {
      try {
        if (navigator.onLine === false) throw new NetworkError('offline')
        await client.api.postMessage(this.path, { id, text })
      } catch (e) {
        if (!(e instanceof NetworkError) || reused) throw e
        try {
          await client.createNode(cell, 'ThreadMessage', id, { Role: 'user', Author: session.userId, Text: text, CreatedAt: new Date().toISOString() }, { sealed: true })
        } catch (made) {
          // [WEB41] The post got through before its connection dropped: its cell (under this
          // device's id) is there. Posted again under that id it is completed if half done, once.
          if (!(made instanceof HttpError && made.code === 'already_exists')) throw made
          await client.api.postMessage(this.path, { id, text })
        }
      }
      this.unsettled = null
    } catch (e) {
      // Not sent: what was typed comes back.
      const next = new Map(this.sent)
      next.delete(cell)
      this.sent = next
      if (!this.draft) this.draft = text
      this.unsettled = (e instanceof HttpError && e.status >= 500) || e instanceof NetworkError ? { id, text } : null
      this.error = humanError(e)
    }
  }

  private onSubmit(ev: SubmitEvent) {
    ev.preventDefault()
    const text = this.draft
    if (text.trim() === '') return
    void this.send(text)
  }

  private onKey(ev: KeyboardEvent) {
    // Enter sends, Shift+Enter is a new line (as in every chat).
    if (ev.key === 'Enter' && !ev.shiftKey && !ev.isComposing) {
      ev.preventDefault()
      ;(ev.target as HTMLTextAreaElement).form?.requestSubmit()
    }
  }

  /** The cells in order: the rounds' (Messages), then those waiting for a round, then this device's unsent ones. */
  private cells(c: JsonObject): Shown[] {
    const messages = strings(c.Messages)
    const listed = new Set(messages)
    const shown: Shown[] = messages.map((path) => ({ path, note: '' }))
    // [THR26] Waiting: what the next round takes (the posted ids not yet ingested), as the engine reads it.
    for (const p of roundInputs(this.path as NodePath, c)) {
      if (listed.has(p)) continue
      listed.add(p)
      shown.push({ path: p, note: 'queued' })
    }
    const known = knownMessageIds(c)
    for (const row of this.kids.value ?? []) {
      if (row.nodeType !== 'ThreadMessage' || listed.has(row.path) || known.has(idOf(row.path))) continue
      // A user cell made here (offline) or just posted, not yet taken in by the thread.
      listed.add(row.path)
      shown.push({ path: row.path, note: row.localOnly ? 'local' : 'sending' })
    }
    return shown
  }

  private renderApproval(c: JsonObject, p: PendingApproval) {
    const canAnswer = this.can('Update')
    const answered = answeredDecision(c, p.Id)
    const args = p.Args === null ? '' : JSON.stringify(p.Args, null, 2)
    const answer = (Decision: 'Approved' | 'Denied') => this.act(() => app().client.patch(this.path, { ApprovalAnswer: { Id: p.Id, Decision } }))
    return html`<section class="approval" aria-labelledby="approval-h" data-approval=${p.Id}>
      <h3 id="approval-h">The agent asks to use <code>${p.Tool}</code></h3>
      ${p.Summary ? html`<p>${p.Summary}</p>` : nothing}
      ${args ? html`<pre aria-label="What it would use it with" tabindex="0">${args}</pre>` : nothing}
      ${p.RequestedAt ? html`<p class="agent">Asked ${formatWhen(p.RequestedAt)}</p>` : nothing}
      ${answered
        ? html`<p data-answered=${answered}>${answered === 'Approved' ? 'Approved' : 'Denied'}; waiting for the agent to go on…</p>`
        : html`<div class="buttons">
            <wa-button size="s" variant="brand" class="approve" ?disabled=${!canAnswer} @click=${() => answer('Approved')}>Approve</wa-button>
            <wa-button size="s" variant="danger" appearance="outlined" class="deny" ?disabled=${!canAnswer} @click=${() => answer('Denied')}>Deny</wa-button>
            ${canAnswer ? nothing : html`<span class="reason-off" data-reason="approve">Only people who can edit this thread (Editors) can approve or deny.</span>`}
          </div>`}
    </section>`
  }

  private renderComposer(canPost: boolean, offline: boolean) {
    if (!this.access.value?.permissions) return nothing
    if (!canPost) {
      return html`<p class="reason-off" data-reason="thread">You can read this thread; your role cannot post to it or stop it (that needs an Editor).</p>`
    }
    return html`<form class="composer" aria-label="New message" @submit=${this.onSubmit}>
      <label for="composer-text">Message</label>
      <textarea id="composer-text" name="text" .value=${this.draft} @input=${(e: Event) => (this.draft = (e.target as HTMLTextAreaElement).value)} @keydown=${this.onKey}
        placeholder="Write to the thread. Enter sends, Shift+Enter starts a new line."></textarea>
      <div class="row">
        <span class="hint ${offline ? 'offline' : ''}" data-offline=${offline ? 'yes' : 'no'}>${offline
          ? 'You are offline: what you send is kept on this device and sent when you are back online.'
          : 'A message sent while the agent is busy waits for the next round.'}</span>
        <wa-button type="submit" size="s" variant="brand" class="send" ?disabled=${this.draft.trim() === ''}>Send</wa-button>
      </div>
    </form>`
  }

  /** Stop (a live round) and Withdraw the question (a thread resting on it) ask the same: a cancel. */
  private readonly requestCancel = () => this.act(() => app().client.patch(this.path, { RequestedStatus: 'Cancelled' }))

  override render() {
    const view = this.node.value
    if (!view) return nothing
    const c = view.content
    const canThread = this.can('Thread')
    const state = threadState(c, { mayAnswer: canThread })
    const approval = pendingApproval(c)
    const question = state.kind === 'asking' && typeof c.Question === 'string' ? c.Question : null
    const round = isJsonObject(c.Round) && typeof c.Round.Response === 'string' ? c.Round.Response : null
    const cells = this.cells(c)
    const seen = new Set(cells.map((s) => s.path))
    const sending = [...this.sent].filter(([p]) => !seen.has(p))
    const subs = (this.kids.value ?? []).filter((r) => r.nodeType === 'Thread')
    // An engine-made cell is joined once the thread's listing has it: the round lists its
    // answer's cell a moment before the cell is made, and joining a node not there yet is
    // refused. A user cell exists before it is listed.
    const known = new Set((this.kids.value ?? []).map((r) => r.path))
    const offline = this.status.value?.kind === 'offline'
    const parent = typeof c.ParentPath === 'string' && c.ParentPath ? c.ParentPath : null
    const agent = agentName(c.Agent)
    const stopped = lastStoppedCell(c)
    return html`
      ${parent
        ? html`<p class="parent">Delegated from <a href=${nodeHref(parent)}>${this.parent.value[0]?.name ?? idOf(parent)}</a></p>`
        : nothing}
      ${cells.length || sending.length
        ? html`<ol class="messages" aria-label="Messages">
            ${repeat(cells, (s) => s.path, (s) => html`<li class=${idOf(s.path).startsWith('_') ? 'from-agent' : 'from-user'}>
              ${known.has(s.path) || !idOf(s.path).startsWith('_')
                ? html`<weft-thread-cell .path=${s.path} .note=${s.note} .agent=${agent} ?streaming=${s.path === round && state.live} ?stoppedRound=${s.path === stopped}></weft-thread-cell>`
                : html`<weft-thread-cell .placeholder=${s.path === round && state.live ? 'Thinking…' : 'Loading the message…'} .agent=${agent}></weft-thread-cell>`}</li>`)}
            ${sending.map(([p, text]) => html`<li class="from-user" data-sending=${p}><weft-thread-cell .draftText=${text} .note=${'sending'}></weft-thread-cell></li>`)}
          </ol>`
        : html`<p class="empty">No messages yet.${canThread ? ' Write the first one below.' : ''}</p>`}
      ${question ? html`<p class="question" data-question><strong>The agent asks:</strong> ${question}</p>` : nothing}
      ${approval ? this.renderApproval(c, approval) : nothing}
      ${subs.length
        ? html`<section class="subs" aria-labelledby="subs-h"><h3 id="subs-h">Sub-threads</h3>
            <ul>${repeat(subs, (r) => r.path, (r) => html`<li><weft-thread-link .path=${r.path}></weft-thread-link></li>`)}</ul></section>`
        : nothing}
      <div class="dock">
        <div class="state">
          <span class="badge" role="status" aria-live="polite" data-kind=${state.kind} data-status=${String(c.Status ?? 'Idle')}>${state.label}</span>
          <span class="agent">${agent}</span>
          ${state.live && canThread && state.kind !== 'stopping'
            ? html`<wa-button size="s" variant="danger" appearance="outlined" class="stop" @click=${this.requestCancel}>Stop</wa-button>`
            : nothing}
          ${state.kind === 'asking' && canThread && c.RequestedStatus !== 'Cancelled'
            ? html`<wa-button size="s" variant="neutral" appearance="outlined" class="withdraw" title="Cancel this thread instead of answering: a thread that delegated to it is told" @click=${this.requestCancel}>Withdraw the question</wa-button>`
            : nothing}
        </div>
        ${this.error ? html`<p class="error" role="alert">${this.error}</p>` : nothing}
        ${this.renderComposer(canThread, offline)}
      </div>
    `
  }
}

customElements.define('weft-thread-page', WeftThreadPage)
