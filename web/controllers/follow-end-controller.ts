import type { ReactiveController, ReactiveControllerHost } from 'lit'

/** How close to the end (px) still counts as "at the end": a fractional scroll is not a scroll up. */
const AT_END_PX = 24

const scroller = (): HTMLElement => document.scrollingElement as HTMLElement

function isAtEnd(): boolean {
  const el = scroller()
  return el.scrollHeight - el.scrollTop - el.clientHeight < AT_END_PX
}

/**
 * [WEB70] Keeps the window at the end of the page while the reader is there, as a chat does: a
 * page opens at its end, and what grows (a new message, an answer streaming in, cells loading
 * one by one) stays in view; a reader who scrolled up to read is left where they are until they
 * come back to the end. The window is what scrolls (the app's `main` is no scroll container, so
 * the composer's `position: sticky` holds to the viewport).
 *
 * Growth is seen by a ResizeObserver on the document (after layout, before paint: no frame shows
 * the old end). Leaving the end is read from where the last pin left the window, as the run log
 * does: a scroll event dispatched a frame after the page grew is not the reader scrolling up.
 */
export class FollowEndController implements ReactiveController {
  private following = false
  private pinnedTop = 0
  private observer: ResizeObserver | null = null

  constructor(host: ReactiveControllerHost) {
    host.addController(this)
  }

  hostConnected(): void {
    addEventListener('scroll', this.onScroll, { passive: true })
    this.observer = new ResizeObserver(() => {
      if (this.following) this.pin()
    })
    this.observer.observe(document.documentElement)
  }

  hostDisconnected(): void {
    removeEventListener('scroll', this.onScroll)
    this.observer?.disconnect()
    this.observer = null
  }

  /** Goes to the end and follows it from now on (a page opened, the reader sent a message). */
  follow(): void {
    this.following = true
    this.pin()
  }

  private pin(): void {
    const el = scroller()
    el.scrollTop = el.scrollHeight
    this.pinnedTop = el.scrollTop
  }

  private readonly onScroll = () => {
    if (isAtEnd()) {
      this.following = true
      this.pinnedTop = scroller().scrollTop
      return
    }
    if (!this.following) return
    if (scroller().scrollTop >= this.pinnedTop - AT_END_PX) this.pin()
    else this.following = false
  }
}
