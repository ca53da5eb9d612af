import { LitElement, css, html } from 'lit'
import { ObservableController } from '../controllers/index.js'
import { app } from '../app-context.js'
import type { NodeView } from '../streams/index.js'
import type { ReplicaState } from '../sync/index.js'
import { nodeHref } from './route.js'
import { threadState, type ThreadState } from './thread-text.js'

/**
 * A link to a thread with its state, live ([WEB34]): a sub-thread the agent delegated to, shown
 * on its parent's page, or a thread on the home ([WEB40], `home`: a question the agent asked
 * reads "Needs your answer" to those who may answer it, "Waiting for an answer" to the others).
 * Watching it says no "here" in the thread's room.
 */
export class WeftThreadLink extends LitElement {
  static override properties = { path: {}, home: { type: Boolean } }
  declare path: string
  declare home: boolean
  private readonly node = new ObservableController<NodeView | null>(this)
  private readonly access = new ObservableController<ReplicaState>(this)

  static override styles = css`
    :host { display: block; min-width: 0; }
    a { display: flex; flex-wrap: wrap; gap: 0.2em 0.6em; align-items: baseline; color: inherit; text-decoration: none; padding: 0.35em 0.6em; border: 1px solid #e3e6ee; border-radius: 6px; background: #fff; }
    a:hover, a:focus-visible { border-color: #8aa4e6; background: #f5f8ff; }
    .name { overflow-wrap: anywhere; color: #1f4fa3; text-decoration: underline; }
    .state { font-size: 0.85em; border-radius: 3px; padding: 0 0.4em; background: #eef0f5; }
    .state[data-kind='thinking'], .state[data-kind='queued'] { background: #def; }
    .state[data-kind='stopping'] { background: #fff1d6; }
    .state[data-kind='asking'], .state[data-kind='approval'] { background: #fff4cc; }
    .state[data-kind='failed'] { background: #fdd; }
    .state[data-kind='answered'], .state[data-kind='done'] { background: #dfd; }
  `

  constructor() {
    super()
    this.path = ''
    this.home = false
  }

  override willUpdate() {
    const path = this.path
    if (!path) return
    this.node.watch(path, () => app().streams.node$(path, { listed: true }))
    if (this.home) this.access.watch(path, () => app().streams.access$(path, { listed: true }))
  }

  /** The state in words; on the home, a question is addressed to those who may answer it. */
  private state(view: NodeView): ThreadState {
    if (!this.home) return threadState(view.content)
    return threadState(view.content, { mayAnswer: this.access.value?.permissions?.has('Thread') ?? false, inList: true })
  }

  override render() {
    const view = this.node.value
    const state = view ? this.state(view) : null
    return html`<a href=${nodeHref(this.path)} data-thread-link=${this.path} data-state=${state?.kind ?? 'loading'}>
      <span class="name">${view?.name ?? this.path.slice(this.path.lastIndexOf('/') + 1)}</span>
      <span class="state" data-kind=${state?.kind ?? 'loading'}>${state?.label ?? '…'}</span>
    </a>`
  }
}

customElements.define('weft-thread-link', WeftThreadLink)
