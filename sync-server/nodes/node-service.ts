import type { Observable } from 'rxjs'
import type { Logger } from 'pino'
import {
  ADMIN_PARTITION,
  DEFAULT_MAX_JSON_DEPTH,
  SYSTEM,
  WeftError,
  isSystem,
  isWeftError,
  nodeTypeDef,
  principalName,
  type ChangeRecord,
  type JsonValue,
  type MergePatch,
  type MeshNode,
  type NodePath,
  type NodeQuery,
  type Permission,
  type PermissionSet,
  type Principal,
  type PathRange,
} from '../../shared/index.js'
import { MAX_QUERY_LIMIT, type ClientBinding, type FieldRow, type MoveInput, type StorageAdapter, type TrashEntry } from '../storage/index.js'
import type { AccessService } from '../access/index.js'
import { CommitFeed } from './commit-feed.js'
import { ContentFlush } from './content-flush.js'
import { LoadedNode, type EarlyUpdate, type RoomConnection } from './loaded-node.js'
import { NodeCache } from './node-cache.js'
import { PagedReads } from './paged-reads.js'
import type { AppendOptions, ChangeOrigin, ClusterHooks, ClusterLink, CommitAttachment, LiveChange, NodeApi, NodeCapabilities, NodeDraft, SyncNodeApi, SyncRoom, UpdateFn, WriteRuleHook } from './types.js'
import { WritePath } from './write-path.js'
import { RemoteApply, type RemoteChange } from './remote-apply.js'
import { WriteRules, allowsRule, checkFieldRules, ownerOf } from './write-policy.js'

export interface NodeServiceOptions {
  idleUnloadMs: number
  /** Soft cap on loaded docs: beyond it, docs without clients unload least recently used first. */
  maxLoadedDocs?: number
  /** Deepest JSON a client may write (MAX_JSON_DEPTH); deeper is `invalid_patch` / `invalid_content` / `invalid_update`. */
  maxJsonDepth?: number
  /** [QUERY1] Range queries one query page makes at most (default REGION_QUERY_BUDGET; tests lower it). */
  regionQueryBudget?: number
  log: Logger
}

/** [OPS3] What `/metrics` counts of the node store (sync-server/metrics/); each call is a counter increment. */
export interface NodeMetricsHooks {
  /** A client's update arrived over a socket. */
  update(origin: ChangeOrigin): void
  /** It became durable (the client is acknowledged). */
  durable(origin: ChangeOrigin): void
  /** It was refused (before it touched the doc, or its commit failed). */
  refused(code: string, origin: ChangeOrigin): void
  /** A commit became durable after this many seconds (any origin). */
  committed(seconds: number): void
}

/** Stale rows repaired per step at boot: their logs are replayed together, then written in one group commit. */
const STALE_REPAIR_PAGE = 200

/**
 * The authoritative node store of one server, composed of its parts: the cache of loaded nodes
 * (node-cache.ts), paged reads (paged-reads.ts), the write policy and its per-type rules
 * (write-policy.ts), the write path (write-path.ts), commit and feed (commit-feed.ts) and the
 * content flush (content-flush.ts). Every read and write checks access for its principal;
 * writes are acknowledged once durable. Transports and engines see it through its interfaces
 * (NodeApi, HttpNodeApi, SyncNodeApi in types.ts).
 */
export class NodeService implements SyncNodeApi {
  private readonly cache: NodeCache
  private readonly reads: PagedReads
  private readonly rules = new WriteRules()
  private readonly flush: ContentFlush
  private readonly feed: CommitFeed
  private metrics: NodeMetricsHooks | null = null
  private readonly writes: WritePath
  private readonly remote: RemoteApply
  /** [SCALE1] The other instances, read by every part at each use (connectCluster sets them). */
  private readonly cluster: ClusterLink = { hooks: null }
  readonly changes$: Observable<LiveChange>

  constructor(
    private readonly storage: StorageAdapter,
    private readonly access: AccessService,
    private readonly opts: NodeServiceOptions,
  ) {
    this.cache = new NodeCache(storage, opts, this.cluster)
    this.reads = new PagedReads(storage, access, opts.regionQueryBudget)
    this.flush = new ContentFlush(storage, this.cache, this.cluster)
    this.feed = new CommitFeed(storage, access, this.cache, this.flush, this.cluster)
    this.writes = new WritePath(storage, access, this.cache, this.feed, this.flush, this.rules, opts.maxJsonDepth ?? DEFAULT_MAX_JSON_DEPTH, this.cluster)
    this.changes$ = this.feed.changes$
    this.remote = new RemoteApply(storage, access, this.cache, this.feed)
  }

