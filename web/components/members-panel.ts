import { LitElement, css, html, nothing, type ReactiveController, type ReactiveControllerHost } from 'lit'
import { app } from '../app-context.js'
import { HttpError, NetworkError } from '../api/index.js'
import { humanError } from './error-text.js'
import { ObservableController } from '../controllers/index.js'
import { oneAtATime, type ReplicaState } from '../sync/index.js'
import { distinctUntilChanged, filter, map, skip, type Subscription } from 'rxjs'
import type { InviteView as InviteRow, MemberView as MemberRow } from '../../shared/subscription.js'

/**
 * `<weft-members-panel path>` on a Space page: members and roles, invite by email (role, pin),
 * and the invites with their status (Pending / Fired / Failed / Cancelled) and LastError.
 * Revoking sets a Pending invite to Cancelled. Data lives in a ReactiveController; the element
 * only renders it.
 */
const ROLES = ['Viewer', 'Commenter', 'Editor', 'Admin'] as const
/** [WEB54] What each role lets someone do, beside its name in the invite form. */
const ROLE_WORDS: Record<(typeof ROLES)[number], string> = {
  Viewer: 'reads, runs scripts',
  Commenter: 'reads, comments',
  Editor: 'edits, creates, exports',
  Admin: 'everything, invites, deletes',
}
/** [WEB54] The least an invite gives unless the Admin chooses more (it was Editor, chosen by default). */
const DEFAULT_INVITE_ROLE = 'Viewer'
/**
 * [WEB105] The slowest the list is read again while shown and nothing was heard: a safety net for
 * what no change the caller may read tells of (an invite that failed, say). Never while the tab
 * is hidden.
 */
const SAFETY_REFRESH_MS = 60_000
/**
 * [WEB137] An accepted invite lands in two writes: the grant (on the space's assignments, which
 * the change feed tells of) and then its invite's Fired mark (on a node only the platform's
 * admins read, which no feed this caller follows tells of). A read between the two shows the new
 * member beside an invite still waiting; it is read again after these waits until the mark is
 * there (or they run out, leaving the safety net).
 */
const LANDING_WAITS_MS = [250, 500, 1000, 2000, 4000, 8000]

/**
 * [WEB137] Whether a grant landed ahead of its invite's Fired mark: an invite still waiting whose
 * address is already a member's.
 */
export function inviteLanding(members: readonly Pick<MemberRow, 'email'>[], invites: readonly Pick<InviteRow, 'email' | 'status'>[]): boolean {
  const emails = new Set(members.flatMap((m) => (m.email ? [m.email.toLowerCase()] : [])))
  return invites.some((i) => i.status === 'Pending' && i.email !== null && emails.has(i.email.toLowerCase()))
}

/** The invites API (sync-server/engines/subscriptions/routes.ts), with the session's token. */
export async function invitesApi<T>(method: string, url: string, body?: unknown): Promise<T> {
  const headers: Record<string, string> = {}
  const token = currentToken()
  if (token) headers.Authorization = `Bearer ${token}`
  if (body !== undefined) headers['Content-Type'] = 'application/json'
  let res: Response
  try {
    res = await fetch(url, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) })
  } catch (e) {
    throw new NetworkError((e as Error).message)
  }
  const text = await res.text()
  let json: unknown = null
  try {
    json = text ? (JSON.parse(text) as unknown) : null
  } catch {
    // not JSON (a proxy's page, an older server's "No API at …")
  }
  if (!res.ok) {
    const err = (json as { error?: { code?: string; message?: string } } | null)?.error
    throw new HttpError(res.status, err?.code ?? `http_${res.status}`, err?.message ?? `${method} ${url} failed with ${res.status}`)
  }
  return json as T
}

function currentToken(): string | null {
  try {
    return app().session.token
  } catch {
    return localStorage.getItem('weft.token')
  }
}

function encodePath(path: string): string {
  return path.split('/').map(encodeURIComponent).join('/')
}

