import { LitElement, css, html, nothing } from 'lit'
import { app, startAppContext, stopAppContext } from '../app-context.js'
import { clearSession, loadSession, saveSession, SESSION_KEY } from '../session.js'
import type { FinalClose, Session, SyncStatus } from '../sync/index.js'
import type { OpError } from '../sync/sync-client.js'
import type { NodeView } from '../streams/index.js'
import { CloseCode } from '../../shared/protocol.js'
import { humanMessage } from './error-text.js'
import { refusedOpLine } from './refused-ops.js'
import { showError } from './toast.js'
import { tap } from 'rxjs'
import { personName } from './names.js'
import { ObservableController } from '../controllers/index.js'
import { contextualFromHash, HOME_HREF, MY_CONSUMERS_HREF, OPERATIONS_HREF, OPERATOR_HREF, pathFromHash, REFUSED_HREF, trashFromHash } from './route.js'
import './nav-tree.js'
import './node-page.js'
import './sync-status.js'
import './refused-list.js'
import './quick-find.js'
import type { WeftQuickFind } from './quick-find.js'
// The other pages load when first shown (lazy.ts): a cold start parses only the node page's code.
import { need } from './lazy.js'

/** The root: sign-in, or the signed-in layout (status bar, navigation tree, node page). */
export class WeftApp extends LitElement {
  static override properties = { session: { state: true }, ready: { state: true }, route: { state: true }, navOpen: { state: true }, applyUpdate: { state: true } }
  declare navOpen: boolean
  /** Set when a new build is waiting (web/pwa-update.ts): calling it reloads into the new version. */
  declare applyUpdate: (() => void) | null
  private readonly onUpdate = (ev: Event) => (this.applyUpdate = (ev as CustomEvent<() => void>).detail)
  declare session: Session | null
  declare ready: boolean
  declare route: string
  private readonly status = new ObservableController<SyncStatus>(this)
  /** The signed-in person's own node: the bar says their name (its FullName) as it is now, renamed since sign-in or not. */
  private readonly me = new ObservableController<NodeView | null>(this)
  /** [WEB70] The sticky bar's height, for what sticks under it (the navigation). */
  private readonly barSize = new ResizeObserver(([entry]) => {
    if (entry) this.style.setProperty('--bar-h', `${(entry.target as HTMLElement).offsetHeight}px`)
  })
  private observedBar: Element | null = null
  /** Queued creations/deletions the server refused when they were replayed. */
  private readonly opErrors = new ObservableController<OpError[]>(this)
  private readonly onHash = () => {
    this.route = location.hash
    this.navOpen = false
    this.applyUpdate = null
  }