  // ---------------------------------------------------------------- several instances (issue 20)

  /**
   * [SCALE1] [SCALE3] Connects this instance to the others (sync-server/cluster/): its own
   * durable changes and its clients' presence go out; a room opening here asks for theirs.
   */
  connectCluster(hooks: ClusterHooks): void {
    this.cluster.hooks = hooks
  }

  /** [SCALE1] A change another instance made durable: into this instance's memory and feed. */
  applyRemote(change: RemoteChange): Promise<void> {
    return this.remote.apply(change)
  }

  /** [SCALE2] A page of changes another instance made, read from storage (remote-apply.ts): each path read once. */
  applyRemotePage(changes: readonly RemoteChange[], fresh: (change: RemoteChange) => boolean, applied: (change: RemoteChange) => void): Promise<void> {
    return this.remote.applyPage(changes, fresh, applied)
  }

  /** [SCALE12] An update another instance accepted and is committing, into the copy here (remote-apply.ts); whether one took it. */
  applyEarly(path: NodePath, key: string, update: Uint8Array, clients: readonly ClientBinding[], early: EarlyUpdate): boolean {
    return this.remote.applyEarly(path, key, update, clients, early)
  }

  /** [SCALE12] That update's commit failed or never came: a copy here that took it is dropped. */
  dropEarly(path: NodePath, key: string): void {
    this.remote.dropEarly(path, key)
  }

  /** [SCALE3] Presence from another instance's clients. */
  applyRemotePresence(path: NodePath, update: Uint8Array): void {
    this.remote.applyPresence(path, update)
  }

  /** [SCALE3] The presence of this instance's clients in a room (null: none here). */
  localPresence(path: NodePath): Uint8Array | null {
    return this.remote.localPresence(path)
  }

  /**
   * Repairs rows a crash left stale ([STO5]), rebuilds the access indexes from storage and makes
   * sure the Admin partition exists. Runs before the server listens.
   */
  async boot(): Promise<void> {
    const repaired = await this.repairStaleRows()
    if (repaired > 0) this.opts.log.info({ repaired }, 'rebuilt row content left stale by an unclean stop')
    for (const nodeType of ['AccessAssignment', 'Membership']) {
      for await (const node of this.scan({ nodeType })) this.access.observe(null, node)
    }
    await this.update(SYSTEM, ADMIN_PARTITION, (current) => current ?? { nodeType: 'Space', name: 'Admin', content: {} }, 'system')
  }

  /**
   * [STO5] A row whose content is stale (deferred commits that a crash kept from their row write)
   * gets its content from its Yjs log, written back, so a `where.` filter sees it again. Paged;
   * the writes of a page go out together (one group commit). At boot nothing else writes, so
   * the content read is the content written.
   */
  private async repairStaleRows(): Promise<number> {
    let after: string | null = null
    let repaired = 0
    for (;;) {
      const paths = await this.storage.stalePaths(after, STALE_REPAIR_PAGE)
      await Promise.all(
        paths.map(async (path) => {
          // A stale row is read from its log ([STO5]): that content is what the row should say.
          const node = await this.storage.getNode(path)
          if (!node) return
          try {
            await this.storage.writeContent(path, node.content)
          } catch (err) {
            // A row storage refuses (content it cannot hold) stays stale; the server still starts.
            if (!(err instanceof WeftError) || err.code !== 'invalid_content') throw err
            this.opts.log.error({ err, path }, 'a stale row could not be rebuilt; it stays stale')
          }
        }),
      )
      repaired += paths.length
      if (paths.length < STALE_REPAIR_PAGE) return repaired
      after = paths[paths.length - 1]!
    }
  }

  /** Every node matching the query, paged by path (no limit). System use only. */
  scan(query: Omit<NodeQuery, 'limit' | 'after'>): AsyncGenerator<MeshNode> {
    return this.reads.scan(query)
  }

  /** [MOVE4] Every node below `path` (not itself), in path order. System use only. */
  scanSubtree(path: NodePath): AsyncGenerator<MeshNode> {
    return this.reads.scanSubtree(path)
  }

  stats(): { loadedDocs: number; rooms: number } {
    return { loadedDocs: this.loadedDocCount(), rooms: this.roomCount() }
  }

  /** Nodes loaded in memory. */
  loadedDocCount(): number {
    return this.cache.size
  }

  /** Loaded nodes with a client connected (counts every copy: for a scrape, not a hot path). */
  roomCount(): number {
    return this.cache.roomCount()
  }

