import type { Observable} from 'rxjs';
import { BehaviorSubject, Subject, combineLatest, distinctUntilChanged, map, shareReplay, type Subscription } from 'rxjs'
import type { ChangeRecord, JsonObject, MergePatch, MeshNode } from '../../shared/index.js'
import { HttpApi, HttpError, NetworkError } from '../api/index.js'
import { dbNameFor, liveStoreQuery, newNodeDoc, NodeStore, rememberPermissions, type OpRow } from '../store/index.js'
import { NO_PERMISSIONS } from '../../shared/access-policy.js'
import { MuxConnection, type ConnectionStatus, type ConnectionTrouble, type FinalClose } from './mux-connection.js'
import { NodeReplica, type TabMessage } from './node-replica.js'
import { background } from './background.js'
import { oneAtATime } from './one-at-a-time.js'
import * as Y from 'yjs'
import { applyPatchToDoc } from '../../shared/merge-patch.js'
import { jsonEqual } from '../../shared/json.js'
import { textPolicyFor } from '../../shared/text-fields.js'

export interface Session {
  userId: string
  token: string
  name: string
}

/**
 * `offline`: the browser says there is no network. `unreachable`: there is a network but the
 * server cannot be reached (or keeps closing the socket).
 */
export type SyncStatusKind = 'offline' | 'unreachable' | 'connecting' | 'syncing' | 'saved' | 'final'

export interface SyncStatus {
  kind: SyncStatusKind
  online: boolean
  /** The socket keeps failing the same way (shown once it happened a few times in a row). */
  trouble: ConnectionTrouble | null
  /** When everything this device had was last on the server (ms since epoch), if this session saw it. */
  lastSyncedAt: number | null
  /** Unsent changes: outbox patches plus queued creations/deletions. */
  pending: number
  refused: number
  final: FinalClose | null
}

export interface SyncClientOptions {
  session: Session
  /** http(s) origin of the server; the app uses its own origin. */
  baseUrl: string
  dbName?: string
  WebSocketImpl?: typeof WebSocket
}

/** A queued creation or deletion the server refused when it was replayed. */
export interface OpError {
  path: string
  code: string
  message: string
  /** What was asked: [WEB133] a creation, [WEB132] a rename, [SYNC24] a deletion. */
  kind?: OpRow['kind']
  /** The name a creation or rename gave (what the author typed). */
  name?: string
}

interface Held {
  replica: NodeReplica
  refs: number
  idleTimer: ReturnType<typeof setTimeout> | null
}

/**
 * How long an unused replica stays loaded (and its room joined). Navigating back and forth,
 * or a burst of patches through `patch()`, then reuses the doc instead of reloading it.
 */
const IDLE_DISPOSE_MS = 10_000

/**
 * Lists (tree levels, child lists) follow the server's change feed at this period while
 * online. Node contents do not need it: their rooms push every change.
 */
/** A fallback only: the server pushes a Changed hint when readable nodes change. */
const CHANGE_FEED_PERIOD_MS = 10_000

/**
 * Pages one catch-up follows at most (each examines up to 10,000 changes on the server); a
 * backlog beyond it continues on the next hint or period instead of holding the poll.
 */
const FEED_CATCH_UP_PAGES = 50

/** [SYNC19] Queued operations that failed for now are tried again after 1 s, then twice as long each time, up to 30 s. */
const OP_RETRY_FIRST_MS = 1000
const OP_RETRY_MAX_MS = 30_000

/** The server's documented default (MAX_PAYLOAD_BYTES), used until /api/config answers. */
const DEFAULT_MAX_PAYLOAD_BYTES = 1024 * 1024

function parentOf(path: string): string {
  const i = path.lastIndexOf('/')
  return i < 0 ? '' : path.slice(0, i)
}

/**
 * The coordinator of a session: one store, one socket, one replica per node in use or with
 * unsent changes. After every (re)connect it replays queued creations and deletions over HTTP,
 * then resyncs every node that still has pending changes.
 */
