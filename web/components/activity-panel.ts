import { LitElement, css, html, nothing } from 'lit'
import { EMPTY, catchError, filter, from, map, merge, of, switchMap, type Subscription } from 'rxjs'
import { isJsonObject, type JsonObject, type JsonValue } from '../../shared/json.js'
import { ObservableController } from '../controllers/index.js'
import { PeopleController } from '../controllers/people-controller.js'
import { app } from '../app-context.js'
import type { NodeView } from '../streams/index.js'
import { formatBytes, type PresenceUser, type ReplicaState } from '../sync/index.js'
import { requestStatus, runCode } from './activity-api.js'
import { nodeHref } from './route.js'
import { formatWhen, limitOf, runDuration, runStatusWord } from './run-text.js'
import { errorLocation, type LogLine } from './run-log-text.js'
import { humanMessage } from './error-text.js'
import { ROLE_PERMISSIONS } from '../../shared/access-policy.js'
import { runName } from '../../shared/run-name.js'
import type { Permission } from '../../shared/enums.js'
import './activity-form.js'
import './run-log.js'

/** The Code node a run came from, as the server has it now (name and current Source). */
interface CodeNow {
  name: string
  source: string | null
  /** Declared inputs: a required one left empty keeps a draft from starting. */
  inputs: Record<string, { Required?: boolean; Label?: string; Type?: string; Requires?: string }>
}

/** [WEB54] What the starter may do at a node an input names: its name and permissions; null when unreadable. */
type RightsAt = { name: string; permissions: ReadonlySet<string> } | null

const str = (v: JsonValue | undefined): string | null => (typeof v === 'string' && v !== '' ? v : null)

/**
 * The result panel of an activity, bound to the activity node itself (seed: "one subscription,
 * one switch, all states handled"): status badge, who started it (and who made the draft),
 * when and for how long, the code it ran (as it was then, collapsed), why a limit stopped it,
 * progress, live messages, output or error, and who else is watching. Every fact of a run is
 * text: the engine writes them, nobody types into them. Cancel and Start are offered only to
 * those the server lets steer the run (its creator, or Update on it) [WEB9]; "Stopping…" shows
 * to everyone once a cancel is asked for.
 */
export class WeftActivityPanel extends LitElement {
  static override properties = { path: {}, full: { type: Boolean }, error: { state: true }, codeOpen: { state: true }, markedLine: { state: true } }
  declare path: string
  /** The run's own page (inputs shown; the code block opens with a click like everywhere). */
  declare full: boolean
  declare error: string
  /** The "Code it ran" block is open (a click on the error's line opens it). */
  declare codeOpen: boolean
  /** The source line the error points at, marked in the code block once the reader followed the link. */
  declare markedLine: number
  private readonly node = new ObservableController<NodeView | null>(this)
  private readonly presence = new ObservableController<PresenceUser[]>(this)
  private readonly access = new ObservableController<ReplicaState>(this)
  private readonly code = new ObservableController<CodeNow | null>(this)
  private readonly people = new PeopleController(this)
  /**
   * [WEB54] The caller's rights at the nodes a draft's `node` inputs name: asked once each
   * ('asking' meanwhile; 'unjudged' when the server could not be asked, offline say, asked again
   * once the browser is online). Forgotten whenever an access assignment or a membership the
   * caller can see changes: a refusal must not outlive the role it was about.
   */
  private readonly rightsAt = new Map<string, RightsAt | 'asking' | 'unjudged'>()
  private accessChanges: Subscription | null = null
  /** The output as text and as the file Download saves, for the value last shown. */
  private output: { value: JsonValue; md: boolean; text: string; file: Blob } | null = null
  private readonly onOnline = () => {
    for (const [k, v] of this.rightsAt) if (v === 'unjudged') this.rightsAt.delete(k)
    this.requestUpdate()
  }