  static override styles = css`
    :host { display: flex; flex-direction: column; min-height: 100vh; font-family: system-ui, -apple-system, 'Segoe UI', sans-serif; color: #1d2433; background: #fafbfd; }
    .bar { display: flex; flex-wrap: wrap; gap: 0.5em 1em; align-items: center; padding: 0.5em 1em; border-bottom: 1px solid #e3e6ee; background: #fff; position: sticky; top: 0; z-index: 2; }
    .bar .title { font-weight: 700; letter-spacing: 0.02em; }
    .bar .spacer { flex: 1; }
    .bar .user { color: #555; }
    button { font: inherit; padding: 0.35em 0.7em; border: 1px solid #bbc; border-radius: 6px; background: #f4f6fb; cursor: pointer; }
    .menu { display: none; }
    .banner { background: #fff1f0; color: #7a1010; padding: 0.6em 1em; border-bottom: 1px solid #f3c6c3; display: flex; flex-wrap: wrap; gap: 0.5em; align-items: center; }
    .banner div { flex: 1 1 20em; }
    .update { background: #eef3ff; color: #1d2f66; padding: 0.5em 1em; border-bottom: 1px solid #c9d6f5; display: flex; flex-wrap: wrap; gap: 0.5em; align-items: center; }
    .layout { display: grid; grid-template-columns: minmax(12em, 18em) minmax(0, 1fr); flex: 1; }
    /* [WEB70] The navigation scrolls on its own, held under the sticky bar (--bar-h, measured):
       revealing the open node in it ([MOVE9]) scrolls it, not the window, which a thread keeps
       at its latest messages. */
    weft-nav-tree { border-right: 1px solid #e3e6ee; padding: 0.5em; overflow: auto; background: #fff; position: sticky; top: var(--bar-h, 0px); height: calc(100vh - var(--bar-h, 0px)); box-sizing: border-box; }
    /* [WEB70] The window scrolls, not main: as a scroll container (overflow: auto) main held every
       position: sticky inside it (a thread's composer) to itself, and it never scrolled. clip
       keeps what is too wide from widening the page without making main a scroll container. */
    main { padding: 1em 1.5em; overflow-x: clip; min-width: 0; }
    .page-title { margin: 0 0 0.5em; font-size: 1.5em; }
    @media (max-width: 700px) {
      .menu { display: inline-block; }
      .layout { grid-template-columns: minmax(0, 1fr); }
      weft-nav-tree { display: none; border-right: none; border-bottom: 1px solid #e3e6ee; position: static; height: auto; }
      .layout.nav-open weft-nav-tree { display: block; }
      main { padding: 0.8em; }
      .bar .user, .bar .title, .bar .find-label { display: none; }
      /* [WEB44] The status has a row of its own under the buttons (in its short words): beside
         them it wrapped word by word into a sticky bar a fifth of a phone's screen high. */
      .bar { padding: 0.4em 0.8em; gap: 0.3em 0.5em; }
      .bar weft-sync-status { order: 1; flex: 1 1 100%; }
    }
  `

  constructor() {
    super()
    this.session = loadSession()
    this.ready = false
    this.route = location.hash
    this.navOpen = false
  }

  override connectedCallback() {
    super.connectedCallback()
    window.addEventListener('hashchange', this.onHash)
    window.addEventListener('weft:update-available', this.onUpdate)
    window.addEventListener('storage', this.onStorage)
    if (this.session) void this.begin(this.session)
  }

  override willUpdate() {
    // [WEB62] One name: the session keeps the person's name as their node says it now (its
    // FullName, which signing up and renaming write; not the view's name, which is the account id
    // until the node's row is here), so the bar and the next start's pages say it.
    const name = this.session && this.me.value?.path === this.session.userId ? personName(this.me.value) : null
    if (this.session && name && name !== this.session.name) {
      this.session = { ...this.session, name }
      saveSession(this.session)
    }
  }

  override updated() {
    const bar = this.renderRoot.querySelector('.bar')
    if (bar === this.observedBar) return
    if (this.observedBar) this.barSize.unobserve(this.observedBar)
    if (bar) this.barSize.observe(bar)
    this.observedBar = bar
  }

  override disconnectedCallback() {
    super.disconnectedCallback()
    this.barSize.disconnect()
    this.observedBar = null
    window.removeEventListener('hashchange', this.onHash)
    window.removeEventListener('weft:update-available', this.onUpdate)
    window.removeEventListener('storage', this.onStorage)
  }

  private async begin(session: Session) {
    this.ready = false
    await startAppContext(session)
    this.status.watch(session.userId, () => app().streams.status$)
    this.me.watch(session.userId, () => app().streams.node$(session.userId, { listed: true }))
    this.opErrors.watch(session.userId, () => app().client.opErrors$.pipe(tap((errs) => tellRefusedOps(errs))))
    this.ready = true
  }

  private onSignedIn(ev: CustomEvent<Session>) {
    saveSession(ev.detail)
    this.session = ev.detail
    void this.begin(ev.detail)
  }

