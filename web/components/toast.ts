import { LitElement, css, html, nothing } from 'lit'
import type { Observable, Subscription } from 'rxjs'
import { humanError } from './error-text.js'

/** How long a toast stays when nobody acts on it (its Undo stays reachable that long). */
const TOAST_MS = 10_000

/**
 * What the person does that makes an "Open" offer stale ([WEB92]): typing, or a click outside
 * the toast. Not any key: Tab is how a keyboard reaches the toast's own button.
 */
const ACTIVITY = ['pointerdown', 'input'] as const

interface ToastAction {
  label: string
  run: () => Promise<void> | void
  /**
   * The page the action opens ("Created … · Open"): once that page is open, however it was
   * opened (the toast, the children list, the back button), the toast has said all it had to.
   */
  opens?: string
}

interface ToastItem {
  id: number
  message: string
  action?: ToastAction
  /** [WEB103] An error: said at once (alert), kept until the person dismisses it, never pushed out by newer toasts. */
  error?: boolean
}

/** [WEB104] What a toast says instead, once what it told of turned out otherwise. */
export interface ToastChange {
  message: string
  action?: ToastAction
  error?: boolean
}

export interface ToastOptions {
  error?: boolean
  /**
   * [WEB104] A toast that follows what it tells of: each change replaces its words and its action
   * in place ("Created “Draft”. · Open" becomes "“Draft” was not created: …" once the server
   * refused it, and its Open, which led to no node, goes).
   */
  follow?: Observable<ToastChange | null>
}

/**
 * [WEB103] How often, while toasts are shown, the stack looks for an error the page shows under
 * it (an alert can appear at any time: a server's answer, a refusal): a walk of the page's
 * elements, only while a toast is on screen.
 */
const AVOID_MS = 250

/** The page's visible error messages (`role="alert"`), through every open shadow root, the toasts' own left out. */
function pageAlerts(skip: Element): DOMRect[] {
  const found: DOMRect[] = []
  const walk = (root: Document | ShadowRoot) => {
    for (const el of root.querySelectorAll('*')) {
      if (el === skip) continue
      if (el.getAttribute('role') === 'alert' && el.textContent?.trim()) {
        const r = el.getBoundingClientRect()
        if (r.width > 0 && r.height > 0 && r.bottom > 0 && r.top < innerHeight) found.push(r)
      }
      if (el.shadowRoot) walk(el.shadowRoot)
    }
  }
  walk(document)
  return found
}

function overlaps(a: DOMRect, b: DOMRect): boolean {
  return a.left < b.right && b.left < a.right && a.top < b.bottom && b.top < a.bottom
}

/**
 * [WEB60] A toast is as wide as its words need, up to the viewport less a margin on each side
 * (not a box centred by `translateX(-50%)`, which a narrow screen capped at half its width), and
 * its buttons never break inside a label. A newer toast replaces the ones offering to open a page (two
 * "Created … · Open" never pile up over the form), and a toast whose action was taken or whose page was
 * opened goes away.
 *
 * [MOVE9] `<weft-toast>`: one line at the bottom of the screen saying what just happened, with an
 * Undo where it can be undone ("Moved to trash · Undo", "Removed field Title · Undo"). Polite live
 * region; the action is a real button (keyboard reachable).
 */
export class WeftToast extends LitElement {
  static override properties = { items: { state: true }, top: { type: Boolean, reflect: true } }
  declare items: ToastItem[]
  /** [WEB103] The stack is at the top of the screen: at the bottom it would cover an error message. */
  declare top: boolean
  private nextId = 1
  private avoidTimer: ReturnType<typeof setInterval> | null = null
  /** [WEB104] The toasts that follow something, until they go. */
  private readonly follows = new Map<number, Subscription>()