  static override styles = css`
    :host { display: block; border: 1px solid #ccd; border-radius: 6px; padding: 0.6em 0.8em; margin: 0.6em 0; background: #fff; min-width: 0; }
    header { display: flex; flex-wrap: wrap; gap: 0.3em 0.6em; align-items: baseline; }
    header a { overflow-wrap: anywhere; }
    .badge { border-radius: 3px; padding: 0 0.5em; font-weight: bold; }
    .Running { background: #def; } .Succeeded { background: #dfd; } .Warning { background: #ffd; }
    .Failed { background: #fdd; } .Cancelled { background: #eee; } .Draft { background: #f4f4ff; }
    .stopping { color: #8a5a00; font-weight: 500; }
    .facts { margin: 0.4em 0; color: #333; overflow-wrap: anywhere; }
    .facts span + span::before { content: ' · '; color: #888; }
    .stopped { border-left: 4px solid #b00; background: #fff4f4; padding: 0.5em 0.8em; margin: 0.5em 0; border-radius: 4px; overflow-wrap: anywhere; }
    .stopped strong { color: #900; }
    .stopped small { display: block; color: #555; margin-top: 0.2em; }
    details.code { margin: 0.5em 0; }
    details.code summary { cursor: pointer; }
    .differs { color: #8a5a00; font-weight: 500; }
    pre.source { counter-reset: ln; background: #f6f7fa; border: 1px solid #e3e6ee; border-radius: 4px; padding: 0.4em 0.6em 0.4em 0; overflow: auto; max-height: 24em; font-size: 0.85em; margin: 0.3em 0; }
    pre.source .line { display: block; }
    pre.source .line::before { counter-increment: ln; content: counter(ln); display: inline-block; width: 3em; padding-right: 0.8em; text-align: right; color: #889; user-select: none; }
    h4 { margin: 0.6em 0 0.2em; font-size: 0.95em; }
    dl.inputs { display: grid; grid-template-columns: max-content minmax(0, 1fr); gap: 0.2em 0.8em; margin: 0.4em 0; }
    dl.inputs dt { font-weight: 500; }
    dl.inputs dd { margin: 0; font-family: ui-monospace, monospace; font-size: 0.9em; overflow-wrap: anywhere; white-space: pre-wrap; }
    progress { width: 100%; }
    .thrown pre.at-line { margin: 0.3em 0 0; padding: 0.3em 0.5em; background: #fff4f4; border-radius: 4px; overflow: auto; font-size: 0.85em; color: #600; }
    .thrown .ln { display: inline-block; min-width: 2.5em; color: #a88; user-select: none; }
    pre.source .line.marked { background: #ffe0e0; outline: none; }
    .denied { color: #555; font-style: italic; }
    pre.output { background: #f6f6f6; padding: 0.4em; overflow: auto; }
    .error { color: #b00; overflow-wrap: anywhere; }
    .reason-off { color: #555; font-style: italic; font-size: 0.9em; }
    .refused-input { color: #8a3b00; margin: 0.4em 0 0; overflow-wrap: anywhere; }
    .watchers { color: #235; font-size: 0.9em; }
  `

  constructor() {
    super()
    this.path = ''
    this.full = false
    this.error = ''
    this.codeOpen = false
    this.markedLine = 0
  }

  override connectedCallback() {
    super.connectedCallback()
    window.addEventListener('online', this.onOnline)
    this.accessChanges = app()
      .client.feed$.pipe(filter((c) => c.path.includes('/_Access/') || c.path.endsWith('_Membership')))
      .subscribe(() => {
        if (this.rightsAt.size === 0) return
        this.rightsAt.clear()
        this.requestUpdate()
      })
  }

  override disconnectedCallback() {
    super.disconnectedCallback()
    window.removeEventListener('online', this.onOnline)
    this.accessChanges?.unsubscribe()
    this.accessChanges = null
  }