/** [WEB15] An invite's status in words (the subscription's `Fired` means the person joined). */
export function inviteStatusWord(status: string): string {
  switch (status) {
    case 'Pending':
      return 'Waiting for sign-up'
    case 'Fired':
      return 'Accepted'
    case 'Failed':
      return 'Failed'
    case 'Cancelled':
      return 'Revoked'
    default:
      return status
  }
}

/** `POST /api/spaces/{space}/invites`' answer ([ACC40]: `change` and `role` for someone with an account). */
interface InviteAnswer {
  status: string
  email: string
  change?: 'granted' | 'same_role' | 'higher_role' | 'self'
  role?: string | null
}

/**
 * [ACC40] What an invite did, truthfully: it said "access granted" when nothing changed (the
 * person already held the role, or a higher one, which an invite never lowers) and when the
 * address was the caller's own.
 */
export function inviteNotice(r: InviteAnswer, asked: string): string {
  if (r.status !== 'Granted') return `Invited ${r.email}: access lands when they sign up.`
  switch (r.change) {
    case 'self':
      return `${r.email} is you: nothing changed.`
    case 'same_role':
      return `${r.email} is already ${article(asked)} here: nothing changed.`
    case 'higher_role':
      return `${r.email} already has a higher role here (${r.role ?? 'unknown'}), which an invite never lowers: unchanged. To lower it, choose their role in the Members list.`
    case 'granted':
      return `${r.email} already has an account: they are now ${article(r.role ?? asked)} here.`
    case undefined:
      return `${r.email} already has an account: access granted.`
    default:
      return r.change satisfies never
  }
}

function article(role: string): string {
  return /^[AEIOU]/.test(role) ? `an ${role}` : `a ${role}`
}

/** Whether a change at `path` may change the members or invites of `space` (its assignments, the space itself). */
export function touchesMembers(space: string, path: string): boolean {
  return path === space || path.startsWith(`${space}/_Access/`)
}

/**
 * Loads members and invites of one space, and again when they may have changed.
 *
 * [WEB105] Not a poll every 4 s: the list is read again when the server tells of a change to the
 * space's assignments (the change feed this client follows, woken by the socket's Changed hint:
 * another Admin's role change or removal, an invite accepted, which grants), when the caller's
 * own role here changes (the room's permissions), after the caller's own actions, when the tab
 * comes back into view or the window gets the focus, and, as a safety net, at most once a
 * minute while the tab is visible: never while it is hidden.
 */
export class MembersController implements ReactiveController {
  members: MemberRow[] = []
  invites: InviteRow[] = []
  error: string | null = null
  loaded = false
  private path = ''
  private timer: ReturnType<typeof setInterval> | null = null
  private connected = false
  private subs: Subscription[] = []
  /** [WEB137] The read again while an accepted invite's Fired mark is on its way, and how many were made. */
  private landingTimer: ReturnType<typeof setTimeout> | null = null
  private landingTries = 0
  constructor(private readonly host: ReactiveControllerHost) {
    host.addController(this)
  }

  setPath(path: string): void {
    if (path === this.path) return
    this.path = path
    this.loaded = false
    this.stopLanding()
    if (this.connected) {
      this.follow()
      void this.refresh()
    }
  }

  hostConnected(): void {
    this.connected = true
    this.follow()
    void this.refresh()
    document.addEventListener('visibilitychange', this.onVisible)
    window.addEventListener('focus', this.onVisible)
    this.timer = setInterval(() => {
      if (document.visibilityState === 'visible') this.refreshSoon()
    }, SAFETY_REFRESH_MS)
  }

  hostDisconnected(): void {
    this.connected = false
    for (const s of this.subs) s.unsubscribe()
    this.subs = []
    document.removeEventListener('visibilitychange', this.onVisible)
    window.removeEventListener('focus', this.onVisible)
    if (this.timer) clearInterval(this.timer)
    this.timer = null
    this.stopLanding()
  }

  private stopLanding(): void {
    if (this.landingTimer) clearTimeout(this.landingTimer)
    this.landingTimer = null
    this.landingTries = 0
  }