export class SyncClient {
  readonly store: NodeStore
  readonly api: HttpApi
  readonly conn: MuxConnection
  readonly status$: Observable<SyncStatus>
  /** Queued operations the server refused for good (shown to the user). */
  readonly opErrors$ = new BehaviorSubject<OpError[]>([])
  /** Readable changes from the server's feed as this client follows it (views that query the server). */
  readonly feed$ = new Subject<ChangeRecord>()
  private readonly replicas = new Map<string, Held>()
  private readonly channel: BroadcastChannel | null
  private readonly subs: Subscription[] = []
  private flushingOps: Promise<void> | null = null
  private readonly watchedParents = new Map<string, number>()
  private feedTimer: ReturnType<typeof setTimeout> | null = null
  private feedVersion: number | null = null
  private stopped = false
  /** The server's limit on one change (GET /api/config), 1 MiB until it answers. */
  maxPayloadBytes = DEFAULT_MAX_PAYLOAD_BYTES

  constructor(readonly opts: SyncClientOptions) {
    const { session, baseUrl } = opts
    this.store = new NodeStore(opts.dbName ?? dbNameFor(session.userId))
    this.api = new HttpApi(baseUrl, () => session.token)
    const wsBase = baseUrl.replace(/^http/, 'ws')
    this.conn = new MuxConnection({
      url: () => `${wsBase}/mux?token=${encodeURIComponent(session.token)}`,
      WebSocketImpl: opts.WebSocketImpl,
    })
    this.channel = typeof BroadcastChannel === 'undefined' ? null : new BroadcastChannel(`weft-tabs-${session.userId}`)
    if (this.channel) this.channel.onmessage = (ev: MessageEvent<TabMessage>) => this.replicas.get(ev.data.path)?.replica.applyFromTab(ev.data)

    const totals$ = liveStoreQuery(this.store.db, ['outbox', 'ops'], async () => {
      // [SYNC18] Read first: every local write settled by now is in the counts below.
      const settled = this.store.settledLocalWrites
      return {
        pending: (await this.store.db.outbox.where('status').equals('pending').count()) + (await this.store.countPendingOps()),
        refused: (await this.store.db.outbox.where('status').equals('refused').count()) + (await this.store.countRefusedOps()),
        settled,
      }
    })
    let lastSyncedAt: number | null = null
    this.status$ = combineLatest([this.conn.status$, totals$, this.store.localWritesBegun$, this.conn.final$, this.conn.trouble$]).pipe(
      map(([conn, totals, begun, final, trouble]) => {
        // Edits made but not yet in the counts (their rows are being written) are pending too.
        const pending = totals.pending + Math.max(0, begun - totals.settled)
        const kind = statusKind(conn, pending)
        if (kind === 'saved') lastSyncedAt = Date.now()
        return { kind, online: conn === 'open', pending, refused: totals.refused, final, trouble: trouble && trouble.count >= 3 ? trouble : null, lastSyncedAt }
      }),
      distinctUntilChanged((a, b) => a.kind === b.kind && a.pending === b.pending && a.refused === b.refused && a.final === b.final && a.trouble?.count === b.trouble?.count),
      shareReplay({ bufferSize: 1, refCount: true }),
    )
  }

  get session(): Session {
    return this.opts.session
  }

  /**
   * Starts the socket and the change feed. Resolves once the store is open; callers that
   * render may go ahead without waiting: Dexie queues every query until the database is open,
   * so the first render overlaps the open instead of following it.
   */
  start(): Promise<void> {
    const opened = this.store.open()
    this.subs.push(
      this.conn.status$.pipe(distinctUntilChanged()).subscribe((s) => {
        if (s === 'open') background(this.onConnected())
      }),
    )
    // The server's Changed hint: catch up from the feed now (one poll at a time, one more after).
    this.subs.push(this.conn.changed$.subscribe(() => this.pollSoon()))
    // [SYNC22] A node replaced at its path under unsent edits: an open replica shows the new one.
    this.subs.push(this.store.replaced$.subscribe((path) => this.replicas.get(path)?.replica.rebuildFromServer()))
    this.conn.start()
    this.scheduleFeed()
    return opened
  }