  override willUpdate() {
    if (!this.path) return
    const path = this.path
    const { streams, client } = app()
    this.node.watch(path, () => streams.node$(path))
    this.presence.watch(path, () => streams.presence$(path))
    this.access.watch(path, () => streams.access$(path))
    this.people.setPath(path)
    this.people.learn(this.presence.value ?? [])
    const codePath = str(this.node.value?.content.CodePath)
    if (codePath) {
      // Read over HTTP, not by joining the Code node's room: watching a run must not show its
      // watcher as "here" on the Code page. Fresh again whenever the feed says it changed.
      this.code.watch(codePath, () =>
        merge(of(null), client.feed$.pipe(filter((c) => c.path === codePath))).pipe(
          switchMap(() => from(client.api.getNode(codePath)).pipe(catchError(() => EMPTY))),
          map((n) => ({
            name: n.name,
            source: typeof n.content.Source === 'string' ? n.content.Source : null,
            inputs: inputsOf(n.content) as CodeNow['inputs'],
          })),
        ),
      )
    }
    const content = this.node.value?.content
    if (content) this.askRights(content)
  }

  /**
   * [WEB54] [ACT22] A draft's `node` inputs that declare `Requires`: the caller's rights at each
   * node named, asked of the server before Start is offered (the server checks again on start;
   * this only says it in words first, where a Viewer used to learn it from a failed run).
   */
  private askRights(c: JsonObject) {
    if (c.Status !== undefined) return
    for (const { at } of this.requiredRights(inputsOf(c))) {
      if (this.rightsAt.has(at)) continue
      this.rightsAt.set(at, 'asking')
      const { api } = app().client
      Promise.all([api.capabilities(at), api.getNode(at)]).then(
        ([caps, node]) => {
          if (this.rightsAt.get(at) !== 'asking') return // forgotten meanwhile (an access change): asked again
          this.rightsAt.set(at, { name: node.name, permissions: new Set(caps.permissions) })
          this.requestUpdate()
        },
        (e: unknown) => {
          if (this.rightsAt.get(at) !== 'asking') return
          // Not there (or moved away) or not readable: said so. Anything else (offline, the server
          // failing): not judged here, and not asked again at once (the server decides on Start).
          const code = (e as { code?: string }).code
          const gone = code === 'not_found' || code === 'forbidden' || code === 'invalid_path' || code === 'moved'
          this.rightsAt.set(at, gone ? null : 'unjudged')
          if (gone) this.requestUpdate()
        },
      )
    }
  }

  /** [WEB54] The `node` inputs given that declare `Requires`: the node each names and the permission it needs there. */
  private requiredRights(given: JsonObject): { label: string; requires: string; at: string }[] {
    const out: { label: string; requires: string; at: string }[] = []
    for (const [k, d] of Object.entries(this.code.value?.inputs ?? {})) {
      const at = given[k]
      if (d?.Type === 'node' && d.Requires && typeof at === 'string' && at !== '') out.push({ label: d.Label ?? k, requires: d.Requires, at })
    }
    return out
  }

  /** [WEB54] Why the inputs as given cannot start, in words (empty: nothing known against it). */
  private rightsRefusals(given: JsonObject): string[] {
    const out: string[] = []
    for (const { label, requires, at } of this.requiredRights(given)) {
      const rights = this.rightsAt.get(at)
      if (rights === undefined || rights === 'asking' || rights === 'unjudged') continue
      if (rights === null) out.push(`${label}: no node you can read is at “${at}”.`)
      else if (!rights.permissions.has(requires)) {
        const holders = rolesWith(requires)
        out.push(
          `${label}: your role at “${rights.name}” does not include ${requires}, which this needs there${holders.length ? ` (${holders.map((r) => `${r}s`).join(' and ')} have it)` : ''}. Ask an Admin of “${rights.name}”, or choose a node of your own.`,
        )
      }
    }
    return out
  }

  /** The error's "line N" link: open the code it ran at that line, marked [WEB25]. */
  private async showLine(line: number, ev?: Event) {
    ev?.preventDefault()
    this.codeOpen = true
    this.markedLine = line
    await this.updateComplete
    const el = this.renderRoot.querySelector<HTMLElement>(`pre.source [data-line="${line}"]`)
    el?.scrollIntoView({ block: 'center' })
    el?.focus()
  }

