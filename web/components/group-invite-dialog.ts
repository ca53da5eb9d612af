/**
 * PLACEHOLDER written by the web-client engineer so the app builds before the real component
 * lands. The owner of this file replaces it entirely; nothing else depends on its contents
 * beyond the custom element name `weft-group-invite-dialog` and its `path` attribute.
 */
import { LitElement, html } from 'lit'

export class WeftGroupInviteDialogPlaceholder extends LitElement {
  static override properties = { path: {} }
  declare path: string

  override render() {
    return html`<p>Invite to group for ${this.path} (coming soon)</p>`
  }
}
if (!customElements.get('weft-group-invite-dialog')) customElements.define('weft-group-invite-dialog', WeftGroupInviteDialogPlaceholder)
