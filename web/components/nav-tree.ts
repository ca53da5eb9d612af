import { LitElement, css, html, nothing } from 'lit'
import { submitSpaceForm } from './create-space.js'
import { ObservableController } from '../controllers/index.js'
import { NamesController } from '../controllers/names-controller.js'
import { app } from '../app-context.js'
import type { IndexRow } from '../store/index.js'
import type { NodeView } from '../streams/index.js'
import { HOME_HREF, MY_CONSUMERS_HREF, nodeHref, OPERATIONS_HREF, OPERATOR_HREF } from './route.js'
import { afterFirstScreen } from './lazy.js'

const LEVEL_LIMIT = 200

/** One tree item; renders in light DOM so the tree's keyboard handler sees every item. */
export class WeftTreeNode extends LitElement {
  static override properties = { path: {}, label: {}, level: { type: Number }, expanded: { state: true }, current: {}, pending: { type: Number } }
  declare path: string
  declare label: string
  /** Unsent or refused changes of this node (from the local index). */
  declare pending: number
  declare level: number
  declare expanded: boolean
  declare current: string
  private readonly children$ = new ObservableController<IndexRow[]>(this)

  constructor() {
    super()
    this.level = 1
    this.expanded = false
  }

  override createRenderRoot() {
    return this
  }

  override willUpdate(changed: Map<string, unknown>) {
    // [MOVE9] The open node is revealed: every ancestor of it in the tree opens.
    if (changed.has('current') && this.current.startsWith(`${this.path}/`)) this.expanded = true
    if (this.expanded) this.children$.watch(this.path, () => app().streams.query$({ parent: this.path, listedOnly: true, limit: LEVEL_LIMIT }))
  }

  override updated(changed: Map<string, unknown>) {
    // In the next frame, not now: scrolling here forced a layout of the whole page in the middle
    // of the first render (tens of ms of a cold start), and again as the page around it changed.
    if (changed.has('current') && this.current === this.path) {
      requestAnimationFrame(() => {
        if (this.current === this.path) this.querySelector(':scope > li > a')?.scrollIntoView({ block: 'nearest' })
      })
    }
  }

  toggle(open = !this.expanded) {
    this.expanded = open
  }

  override render() {
    const kids = this.expanded ? (this.children$.value ?? []) : []
    return html`<li role="none">
      <a
        role="treeitem"
        href=${nodeHref(this.path)}
        aria-level=${this.level}
        aria-expanded=${this.expanded ? 'true' : 'false'}
        aria-current=${this.current === this.path ? 'page' : 'false'}
        tabindex="-1"
        data-path=${this.path}
        ><span class="twisty" aria-hidden="true" @click=${(e: Event) => (e.preventDefault(), this.toggle())}>${this.expanded ? '▾' : '▸'}</span>
        <span class="label" title=${this.label}>${this.label}</span>${this.pending ? html` <span class="pending" title="Unsaved changes" aria-label=${`${this.pending} unsaved`}>•</span>` : nothing}</a
      >
      ${this.expanded && kids.length
        ? html`<ul role="group">
            ${kids.map(
              (k) =>
                html`<weft-tree-node .path=${k.path} .label=${k.name} .level=${this.level + 1} .current=${this.current} .pending=${k.pending + k.refused}></weft-tree-node>`,
            )}
          </ul>`
        : nothing}
    </li>`
  }
}
customElements.define('weft-tree-node', WeftTreeNode)

/**
 * The navigation tree: home (the User node), pinned paths from its content, and every
 * top-level node the user can read. Arrow keys move, Right/Left expand and collapse.
 */
export class WeftNavTree extends LitElement {
  static override properties = { current: {}, creating: { state: true }, error: { state: true }, operator: { state: true }, consumers: { state: true } }
  declare current: string
  declare error: string
  /** [OPS10] Whether the server shows this user the operator's page (asked once; a refusal or no network hides the entry). */
  declare operator: boolean
  /** [WEB126] The user has contextual consumers: "My consumers" is listed (asked with the operator question). */
  declare consumers: boolean
  private readonly top = new ObservableController<IndexRow[]>(this)
  private readonly home = new ObservableController<NodeView | null>(this)
  /** Pinned spaces are shown by name, never by path. */
  private readonly pinNames = new NamesController(this)