  /**
   * A new run of the Code node with this run's inputs. The page that shows this panel may take it
   * (the Code page's "Your run" follows it: the `rerun` event, its default prevented); otherwise
   * the new run is opened, so the person sees it start (it used to start unseen).
   */
  private async rerun(codePath: string, c: JsonObject) {
    const made = await runCode(codePath, { inputs: (c.Inputs ?? {}) as Record<string, unknown> })
    const taken = !this.dispatchEvent(new CustomEvent('rerun', { detail: made, bubbles: true, composed: true, cancelable: true }))
    if (!taken) location.hash = nodeHref(made)
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
    // Made once per output (not at each render: presence and feed updates render too).
    if (this.output?.value !== value) {
      const md = value && typeof value === 'object' && !Array.isArray(value) && typeof value.Markdown === 'string' ? value.Markdown : null
      const text = md ?? JSON.stringify(value, null, 2)
      this.output = { value, md: md !== null, text, file: new Blob([text], { type: md !== null ? 'text/markdown' : 'application/json' }) }
    }
    const { md, text, file } = this.output
    // [WEB54] One size, the file's: the log no longer says one and the preview another.
    const shown = text.length > 20_000 ? `${text.slice(0, 20_000)}\n… (the beginning only: download the whole file)` : text
    const download = () => {
      const a = document.createElement('a')
      a.href = URL.createObjectURL(file)
      a.download = `${name}.${md ? 'md' : 'json'}`
      a.click()
      setTimeout(() => URL.revokeObjectURL(a.href), 10_000)
    }
    return html`<h4>Output <wa-button size="s" appearance="outlined" class="download" @click=${download}>Download (${formatBytes(file.size)})</wa-button></h4><pre class="output">${shown}</pre>`
  }

  /** Who started it, who made the draft (when someone else), when, how long. */
  private renderFacts(c: JsonObject, status: string) {
    const createdBy = str(c.CreatedBy)
    // Before the server recorded StartedBy, a run acted as (and was started by) its creator.
    const startedBy = str(c.StartedBy) ?? (status !== 'Draft' ? createdBy : null)
    const start = str(c.Start)
    const took = runDuration(c.Start, c.End)
    const who = (id: string) => html`<span class="person" data-user=${id}>${this.people.nameOf(id)}</span>`
    return html`<p class="facts">
      ${startedBy ? html`<span data-fact="started-by">Started by ${who(startedBy)}</span>` : nothing}
      ${createdBy && createdBy !== startedBy ? html`<span data-fact="created-by">${status === 'Draft' ? 'Draft made by' : 'draft made by'} ${who(createdBy)}</span>` : nothing}
      ${start ? html`<span data-fact="start">${formatWhen(start)}</span>` : nothing}
      ${took ? html`<span data-fact="duration">${status === 'Running' ? `running for ${took}` : `took ${took}`}</span>` : nothing}
    </p>`
  }

  /** The code the run executes (kept on the activity when it was made), collapsed. */
  private renderCode(c: JsonObject) {
    const source = typeof c.Source === 'string' ? c.Source : null
    const codePath = str(c.CodePath)
    const now = this.code.value
    const codeLink = codePath ? html`<a href=${nodeHref(codePath)}>${now?.name ?? codePath.split('/').pop()}</a>` : nothing
    if (source === null) {
      return codePath ? html`<p class="code-link">Code: ${codeLink}</p>` : nothing
    }
    const differs = now && now.source !== null && now.source !== source
    const lines = source.split('\n')
    // The link to the Code node stays outside <summary>: a link inside a toggle is two
    // controls in one (axe: nested-interactive).
    return html`${codePath ? html`<p class="code-link">Code: ${codeLink}</p>` : nothing}<details class="code" ?data-differs=${!!differs} .open=${this.codeOpen} @toggle=${(e: Event) => (this.codeOpen = (e.target as HTMLDetailsElement).open)}>
      <summary>Code it ran · ${lines.length} line${lines.length === 1 ? '' : 's'}${differs
        ? html` · <span class="differs" data-differs>differs from the current code</span>`
        : nothing}</summary>
      <pre class="source" aria-label="Code it ran" tabindex="0">${lines.map((l, i) => html`<span class="line ${this.markedLine === i + 1 ? 'marked' : ''}" data-line=${i + 1} tabindex=${this.markedLine === i + 1 ? '-1' : nothing}>${l}</span>`)}</pre>
    </details>`
  }