  static override styles = css`
    :host { position: fixed; left: 1em; right: 1em; bottom: 1em; z-index: 20; pointer-events: none; }
    :host([top]) { bottom: auto; top: 1em; }
    [role='status'] { display: flex; flex-direction: column; align-items: center; gap: 0.5em; }
    .toast { pointer-events: auto; box-sizing: border-box; max-width: 100%; display: flex; align-items: center; gap: 0.8em; padding: 0.6em 0.9em; border-radius: 8px; background: #1d2433; color: #fff; box-shadow: 0 4px 16px rgb(0 0 0 / 0.2); }
    /* Only the message wraps (a long name may break anywhere); the buttons keep their width. */
    /* [WEB91] At most three lines (a 300-character name filled the toast); the live region
       still reads it whole, and its tooltip shows it. */
    .message { min-width: 0; overflow-wrap: anywhere; overflow: hidden; display: -webkit-box; -webkit-box-orient: vertical; -webkit-line-clamp: 3; line-clamp: 3; }
    button { flex: none; white-space: nowrap; font: inherit; border: 1px solid #8ab4ff; color: #cfe0ff; background: transparent; border-radius: 6px; padding: 0.2em 0.7em; cursor: pointer; }
    button.close { border: none; color: #aab; }
    /* [WEB103] An error reads as one (a red edge, and its own words say what failed). */
    .toast.error { background: #3a1418; border-left: 4px solid #ff8a8a; }
    button:focus-visible { outline: 2px solid #8ab4ff; outline-offset: 1px; }
  `

  constructor() {
    super()
    this.items = []
    this.top = false
  }

  private readonly onNavigate = () => {
    const here = location.hash
    if (this.items.some((i) => i.action?.opens === here)) this.items = this.items.filter((i) => i.action?.opens !== here)
  }

  /**
   * [WEB92] An "Open" offer goes as soon as the person does something else on the page (types,
   * clicks outside the toast): it sat at the bottom over the "New child node" form,
   * and the error of the next create ("A node named … already exists", with its "Create … (2)
   * instead") appeared under it. Read on the window in the capture phase: these events are
   * composed, so they reach it from inside every shadow root, before the page reacts to them.
   * An Undo stays its full time: undoing is what it is there for.
   */
  private readonly onActivity = (ev: Event) => {
    if (ev.composedPath().includes(this)) return
    if (this.items.some((i) => !i.error && i.action?.opens)) this.items = this.items.filter((i) => i.error || !i.action?.opens)
  }

  override connectedCallback(): void {
    super.connectedCallback()
    window.addEventListener('hashchange', this.onNavigate)
    for (const type of ACTIVITY) window.addEventListener(type, this.onActivity, true)
  }

  override disconnectedCallback(): void {
    window.removeEventListener('hashchange', this.onNavigate)
    for (const type of ACTIVITY) window.removeEventListener(type, this.onActivity, true)
    this.watchAlerts(false)
    for (const s of this.follows.values()) s.unsubscribe()
    this.follows.clear()
    super.disconnectedCallback()
  }

  show(message: string, action?: ToastAction, opts: ToastOptions = {}): void {
    const item: ToastItem = { id: this.nextId++, message, action, error: opts.error }
    // An "Open" offer is stale once something newer happened; an Undo stays while it can be used;
    // [WEB103] an error stays until it is dismissed.
    const errors = this.items.filter((i) => i.error)
    this.items = [...errors, ...this.items.filter((i) => !i.error && !i.action?.opens).slice(-2), item]
    if (!item.error) this.expire(item.id)
    if (opts.follow) {
      const id = item.id
      this.follows.set(id, opts.follow.subscribe((change) => {
        if (change && this.items.some((i) => i.id === id)) this.items = this.items.map((i) => (i.id === id ? { id, ...change } : i))
      }))
    }
  }

  /**
   * Dismissed after TOAST_MS, or later while the pointer is on the toasts or the keyboard's focus
   * in them ([WEB103]: the person is about to use its Undo; a toast does not vanish under them).
   */
  private expire(id: number): void {
    setTimeout(() => {
      // [WEB104] A toast that became an error stays until dismissed.
      if (this.items.find((i) => i.id === id)?.error) return
      if (this.matches(':hover, :focus-within')) this.expire(id)
      else this.dismiss(id)
    }, TOAST_MS)
  }

