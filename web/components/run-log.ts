import { LitElement, css, html, nothing } from 'lit'
import { repeat } from 'lit/directives/repeat.js'
import { lineTime, matchingLines, splitHits, type LogLine } from './run-log-text.js'

/**
 * Lines rendered at once: a 10,000-line log opens with its tail, older lines on request. Each
 * line is kept by its number (`repeat`), so a new line at a full tail adds one `li` and drops
 * one: rendered by position, all 200 were rewritten for every line, which kept a busy machine's
 * page from answering a click for seconds (the suite beside CPU hogs).
 */
const TAIL = 200
/** Matches rendered at once while searching. */
const MAX_HITS = 500
/** How close to the end (px) still counts as "at the end": a fractional scroll is not a scroll up. */
const AT_END_PX = 8

const isAtEnd = (ol: HTMLElement): boolean => ol.scrollHeight - ol.scrollTop - ol.clientHeight < AT_END_PX

/**
 * A run's live log like the best CI pages ([WEB24]): numbered lines with their time, the tail
 * followed while the reader is at the end (scrolling up stops that, and "Jump to latest"
 * brings it back), and a search that keeps the lines holding the words, marked.
 */
export class WeftRunLog extends LitElement {
  static override properties = { lines: { attribute: false }, showAll: { state: true }, query: { state: true }, following: { state: true }, unseen: { state: true } }
  declare lines: readonly LogLine[]
  declare showAll: boolean
  declare query: string
  /** The reader is at the end: new lines scroll into view. */
  declare following: boolean
  /** Lines that arrived since the reader scrolled up. */
  declare unseen: number
  private seenCount = 0

  static override styles = css`
    :host { display: block; min-width: 0; }
    .tools { display: flex; flex-wrap: wrap; gap: 0.4em 0.8em; align-items: center; margin: 0.4em 0 0.2em; }
    input[type='search'] { font: inherit; padding: 0.25em 0.5em; border: 1px solid var(--wa-color-neutral-80, #bbc); border-radius: var(--wa-border-radius-m, 6px); min-width: 0; flex: 1 1 12em; max-width: 24em; }
    .count { color: #555; font-size: 0.9em; }
    .wrap { position: relative; }
    ol { font-family: ui-monospace, monospace; font-size: 0.85em; max-height: 24em; overflow: auto; margin: 0; padding: 0.3em 0.3em 0.3em 3.5em; overflow-wrap: anywhere; background: #fafbfd; border: 1px solid #e3e6ee; border-radius: 4px; }
    li { padding: 0.05em 0; }
    time { color: #555566; margin-right: 0.6em; user-select: none; font-size: 0.95em; }
    .Warning-line { color: #960; } .Error-line { color: #b00; }
    mark { background: #ffe58a; color: inherit; border-radius: 2px; }
    button { font: inherit; cursor: pointer; border: 1px solid var(--wa-color-neutral-80, #bbc); border-radius: var(--wa-border-radius-m, 6px); background: var(--wa-color-neutral-95, #f4f6fb); padding: 0.2em 0.6em; }
    .jump { position: absolute; right: 1em; bottom: 0.8em; background: var(--wa-color-brand-50, #2f6fd1); color: #fff; border-color: transparent; box-shadow: 0 2px 6px rgba(0, 0, 0, 0.25); }
    .earlier { border: 0; background: none; color: var(--wa-color-brand-40, #245bb0); padding: 0.2em 0; }
  `

  constructor() {
    super()
    this.lines = []
    this.showAll = false
    this.query = ''
    this.following = true
    this.unseen = 0
  }

  override willUpdate(changed: Map<string, unknown>) {
    // Read before this render touches the list: once it drops the oldest line of a full tail,
    // the browser's scroll anchoring moves the view up by that line, which is not the reader.
    const ol = this.list
    this.leftTail = !!ol && this.following && !isAtEnd(ol) && ol.scrollTop < this.pinnedTop - AT_END_PX
    if (changed.has('lines')) {
      const added = this.lines.length - this.seenCount
      if (!this.following && added > 0) this.unseen += added
      this.seenCount = this.lines.length
    }
  }