  /** [OPS3] Counts client updates, acknowledgements, refusals and commit latency into `hooks`. */
  instrument(hooks: NodeMetricsHooks): void {
    this.metrics = hooks
    this.feed.onCommitted = hooks.committed
  }

  /** Whether the node is in memory right now (diagnostics and tests). */
  isLoaded(path: NodePath): boolean {
    return this.cache.peek(path) !== undefined
  }

  /** See NodeApi.applied. */
  applied(path: NodePath): boolean | null {
    const ln = this.cache.peek(path)
    return ln ? ln.node !== null : null
  }

  /** See NodeApi.committing. */
  committing(path: NodePath): Promise<void> | null {
    const ln = this.cache.peek(path)
    return ln && ln.changesInFlight > 0 ? ln.changesSettled() : null
  }

  /** Whether the node's Y.Doc is built right now ([DOC1]; diagnostics and tests). */
  hasDoc(path: NodePath): boolean {
    return this.cache.peek(path)?.hasDoc ?? false
  }

  // ---------------------------------------------------------------- loading

  /** The node in memory (its row; the doc is built by acquireDoc), loading it from storage once. */
  acquire(path: NodePath): Promise<LoadedNode> {
    return this.cache.acquire(path)
  }

  /** The node in memory with its Y.Doc built: what a room (a client's sync session) needs. */
  acquireDoc(path: NodePath): Promise<LoadedNode> {
    return this.cache.acquireDoc(path)
  }

  // ---------------------------------------------------------------- reads

  async get(principal: Principal, path: NodePath): Promise<MeshNode | null> {
    if (!(await this.mayRead(principal, path))) this.requirePermission(principal, path, 'Read')
    return this.cache.read(path)
  }

  /** Like `get`, but loads the node into memory: for a read that a write to the node follows. */
  async read(principal: Principal, path: NodePath): Promise<MeshNode | null> {
    if (!(await this.mayRead(principal, path))) this.requirePermission(principal, path, 'Read')
    return (await this.cache.acquire(path)).node
  }

  /**
   * [SCALE14] Whether `principal` may read `path`. With several instances, this instance's access
   * rules may lag a grant another instance has just committed (a space created through one
   * instance, opened through another a moment later): a refusal is decided again once every change
   * committed before it is applied here, so every instance refuses alike. A grant is never waited
   * for: only a refusal pays for the check.
   */
  async mayRead(principal: Principal, path: NodePath): Promise<boolean> {
    if (this.access.has(principal, path, 'Read')) return true
    const hooks = this.cluster.hooks
    if (!hooks) return false
    await hooks.freshen()
    return this.access.has(principal, path, 'Read')
  }

  /** The readable nodes of the query; `queryPage` says where to continue when there may be more. */
  async query(principal: Principal, query: NodeQuery): Promise<MeshNode[]> {
    return (await this.queryPage(principal, query)).items
  }

  /**
   * [KIT7] An engine's light page (kit/light-query.ts): paths and a few top-level fields, projected
   * by storage, so a reconciler finds work without parsing large contents. System only.
   */
  async queryFields(principal: Principal, query: NodeQuery, fields: readonly string[]): Promise<FieldRow[]> {
    if (!isSystem(principal)) throw new WeftError('forbidden', 'queryFields is for engines (system) only.')
    return this.storage.queryFields({ ...query, limit: Math.max(1, Math.min(query.limit ?? MAX_QUERY_LIMIT, MAX_QUERY_LIMIT)) }, fields)
  }

  /** [FEED3] [QUERY1] A page of the readable nodes of the query, in path order (paged-reads.ts). */
  async queryPage(principal: Principal, query: NodeQuery): Promise<{ items: MeshNode[]; next: string | null }> {
    // [SCALE14] The children of a parent the caller cannot read here: asked again on fresh rules
    // (a list answers with fewer rows instead of refusing, so this is where its refusal is).
    if (query.parent) await this.mayRead(principal, query.parent as NodePath)
    return this.reads.queryPage(principal, query)
  }

  node$(path: NodePath): Observable<MeshNode | null> {
    return this.feed.node$(path, () => this.get(SYSTEM, path))
  }

  /** The readable changes after `version`; `changesPage` gives the cursor to continue from. */
  async changesSince(principal: Principal, version: number, limit = 1000): Promise<ChangeRecord[]> {
    return (await this.changesPage(principal, version, limit)).items
  }

