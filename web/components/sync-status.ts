import { LitElement, css, html } from 'lit'
import { ObservableController } from '../controllers/index.js'
import { app } from '../app-context.js'
import type { SyncStatus } from '../sync/index.js'

const LABELS: Record<SyncStatus['kind'], string> = {
  offline: 'Offline',
  connecting: 'Connecting…',
  syncing: 'Online · syncing',
  saved: 'Online · all saved',
  final: 'Disconnected',
}

/** The sync status the user can see: online / offline / syncing / all saved, with counts. */
export class WeftSyncStatus extends LitElement {
  static override styles = css`
    :host { display: inline-flex; gap: 0.5em; align-items: center; font-size: 0.9em; }
    .dot { width: 0.7em; height: 0.7em; border-radius: 50%; background: #999; }
    [data-status='saved'] .dot { background: #2a2; }
    [data-status='syncing'] .dot, [data-status='connecting'] .dot { background: #e90; }
    [data-status='offline'] .dot { background: #888; }
    [data-status='final'] .dot { background: #c22; }
  `
  private readonly status = new ObservableController<SyncStatus>(this)

  constructor() {
    super()
    this.status.watch('status', () => app().streams.status$)
  }

  override render() {
    const s = this.status.value
    if (!s) return html``
    const pending = s.pending > 0 ? ` · ${s.pending} pending` : ''
    const refused = s.refused > 0 ? ` · ${s.refused} refused` : ''
    return html`<span role="status" aria-live="polite" data-status=${s.kind} data-pending=${s.pending} class="sync"
      ><span class="dot" aria-hidden="true"></span>${LABELS[s.kind]}${pending}${refused}</span
    >`
  }
}
customElements.define('weft-sync-status', WeftSyncStatus)