  override updated(): void {
    for (const [id, s] of this.follows) {
      if (this.items.some((i) => i.id === id)) continue
      s.unsubscribe()
      this.follows.delete(id)
    }
    this.watchAlerts(this.items.length > 0)
    if (this.items.length) this.avoidAlerts()
  }

  /** [WEB103] While toasts are shown, the stack keeps off the page's error messages (scrolling and resizing included). */
  private watchAlerts(on: boolean): void {
    if (on === (this.avoidTimer !== null)) return
    if (on) {
      this.avoidTimer = setInterval(this.avoidAlerts, AVOID_MS)
      window.addEventListener('scroll', this.avoidAlerts, { passive: true, capture: true })
      window.addEventListener('resize', this.avoidAlerts, { passive: true })
    } else {
      clearInterval(this.avoidTimer!)
      this.avoidTimer = null
      window.removeEventListener('scroll', this.avoidAlerts, { capture: true })
      window.removeEventListener('resize', this.avoidAlerts)
      this.top = false
    }
  }

  /**
   * [WEB103] An error message the page shows is never under a toast: an Undo stays ten seconds at
   * the bottom of the screen, and a create's "already exists" (with its "Create … (2) instead"),
   * a field's refusal, a failed move appeared under it. The stack goes to the top of the screen
   * while its place at the bottom would cover one, and back once it would not; the toasts stay
   * whole there, their buttons reachable by pointer and keyboard (Tab, as before).
   */
  private readonly avoidAlerts = () => {
    const stack = this.renderRoot.querySelector('[role=status]')
    if (!stack || !this.items.length) return
    const alerts = pageAlerts(this)
    const free = (r: DOMRect) => !alerts.some((a) => overlaps(a, r))
    const here = stack.getBoundingClientRect()
    // Where the stack would be at the other edge of the screen (1em from it, as it is from this one).
    const margin = this.top ? here.top : innerHeight - here.bottom
    const there = new DOMRect(here.x, this.top ? innerHeight - margin - here.height : margin, here.width, here.height)
    // The bottom is its place: it goes back there as soon as nothing is under it.
    if (this.top ? free(there) : !free(here) && free(there)) this.top = !this.top
  }

  private dismiss(id: number): void {
    this.items = this.items.filter((i) => i.id !== id)
  }

  private async act(item: ToastItem): Promise<void> {
    this.dismiss(item.id)
    try {
      await item.action?.run()
    } catch (e) {
      this.show(`Could not undo: ${humanError(e)}`, undefined, { error: true })
    }
  }

  override render() {
    return html`<div role="status" aria-live="polite">
      ${this.items.map(
        (item) => html`<div class=${item.error ? 'toast error' : 'toast'} data-toast role=${item.error ? 'alert' : nothing}>
          <span class="message" title=${item.message}>${item.message}</span>
          ${item.action ? html`<button type="button" @click=${() => this.act(item)}>${item.action.label}</button>` : nothing}
          <button type="button" class="close" aria-label="Dismiss" @click=${() => this.dismiss(item.id)}>✕</button>
        </div>`,
      )}
    </div>`
  }
}
customElements.define('weft-toast', WeftToast)

/** Shows a toast (creating the one `<weft-toast>` of the page on first use). */
export function showToast(message: string, action?: ToastAction, opts: ToastOptions = {}): void {
  let el = document.querySelector('weft-toast')
  if (!el) el = document.body.appendChild(document.createElement('weft-toast'))
  el.show(message, action, opts)
}

/** [WEB103] Says an error in a toast: an alert, kept until dismissed, never under or behind an Undo. */
export function showError(message: string): void {
  showToast(message, undefined, { error: true })
}

/** "Open" on a toast: goes to `href`, and the toast goes once that page is open. */
export function openAction(href: string): ToastAction {
  return { label: 'Open', opens: href, run: () => void (location.hash = href) }
}

declare global {
  interface HTMLElementTagNameMap {
    'weft-toast': WeftToast
  }
}