  /** [FEED1] [FEED2] The readable changes after `version`, and the last version examined (paged-reads.ts). */
  changesPage(principal: Principal, version: number, limit = 1000): Promise<{ items: ChangeRecord[]; next: number }> {
    return this.reads.changesPage(principal, version, limit)
  }

  /** [MOVE3] Where a path that is gone now lives, following recorded moves (null: nowhere known). */
  movedTo(path: NodePath): Promise<NodePath | null> {
    return this.reads.movedTo(path, (p) => this.cache.exists(p))
  }

  /** [MOVE6] Trash entries deleted before `before`, for the purge. */
  expiredTrash(before: string, limit: number): Promise<NodePath[]> {
    return this.storage.expiredTrash(before, limit)
  }

  /** [MOVE5] The trash entries of a top-level node, for its Admins (move-service.ts checks who). */
  listTrash(top: NodePath): Promise<TrashEntry[]> {
    return this.storage.listTrash(top)
  }

  permissions(principal: Principal, path: NodePath): PermissionSet {
    return this.access.permissions(principal, path)
  }

  /** [QUERY1] [FIND4] The paths `principal` may read, as sorted disjoint ranges; `null` for system (everything). */
  readRegions(principal: Principal): readonly PathRange[] | null {
    return isSystem(principal) ? null : this.access.readRegions(principal.userId as string)
  }

  /**
   * [WEB15] What `principal` may do on `node`, decided by the very checks a write makes
   * (`allowsRule` for delete, `checkFieldRules` per field), so an app can offer only what the
   * server accepts: each declared or present field, a new field, deleting the node, creating under it.
   */
  capabilities(principal: Principal, node: MeshNode): NodeCapabilities {
    const perms = this.access.permissions(principal, node.path)
    const owner = ownerOf(node)
    const def = nodeTypeDef(node.nodeType)
    const mayWrite = (field: string): boolean => {
      try {
        checkFieldRules(principal, perms, node.nodeType, node.path, [field], owner)
        return true
      } catch {
        return false
      }
    }
    const fields: Record<string, boolean> = {}
    for (const f of new Set([...Object.keys(def.fields), ...Object.keys(node.content)])) fields[f] = mayWrite(f)
    return {
      permissions: [...perms],
      fields,
      // A field no rule names follows the type's default rule; ' ' is never a declared field.
      newFields: mayWrite(' '),
      canDelete: allowsRule(principal, () => perms, def.delete),
      canCreate: perms.has('Create'),
    }
  }

  private requirePermission(principal: Principal, path: NodePath, permission: Permission): void {
    if (!this.access.has(principal, path, permission)) {
      throw new WeftError('forbidden', `${principalName(principal)} lacks ${permission} on ${path}.`)
    }
  }

  /** [SCALE14] [SCALE21] Several instances: applies every change committed so far (a no-op alone). */
  async catchUp(): Promise<void> {
    await this.cluster.hooks?.freshen()
  }

  registerWriteRule(nodeType: string, rule: WriteRuleHook): void {
    this.rules.register(nodeType, rule)
  }

  hasWriteRule(nodeType: string): boolean {
    return this.rules.has(nodeType)
  }

  headVersion(): Promise<number> {
    return this.storage.lastVersion()
  }

  // ---------------------------------------------------------------- writes (write-path.ts)

  /**
   * [SCALE14] A write refused as `forbidden` (refused before anything is written) is tried once
   * more when this instance had not applied every change committed before it: the grant it lacked
   * may have been committed through another instance a moment ago (`mayRead`).
   */
  private async freshRetry<T>(write: () => Promise<T>): Promise<T> {
    const hooks = this.cluster.hooks
    const seen = hooks?.watermark() ?? 0
    try {
      return await write()
    } catch (err) {
      if (!hooks || !isWeftError(err) || err.code !== 'forbidden') throw err
      await hooks.freshen()
      // Tried again only when changes were applied since the first try began (from Redis while
      // it ran, or by the catch-up): otherwise the answer would be the same.
      if (hooks.watermark() <= seen) throw err
      return write()
    }
  }

  put(principal: Principal, path: NodePath, draft: NodeDraft, origin: ChangeOrigin = 'http'): Promise<{ node: MeshNode; created: boolean }> {
    return this.freshRetry(() => this.writes.put(principal, path, draft, origin))
  }

  create(principal: Principal, path: NodePath, draft: NodeDraft, origin: ChangeOrigin = 'http'): Promise<MeshNode> {
    return this.freshRetry(() => this.writes.create(principal, path, draft, origin))
  }

