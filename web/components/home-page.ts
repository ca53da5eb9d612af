import { LitElement, css, html, nothing } from 'lit'
import { ObservableController } from '../controllers/index.js'
import { NamesController } from '../controllers/names-controller.js'
import { app } from '../app-context.js'
import type { IndexRow } from '../store/index.js'
import type { InviteView } from '../../shared/subscription.js'
import { invitesApi, inviteStatusWord } from './members-panel.js'
import { recentPaths } from './recent.js'
import { MY_CONSUMERS_HREF, nodeHref, OPERATIONS_HREF } from './route.js'
import { submitSpaceForm } from './create-space.js'
import './activity-strip.js'
import './thread-list.js'

/** Spaces whose invites the home asks about (one request each). */
const INVITE_SPACES = 20

interface PendingInvite extends InviteView {
  space: string
  spaceName: string
}

/**
 * [WEB14] The landing page after sign-in: your spaces, the nodes you opened recently (on this
 * device), your runs and threads with their status, and the invites still waiting in your spaces. Your
 * profile (the User node) is its own page, linked from here.
 */
export class WeftHomePage extends LitElement {
  static override properties = { invites: { state: true }, spaceError: { state: true }, consumers: { state: true } }
  declare invites: PendingInvite[] | null
  declare spaceError: string
  /** [WEB126] How many contextual consumers the person has (0 until known, or offline): "My consumers" is linked when any. */
  declare consumers: number
  private readonly top = new ObservableController<IndexRow[]>(this)
  private readonly recent = new NamesController(this)
  /** The spaces whose invites were asked for (null: none asked yet; '' is no space at all). */
  private asked: string | null = null

  static override styles = css`
    :host { display: block; }
    h1 { margin: 0 0 0.4em; font-size: 1.5em; overflow-wrap: anywhere; }
    h2 { font-size: 1.1em; margin: 1.4em 0 0.5em; }
    ul.cards { list-style: none; margin: 0; padding: 0; display: grid; grid-template-columns: repeat(auto-fill, minmax(12em, 1fr)); gap: 0.6em; }
    ul.cards a { display: block; padding: 0.7em 0.9em; border: 1px solid #e3e6ee; border-radius: 8px; background: #fff; color: inherit; text-decoration: none; overflow-wrap: anywhere; }
    ul.cards a:hover, ul.cards a:focus-visible { border-color: #8aa4e6; background: #f5f8ff; }
    ul.list { list-style: none; margin: 0; padding: 0; border: 1px solid #e3e6ee; border-radius: 6px; background: #fff; }
    ul.list li { padding: 0.4em 0.7em; border-bottom: 1px solid #eceef3; overflow-wrap: anywhere; }
    ul.list li:last-child { border-bottom: none; }
    .muted { color: #555; }
    .status { border-radius: 3px; padding: 0 0.4em; background: #fff4cc; font-size: 0.9em; }
    .links { display: flex; flex-wrap: wrap; gap: 0.5em; }
    form.first-space { display: flex; flex-wrap: wrap; gap: 0.5em; align-items: center; margin-top: 0.6em; }
    form.first-space label { flex-basis: 100%; font-weight: 500; }
    form.first-space input { font: inherit; padding: 0.35em 0.5em; border: 1px solid var(--wa-color-neutral-80, #bbc); border-radius: var(--wa-border-radius-m, 6px); flex: 1 1 12em; min-width: 0; }
    .error { color: #b00; }
    weft-activity-strip { margin-top: 1.4em; }
  `

  constructor() {
    super()
    this.invites = null
    this.spaceError = ''
    this.consumers = 0
    app().client.api.myConsumerCount().then(
      (n) => (this.consumers = n),
      () => undefined,
    )
    this.top.watch('top', () => app().streams.query$({ parent: '' }))
  }

  override willUpdate() {
    // Only what this device still holds: a node deleted or moved since is not listed by its id.
    this.recent.watch(recentPaths().slice(0, 8), true)
    // Asked once the spaces are known: someone with none has no invites waiting (not "Loading…").
    if (this.top.value == null) return
    const spaces = this.spaces().slice(0, INVITE_SPACES)
    const key = spaces.map((s) => s.path).join('\n')
    if (key !== this.asked) {
      this.asked = key
      void this.loadInvites(spaces)
    }
  }

