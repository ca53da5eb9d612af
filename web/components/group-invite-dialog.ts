import { LitElement, css, html, nothing } from 'lit'
import { humanError } from './error-text.js'
import { invitesApi } from './members-panel.js'

/**
 * `<weft-group-invite-dialog path>` on a Group page: "Invite by email" opens a dialog that takes
 * one address or a pasted list (commas, semicolons, spaces or new lines) and an optional role.
 * People with an account become members now; the others when they sign up.
 */
export interface GroupInviteResult {
  email: string
  status: 'Granted' | 'Invited'
  subscriptionId?: string
  /** [ACC41] What the invite did to someone with an account (absent from an older server). */
  change?: 'added' | 'already_member' | 'self'
}
type InviteResult = GroupInviteResult

/**
 * [ACC41] One result in words, truthfully: it said "added now" for everyone with an account,
 * also when they were a member already and nothing changed.
 */
export function groupInviteText(r: GroupInviteResult): string {
  if (r.status !== 'Granted') return 'invited (joins on sign-up)'
  switch (r.change) {
    case 'added':
      return 'added now'
    case 'already_member':
      return 'already a member: nothing changed'
    case 'self':
      return 'that is you, already a member: nothing changed'
    case undefined:
      return 'has an account: a member now'
    default:
      return r.change satisfies never
  }
}

const ROLES = ['', 'Viewer', 'Commenter', 'Editor', 'Admin'] as const

export function splitPastedEmails(text: string): string[] {
  return [...new Set(text.split(/[\s,;]+/).map((s) => s.trim().toLowerCase()).filter(Boolean))]
}

export class WeftGroupInviteDialog extends LitElement {
  static override properties = { path: {}, results: { state: true }, error: { state: true }, busy: { state: true }, count: { state: true } }
  declare path: string
  declare results: InviteResult[]
  declare error: string
  declare busy: boolean
  declare count: number

  static override styles = css`
    :host { display: block; }
    dialog { min-width: 24em; }
    textarea { width: 100%; min-height: 8em; box-sizing: border-box; }
    .row { display: flex; gap: 0.5em; align-items: center; margin: 0.5em 0; }
    .error { color: #a00; }
    ul { padding-left: 1.2em; }
    .muted { color: #666; font-size: 0.9em; }
  `

  constructor() {
    super()
    this.path = ''
    this.results = []
    this.error = ''
    this.busy = false
    this.count = 0
  }

  private get dialog(): HTMLDialogElement | null {
    return this.renderRoot.querySelector('dialog')
  }

  private open() {
    this.results = []
    this.error = ''
    this.dialog?.showModal()
  }

  private async send(e: Event) {
    e.preventDefault()
    const form = e.target as HTMLFormElement
    const fd = new FormData(form)
    const emails = splitPastedEmails(String(fd.get('emails') ?? ''))
    if (emails.length === 0) {
      this.error = 'Paste at least one email address.'
      return
    }
    const role = String(fd.get('role') ?? '')
    this.busy = true
    this.error = ''
    try {
      const group = this.path.split('/').map(encodeURIComponent).join('/')
      const r = await invitesApi<{ results: InviteResult[] }>('POST', `/api/groups/${group}/invites`, role ? { emails, role } : { emails })
      this.results = r.results
      form.reset()
      this.count = 0
    } catch (err) {
      this.error = humanError(err)
    } finally {
      this.busy = false
    }
  }

  override render() {
    return html`
      <wa-button size="s" appearance="outlined" @click=${this.open}>Invite by email</wa-button>
      <dialog aria-label="Invite to group">
        <form @submit=${this.send}>
          <h2>Invite to ${this.path}</h2>
          <label for="emails">Email addresses <span class="muted">(paste a list: commas, spaces or new lines)</span></label>
          <textarea id="emails" name="emails" @input=${(e: Event) => (this.count = splitPastedEmails((e.target as HTMLTextAreaElement).value).length)}></textarea>
          <div class="row">
            <label>Role on the group
              <select name="role">${ROLES.map((r) => html`<option value=${r}>${r || 'Member only'}</option>`)}</select>
            </label>
            <span class="muted">${this.count} address${this.count === 1 ? '' : 'es'}</span>
          </div>
          ${this.error ? html`<p class="error" role="alert">${this.error}</p>` : nothing}
          ${this.results.length ? html`<ul aria-label="Results">
            ${this.results.map((r) => html`<li>${r.email}: ${groupInviteText(r)}</li>`)}
          </ul>` : nothing}
          <div class="row">
            <wa-button type="submit" size="s" variant="brand" ?disabled=${this.busy}>Send invites</wa-button>
            <wa-button size="s" appearance="outlined" @click=${() => this.dialog?.close()}>Close</wa-button>
          </div>
        </form>
      </dialog>
    `
  }
}
if (!customElements.get('weft-group-invite-dialog')) customElements.define('weft-group-invite-dialog', WeftGroupInviteDialog)
