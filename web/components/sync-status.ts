import { LitElement, css, html, nothing } from 'lit'
import { ObservableController } from '../controllers/index.js'
import { app } from '../app-context.js'
import type { SyncStatus } from '../sync/index.js'
import type { RefusedGroup } from '../store/index.js'
import { refusedGroups$ } from './refused-list.js'
import { statusWords, type Failures } from './status-words.js'

function clock(ms: number): string {
  return new Date(ms).toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' })
}

/**
 * The sync status a person can read: offline (the browser has no network) is told apart from
 * a server that cannot be reached; unsent changes are "saved on this device, not yet synced";
 * "last synced at" once this session saw everything on the server; a socket that keeps failing
 * the same way says why.
 */
export class WeftSyncStatus extends LitElement {
  static override styles = css`
    :host { display: inline-flex; gap: 0.5em; align-items: center; font-size: 0.9em; min-width: 0; }
    .sync { display: inline; line-height: 1.3; }
    .dot { display: inline-block; width: 0.7em; height: 0.7em; border-radius: 50%; background: #999; margin-right: 0.4em; vertical-align: baseline; }
    [data-status='saved'] .dot { background: #2a2; }
    [data-status='syncing'] .dot, [data-status='connecting'] .dot, [data-status='reconnecting'] .dot { background: #e90; }
    [data-status='offline'] .dot { background: #888; }
    [data-status='unreachable'] .dot, [data-status='final'] .dot { background: #c22; }
    .detail { color: #555; margin-left: 0.35em; }
    .trouble { color: #a11; margin-left: 0.35em; }
    a.refused { text-decoration: underline; }
    .short { display: none; }
    /* [WEB44] A phone's bar says it in short words: the same facts, one line when nothing is wrong. */
    @media (max-width: 700px) {
      .long, .last { display: none; }
      .short { display: inline; }
    }
  `
  private readonly status = new ObservableController<SyncStatus>(this)
  /** Refused edits counted as a person sees them: one per node and field, not per keystroke. */
  private readonly refusedGroups = new ObservableController<RefusedGroup[]>(this)
  /** The socket's failures in a row, as they happen (the words for "not connected" depend on them). */
  private readonly failures = new ObservableController<Failures | null>(this)

  constructor() {
    super()
    this.status.watch('status', () => app().streams.status$)
    this.refusedGroups.watch('refused', () => refusedGroups$())
    this.failures.watch('failures', () => app().client.conn.trouble$)
  }

  override render() {
    const s = this.status.value
    if (!s) return html``
    const waiting = s.pending > 0 && s.kind !== 'syncing'
    const pending = waiting
      ? html`<span class="detail" data-unsynced>· ${s.pending} <span class="long">change${s.pending === 1 ? '' : 's'} saved on this device, not yet synced</span><span class="short">not yet synced</span></span>`
      : s.pending > 0
        ? html`<span class="detail">· ${s.pending} to send</span>`
        : nothing
    const groups = this.refusedGroups.value?.length ?? 0
    const refused = groups > 0 ? html`<a class="trouble refused" href="#/refused" data-refused=${groups}>· ${groups} refused</a>` : nothing
    const words = statusWords(s, this.failures.value ?? null)
    const last = s.lastSyncedAt && words.kind !== 'saved' ? html`<span class="detail last">· last synced at ${clock(s.lastSyncedAt)}</span>` : nothing
    const trouble = words.trouble ? html`<span class="trouble" data-trouble=${this.failures.value?.code ?? ''}>· ${words.trouble}</span>` : nothing
    return html`<span role="status" aria-live="polite" data-status=${words.kind} data-pending=${s.pending} class="sync"
      ><span class="dot" aria-hidden="true"></span><span class="label">${words.label}</span>${pending}${refused}${last}${trouble}</span
    >`
  }
}
customElements.define('weft-sync-status', WeftSyncStatus)