  /** Keeps `parent`'s listing fresh from the change feed until the returned function is called. */
  watchParent(parent: string): () => void {
    this.watchedParents.set(parent, (this.watchedParents.get(parent) ?? 0) + 1)
    background(this.refreshChildren(parent))
    return () => {
      const n = (this.watchedParents.get(parent) ?? 1) - 1
      if (n <= 0) this.watchedParents.delete(parent)
      else this.watchedParents.set(parent, n)
    }
  }

  private scheduleFeed(): void {
    if (this.stopped) return
    this.feedTimer = setTimeout(() => {
      this.pollSoon()
      this.scheduleFeed()
    }, CHANGE_FEED_PERIOD_MS)
  }

  /** Catches up from the feed: one poll at a time, one more after it if asked meanwhile. */
  private readonly pollSoon = oneAtATime(() => this.pollFeed())

  private async pollFeed(): Promise<void> {
    if (!this.conn.isOpen) return
    try {
      if (this.feedVersion === null) {
        // Start from what the index already reflects; older changes are in it.
        let max = 0
        await this.store.db.nodes.each((r) => {
          if (r.version > max) max = r.version
        })
        this.feedVersion = max
      }
      // [FEED2] Follow the cursor until caught up: it advances past every change the server
      // examined, readable or not, so a page that is empty (thousands of writes this user cannot
      // read ahead) still moves on instead of asking for the same range forever.
      const parents = new Set<string>()
      for (let page = 0; page < FEED_CATCH_UP_PAGES && !this.stopped; page++) {
        const since: number = this.feedVersion
        const { items, next } = await this.api.changesSince(since)
        for (const c of items) {
          this.feed$.next(c)
          parents.add('')
          parents.add(parentOf(c.path))
          if (c.kind === 'Deleted') {
            const row = await this.store.getIndexRow(c.path)
            // Refused edits are kept until the author discards them, even for a deleted node.
            if (row && row.pending === 0 && row.refused === 0 && !row.localOnly) await this.store.removeLocal(c.path, false)
          }
        }
        this.feedVersion = Math.max(since, next)
        if (this.feedVersion === since) break
      }
      await Promise.all([...parents].filter((p) => this.watchedParents.has(p)).map((p) => this.refreshChildren(p)))
    } catch (e) {
      if (!(e instanceof NetworkError || e instanceof HttpError)) throw e
    }
  }

  stop(): void {
    this.stopped = true
    if (this.feedTimer) clearTimeout(this.feedTimer)
    if (this.opRetryTimer) clearTimeout(this.opRetryTimer)
    for (const s of this.subs) s.unsubscribe()
    for (const held of this.replicas.values()) {
      if (held.idleTimer) clearTimeout(held.idleTimer)
      held.replica.dispose()
    }
    this.replicas.clear()
    this.conn.stop()
    this.channel?.close()
    this.store.close()
  }

  private async loadConfig(): Promise<void> {
    try {
      const config = await this.api.config()
      if (config && Number.isFinite(config.maxPayloadBytes) && config.maxPayloadBytes > 0) this.maxPayloadBytes = config.maxPayloadBytes
    } catch (e) {
      if (!(e instanceof NetworkError)) throw e
    }
  }

  private async onConnected(): Promise<void> {
    background(this.loadConfig())
    await this.flushOps()
    for (const path of await this.store.pathsWithPending()) this.hold(path, 0)
  }

  /** A replica for `path`, held by a view until `release`. */
  acquire(path: string, announce = true): NodeReplica {
    const replica = this.hold(path, 1)
    // A view that only shows a node beside another (a thread's cells, a sub-thread's status)
    // does not say "here" in its room.
    if (announce) replica.setPresence({ id: this.session.userId, name: this.session.name })
    return replica
  }

  release(path: string): void {
    const held = this.replicas.get(path)
    if (!held) return
    held.refs = Math.max(0, held.refs - 1)
    if (held.refs === 0) {
      held.replica.setPresence(null)
      this.disposeIfIdle(path)
    }
  }