  /** [WEB137] Reads again, a little later each time, while a grant has landed ahead of its invite's mark. */
  private followLanding(): void {
    if (!inviteLanding(this.members, this.invites)) {
      this.stopLanding()
      return
    }
    if (this.landingTimer || !this.connected) return
    const wait = LANDING_WAITS_MS[this.landingTries++]
    if (wait === undefined) return
    this.landingTimer = setTimeout(() => {
      this.landingTimer = null
      if (this.connected) this.refreshSoon()
    }, wait)
  }

  private readonly onVisible = () => {
    if (document.visibilityState === 'visible') this.refreshSoon()
  }

  /** [WEB105] What tells of a change to this space's members: its assignments in the change feed, the caller's own role. */
  private follow(): void {
    for (const s of this.subs) s.unsubscribe()
    this.subs = []
    const space = this.path
    if (!space) return
    const { client, streams } = app()
    this.subs.push(client.feed$.pipe(filter((c) => touchesMembers(space, c.path))).subscribe(() => this.refreshSoon()))
    this.subs.push(
      streams
        .access$(space, { listed: true })
        .pipe(
          map((a) => (a.permissions ? [...a.permissions].sort().join(',') : '')),
          distinctUntilChanged(),
          skip(1),
        )
        .subscribe(() => this.refreshSoon()),
    )
  }

  /** Reads the list again: now, or right after the read under way (which may have missed the change). */
  readonly refreshSoon = oneAtATime(() => this.refresh())

  async refresh(): Promise<void> {
    if (!this.path) return
    const path = this.path
    try {
      const r = await invitesApi<{ members: MemberRow[]; invites: InviteRow[] }>('GET', `/api/spaces/${encodePath(path)}/members`)
      if (path !== this.path) return
      this.members = r.members
      this.invites = r.invites
      this.error = null
      this.followLanding()
    } catch (e) {
      this.error = humanError(e)
    }
    this.loaded = true
    this.host.requestUpdate()
  }
}

/** `{scope}/_Access/{label}`: the assignment of a subject on a scope ([ACC0]: a group path's `/` is written `.`). */
function assignmentPathOf(scope: string, subject: string): string {
  return `${scope}/_Access/${subject.replaceAll('/', '.')}_Access`
}

export class WeftMembersPanel extends LitElement {
  static override properties = { path: {}, notice: { state: true }, busy: { state: true }, removing: { state: true } }
  declare path: string
  declare notice: string
  declare busy: boolean
  /** [WEB87] The member whose removal waits for its confirmation. */
  declare removing: string | null
  private readonly data = new MembersController(this)
  /** [WEB15] Inviting and revoking are the space Admins' (ManageAccess): others are not offered them. */
  private readonly access = new ObservableController<ReplicaState>(this)

  static override styles = css`
    :host { display: block; }
    h2 { font-size: 1.1em; margin: 0 0 0.5em; }
    h3 { font-size: 1em; }
    table { border-collapse: collapse; width: 100%; margin: 0.4em 0 1em; }
    th, td { text-align: left; padding: 0.25em 0.5em; border-bottom: 1px solid #e4e4e4; vertical-align: top; }
    form { display: flex; gap: 0.5em; flex-wrap: wrap; align-items: end; margin: 0.5em 0; }
    label.stacked { display: flex; flex-direction: column; gap: 0.15em; font-size: 0.9em; }
    input[type='email'], select { font: inherit; padding: 0.3em 0.45em; }
    input[type='email'] { min-width: min(16em, 70vw); }
    .status { font-size: 0.85em; padding: 0.05em 0.45em; border-radius: 3px; background: #eee; }
    .status.Pending { background: #fff4cc; }
    .status.Fired { background: #d9f5dd; }
    .status.Failed { background: #fde0e0; }
    .status.Cancelled { background: #eee; color: #666; }
    .error { color: #a00; }
    .notice { color: #235; }
    .muted { color: #666; font-size: 0.9em; }
    .confirm { display: inline-flex; flex-wrap: wrap; gap: 0.4em; align-items: center; }
    td select { max-width: 100%; }
    td { overflow-wrap: anywhere; }
    /* [WEB87] At a phone's width each member is a block (name, role, controls): three columns with an address ran off the screen. */
    @media (max-width: 600px) {
      table.members thead { position: absolute; width: 1px; height: 1px; overflow: hidden; clip-path: inset(50%); }
      table.members, table.members tbody, table.members tr, table.members td { display: block; }
      table.members tr { padding: 0.4em 0; border-bottom: 1px solid #e4e4e4; }
      table.members td { border: 0; padding: 0.15em 0; }
    }
    .visually-hidden { position: absolute; width: 1px; height: 1px; overflow: hidden; clip-path: inset(50%); white-space: nowrap; }
  `

