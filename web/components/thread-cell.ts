import { LitElement, css, html, nothing } from 'lit'
import { isJsonObject, type JsonValue } from '../../shared/json.js'
import { ObservableController } from '../controllers/index.js'
import { PeopleController } from '../controllers/people-controller.js'
import { app } from '../app-context.js'
import type { NodeView } from '../streams/index.js'
import { NamesController } from '../controllers/names-controller.js'
import { formatWhen } from './run-text.js'
import { nodeHref } from './route.js'
import { strings } from '../../shared/threads.js'
import { roleWord, str } from './thread-text.js'

/** Where a cell stands on its way to a round ([WEB32]). */
export type CellNote = '' | 'queued' | 'local' | 'sending'

const NOTES: Record<Exclude<CellNote, ''>, string> = {
  queued: 'Waiting for the next round',
  local: 'Saved on this device; sent when you are back online',
  sending: 'Sending…',
}


/**
 * One message of a thread ([WEB30]), bound to its cell node: who wrote it (in words), its role
 * and time, the text, the error of a failed round. An agent's answer is a Y.Text the agent
 * streams into, so this element re-renders as it grows: reconnecting or reloading simply
 * resyncs the cell (no stream store).
 */
export class WeftThreadCell extends LitElement {
  static override properties = { path: {}, streaming: { type: Boolean }, stoppedRound: { type: Boolean }, note: {}, agent: {}, draftText: { attribute: false }, placeholder: {} }
  /** A cell listed before this device knows it exists (the round's answer, being made): what to say meanwhile. */
  declare placeholder: string
  declare path: string
  /** A message being posted from this page, before its cell exists: shown as typed. */
  declare draftText: string | null
  /** The live round's answer: a caret shows while it grows. */
  declare streaming: boolean
  /** [WEB75] The thread says its last round, this cell's, was stopped (lastStoppedCell). */
  declare stoppedRound: boolean
  declare note: CellNote
  /** The thread's agent in words (an assistant cell's author). */
  declare agent: string
  private readonly node = new ObservableController<NodeView | null>(this)
  private readonly people = new PeopleController(this)
  /** The name of the node a hand-back reports on (its `About`). */
  private readonly about = new NamesController(this)

  static override styles = css`
    :host { display: block; min-width: 0; }
    article { border: 1px solid #e3e6ee; border-radius: 10px; padding: 0.5em 0.8em; background: #fff; }
    article.user { background: #f3f7ff; border-color: #d3def5; }
    article.tool { background: #f7f7f7; border-style: dashed; }
    article.failed { border-color: #f0b8b4; background: #fff6f5; }
    header { display: flex; flex-wrap: wrap; gap: 0.2em 0.6em; align-items: baseline; font-size: 0.9em; }
    .who { font-weight: 600; overflow-wrap: anywhere; }
    .role { color: #44506a; font-size: 0.85em; border: 1px solid #cfd5e2; border-radius: 999px; padding: 0 0.5em; }
    time, .for { color: #555566; font-size: 0.9em; }
    .text { margin-top: 0.3em; white-space: pre-wrap; overflow-wrap: anywhere; line-height: 1.45; }
    .text:empty { display: none; }
    .caret { display: inline-block; width: 0.5em; height: 1em; vertical-align: -0.15em; background: #5b6b8f; margin-left: 0.1em; animation: blink 1s steps(2, start) infinite; }
    @keyframes blink { to { visibility: hidden; } }
    @media (prefers-reduced-motion: reduce) { .caret { animation: none; } }
    .thinking, .stopped { color: #555566; font-style: italic; margin-top: 0.3em; }
    .error { color: #a40000; margin: 0.3em 0 0; overflow-wrap: anywhere; }
    .note { color: #7a4f00; font-size: 0.85em; margin-top: 0.3em; }
    .about { margin: 0.3em 0 0; font-size: 0.9em; }
    .about a { color: #1f4fa3; overflow-wrap: anywhere; }
    ul.tools { margin: 0.3em 0 0; padding-left: 1.2em; font-size: 0.9em; color: #333; }
    code { font-family: ui-monospace, monospace; font-size: 0.9em; overflow-wrap: anywhere; }
  `

  constructor() {
    super()
    this.path = ''
    this.streaming = false
    this.stoppedRound = false
    this.note = ''
    this.agent = 'Agent'
    this.draftText = null
    this.placeholder = ''
  }

  override willUpdate() {
    if (!this.path) return
    const path = this.path
    // Listed: the thread page watches the thread's children; a cell says no "here" of its own.
    this.node.watch(path, () => app().streams.node$(path, { listed: true }))
    this.people.setPath(path)
    const about = str(this.node.value?.content.About)
    this.about.watch(about ? [about] : [])
  }