  /**
   * [WEB94] The pages go first, then the services they read: stopping the context while the
   * node page and the navigation were still mounted made their next update (a stream closing,
   * the logout's own 4401) call app() on nothing ("Invariant: the app context is started…").
   * The stored session is cleared before the token is revoked, so another tab that hears its
   * socket close already finds it gone and says it was signed out there.
   */
  private async signOut() {
    let api: ReturnType<typeof app>['client']['api'] | null = null
    try {
      api = app().client.api
    } catch {
      // already stopped (a second click): only the page is left to change
    }
    clearSession()
    this.session = null
    this.ready = false
    await this.updateComplete
    stopAppContext()
    try {
      await api?.logout()
    } catch {
      // signing out locally is what matters
    }
  }

  /** [WEB94] Another tab signed out or in: the banner's words depend on the stored session. */
  private readonly onStorage = (ev: StorageEvent) => {
    if (ev.key === null || ev.key === SESSION_KEY) this.requestUpdate()
  }

  /** [WEB14] No route (or `#/`) is the home; `#/n/{path}` a node; the refused list; operations. */
  private renderPage(path: string | null, trash: string | null) {
    if (path) return html`<weft-node-page .path=${path}></weft-node-page>`
    if (trash) {
      need('weft-trash-page')
      // [WEB76] The page's own heading names the space ("Trash of Studio").
      return html`<weft-trash-page .space=${trash}></weft-trash-page>`
    }
    const contextual = contextualFromHash(this.route)
    if (contextual) {
      need('weft-contextual-page')
      return html`<h1 class="page-title">Subscription status</h1><weft-contextual-page .subscription=${contextual}></weft-contextual-page>`
    }
    if (this.route === MY_CONSUMERS_HREF) {
      need('weft-my-consumers-page')
      return html`<h1 class="page-title">Your consumers</h1><weft-my-consumers-page></weft-my-consumers-page>`
    }
    if (this.route === REFUSED_HREF) return html`<h1 class="page-title">Refused changes</h1><weft-refused-list></weft-refused-list>`
    if (this.route === OPERATIONS_HREF) {
      need('weft-operations-page')
      return html`<weft-operations-page></weft-operations-page>`
    }
    if (this.route === OPERATOR_HREF) {
      need('weft-operator-page')
      return html`<weft-operator-page></weft-operator-page>`
    }
    if (this.route !== '' && this.route !== HOME_HREF && this.route !== '#') return html`<h1 class="page-title">Not found</h1><p>Nothing lives at this address. <a href=${HOME_HREF}>Go home</a>.</p>`
    need('weft-home-page')
    return html`<weft-home-page></weft-home-page>`
  }