  constructor() {
    super()
    this.path = ''
    this.notice = ''
    this.busy = false
    this.removing = null
  }

  override willUpdate() {
    this.data.setPath(this.path)
    if (this.path) this.access.watch(this.path, () => app().streams.access$(this.path))
  }

  private async invite(e: Event) {
    e.preventDefault()
    const form = e.target as HTMLFormElement
    const fd = new FormData(form)
    const email = String(fd.get('email') ?? '').trim()
    if (!email) return
    this.busy = true
    try {
      const role = String(fd.get('role') ?? DEFAULT_INVITE_ROLE)
      const r = await invitesApi<InviteAnswer>('POST', `/api/spaces/${encodePath(this.path)}/invites`, { email, role, pin: fd.get('pin') === 'on' })
      this.notice = inviteNotice(r, role)
      form.reset()
    } catch (err) {
      this.notice = ''
      this.data.error = humanError(err)
    } finally {
      this.busy = false
      await this.data.refresh()
    }
  }

  /**
   * [WEB87] A member's role, changed by an Admin: a patch of their assignment over the nodes API,
   * which checks ManageAccess and keeps the space's last Admin ([ACC40]'s invite never lowers a role).
   */
  private async setRole(m: MemberRow, role: string) {
    const who = m.name ?? m.email ?? m.subject
    this.busy = true
    try {
      await app().client.api.patchNode(assignmentPathOf(this.path, m.subject), { Role: role })
      this.notice = `${who} is now ${role === 'Admin' || role === 'Editor' ? 'an' : 'a'} ${role} here.`
      this.data.error = null
    } catch (err) {
      this.notice = ''
      this.data.error = `${who} keeps the role ${m.role}: ${humanError(err)}`
    } finally {
      this.busy = false
      await this.data.refresh()
    }
  }

  /** [WEB87] Takes a member's access to the space away (deletes their assignment; the server keeps the last Admin). */
  private async removeMember(m: MemberRow) {
    const who = m.name ?? m.email ?? m.subject
    this.removing = null
    this.busy = true
    try {
      await app().client.api.deleteNode(assignmentPathOf(this.path, m.subject))
      this.notice = `${who} no longer has access here.`
      this.data.error = null
    } catch (err) {
      this.notice = ''
      this.data.error = `${who} was not removed: ${humanError(err)}`
    } finally {
      this.busy = false
      await this.data.refresh()
    }
  }

  /** [WEB87] An Admin's controls on one member's row: the role, and Remove (confirmed in words). */
  private renderMemberControls(m: MemberRow, onlyAdmin: boolean) {
    const who = m.name ?? m.email ?? m.subject
    if (onlyAdmin) return html`<span class="muted" data-only-admin>The only Admin: make someone else Admin first.</span>`
    if (this.removing === m.subject) {
      return html`<span class="confirm">Remove ${who}'s access?
        <wa-button size="s" variant="danger" ?disabled=${this.busy} @click=${() => this.removeMember(m)}>Remove</wa-button>
        <wa-button size="s" appearance="outlined" @click=${() => (this.removing = null)}>Keep</wa-button></span>`
    }
    return html`<wa-button size="s" appearance="outlined" ?disabled=${this.busy} @click=${() => (this.removing = m.subject)}>Remove<span class="visually-hidden"> ${who}</span></wa-button>`
  }