  private hold(path: string, refs: number): NodeReplica {
    let held = this.replicas.get(path)
    if (!held) {
      const replica = new NodeReplica(path, {
        store: this.store,
        conn: this.conn,
        // After stop() the channel is closed; an edit settling late has nobody to tell.
        broadcast: (msg) => {
          if (!this.stopped) this.channel?.postMessage(msg)
        },
        onIdle: (p) => this.disposeIfIdle(p),
        maxPayloadBytes: () => this.maxPayloadBytes,
        confirmNode: (p) => this.refreshNode(p),
      })
      held = { replica, refs: 0, idleTimer: null }
      this.replicas.set(path, held)
      this.rememberPermissionsOf(replica)
      background(this.store.getIndexRow(path).then((row) => {
        // A node created offline joins once its creation reached the server.
        if (!row?.localOnly) replica.startSync()
      }))
    }
    held.refs += refs
    if (held.idleTimer && held.refs > 0) {
      clearTimeout(held.idleTimer)
      held.idleTimer = null
    }
    return held.replica
  }

  /**
   * [WEB85] Every mask a room tells (Joined, a role changed) and every final denial is kept on
   * this device, so a page opened offline or before its room answers knows the role. The
   * subscription ends with the replica (nothing else holds its state$).
   */
  private rememberPermissionsOf(replica: NodeReplica): void {
    let last: string | null = null
    replica.state$.subscribe((st) => {
      const lost = st.denied && st.denied.code !== 'moved' && st.denied.code !== 'not_found'
      const perms = lost ? NO_PERMISSIONS : st.joined ? st.permissions : null
      if (!perms) return
      const key = [...perms].sort().join(',')
      if (key === last) return
      last = key
      background(rememberPermissions(this.store.db, replica.path, perms))
    })
  }

  private disposeIfIdle(path: string): void {
    const held = this.replicas.get(path)
    if (!held || held.refs > 0 || held.idleTimer) return
    held.idleTimer = setTimeout(() => {
      held.idleTimer = null
      this.disposeNow(path, held)
    }, IDLE_DISPOSE_MS)
  }

  private disposeNow(path: string, held: Held): void {
    if (held.refs > 0) return
    background(this.store.getIndexRow(path).then((row) => {
      const current = this.replicas.get(path)
      if (current !== held || held.refs > 0 || held.replica.state$.value.rebuilding) return
      if (row && row.pending > 0 && !held.replica.state$.value.denied) return
      held.replica.dispose()
      this.replicas.delete(path)
    }))
  }

  /**
   * Makes nodes available offline: holds each one's replica until it has the server's state.
   * Resolves when all are stored (nodes that are denied resolve too).
   */
  async prefetch(paths: readonly string[]): Promise<void> {
    await Promise.all(
      paths.map(async (path) => {
        const replica = this.hold(path, 1)
        try {
          await Promise.race([
            replica.synced,
            new Promise<void>((resolve) => {
              const s = replica.state$.subscribe((st) => {
                if (st.denied) resolve()
              })
              background(replica.synced.then(() => s.unsubscribe()))
            }),
          ])
        } finally {
          this.release(path)
        }
      }),
    )
  }

  /** One field edit = one merge patch on the node. */
  async patch(path: string, patch: MergePatch | (() => MergePatch)): Promise<void> {
    const replica = this.hold(path, 1)
    try {
      await replica.patch(patch)
    } finally {
      this.release(path)
    }
  }

  async discardRefused(id: number): Promise<void> {
    await this.discardRefusedMany([id])
  }

  /**
   * [WEB81] Discards refused entries (a group, or all): each node's copy on this device becomes
   * the server's again (an open replica is rebuilt now, any other at its next open), so the
   * discarded text is no longer shown as if saved.
   */
  async discardRefusedMany(ids: readonly number[]): Promise<void> {
    for (const path of await this.store.discardMany(ids)) this.replicas.get(path)?.replica.rebuildFromServer()
  }

  /**
   * [WEB82] Sends refused entries again (the role may write again): pending once more, replayed on
   * the node's doc rebuilt from the server's state. The replica is held until they settle.
   */
  async retryRefused(ids: readonly number[]): Promise<void> {
    for (const path of await this.store.retryRefused(ids)) {
      const held = this.replicas.get(path)
      if (!held) {
        this.hold(path, 0)
        continue
      }
      held.replica.rebuildFromServer()
      held.replica.rejoinIfDenied()
    }
  }