  override render() {
    if (!this.session) {
      need('weft-auth-page')
      return html`<weft-auth-page @signed-in=${this.onSignedIn}></weft-auth-page>`
    }
    if (!this.ready) return html`<p aria-busy="true">Opening your nodes…</p>`
    const path = pathFromHash(this.route)
    const trash = trashFromHash(this.route)
    const final = this.status.value?.final
    return html`
      <div class="bar">
        <wa-button size="s" appearance="outlined" class="menu" aria-expanded=${this.navOpen ? 'true' : 'false'} aria-controls="nav" @click=${() => (this.navOpen = !this.navOpen)}>☰ Nodes</wa-button>
        <span class="title">Weft</span>
        <weft-sync-status></weft-sync-status>
        <span class="spacer"></span>
        <wa-button size="s" appearance="outlined" class="find" aria-label="Search (Ctrl+K)" aria-keyshortcuts="Control+K Meta+K" title="Find (Ctrl+K)" @click=${() => void this.renderRoot.querySelector<WeftQuickFind>('weft-quick-find')?.show()}><svg aria-hidden="true" width="14" height="14" viewBox="0 0 16 16" style="vertical-align: -2px"><circle cx="6.5" cy="6.5" r="4.75" fill="none" stroke="currentColor" stroke-width="1.8"></circle><line x1="10" y1="10" x2="14.5" y2="14.5" stroke="currentColor" stroke-width="1.8" stroke-linecap="round"></line></svg><span class="find-label"> Search</span></wa-button>
        <weft-quick-find></weft-quick-find>
        <span class="user">${this.session.name}</span>
        <wa-button size="s" appearance="outlined" @click=${this.signOut}>Sign out</wa-button>
      </div>
      ${this.applyUpdate
        ? html`<div class="update" role="status" data-update-available>
            A new version of Weft is available. Your changes are saved on this device.
            <wa-button size="s" variant="brand" @click=${() => this.applyUpdate?.()}>Reload to update</wa-button>
            <wa-button size="s" appearance="plain" @click=${() => (this.applyUpdate = null)}>Later</wa-button>
          </div>`
        : nothing}
      ${final
        ? html`<div class="banner" role="alert">
            ${finalWords(final, this.session)} <wa-button size="s" appearance="outlined" @click=${this.signOut}>Sign in again</wa-button>
          </div>`
        : nothing}
      ${(this.opErrors.value ?? []).length
        ? html`<div class="banner" role="alert" aria-label="Changes the server refused">
            ${(this.opErrors.value ?? []).map((e) => html`<div>Not applied: ${e.code === 'already_exists' ? e.message : `${opLabel(e)}: ${humanMessage(e.code, e.message)}`}</div>`)}
            <wa-button size="s" appearance="outlined" @click=${() => app().client.opErrors$.next([])}>Dismiss</wa-button>
          </div>`
        : nothing}
      <div class="layout ${this.navOpen ? 'nav-open' : ''}">
        <weft-nav-tree id="nav" .current=${path ?? trash ?? this.route}></weft-nav-tree>
        <main>${this.renderPage(path, trash)}</main>
      </div>
    `
  }
}
/**
 * [WEB94] Why this tab's session ended, in words (it said "You were signed out (4401:
 * unauthorized: signed out: this token was revoked)"). A token is revoked by signing out; when
 * this browser no longer holds it, it was signed out here, in another tab.
 */
/** [WEB104] A refused queued operation, by the name its node was given here when known ("creating “Draft”"), else its path. */
/** The refusals already told in a toast (opErrors$ repeats them with each new one). */
const told = new WeakSet<OpError>()

/**
 * [WEB132] [SYNC24] A rename or deletion the server refused is said in a toast (an error, kept
 * until dismissed: [WEB103]) with what it asked and why; it stays in the refused list.
 */
function tellRefusedOps(errs: readonly OpError[]): void {
  for (const e of errs) {
    if (told.has(e)) continue
    told.add(e)
    if (e.kind !== 'rename' && e.kind !== 'delete') continue
    const { store } = app().client
    void Promise.all([store.refusedOps(), store.getIndexRow(e.path)]).then(([ops, row]) => {
      const op = ops.findLast((o) => o.path === e.path && o.kind === e.kind)
      if (op?.refusal && op.id !== undefined) showError(refusedOpLine({ ...op, id: op.id, refusal: op.refusal }, row?.name ?? e.path.split('/').pop() ?? e.path))
    })
  }
}

function opLabel(e: OpError): string {
  // [WEB132] A rename is named by the name typed; [SYNC24] a deletion by what it deleted.
  if (e.kind === 'rename' && e.name) return `renaming ${e.path} to “${e.name}”`
  if (e.kind === 'delete') return `deleting ${e.path}`
  return e.kind === 'create' && e.name ? `creating “${e.name}”` : e.path
}

function finalWords(final: FinalClose, session: Session): string {
  const kept = 'What you changed here stays on this device; sign in again to send it.'
  if (final.code !== CloseCode.Unauthorized) return `The server no longer accepts this session. ${kept}`
  if (loadSession()?.token !== session.token && /revoked|signed out/i.test(final.reason)) return `You signed out in another tab. ${kept}`
  if (/expired/i.test(final.reason)) return `Your session expired. ${kept}`
  return `You are signed out: your session ended. ${kept}`
}

customElements.define('weft-app', WeftApp)