  static override styles = css`
    :host { display: block; }
    ul { list-style: none; margin: 0; padding-left: 1em; }
    ul[role='tree'] { padding-left: 0; }
    a { display: flex; align-items: baseline; gap: 0.3em; padding: 0.15em 0.3em; color: inherit; text-decoration: none; border-radius: 3px; }
    /* [WEB91] A name takes two lines at most, cut with an ellipsis; the whole name is the item's
       accessible name and its tooltip. A 300-character name filled ten lines, twice at 390 px. */
    .label { flex: 0 1 auto; min-width: 0; overflow: hidden; overflow-wrap: anywhere; display: -webkit-box; -webkit-box-orient: vertical; -webkit-line-clamp: 2; line-clamp: 2; }
    .twisty, .pending { flex: none; }
    a[aria-current='page'] { background: #dde8ff; }
    a:focus { outline: 2px solid #36c; }
    .pending { color: #c70; }
    h2 { font-size: 0.8em; text-transform: uppercase; color: #666; margin: 1em 0 0.3em; }
    form { display: flex; gap: 0.3em; margin-top: 0.5em; }
    input { min-width: 0; flex: 1; }
    .error { color: #b00; font-size: 0.85em; }
    .visually-hidden { position: absolute; width: 1px; height: 1px; overflow: hidden; clip-path: inset(50%); white-space: nowrap; }
  `

  constructor() {
    super()
    this.current = ''
    this.error = ''
    this.operator = false
    this.consumers = false
    // The tree's items are read after the first screen: on a cold start, its reads and renders
    // (the top-level list, the home node's doc, the server's answer about the operator's page)
    // would share the main thread and the database with the open node's fields and children.
    afterFirstScreen(() => {
      // Signed out meanwhile: this tree is dropped (the app renders a new one) and reads nothing.
      let ctx: ReturnType<typeof app>
      try {
        ctx = app()
      } catch {
        return
      }
      const { session, streams } = ctx
      // The controllers subscribe when the tree is connected (now, or when it is).
      this.top.watch('top', () => streams.query$({ parent: '' }))
      this.home.watch(session.userId, () => streams.node$(session.userId))
      this.askOperator()
    })
  }

  private askedOperator = false
  override connectedCallback() {
    super.connectedCallback()
    if (this.askedOperator) this.askOperator()
  }

  private askOperator() {
    this.askedOperator = true
    if (!this.isConnected) return
    app().client.api.me().then(
      (me) => (this.operator = me.operator === true),
      () => (this.operator = false),
    )
    app().client.api.myConsumerCount().then(
      (n) => (this.consumers = n > 0),
      () => (this.consumers = false),
    )
  }

  override willUpdate() {
    const pinned = this.home.value?.content.PinnedPaths
    this.pinNames.watch(Array.isArray(pinned) ? pinned.filter((p): p is string => typeof p === 'string') : [])
  }

  private onKeyDown(ev: KeyboardEvent) {
    const items = [...this.renderRoot.querySelectorAll<HTMLAnchorElement>('a[role=treeitem]')]
    const i = items.indexOf(ev.target as HTMLAnchorElement)
    if (i < 0) return
    const node = (ev.target as HTMLElement).closest('weft-tree-node') as WeftTreeNode | null
    const move = (j: number) => {
      ev.preventDefault()
      items[Math.max(0, Math.min(items.length - 1, j))]?.focus()
    }
    switch (ev.key) {
      case 'ArrowDown':
        return move(i + 1)
      case 'ArrowUp':
        return move(i - 1)
      case 'Home':
        return move(0)
      case 'End':
        return move(items.length - 1)
      case 'ArrowRight':
        ev.preventDefault()
        node?.toggle(true)
        return
      case 'ArrowLeft':
        ev.preventDefault()
        node?.toggle(false)
        return
    }
  }