  /** [WEB54] Someone with no space yet makes one here (the navigation's form is behind a button at 390 px). */
  private async createFirstSpace(ev: SubmitEvent) {
    this.spaceError = await submitSpaceForm(ev)
  }

  private spaces(): IndexRow[] {
    return (this.top.value ?? []).filter((r) => r.nodeType === 'Space')
  }

  /** Invites still Pending in the spaces you belong to (GET /api/spaces/{space}/members). */
  private async loadInvites(spaces: IndexRow[]) {
    const found: PendingInvite[] = []
    for (const s of spaces) {
      try {
        const r = await invitesApi<{ invites: InviteView[] }>('GET', `/api/spaces/${s.path.split('/').map(encodeURIComponent).join('/')}/members`)
        for (const i of r.invites) if (i.status === 'Pending') found.push({ ...i, space: s.path, spaceName: s.name })
      } catch {
        // offline, or no longer readable: nothing to list for it
      }
    }
    this.invites = found
  }

  override render() {
    const { session } = app()
    const spaces = this.spaces()
    const recent = this.recent.value
    return html`
      <h1>Welcome, ${session.name}</h1>
      <div class="links">
        <wa-button size="s" appearance="outlined" href=${nodeHref(session.userId)}>Your profile</wa-button>
        <wa-button size="s" appearance="outlined" href=${OPERATIONS_HREF}>Operations</wa-button>
        ${this.consumers > 0 ? html`<wa-button size="s" appearance="outlined" href=${MY_CONSUMERS_HREF}>My consumers (${this.consumers})</wa-button>` : nothing}
      </div>
      <section aria-labelledby="h-spaces">
        <h2 id="h-spaces">Your spaces</h2>
        ${spaces.length
          ? html`<ul class="cards" data-home="spaces">${spaces.map((s) => html`<li><a href=${nodeHref(s.path)}>${s.name}</a></li>`)}</ul>`
          : html`<p class="muted">No spaces yet. A space holds your documents and scripts, and the people you invite to it.</p>
              <form class="first-space" aria-label="Your first space" @submit=${this.createFirstSpace}>
                <label for="first-space">Name your first space</label>
                <input id="first-space" name="space" required placeholder="e.g. Garden, Team notes" @input=${() => (this.spaceError = '')} />
                <wa-button type="submit" size="s" variant="brand">Create space</wa-button>
              </form>
              ${this.spaceError ? html`<p class="error" role="alert">${this.spaceError}</p>` : ''}`}
      </section>
      <section aria-labelledby="h-recent">
        <h2 id="h-recent">Recently opened</h2>
        ${recent.length
          ? html`<ul class="list" data-home="recent">${recent.map((n) => html`<li><a href=${nodeHref(n.path)}>${n.name}</a></li>`)}</ul>`
          : html`<p class="muted">Nodes you open on this device are listed here.</p>`}
      </section>
      <section aria-label="Your runs" data-home="runs">
        <weft-activity-strip path=${session.userId} heading="Your runs" mine
          empty="None yet. The runs you start anywhere (an operation, a script in a space) are listed here with their status."></weft-activity-strip>
      </section>
      <section aria-labelledby="h-threads">
        <h2 id="h-threads">Your threads</h2>
        <weft-thread-list></weft-thread-list>
      </section>
      <section aria-labelledby="h-invites">
        <h2 id="h-invites">Pending invites</h2>
        ${this.invites === null
          ? html`<p class="muted">Loading…</p>`
          : this.invites.length
            ? html`<ul class="list" data-home="invites">${this.invites.map(
                (i) => html`<li>${i.email ?? 'someone'} as ${i.role ?? 'Editor'} in <a href=${nodeHref(i.space)}>${i.spaceName}</a>
                  <span class="status">${inviteStatusWord(i.status)}</span></li>`,
              )}</ul>`
            : html`<p class="muted">No invites waiting.</p>`}
      </section>
    `
  }
}

customElements.define('weft-home-page', WeftHomePage)
