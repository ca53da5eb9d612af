/**
 * PLACEHOLDER written by the web-client engineer so the app builds before the real component
 * lands. The owner of this file replaces it entirely; nothing else depends on its contents
 * beyond the custom element name `weft-members-panel` and its `path` attribute.
 */
import { LitElement, html } from 'lit'

export class WeftMembersPanelPlaceholder extends LitElement {
  static override properties = { path: {} }
  declare path: string

  override render() {
    return html`<p>Members for ${this.path} (coming soon)</p>`
  }
}
if (!customElements.get('weft-members-panel')) customElements.define('weft-members-panel', WeftMembersPanelPlaceholder)