  private renderRole(m: MemberRow, canManage: boolean, onlyAdmin: boolean) {
    if (m.denied) return 'Denied'
    if (!canManage || onlyAdmin) return m.role
    const who = m.name ?? m.email ?? m.subject
    return html`<select aria-label=${`Role of ${who}`} ?disabled=${this.busy} @change=${(e: Event) => void this.setRole(m, (e.target as HTMLSelectElement).value)}>
      ${ROLES.map((r) => html`<option value=${r} ?selected=${r === m.role}>${r}</option>`)}
    </select>`
  }

  private async revoke(id: string) {
    try {
      await invitesApi('DELETE', `/api/spaces/${encodePath(this.path)}/invites/${encodeURIComponent(id)}`)
      this.notice = 'Invite revoked.'
    } catch (err) {
      this.data.error = humanError(err)
    }
    await this.data.refresh()
  }

  override render() {
    const d = this.data
    const canManage = this.access.value?.permissions?.has('ManageAccess') === true
    // [WEB138] Until the room tells the caller's rights, an Admin is not told only Admins invite.
    const rightsKnown = (this.access.value?.permissions ?? null) !== null
    // [WEB87] The server keeps one Admin (last_admin): the only one is offered no way to go.
    const admins = d.members.filter((m) => m.role === 'Admin' && !m.denied).length
    const isOnlyAdmin = (m: MemberRow) => m.role === 'Admin' && !m.denied && admins === 1
    return html`
      <h2>Members</h2>
      ${d.error ? html`<p class="error" role="alert">${d.error}</p>` : nothing}
      ${!d.loaded ? html`<p class="muted">Loading…</p>` : html`
        <table class="members" aria-label="Members">
          <thead><tr><th>Member</th><th>Role</th>${canManage ? html`<th><span class="visually-hidden">Access</span></th>` : nothing}</tr></thead>
          <tbody>
            ${d.members.map((m) => html`<tr data-subject=${m.subject}>
              <td>${m.name ?? m.subject}${m.email ? html` <span class="muted">${m.email}</span>` : nothing}</td>
              <td>${this.renderRole(m, canManage, isOnlyAdmin(m))}</td>
              ${canManage ? html`<td>${this.renderMemberControls(m, isOnlyAdmin(m))}</td>` : nothing}
            </tr>`)}
          </tbody>
        </table>`}
      ${canManage
        ? html`<h3 id="h-invite">Invite someone</h3>
          <form @submit=${this.invite} aria-label="Invite by email">
            <label class="stacked">Email <input type="email" name="email" placeholder="name@example.com" required /></label>
            <label class="stacked">Role
              <select name="role">
                ${ROLES.map((r) => html`<option value=${r} ?selected=${r === DEFAULT_INVITE_ROLE}>${r} · ${ROLE_WORDS[r]}</option>`)}
              </select>
            </label>
            <label><input type="checkbox" name="pin" checked /> Pin to their navigation</label>
            <wa-button type="submit" size="s" variant="brand" ?disabled=${this.busy}>Invite</wa-button>
          </form>`
        : rightsKnown ? html`<p class="muted">Only the space's Admins invite people.</p>` : nothing}
      ${this.notice ? html`<p class="notice" role="status">${this.notice}</p>` : nothing}
      ${d.invites.length ? html`
        <h3>Invites</h3>
        <table aria-label="Invites">
          <thead><tr><th>Email</th><th>Role</th><th>Status</th><th></th></tr></thead>
          <tbody>
            ${d.invites.map((i) => html`<tr data-invite=${i.subscriptionId}>
              <td>${i.email ?? '—'}</td>
              <td>${i.role ?? '—'}${i.pin ? html` <span class="muted">(pinned)</span>` : nothing}</td>
              <td><span class="status ${i.status}" data-status=${i.status}>${inviteStatusWord(i.status)}</span>${i.lastError ? html`<div class="error">${i.lastError}</div>` : nothing}</td>
              <td>${i.status === 'Pending' && canManage ? html`<wa-button size="s" appearance="outlined" @click=${() => this.revoke(i.subscriptionId)}>Revoke</wa-button>` : nothing}</td>
            </tr>`)}
          </tbody>
        </table>` : nothing}
    `
  }
}
if (!customElements.get('weft-members-panel')) customElements.define('weft-members-panel', WeftMembersPanel)