  /** Where the last pin to the end left the list (a lower scrollTop since: the reader scrolled up). */
  private pinnedTop = 0
  /** The reader had scrolled up from the last pin before this render began. */
  private leftTail = false

  private get list(): HTMLElement | null {
    return this.renderRoot.querySelector('ol')
  }

  private readonly onScroll = () => {
    const ol = this.list
    if (!ol) return
    const atEnd = isAtEnd(ol)
    if (atEnd) {
      if (!this.following) this.following = true
      this.unseen = 0
      this.pinnedTop = ol.scrollTop
      return
    }
    // Off the end: stop following only when the reader moved up from the last pin. A scroll
    // event that lands after lines grew the list (a loaded page dispatches it frames late) is not
    // the reader leaving the tail: pinned again. Beside two CPU hogs, "Jump to latest" then
    // read that event as a scroll up and stopped following at once.
    if (!this.following) return
    if (ol.scrollTop >= this.pinnedTop - AT_END_PX) this.pin(ol)
    else this.following = false
  }

  /** Shows the last line and remembers where that left the list. */
  private pin(ol: HTMLElement) {
    ol.scrollTop = ol.scrollHeight
    this.pinnedTop = ol.scrollTop
  }

  override updated() {
    const ol = this.list
    if (!ol || !this.following || this.query) return
    // The reader scrolled up since the last pin, and the scroll event (dispatched on the next
    // frame) has not told us yet: a line arriving now must not yank them back to the end.
    // Decided on the list as it was before this render (see willUpdate), not as it is now.
    if (this.leftTail) {
      this.following = false
      return
    }
    this.pin(ol)
  }

  private jump() {
    this.following = true
    this.unseen = 0
    const ol = this.list
    if (ol) this.pin(ol)
  }

  private renderLine(n: number) {
    const m = this.lines[n - 1]!
    const t = lineTime(m.At)
    return html`<li value=${n} class="${m.Level}-line" data-line=${n}>${t ? html`<time datetime=${m.At} title=${m.At}>${t}</time>` : nothing}${splitHits(m.Text, this.query).map((p) => (p.hit ? html`<mark>${p.text}</mark>` : p.text))}</li>`
  }

  override render() {
    const total = this.lines.length
    if (!total) return nothing
    const searching = this.query.trim() !== ''
    const hits = searching ? matchingLines(this.lines, this.query) : null
    const first = this.showAll ? 1 : Math.max(1, total - TAIL + 1)
    const numbers = hits ? hits.slice(-MAX_HITS) : Array.from({ length: total - first + 1 }, (_, i) => first + i)
    return html`<div class="tools">
        <input type="search" aria-label="Search the log" placeholder="Search the log" .value=${this.query} @input=${(e: Event) => (this.query = (e.target as HTMLInputElement).value)} />
        <span class="count" role="status" data-count=${hits ? hits.length : total}>${hits
          ? `${hits.length} of ${total} line${total === 1 ? '' : 's'} match${hits.length > MAX_HITS ? ` (the last ${MAX_HITS} shown)` : ''}`
          : `${total} line${total === 1 ? '' : 's'}`}</span>
      </div>
      ${!searching && first > 1 ? html`<button class="earlier" @click=${() => (this.showAll = true)}>Show ${first - 1} earlier lines</button>` : nothing}
      <div class="wrap">
        <ol class="log" aria-label="Messages" tabindex="0" @scroll=${this.onScroll}>${repeat(numbers, (n) => n, (n) => this.renderLine(n))}</ol>
        ${!this.following && !searching
          ? html`<button class="jump" @click=${this.jump}>Jump to latest${this.unseen ? ` (${this.unseen} new)` : ''} ↓</button>`
          : nothing}
      </div>`
  }
}

customElements.define('weft-run-log', WeftRunLog)
