import { LitElement, css, html, nothing } from 'lit'
import { repeat } from 'lit/directives/repeat.js'
import { catchError, filter, from, map, merge, of, switchMap, throttleTime } from 'rxjs'
import type { MeshNode } from '../../shared/index.js'
import { ObservableController } from '../controllers/index.js'
import { app } from '../app-context.js'
import './thread-link.js'

/** Threads listed at once, the most recently active first. */
const SHOWN = 10
/** Threads asked of the server (one page). */
const ASKED = 200

interface ListedThread {
  path: string
  /** When the thread last moved (its last activity, else its row's update): the order. */
  at: string
}

/** The threads a home lists: top-level conversations (a sub-thread is shown on its parent's page), latest first. */
export function homeThreads(nodes: readonly { path: string; content: MeshNode['content']; updatedAt: string }[]): ListedThread[] {
  return nodes
    .filter((n) => typeof n.content.ParentPath !== 'string' || n.content.ParentPath === '')
    .map((n) => ({ path: n.path, at: typeof n.content.LastActivityAt === 'string' ? n.content.LastActivityAt : n.updatedAt }))
    .sort((a, b) => (a.at < b.at ? 1 : a.at > b.at ? -1 : a.path < b.path ? -1 : 1))
}

/**
 * [WEB40] "Your threads" on the home: the threads the caller may read, anywhere (the server's
 * query: nothing they may not read), the most recently active first, each a live link with its
 * state in words (weft-thread-link `home`). Asked again (at most once a second) when the feed
 * announces a change to a Thread node; each row's state follows its node live. Offline: the
 * threads this device holds.
 */
export class WeftThreadList extends LitElement {
  private readonly threads = new ObservableController<ListedThread[]>(this)

  static override styles = css`
    :host { display: block; }
    ul { list-style: none; margin: 0; padding: 0; display: grid; gap: 0.35em; }
    li { min-width: 0; }
    .muted { color: #555; }
  `

  constructor() {
    super()
    this.threads.watch('threads', () => {
      const { client } = app()
      // A thread created, gone, or moved on (its status and message list are on the Thread node;
      // streamed text is on its cells, which do not count): the order may change.
      const announced = client.feed$.pipe(filter((c) => c.nodeType === 'Thread'))
      // Offline: the index rows hold no content; a sub-thread is a thread's child. On the type index: never a scan.
      const onDevice = () =>
        from(client.store.db.nodes.where('nodeType').equals('Thread').toArray()).pipe(
          map((rows) => {
            const paths = new Set(rows.map((r) => r.path))
            return homeThreads(rows.filter((r) => !paths.has(r.parent)).map((r) => ({ path: r.path, content: {}, updatedAt: r.updatedAt })))
          }),
        )
      return merge(of(null), announced).pipe(
        throttleTime(1000, undefined, { leading: true, trailing: true }),
        switchMap(() =>
          from(client.api.queryByType('Thread', ASKED)).pipe(
            // Their rows on this device: each link shows the thread's name (never its path), offline too.
            switchMap(async (nodes) => (await client.store.learnNodes(nodes), homeThreads(nodes))),
            catchError(onDevice),
          ),
        ),
      )
    })
  }

  override render() {
    const threads = this.threads.value
    if (threads === undefined) return html`<p class="muted">Loading…</p>`
    if (threads.length === 0) return html`<p class="muted">No threads yet. To start one, open a space where you may add nodes, give it a name under Children, choose Thread as its type and press Create.</p>`
    return html`<ul data-home="threads">
        ${repeat(threads.slice(0, SHOWN), (t) => t.path, (t) => html`<li><weft-thread-link home .path=${t.path}></weft-thread-link></li>`)}
      </ul>
      ${threads.length > SHOWN ? html`<p class="muted">${threads.length - SHOWN} more not shown.</p>` : nothing}`
  }
}

customElements.define('weft-thread-list', WeftThreadList)