  patch(principal: Principal, path: NodePath, patch: MergePatch, origin: ChangeOrigin = 'http'): Promise<MeshNode> {
    return this.freshRetry(() => this.writes.patch(principal, path, patch, origin))
  }

  update(principal: Principal, path: NodePath, fn: UpdateFn, origin: ChangeOrigin = 'engine'): Promise<MeshNode | null> {
    return this.writes.update(principal, path, fn, origin)
  }

  delete(principal: Principal, path: NodePath, origin: ChangeOrigin = 'http'): Promise<void> {
    return this.freshRetry(() => this.writes.delete(principal, path, origin))
  }

  append(
    principal: Principal,
    path: NodePath,
    field: string,
    items: readonly JsonValue[],
    origin: ChangeOrigin = 'engine',
    opts: AppendOptions = {},
  ): Promise<MeshNode> {
    return this.writes.append(principal, path, field, items, origin, opts)
  }

  /** [CTX26] A view of this API whose writes carry `holder`'s attachment into their first commit. */
  attaching(holder: CommitAttachment): NodeApi {
    const w = this.writes
    return {
      permissions: (principal, path) => this.permissions(principal, path),
      get: (principal, path) => this.get(principal, path),
      read: (principal, path) => this.read(principal, path),
      query: (principal, query) => this.query(principal, query),
      node$: (path) => this.node$(path),
      changes$: this.changes$,
      changesSince: (principal, version, limit) => this.changesSince(principal, version, limit),
      registerWriteRule: (nodeType, rule) => this.registerWriteRule(nodeType, rule),
      hasWriteRule: (nodeType) => this.hasWriteRule(nodeType),
      headVersion: () => this.headVersion(),
      attaching: (other) => this.attaching(other),
      put: (principal, path, draft, origin = 'http') => w.put(principal, path, draft, origin, holder),
      create: (principal, path, draft, origin = 'http') => w.create(principal, path, draft, origin, holder),
      patch: (principal, path, patch, origin = 'http') => w.patch(principal, path, patch, origin, holder),
      update: (principal, path, fn, origin = 'engine') => w.update(principal, path, fn, origin, holder),
      delete: (principal, path, origin = 'http') => w.delete(principal, path, origin, holder),
      append: (principal, path, field, items, origin = 'engine', opts = {}) => w.append(principal, path, field, items, origin, opts, holder),
    }
  }

  /** [MOVE2] Moves a subtree in one storage transaction; move-service.ts checks the rules first (write-path.ts). */
  relocate(principal: Principal, from: NodePath, to: NodePath, extra: Pick<MoveInput, 'redirect' | 'trash' | 'restore'>, origin: ChangeOrigin = 'http'): Promise<ChangeRecord[]> {
    return this.writes.relocate(principal, from, to, extra, origin)
  }

  /** [MOVE8] Renames: the name changes, the path stays (write-path.ts). */
  rename(principal: Principal, path: NodePath, name: string, origin: ChangeOrigin = 'http'): Promise<MeshNode> {
    return this.writes.rename(principal, path, name, origin)
  }

  /** A client's Yjs update (sockets): inspected before it may touch the authoritative doc. */
  applyClientUpdate(principal: Principal, path: NodePath, update: Uint8Array, conn: RoomConnection | null, origin: ChangeOrigin): Promise<MeshNode | null> {
    return this.writes.applyClientUpdate(principal, path, update, conn, origin)
  }

  /** [ACC10] A client's update to a loaded room, checked and applied before this returns (write-path.ts). */
  applyClientUpdateLoaded(room: SyncRoom, principal: Principal, update: Uint8Array, conn: RoomConnection | null, origin: ChangeOrigin): Promise<MeshNode | null> {
    if (!(room instanceof LoadedNode)) throw new Error(`Invariant: the room of ${room.path} did not come from acquireDoc`)
    const m = this.metrics
    if (!m) return this.writes.applyClientUpdateLoaded(room, principal, update, conn, origin)
    m.update(origin)
    let written: Promise<MeshNode | null>
    try {
      written = this.writes.applyClientUpdateLoaded(room, principal, update, conn, origin)
    } catch (e) {
      m.refused(isWeftError(e) ? e.code : 'internal', origin)
      throw e
    }
    written.then(
      () => m.durable(origin),
      (e: unknown) => m.refused(isWeftError(e) ? e.code : 'internal', origin),
    )
    return written
  }

  async close(): Promise<void> {
    this.cache.close()
    // Deferred row content is written before storage closes (a crash instead is covered by the log).
    await this.flush.close().catch(() => undefined)
    this.feed.close()
    this.cache.clear()
  }
}
