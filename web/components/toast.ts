import { LitElement, css, html, nothing } from 'lit'

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
  static override properties = { items: { state: true } }
  declare items: ToastItem[]
  private nextId = 1

  static override styles = css`
    :host { position: fixed; left: 1em; right: 1em; bottom: 1em; z-index: 20; pointer-events: none; }
    [role='status'] { display: flex; flex-direction: column; align-items: center; gap: 0.5em; }
    .toast { pointer-events: auto; box-sizing: border-box; max-width: 100%; display: flex; align-items: center; gap: 0.8em; padding: 0.6em 0.9em; border-radius: 8px; background: #1d2433; color: #fff; box-shadow: 0 4px 16px rgb(0 0 0 / 0.2); }
    /* Only the message wraps (a long name may break anywhere); the buttons keep their width. */
    /* [WEB91] At most three lines (a 300-character name filled the toast); the live region
       still reads it whole, and its tooltip shows it. */
    .message { min-width: 0; overflow-wrap: anywhere; overflow: hidden; display: -webkit-box; -webkit-box-orient: vertical; -webkit-line-clamp: 3; line-clamp: 3; }
    button { flex: none; white-space: nowrap; font: inherit; border: 1px solid #8ab4ff; color: #cfe0ff; background: transparent; border-radius: 6px; padding: 0.2em 0.7em; cursor: pointer; }
    button.close { border: none; color: #aab; }
    button:focus-visible { outline: 2px solid #8ab4ff; outline-offset: 1px; }
  `

  constructor() {
    super()
    this.items = []
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
    if (this.items.some((i) => i.action?.opens)) this.items = this.items.filter((i) => !i.action?.opens)
  }

  override connectedCallback(): void {
    super.connectedCallback()
    window.addEventListener('hashchange', this.onNavigate)
    for (const type of ACTIVITY) window.addEventListener(type, this.onActivity, true)
  }

  override disconnectedCallback(): void {
    window.removeEventListener('hashchange', this.onNavigate)
    for (const type of ACTIVITY) window.removeEventListener(type, this.onActivity, true)
    super.disconnectedCallback()
  }

  show(message: string, action?: ToastAction): void {
    const item = { id: this.nextId++, message, action }
    // An "Open" offer is stale once something newer happened; an Undo stays while it can be used.
    this.items = [...this.items.filter((i) => !i.action?.opens).slice(-2), item]
    setTimeout(() => this.dismiss(item.id), TOAST_MS)
  }

  private dismiss(id: number): void {
    this.items = this.items.filter((i) => i.id !== id)
  }

  private async act(item: ToastItem): Promise<void> {
    this.dismiss(item.id)
    try {
      await item.action?.run()
    } catch (e) {
      this.show(`Could not undo: ${(e as Error).message}`)
    }
  }

  override render() {
    return html`<div role="status" aria-live="polite">
      ${this.items.map(
        (item) => html`<div class="toast" data-toast>
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
export function showToast(message: string, action?: ToastAction): void {
  let el = document.querySelector('weft-toast')
  if (!el) el = document.body.appendChild(document.createElement('weft-toast'))
  el.show(message, action)
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