  /**
   * Creates, never replaces: a PUT with `If-None-Match: *` when online (`already_exists` when
   * the path is taken); queued (and shown as pending) when the network is not there, unless
   * this device already knows a node at that path.
   */
  async createNode(path: string, nodeType: string, name: string, content: JsonObject = {}, opts: { sealed?: boolean } = {}): Promise<void> {
    try {
      if (typeof navigator !== 'undefined' && navigator.onLine === false) throw new NetworkError('offline')
      const node = await this.api.createNode(path, { nodeType, name, content })
      await this.store.upsertNodes([node])
    } catch (e) {
      if (!(e instanceof NetworkError)) throw e
      if (await this.store.getIndexRow(path)) throw new HttpError(412, 'already_exists', `A node already exists at ${path}.`)
      if (opts.sealed) {
        // Made whole (a thread's user cell): the content goes with the create when it is
        // replayed, never as an edit of a node its author may not change once made.
        const doc = newNodeDoc(path)
        applyPatchToDoc(doc, content, 'local', textPolicyFor(nodeType))
        await this.store.queueCreate(path, nodeType, name, { content, state: Y.encodeStateAsUpdate(doc) })
        await this.replicas.get(path)?.replica.reload()
        return
      }
      await this.store.queueCreate(path, nodeType, name)
      if (Object.keys(content).length > 0) await this.patch(path, content)
    }
  }

  /** True when a node is known at `path` (this device's index, else the server when reachable). */
  async isPathTaken(path: string): Promise<boolean> {
    if (await this.store.getIndexRow(path)) return true
    try {
      return await this.api.nodeExists(path)
    } catch (e) {
      if (e instanceof NetworkError) return false
      throw e
    }
  }

  /**
   * [MOVE8] Renames the node (its path stays). [WEB131] Without the server (offline, or the node
   * not created there yet) the rename is queued with the other operations, shown here at once, and
   * replayed once back online.
   */
  async renameNode(path: string, name: string): Promise<void> {
    try {
      if (typeof navigator !== 'undefined' && navigator.onLine === false) throw new NetworkError('offline')
      const row = await this.store.getIndexRow(path)
      if (row?.localOnly || (await this.store.hasPendingOp(path))) throw new NetworkError('queued after the operations before it')
      await this.store.upsertNodes([await this.api.renameNode(path, name)])
    } catch (e) {
      if (!(e instanceof NetworkError)) throw e
      await this.store.queueRename(path, name)
    }
  }

  async deleteNode(path: string): Promise<void> {
    let queue = false
    try {
      if (typeof navigator !== 'undefined' && navigator.onLine === false) throw new NetworkError('offline')
      await this.api.deleteNode(path)
    } catch (e) {
      if (e instanceof HttpError && e.status === 404) queue = false
      else if (e instanceof NetworkError) queue = true
      else throw e
    }
    this.dropReplicas(path)
    await this.store.removeLocal(path, queue)
  }

  private dropReplicas(path: string): void {
    for (const [p, held] of this.replicas) {
      if (p === path || p.startsWith(path + '/')) {
        if (held.idleTimer) clearTimeout(held.idleTimer)
        held.replica.dispose()
        this.replicas.delete(p)
      }
    }
  }

  /**
   * [MOVE2] After a move, a trash or a restore: this device forgets the subtree's old place and
   * re-reads the parents on both sides (the server holds the nodes at their new place).
   */
  async relocated(from: string, to: string): Promise<void> {
    this.dropReplicas(from)
    await this.store.removeLocal(from, false)
    await Promise.all([parentOf(from), parentOf(to)].map((p) => this.refreshChildren(p)))
  }

  /**
   * A node from the server. A system child (a Code node's `_Check`) appears when its engine
   * writes it, often just after a page asks: it is looked up in its parent's listing, which
   * answers 200 either way (a GET of it would log a 404 in the console in normal use).
   */
  private async fetchNode(path: string): Promise<MeshNode> {
    const slash = path.lastIndexOf('/')
    if (slash < 0 || !path.startsWith('_', slash + 1)) return this.api.getNode(path)
    const found = await this.fromListing(path)
    if (!found) throw new HttpError(404, 'not_found', `No node at ${path}.`)
    return found
  }