  private async createSpace(ev: SubmitEvent) {
    this.error = ''
    this.error = await submitSpaceForm(ev)
  }

  override render() {
    const { session } = app()
    const pinned = this.home.value?.content.PinnedPaths
    const pins = Array.isArray(pinned) ? pinned.filter((p): p is string => typeof p === 'string') : []
    const pinName = new Map(this.pinNames.value.map((n) => [n.path, n.name]))
    const others = (this.top.value ?? []).filter((r) => r.path !== session.userId)
    return html`<nav aria-label="Nodes" @keydown=${this.onKeyDown} @focusin=${this.rovingFocus}>
      <ul role="tree" aria-label="Nodes">
        <li role="none"><a role="treeitem" tabindex="-1" href=${HOME_HREF} aria-current=${this.current === '' || this.current === HOME_HREF ? 'page' : 'false'} data-nav="home">Home</a></li>
        <li role="none"><a role="treeitem" tabindex="-1" href=${OPERATIONS_HREF} aria-current=${this.current === OPERATIONS_HREF ? 'page' : 'false'} data-nav="operations">Operations</a></li>
        ${this.consumers || this.current === MY_CONSUMERS_HREF ? html`<li role="none"><a role="treeitem" tabindex="-1" href=${MY_CONSUMERS_HREF} aria-current=${this.current === MY_CONSUMERS_HREF ? 'page' : 'false'} data-nav="consumers">My consumers</a></li>` : nothing}
        ${this.operator ? html`<li role="none"><a role="treeitem" tabindex="-1" href=${OPERATOR_HREF} aria-current=${this.current === OPERATOR_HREF ? 'page' : 'false'} data-nav="operator">Operator</a></li>` : nothing}
        <h2 role="none">Profile</h2>
        <weft-tree-node .path=${session.userId} .label=${this.home.value?.name ?? session.name} .current=${this.current}></weft-tree-node>
        ${pins.length ? html`<h2 role="none">Pinned</h2>` : nothing}
        ${pins.map((p) => html`<weft-tree-node .path=${p} .label=${pinName.get(p) ?? p.slice(p.lastIndexOf('/') + 1)} .current=${this.current}></weft-tree-node>`)}
        <h2 role="none">Spaces and shared</h2>
        ${others.map((r) => html`<weft-tree-node .path=${r.path} .label=${r.name} .current=${this.current} .pending=${r.pending + r.refused}></weft-tree-node>`)}
      </ul>
      <form @submit=${this.createSpace} aria-label="New space">
        <label for="new-space" class="visually-hidden">New space name</label>
        <input id="new-space" name="space" placeholder="New space" />
        <wa-button type="submit" size="s" appearance="outlined">Create</wa-button>
      </form>
      ${this.error ? html`<p class="error" role="alert">${this.error}</p>` : nothing}
    </nav>`
  }

  /** Roving tabindex: exactly one item is in the tab order. */
  private rovingFocus(ev: FocusEvent) {
    const target = ev.target as HTMLElement
    if (target.getAttribute('role') !== 'treeitem') return
    for (const a of this.renderRoot.querySelectorAll<HTMLElement>('a[role=treeitem]')) a.tabIndex = a === target ? 0 : -1
  }

  override updated(changed: Map<string, unknown>) {
    const items = [...this.renderRoot.querySelectorAll<HTMLElement>('a[role=treeitem]')]
    // The tree's one tab stop is the open page's item when it is listed, else the first.
    const current = items.find((a) => a.getAttribute('aria-current') === 'page')
    if (current && changed.has('current')) for (const a of items) a.tabIndex = a === current ? 0 : -1
    if (items.length && !items.some((a) => a.tabIndex === 0)) (current ?? items[0]!).tabIndex = 0
  }
}
customElements.define('weft-nav-tree', WeftNavTree)
