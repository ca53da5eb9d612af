import { LitElement, css, html, nothing } from 'lit'
import { app, startAppContext, stopAppContext } from '../app-context.js'
import { clearSession, loadSession, saveSession } from '../session.js'
import type { Session, SyncStatus } from '../sync/index.js'
import { ObservableController } from '../controllers/index.js'
import { pathFromHash } from './route.js'
import './auth-page.js'
import './nav-tree.js'
import './node-page.js'
import './sync-status.js'

/** The root: sign-in, or the signed-in layout (status bar, navigation tree, node page). */
export class WeftApp extends LitElement {
  static override properties = { session: { state: true }, ready: { state: true }, route: { state: true } }
  declare session: Session | null
  declare ready: boolean
  declare route: string
  private readonly status = new ObservableController<SyncStatus>(this)
  /** Queued creations/deletions the server refused when they were replayed. */
  private readonly opErrors = new ObservableController<{ path: string; message: string }[]>(this)
  private readonly onHash = () => (this.route = location.hash)

  static override styles = css`
    :host { display: grid; grid-template-rows: auto auto 1fr; min-height: 100vh; font-family: system-ui, sans-serif; }
    .bar { display: flex; gap: 1em; align-items: center; padding: 0.4em 1em; border-bottom: 1px solid #ddd; }
    .bar .title { font-weight: 600; }
    .bar .spacer { flex: 1; }
    .banner { background: #fee; color: #800; padding: 0.5em 1em; }
    .layout { display: grid; grid-template-columns: minmax(12em, 18em) 1fr; }
    weft-nav-tree { border-right: 1px solid #eee; padding: 0.5em; overflow: auto; }
    main { padding: 1em 1.5em; overflow: auto; }
  `

  constructor() {
    super()
    this.session = loadSession()
    this.ready = false
    this.route = location.hash
  }

  override connectedCallback() {
    super.connectedCallback()
    window.addEventListener('hashchange', this.onHash)
    if (this.session) void this.begin(this.session)
  }

  override disconnectedCallback() {
    super.disconnectedCallback()
    window.removeEventListener('hashchange', this.onHash)
  }

  private async begin(session: Session) {
    this.ready = false
    await startAppContext(session)
    this.status.watch(session.userId, () => app().streams.status$)
    this.opErrors.watch(session.userId, () => app().client.opErrors$)
    this.ready = true
  }

  private onSignedIn(ev: CustomEvent<Session>) {
    saveSession(ev.detail)
    this.session = ev.detail
    void this.begin(ev.detail)
  }

  private async signOut() {
    try {
      await app().client.api.logout()
    } catch {
      // signing out locally is what matters
    }
    stopAppContext()
    clearSession()
    this.session = null
    this.ready = false
  }

  override render() {
    if (!this.session) return html`<weft-auth-page @signed-in=${this.onSignedIn}></weft-auth-page>`
    if (!this.ready) return html`<p aria-busy="true">Opening your nodes…</p>`
    const path = pathFromHash(this.route) ?? this.session.userId
    const final = this.status.value?.final
    return html`
      <div class="bar">
        <span class="title">Weft</span>
        <weft-sync-status></weft-sync-status>
        <span class="spacer"></span>
        <span class="user">${this.session.name}</span>
        <button type="button" @click=${this.signOut}>Sign out</button>
      </div>
      ${final
        ? html`<div class="banner" role="alert">
            ${final.code === 4401 ? 'You were signed out' : 'The server refused this session'} (${final.code}${final.reason ? `: ${final.reason}` : ''}).
            Changes stay on this device. <button type="button" @click=${this.signOut}>Sign in again</button>
          </div>`
        : nothing}
      ${(this.opErrors.value ?? []).length
        ? html`<div class="banner" role="alert" aria-label="Changes the server refused">
            ${(this.opErrors.value ?? []).map((e) => html`<div>Not applied: ${e.message}</div>`)}
          </div>`
        : nothing}
      <div class="layout">
        <weft-nav-tree .current=${path}></weft-nav-tree>
        <main><weft-node-page .path=${path}></weft-node-page></main>
      </div>
    `
  }
}
customElements.define('weft-app', WeftApp)