  /** "Stopped: …" when the error names a server limit; otherwise the error, once. */
  private renderError(c: JsonObject) {
    const error = str(c.Error)
    if (!error) return nothing
    const hit = limitOf(error)
    const at = errorLocation(error)
    if (at) {
      const source = typeof c.Source === 'string' ? c.Source : null
      const line = source?.split('\n')[at.line - 1]
      return html`<div class="error thrown" role="alert" data-error="run" data-line=${at.line} data-column=${at.column}>
        ${at.message} <a href="#" class="at" @click=${(e: Event) => this.showLine(at.line, e)}>(line ${at.line}, column ${at.column})</a>
        ${line !== undefined ? html`<pre class="at-line"><span class="ln">${at.line}</span>${line}
<span class="ln"></span>${' '.repeat(Math.max(0, at.column - 1))}^</pre>` : nothing}
      </div>`
    }
    if (!hit) return html`<p class="error" role="alert" data-error="run">${error}</p>`
    return html`<div class="stopped" role="alert" data-limit=${hit.limit}>
      <strong>Stopped:</strong> ${hit.reason} (${hit.limit}${hit.value ? `, ${hit.value}` : ''}).
      <small>${error}</small>
    </div>`
  }

  private renderInputs(c: JsonObject, status: string) {
    if (status === 'Draft') return html`<weft-activity-form path=${this.path} code-path=${str(c.CodePath) ?? ''}></weft-activity-form>`
    const inputs = inputsOf(c)
    const entries = Object.entries(inputs)
    if (!this.full || entries.length === 0) return nothing
    return html`<h4 class="inputs-title">Inputs</h4><dl class="inputs" aria-label="Inputs">${entries.map(([k, v]) => html`<dt>${k}</dt><dd>${typeof v === 'string' ? v : JSON.stringify(v)}</dd>`)}</dl>`
  }

  private renderActions(c: JsonObject, status: string, codePath: string | null) {
    const me = app().session.userId
    const createdBy = str(c.CreatedBy)
    // DESIGN.md "Field rules": RequestedStatus is the creator's, or anyone's with Update on it.
    const perms = this.access.value?.permissions
    const canSteer = createdBy === me || !!perms?.has('Update')
    const startRequested = c.RequestedStatus === 'Running'
    const live = status === 'Running' || (status === 'Draft' && startRequested)
    const cancelAsked = c.RequestedStatus === 'Cancelled'
    const creator = createdBy ? this.people.nameOf(createdBy) : 'its creator'
    const given = inputsOf(c)
    const missing = Object.entries(this.code.value?.inputs ?? {})
      .filter(([k, d]) => d?.Required && (given[k] === undefined || given[k] === null || given[k] === ''))
      .map(([k, d]) => d.Label ?? k)
    const refused = status === 'Draft' ? this.rightsRefusals(given) : []
    return html`<div class="actions">
      ${status === 'Draft' && !startRequested && canSteer
        ? html`<wa-button size="s" variant="brand" class="start-run" ?disabled=${missing.length > 0 || refused.length > 0} @click=${() => this.act(() => requestStatus(this.path, 'Running'))}>Start</wa-button>
            ${missing.length ? html`<span class="reason-off" data-reason="required">Fill in ${missing.join(', ')} first.</span>` : nothing}
            ${refused.map((r) => html`<p class="refused-input" role="alert" data-reason="requires">${r}</p>`)}`
        : nothing}
      ${live && canSteer && !cancelAsked
        ? html`<wa-button size="s" variant="danger" appearance="outlined" class="cancel" @click=${() => this.act(() => requestStatus(this.path, 'Cancelled'))}>Cancel</wa-button>`
        : nothing}
      ${(live || (status === 'Draft' && !startRequested)) && !canSteer && perms
        ? html`<span class="reason-off" data-reason="steer">Only ${creator} or an Editor here can ${live ? 'cancel' : 'start'} this run.</span>`
        : nothing}
      ${status !== 'Draft' && status !== 'Running' && codePath
        ? html`<wa-button size="s" appearance="outlined" class="rerun" @click=${() => this.act(() => this.rerun(codePath, c))}>Re-run</wa-button>`
        : nothing}
    </div>`
  }