  private author(role: string, c: Record<string, JsonValue>) {
    if (role === 'assistant') return this.agent
    if (role === 'tool') return 'Weft'
    const author = str(c.Author)
    return author ? this.people.nameOf(author) : 'someone'
  }

  private renderTools(calls: JsonValue | undefined) {
    if (!Array.isArray(calls) || calls.length === 0) return nothing
    return html`<ul class="tools" aria-label="Tool calls">${calls.map((t) => {
      const name = (isJsonObject(t) ? str(t.Tool) : null) ?? 'a tool'
      return html`<li><code>${name}</code></li>`
    })}</ul>`
  }

  /**
   * [WEB71] An agent's cell whose round is over says how it ended when its text does not: a round
   * stopped (the engine's `Stopped`) before or while answering, or one that ended with nothing.
   */
  private renderEnd(text: string, c: Record<string, JsonValue>) {
    const stopped = c.Stopped === true
    if (text) return stopped ? html`<p class="stopped" data-stopped>Stopped before it finished.</p>` : nothing
    if (stopped) return html`<p class="stopped" data-stopped>Stopped before it answered.</p>`
    if (Array.isArray(c.ToolCalls) && c.ToolCalls.length) return nothing
    // [WEB75] A cell from before [WEB71] has no `Stopped`: the thread tells whether its round was
    // the last one and was stopped; if not (an older round), nothing tells, and the words stay
    // neutral (true of a stop and of a round that ended with nothing).
    return this.stoppedRound ? html`<p class="stopped" data-stopped>Stopped before it answered.</p>` : html`<p class="stopped" data-ended>No answer.</p>`
  }

  /** [THR32] A hand-back names a sub-thread in words; the link goes to it (the text is never HTML). */
  private renderAbout(about: string | null) {
    if (!about) return nothing
    const name = this.about.value[0]?.name ?? about.slice(about.lastIndexOf('/') + 1)
    return html`<p class="about"><a href=${nodeHref(about)} data-about=${about}>Open “${name}”</a></p>`
  }

  override render() {
    if (this.placeholder) {
      return html`<article class="assistant" data-role="pending"><header><span class="who">${this.agent}</span><span class="role">${roleWord('assistant')}</span></header>
        <p class="thinking">${this.placeholder}</p></article>`
    }
    if (this.draftText !== null) {
      return html`<article class="user" data-role="user">
        <header><span class="who">${this.people.nameOf(app().session.userId)}</span><span class="role">${roleWord('user')}</span></header>
        <div class="text" data-text>${this.draftText}</div>
        ${this.note ? html`<p class="note" data-note=${this.note}>${NOTES[this.note]}</p>` : nothing}
      </article>`
    }
    const view = this.node.value
    // Nothing of it synced yet (its row may come first): said, not shown as an empty message.
    if (!view || Object.keys(view.content).length === 0) return html`<article aria-busy="true"><span class="thinking">Loading the message…</span></article>`
    const c = view.content
    const role = str(c.Role) ?? 'user'
    const text = typeof c.Text === 'string' ? c.Text : ''
    const error = str(c.Error)
    const at = str(c.CreatedAt)
    const behalf = strings(c.OnBehalfOf)
    return html`<article class="${role} ${error ? 'failed' : ''}" data-role=${role} data-cell=${view.path}>
      <header>
        <span class="who">${this.author(role, c)}</span>
        <span class="role">${roleWord(role)}</span>
        ${behalf.length ? html`<span class="for">with ${behalf.map((b) => this.people.nameOf(b)).join(', ')}</span>` : nothing}
        ${at ? html`<time datetime=${at} title=${at}>${formatWhen(at)}</time>` : nothing}
      </header>
      <div class="text" data-text>${text}${this.streaming && text ? html`<span class="caret" aria-hidden="true"></span>` : nothing}</div>
      ${this.streaming && !text && !error ? html`<p class="thinking">Thinking…</p>` : nothing}
      ${role === 'assistant' && !this.streaming && !error ? this.renderEnd(text, c) : nothing}
      ${this.renderTools(c.ToolCalls)}
      ${this.renderAbout(str(c.About))}
      ${error ? html`<p class="error" role="alert" data-error>${error}</p>` : nothing}
      ${this.note ? html`<p class="note" data-note=${this.note}>${NOTES[this.note]}</p>` : nothing}
    </article>`
  }
}

customElements.define('weft-thread-cell', WeftThreadCell)