  /** `path` as its parent's listing ('' = top level) has it: only what the caller may read, always 200. */
  private async fromListing(path: string): Promise<MeshNode | undefined> {
    const slash = path.lastIndexOf('/')
    return (await this.api.listChildren(slash < 0 ? '' : path.slice(0, slash), 500)).find((n) => n.path === path)
  }

  /** Refreshes the local index of `parent` ('' = top level) from the server; offline it is a no-op. */
  async refreshChildren(parent: string): Promise<void> {
    const limit = 500
    try {
      const askedAt = this.store.stamp()
      const items = await this.api.listChildren(parent, limit)
      await this.store.reconcileChildren(parent, items, items.length < limit, askedAt)
    } catch (e) {
      if (!(e instanceof NetworkError || e instanceof HttpError)) throw e
    }
  }

  /**
   * [WEB16] Learns a linked node (its name) from its parent's listing, which holds only what the
   * caller may read: a link to a node they cannot read (another person's profile) costs no 403.
   */
  async learnNode(path: string): Promise<void> {
    try {
      const found = await this.fromListing(path)
      if (found) await this.store.upsertNodes([found])
    } catch (e) {
      if (!(e instanceof NetworkError || e instanceof HttpError)) throw e
    }
  }

  async refreshNode(path: string): Promise<void> {
    try {
      await this.store.upsertNodes([await this.fetchNode(path)])
    } catch (e) {
      if (e instanceof HttpError && e.status === 404) {
        const row = await this.store.getIndexRow(path)
        if (row && !row.localOnly && row.pending === 0 && row.refused === 0) await this.store.removeLocal(path, false)
        return
      }
      if (!(e instanceof NetworkError || e instanceof HttpError)) throw e
    }
  }

  private flushOps(): Promise<void> {
    this.flushingOps ??= this.runOps().finally(() => {
      this.flushingOps = null
    })
    return this.flushingOps
  }

  /** [SYNC19] The next replay of queued operations after a failure for now, and how many in a row failed. */
  private opRetryTimer: ReturnType<typeof setTimeout> | null = null
  private opFailures = 0

  /**
   * [SYNC19] Tries the queued operations again after a growing delay (1 s, doubling, at most 30 s)
   * while the socket is open; a reconnect tries them at once anyway (onConnected).
   */
  private retryOpsLater(): void {
    if (this.stopped || this.opRetryTimer) return
    const delay = Math.min(OP_RETRY_MAX_MS, OP_RETRY_FIRST_MS * 2 ** this.opFailures++)
    this.opRetryTimer = setTimeout(() => {
      this.opRetryTimer = null
      if (!this.stopped && this.conn.isOpen) background(this.flushOps())
    }, delay)
  }

  private async runOps(): Promise<void> {
    try {
      await this.runClaimedOps()
    } finally {
      await this.store.releaseOps()
    }
  }