  override render() {
    const view = this.node.value
    const denied = this.access.value?.denied
    // [WEB26] Someone else's run this caller may not read: said, not "Loading…" forever.
    if (!view && denied) {
      return html`<p class="denied" role="status" data-denied=${denied.code}>${denied.code === 'not_found' ? 'This run does not exist (any more).' : 'You cannot see this run'}: ${humanMessage(denied.code, denied.message)}</p>`
    }
    if (!view) return html`<p aria-busy="true">Loading activity…</p>`
    const c = view.content
    const status = typeof c.Status === 'string' ? c.Status : 'Draft'
    const all = (Array.isArray(c.Messages) ? c.Messages : []) as unknown as LogLine[]
    // The engine logs the error that ended a run and keeps it in Error: printed once, above.
    const messages = typeof c.Error === 'string' && all.at(-1)?.Level === 'Error' && all.at(-1)?.Text === c.Error ? all.slice(0, -1) : all
    const progress = c.Progress as { Fraction?: number; Text?: string } | undefined
    const me = app().session.userId
    const others = (this.presence.value ?? []).filter((u) => u.id !== me)
    const codePath = str(c.CodePath)
    const stopping = status === 'Running' && c.RequestedStatus === 'Cancelled'
    // [WEB74] The run's own name, as the run list and its page say it (it was "Run of X" here, "X run" there).
    const title = runName(view.name, this.code.value?.name) ?? view.path
    return html`
      <header>
        <span class="badge ${status}" data-status=${status}>${runStatusWord(status)}</span>
        ${stopping ? html`<span class="stopping" data-stopping>Stopping…</span>` : nothing}
        ${this.full ? nothing : html`<a href=${nodeHref(view.path)}>${title}</a>`}
      </header>
      ${this.renderFacts(c, status)}
      ${this.renderError(c)}
      ${this.renderInputs(c, status)}
      ${this.renderCode(c)}
      ${progress && typeof progress.Fraction === 'number'
        ? // A run that succeeded is done, whatever fraction its script last reported.
          html`<progress max="1" aria-label="Progress" .value=${status === 'Succeeded' ? 1 : progress.Fraction}></progress> <small>${progress.Text ?? ''}</small>`
        : nothing}
      ${messages.length ? html`<weft-run-log .lines=${messages}></weft-run-log>` : nothing}
      ${c.ReturnValue !== undefined ? this.renderOutput(view.name, c.ReturnValue) : nothing}
      ${this.error ? html`<p class="error" role="alert">${this.error}</p>` : nothing}
      ${this.renderActions(c, status, codePath)}
      ${this.full
        ? nothing // the page says who else is here
        : html`<p class="watchers">${others.length ? html`Also watching: ${others.map((u) => u.name).join(', ')}` : 'Nobody else is watching.'}</p>`}
    `
  }
}

customElements.define('weft-activity-panel', WeftActivityPanel)

/** A run's Inputs as given (an object, else none). */
function inputsOf(c: JsonObject): JsonObject {
  return isJsonObject(c.Inputs) ? c.Inputs : {}
}

/** The roles whose permissions include `permission` (DESIGN.md's role table), least first. */
function rolesWith(permission: string): string[] {
  return Object.entries(ROLE_PERMISSIONS)
    .filter(([, perms]) => perms.includes(permission as Permission))
    .map(([role]) => role)
}
