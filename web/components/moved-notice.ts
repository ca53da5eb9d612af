import { LitElement, html, nothing } from 'lit'
import { isInTrash } from '../../shared/path.js'
import { HttpError } from '../api/index.js'
import { app } from '../app-context.js'
import { humanMessage } from './error-text.js'
import { forgetRecent } from './recent.js'
import { nodeHref, REFUSED_HREF } from './route.js'
import { ObservableController } from '../controllers/index.js'
import { refusedGroups$ } from './refused-list.js'
import { createRefusal$, notCreatedLine, type CreateRefusal } from './create-refused.js'
import type { RefusedGroup } from '../store/index.js'

/**
 * [MOVE3] `<weft-moved-notice path code message>`: shown instead of a node the server refused to
 * open (`moved`, or `not_found`). It asks the server where the node went (a read of the old path
 * answers `moved` with the new one, to a reader of it) and links there; else it says why.
 */
export class WeftMovedNotice extends LitElement {
  static override properties = { path: {}, code: {}, message: {}, to: { state: true }, asked: { state: true } }
  declare path: string
  declare code: string
  declare message: string
  declare to: string | null
  declare asked: string
  /** [WEB84] This device's refused edits of the node: kept, and said so where it is gone. */
  private readonly refused = new ObservableController<RefusedGroup[]>(this)
  /** [WEB104] The server refused to create it (made here offline): it never existed there. */
  private readonly notCreated = new ObservableController<CreateRefusal | null>(this)

  constructor() {
    super()
    this.to = null
    this.asked = ''
  }

  override willUpdate(): void {
    const path = this.path
    this.refused.watch(`refused:${path}`, () => refusedGroups$(path))
    this.notCreated.watch(`not-created:${path}`, () => createRefusal$(path))
    if (this.asked === this.path) return
    this.asked = this.path
    forgetRecent(this.path)
    this.to = this.code === 'moved' ? (/Moved to (\S+)/.exec(this.message)?.[1] ?? null) : null
    if (this.to) return
    const asked = this.path
    app()
      .client.api.getNode(asked)
      .catch((e: unknown) => {
        const to = e instanceof HttpError && e.code === 'moved' ? e.to : undefined
        if (this.asked === asked && to) this.to = to
      })
  }

  /** [WEB84] Refused edits of the node stay on this device (Copy, Discard): a line says so and links to them. */
  private keptLine() {
    const n = this.refused.value?.length ?? 0
    if (n === 0) return nothing
    return html`<p data-refused-kept=${n}>Your ${n === 1 ? 'refused edit' : `${n} refused edits`} of this node ${n === 1 ? 'is' : 'are'} kept on this device:
      <a href=${REFUSED_HREF}>copy or discard ${n === 1 ? 'it' : 'them'}</a>.</p>`
  }

  override render() {
    return html`${this.notice()}${this.keptLine()}`
  }

  private notice() {
    if (this.to && isInTrash(this.to)) {
      // Deleted (to the trash, which only the space's Admins see): said so, with the way back.
      const space = this.to.slice(0, this.to.indexOf('/'))
      return html`<p role="status" data-moved data-deleted>This node was deleted: it is in the space's trash, where its Admins can restore it.
        <a href=${nodeHref(space)}>Back to the space</a></p>`
    }
    if (this.to) return html`<p role="status" data-moved>This node was moved. <a href=${nodeHref(this.to)}>Open it in its new place</a></p>`
    const refusal = this.notCreated.value
    if (this.code === 'not_found' && refusal) {
      // [WEB104] Not "deleted, or moved": it was never made (an "Open" or a link followed from before the refusal).
      const parent = this.path.includes('/') ? this.path.slice(0, this.path.lastIndexOf('/')) : ''
      return html`<p role="status" data-not-created=${refusal.code}>${notCreatedLine(refusal)}
        ${parent ? html`<a href=${nodeHref(parent)}>Back to where it was made</a>` : nothing}</p>`
    }
    if (this.code === 'not_found') {
      const top = this.path.split('/')[0] ?? ''
      return html`<p role="status" data-deleted>This node was deleted, or moved where you cannot see it.
        ${top && top !== this.path ? html`<a href=${nodeHref(top)}>Back to the space</a>` : nothing}</p>`
    }
    return html`<p class="denied" role="alert" data-code=${this.code}>You cannot open this node: ${humanMessage(this.code, this.message)}</p>${nothing}`
  }
}
customElements.define('weft-moved-notice', WeftMovedNotice)