  private async runClaimedOps(): Promise<void> {
    for (const op of await this.store.pendingOps()) {
      // [SYNC23] One tab replays the queue at a time; this one tries again once that tab is done.
      if (!(await this.store.claimOps()) || !(await this.store.isOpQueued(op))) {
        this.retryOpsLater()
        return
      }
      try {
        await this.runOp(op)
      } catch (e) {
        if (isFailureForNow(e)) {
          // [SYNC19] Not a refusal: the operation stays queued (and counted as pending), in order
          // (a creation queued under it waits for it), and is tried again.
          await this.store.noteOpFailure(op, e instanceof HttpError ? e.code : 'network', e instanceof Error ? e.message : String(e))
          this.retryOpsLater()
          return
        }
        if (op.kind === 'create' && e instanceof HttpError && e.code === 'already_exists') {
          // Taken meanwhile: the offline node's edits are kept as refused on that path.
          const message = `“${op.name}” was created on this device while offline, but a node already exists at ${op.path}. Your edits to it were not applied; they are kept below.`
          await this.store.refuseCreate(op, e.code, message)
          this.opErrors$.next([...this.opErrors$.value, { path: op.path, code: e.code, message }])
          // The reload first, then the sync: the other way round, the server's state could land
          // on the doc the reload then replaces (an empty page, CI caught it).
          const held = this.replicas.get(op.path)?.replica
          if (held) {
            await held.reload()
            held.startSync()
          }
          continue
        }
        const message = e instanceof Error ? e.message : String(e)
        const code = e instanceof HttpError ? e.code : 'unknown'
        const told: OpError = { path: op.path, code, message: `${op.kind} ${op.path}: ${message}`, kind: op.kind, ...(op.kind === 'delete' ? {} : { name: op.name }) }
        if (e instanceof HttpError && e.status >= 400 && e.status < 500) {
          if (op.kind === 'create') {
            // [WEB97] Refused (a Viewer, Create rights lost meanwhile): no node was made, so the
            // device stops listing it; its edits stay, refused, for the author.
            this.opErrors$.next([...this.opErrors$.value, told])
            await this.store.refuseCreateGone(op, code, `“${op.name}” was created on this device while offline, but the server refused it: ${message}`, message)
            continue
          }
          // [SYNC24] A rename or deletion refused for good is kept, refused, for its author, and
          // the node is shown as the server has it (a refused deletion's node comes back); then
          // it is told.
          await this.store.refuseOp(op, code, message)
          await this.refreshNode(op.path)
          if (op.kind === 'delete') await this.refreshChildren(parentOf(op.path))
          this.opErrors$.next([...this.opErrors$.value, told])
          continue
        }
        this.opErrors$.next([...this.opErrors$.value, told])
      }
      await this.store.completeOp(op)
      if (op.kind === 'create') this.replicas.get(op.path)?.replica.startSync()
    }
    this.opFailures = 0
  }

  private async runOp(op: OpRow): Promise<void> {
    switch (op.kind) {
      case 'create':
        // A replay of a create the server already made (an earlier attempt whose answer was
        // lost) also answers already_exists; it is told apart by the node being ours.
        try {
          await this.store.upsertNodes([await this.api.createNode(op.path, { nodeType: op.nodeType, name: op.name, content: op.content ?? {} })])
        } catch (e) {
          if (!(e instanceof HttpError && e.code === 'already_exists')) throw e
          const existing = await this.api.getNode(op.path).catch(() => null)
          if (!existing || !(sameSealed(op, existing) || (existing.createdBy === this.session.userId && existing.createdAt >= op.at))) throw e
          await this.store.upsertNodes([existing])
        }
        return
      case 'delete':
        try {
          await this.api.deleteNode(op.path)
        } catch (e) {
          if (!(e instanceof HttpError && e.status === 404)) throw e
        }
        return
      case 'rename':
        await this.store.upsertNodes([await this.api.renameNode(op.path, op.name)])
        return
      default:
        op satisfies never
    }
  }
}

/**
 * A sealed creation already made another way (a message posted over HTTP whose answer was lost,
 * then queued): the node there is the same type with the same content, its time stamp aside
 * (the server stamps the time it made it).
 */
function sameSealed(op: OpRow & { kind: 'create' }, existing: MeshNode): boolean {
  if (!op.content || existing.nodeType !== op.nodeType) return false
  return Object.entries(op.content).every(([k, v]) => k === 'CreatedAt' || jsonEqual(existing.content[k] ?? null, v))
}

/**
 * [SYNC19] A replay that failed for now, not a refusal: the network, the server failing (5xx), a
 * timeout or too many requests. A 4xx with the server's code (forbidden, already_exists) is final.
 */
function isFailureForNow(e: unknown): boolean {
  if (e instanceof NetworkError) return true
  return e instanceof HttpError && (e.status >= 500 || e.status === 408 || e.status === 429)
}

function statusKind(conn: ConnectionStatus, pending: number): SyncStatusKind {
  const browserOffline = typeof navigator !== 'undefined' && navigator.onLine === false
  switch (conn) {
    case 'open':
      return pending > 0 ? 'syncing' : 'saved'
    case 'connecting':
      return browserOffline ? 'offline' : 'connecting'
    case 'offline':
      return browserOffline ? 'offline' : 'unreachable'
    case 'final':
      return 'final'
    default:
      return conn satisfies never
  }
}
