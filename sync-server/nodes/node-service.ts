import * as Y from 'yjs'
import { Observable, Subject } from 'rxjs'
import type { Logger } from 'pino'
import {
  ADMIN_PARTITION,
  ALL_PERMISSIONS,
  CONTENT_MAP,
  WeftError,
  applyMergePatch,
  applyPatchToDoc,
  applyPatchToJson,
  assertJsonContent,
  assertMergePatch,
  DEFAULT_MAX_JSON_DEPTH,
  docToJson,
  fieldRule,
  isPermissiveContent,
  isInTrash,
  isReservedSegment,
  isSystem,
  jsonEqual,
  lastSegment,
  nodeTypeDef,
  parentPath,
  partitionPlace,
  principalName,
  replaceDocContent,
  replaceJsonContent,
  selfAndAncestors,
  SYSTEM,
  validateAppend,
  validateContent,
  validateFields,
  textPolicyFor,
  withFieldsFromDoc,
  type ChangeRecord,
  type JsonObject,
  type JsonValue,
  type MergePatch,
  type MeshChangeKind,
  type MeshNode,
  type NodePath,
  type NodeQuery,
  type Permission,
  type PermissionSet,
  type Principal,
  type WriteRule,
} from '../../shared/index.js'
import type { MoveInput, StorageAdapter } from '../storage/types.js'
import { ACCESS_SEGMENT, assignmentLabel, assignmentScope, type AccessService } from '../access/access-service.js'
import { admitUpdate, ClientBindings, type ClientBinding } from '../admission/index.js'
import { DocCorrupted, LoadedNode, type RoomConnection } from './loaded-node.js'
import type { ChangeOrigin, LiveChange, NodeApi, NodeDraft, UpdateFn, WriteRuleHook } from './types.js'
import { CursorSealer, isSealedCursor } from './query-cursor.js'

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

/** The result of a write: the node after it, once durable. */
type Written = Promise<MeshNode | null>

const QUERY_DEFAULT_LIMIT = 100
const QUERY_MAX_LIMIT = 1000
const CHANGES_MAX_LIMIT = 10_000
/** Change records read from storage at a time while filtering a caller's feed. */
const CHANGES_STORAGE_PAGE = 2000
/**
 * Rows one feed or query request examines at most ([FEED2]): enough to step over a burst of
 * 5,000 changes a caller cannot read in one request, few enough that one request stays a few
 * milliseconds of access checks however much lies ahead. The cursor carries the rest.
 */
const PAGE_SCAN_BUDGET = 10_000
/**
 * [QUERY1] Range queries (one per readable region, each an index range scan) one query page
 * makes at most: a user whose groups reach thousands of scopes gets a sealed cursor instead of a
 * request that blocks the loop. A few milliseconds of empty range scans.
 */
const REGION_QUERY_BUDGET = 512
/** Nodes read but not loaded that `get` remembers (an engine checking the same space 10,000 times). */
const READ_CACHE_SIZE = 4096
/** A doc used this recently is never unloaded for the cap: a write may be between its acquire and its commit. */
const MIN_RESIDENCY_MS = 1000
/** Loaded docs one trim looks at, at most: the cap is enforced a little at a time. */
const TRIM_SCAN = 256
/**
 * [STO5] How long the stored row's content may lag a client's Yjs edits. Each edit logs its
 * update and its change at once (durable, acknowledged); the row's content (the whole node's
 * JSON) is written at most this often per node, so a small edit to a 1 MB node costs what it
 * costs on a 1 KB node. A read of a stale row rebuilds its content from the log.
 */
const CONTENT_FLUSH_MS = 1000
/** Stale rows repaired per step at boot: their logs are replayed together, then written in one group commit. */
const STALE_REPAIR_PAGE = 200

/**
 * The authoritative node store of one server: loads Y.Docs on demand, runs every write through
 * the same checks (access, field rules, schema, invariants), commits durably and publishes the
 * change feed.
 *
 * Concurrency: a write's checks, its application to the doc and its enqueueing in storage run
 * in ONE synchronous stretch after the node is loaded, so no other write to the node can
 * interleave: an update function's re-check is a real claim. Storage keeps commits in call
 * order, so versions follow application order.
 */
export class NodeService implements NodeApi {
  private readonly loaded = new Map<NodePath, LoadedNode>()
  private readonly loading = new Map<NodePath, Promise<LoadedNode>>()
  /** Copies dropped after a failed commit, until their other commits settle: no reload before. */
  private readonly retired = new Map<NodePath, LoadedNode>()
  /** Subtrees whose cascade delete is under way: nothing new may be created inside them. */
  private readonly deleting = new Set<NodePath>()
  /** [MOVE2] Subtrees being moved (source and destination): no write inside them meanwhile. */
  private readonly moving = new Set<NodePath>()
  private readonly changesSubject = new Subject<LiveChange>()
  /** [QUERY1] Seals query cursors that stop between readable regions. */
  private readonly cursors = new CursorSealer()
  /** Per-path feeds for node$: a watcher sees its node's changes only, not the whole mesh's. */
  private readonly pathSubjects = new Map<NodePath, Subject<LiveChange>>()
  /**
   * Recent reads of nodes that are not loaded, oldest first. Only a node that is not loaded is
   * cached, and a write loads it (which drops the entry); every commit drops it again when it
   * settles (a dropped copy's commits land while the node is not loaded), and a read that
   * overlapped a settling commit is not remembered (writeEpoch).
   */
  private readonly readCache = new Map<NodePath, MeshNode | null>()
  /** [ACT12] Arrays `append` grows in place, and the copy of the node that owns each. */
  private readonly appendable = new WeakMap<object, LoadedNode>()
  /** [ACT12] The JSON of such an array's first `count` items (they never change: items are only added). */
  private readonly appendedJson = new WeakMap<object, { json: string; count: number }>()
  private writeEpoch = 0
  /** Loaded copies whose stored content lags (deferred commits), written by the next flush. */
  private readonly dirtyContent = new Set<LoadedNode>()
  private flushTimer: NodeJS.Timeout | null = null
  readonly changes$: Observable<LiveChange> = this.changesSubject.asObservable()
  private sweepTimer: NodeJS.Timeout | null = null
  private closed = false
  /** Per-type write rules engines register (registerWriteRule). */
  private readonly writeRules = new Map<string, WriteRuleHook>()

  constructor(
    private readonly storage: StorageAdapter,
    private readonly access: AccessService,
    private readonly opts: NodeServiceOptions,
  ) {
    const every = Math.max(50, Math.min(5_000, Math.floor(opts.idleUnloadMs / 2)))
    this.sweepTimer = setInterval(() => this.unloadIdle(), every)
    this.sweepTimer.unref()
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
          if (node) await this.storage.writeContent(path, node.content)
        }),
      )
      repaired += paths.length
      if (paths.length < STALE_REPAIR_PAGE) return repaired
      after = paths[paths.length - 1]!
    }
  }

  /** Every node matching the query, paged by path (no limit). System use only. */
  async *scan(query: Omit<NodeQuery, 'limit' | 'after'>): AsyncGenerator<MeshNode> {
    let after: string | undefined
    for (;;) {
      const page = await this.storage.queryNodes({ ...query, limit: QUERY_MAX_LIMIT, after })
      for (const node of page) yield node
      if (page.length < QUERY_MAX_LIMIT) return
      after = page[page.length - 1]!.path
    }
  }

  /** [MOVE4] Every node below `path` (not itself), in path order. System use only. */
  async *scanSubtree(path: NodePath): AsyncGenerator<MeshNode> {
    let after: string = `${path}/`
    for (;;) {
      const page = await this.storage.queryNodes({ limit: QUERY_MAX_LIMIT }, { from: after, to: `${path}0` })
      for (const node of page) yield node
      if (page.length < QUERY_MAX_LIMIT) return
      after = `${page[page.length - 1]!.path},`
    }
  }

  stats(): { loadedDocs: number } {
    return { loadedDocs: this.loaded.size }
  }

  /** Whether the node is in memory right now (diagnostics and tests). */
  isLoaded(path: NodePath): boolean {
    return this.loaded.has(path)
  }

  /** Whether the node's Y.Doc is built right now ([DOC1]; diagnostics and tests). */
  hasDoc(path: NodePath): boolean {
    return this.loaded.get(path)?.hasDoc ?? false
  }

  // ---------------------------------------------------------------- loading

  /** The node in memory (its row; the doc is built by acquireDoc), loading it from storage once. */
  async acquire(path: NodePath): Promise<LoadedNode> {
    if (this.closed) throw new WeftError('unavailable', 'The server is shutting down.')
    const hit = this.loaded.get(path)
    if (hit) {
      const at = Date.now()
      // Most recently used last: the cap unloads from the front. Moved at most once per
      // residency period: re-inserting into a map of 50,000 on every use shows in profiles, and
      // the cap never takes a node used within that period anyway.
      if (at - hit.movedAt >= MIN_RESIDENCY_MS) {
        this.loaded.delete(path)
        this.loaded.set(path, hit)
        hit.movedAt = at
      }
      hit.lastUsed = at
      return hit
    }
    let pending = this.loading.get(path)
    if (!pending) {
      pending = this.load(path).finally(() => this.loading.delete(path))
      this.loading.set(path, pending)
    }
    return pending
  }

  private async load(path: NodePath): Promise<LoadedNode> {
    // A copy dropped after a failed commit may still have commits in flight: read after them.
    await this.retired.get(path)?.settled()
    // The row only: the doc is built when a client opens the node ([DOC1]). A cached read is
    // current (a settling commit drops it), so a read that a write follows costs one query.
    const cached = this.readCache.get(path)
    const node = cached !== undefined ? cached : await this.storage.getNode(path)
    const ln = new LoadedNode(path, node)
    this.loaded.set(path, ln)
    this.readCache.delete(path)
    this.trimLoaded()
    return ln
  }

  /** The node in memory with its Y.Doc built: what a room (a client's sync session) needs. */
  async acquireDoc(path: NodePath): Promise<LoadedNode> {
    // A failed catch-up retires the copy; the second attempt loads a fresh one.
    for (let attempt = 0; attempt < 2; attempt++) {
      const ln = await this.acquire(path)
      // Built but its catch-up not yet stored: wait for that too, like the client that built it.
      if (ln.materializing) await ln.materializing
      else if (!ln.hasDoc) await this.materialize(ln)
      if (ln.hasDoc && !ln.poisoned) return ln
    }
    throw new WeftError('unavailable', `${path} could not be opened for sync; retry in a moment.`)
  }

  /**
   * [DOC1] Builds the doc from the stored Yjs log. Writes made while no doc was built changed the
   * JSON only, so the log may lag the content: the difference is applied as one system
   * transaction and folded into the stored log BEFORE any client sees the doc. Without that, a
   * crash after a client saw the catch-up would rebuild it with other Yjs ids, and the client's
   * copy would hold items the server never had.
   */
  private materialize(ln: LoadedNode): Promise<void> {
    if (!ln.materializing) {
      // Cleared once settled (and only then: a build that finishes at once must not leave it set).
      const building: Promise<void> = this.buildDoc(ln).finally(() => {
        if (ln.materializing === building) ln.materializing = null
      })
      ln.materializing = building
    }
    return ln.materializing
  }

  private async buildDoc(ln: LoadedNode): Promise<void> {
    ln.holds++
    try {
      const generation = ln.generation
      // [ACC12] The client-id bindings come with the log (read alongside: only a client update
      // through a built doc writes bindings, and this copy has none yet).
      const [stored, bound] = ln.node ? await Promise.all([this.storage.loadDoc(ln.path), this.storage.loadClientBindings(ln.path)]) : [null, []]
      if (ln.hasDoc || ln.poisoned) return
      const doc = new Y.Doc({ guid: ln.path })
      const bindings = new ClientBindings(stored && ln.node && ln.generation === generation ? bound : [])
      // A node absent now, or deleted (and maybe created again) while the log was read, starts
      // from an empty doc: a create must not build on a deleted node's log.
      if (stored && ln.node && ln.generation === generation) {
        if (stored.snapshot) Y.applyUpdate(doc, stored.snapshot)
        for (const u of stored.updates) Y.applyUpdate(doc, u)
      }
      const content = ln.node?.content ?? {}
      const logged = docToJson(doc)
      const lags = !jsonEqual(logged, content)
      // Before the catch-up: the server's own writes use an id nobody else holds.
      bindings.adoptServerDoc(doc)
      if (lags) replaceDocContent(doc, content, 'system', textPolicyFor(ln.node?.nodeType ?? 'Document'))
      // Installed now, in the same synchronous stretch as the comparison: every later write
      // goes through the doc, and its commit is queued after the fold below.
      ln.setDoc(doc, bindings)
      if (!lags || !ln.node) return
      ln.commitStarted()
      try {
        await this.storage.foldDoc(ln.path, Y.encodeStateAsUpdate(doc))
        this.commitLanded(ln)
      } catch (err) {
        this.commitFailed(ln, err)
      }
    } finally {
      ln.holds--
    }
  }

  /**
   * Enforces `maxLoadedDocs`: unloads docs no client has open and no commit is waiting on, least
   * recently used first, never one used in the last MIN_RESIDENCY_MS. Docs with clients move to
   * the back (they are in use).
   */
  private trimLoaded(): void {
    const max = this.opts.maxLoadedDocs
    if (max === undefined || this.loaded.size <= max) return
    let excess = this.loaded.size - max
    const now = Date.now()
    let scanned = 0
    for (const [path, ln] of this.loaded) {
      if (excess <= 0 || scanned++ >= TRIM_SCAN) break
      if (ln.connections.size > 0 || ln.pendingCommits > 0 || ln.holds > 0 || ln.contentDirty) {
        this.loaded.delete(path)
        this.loaded.set(path, ln)
        continue
      }
      // The order is approximate (acquire moves a node at most once per residency period): a
      // node used lately at the front holds the trim back until its next use moves it (at most a
      // second for a node in steady use) or it ages.
      if (now - ln.lastUsed < MIN_RESIDENCY_MS) break
      this.unload(path, ln)
      excess--
    }
  }

  private unload(path: NodePath, ln: LoadedNode): void {
    this.loaded.delete(path)
    ln.destroy()
  }

  private unloadIdle(): void {
    const now = Date.now()
    for (const [path, ln] of this.loaded) {
      if (ln.isIdle(now, this.opts.idleUnloadMs)) this.unload(path, ln)
    }
    this.trimLoaded()
  }

  // ---------------------------------------------------------------- reads

  async get(principal: Principal, path: NodePath): Promise<MeshNode | null> {
    this.requirePermission(principal, path, 'Read')
    const ln = this.loaded.get(path)
    if (ln) return ln.node
    const cached = this.readCache.get(path)
    if (cached !== undefined) return cached
    const epoch = this.writeEpoch
    const node = await this.storage.getNode(path)
    if (epoch === this.writeEpoch && !this.loaded.has(path)) {
      if (this.readCache.size >= READ_CACHE_SIZE) this.readCache.delete(this.readCache.keys().next().value as NodePath)
      this.readCache.set(path, node)
    }
    return node
  }

  /** Like `get`, but loads the node into memory: for a read that a write to the node follows. */
  async read(principal: Principal, path: NodePath): Promise<MeshNode | null> {
    this.requirePermission(principal, path, 'Read')
    return (await this.acquire(path)).node
  }

  /** The readable nodes of the query; `queryPage` says where to continue when there may be more. */
  async query(principal: Principal, query: NodeQuery): Promise<MeshNode[]> {
    return (await this.queryPage(principal, query)).items
  }

  /**
   * [FEED3] [QUERY1] A page of the readable nodes of the query, in path order. For a user, storage
   * is scanned only inside the paths they may read (AccessService.readRegions), so a row they may
   * not read is never examined: it cannot fill a page, end one, or move the cursor, and a value
   * only such rows hold answers exactly like a value no row holds. `next` is the last item when
   * the page is full; when a page stops between regions (REGION_QUERY_BUDGET range queries) it
   * is a sealed cursor (query-cursor.ts), never a path. No `next`: the end.
   */
  async queryPage(principal: Principal, query: NodeQuery): Promise<{ items: MeshNode[]; next: string | null }> {
    const limit = Math.min(Math.max(1, query.limit ?? QUERY_DEFAULT_LIMIT), isSystem(principal) ? Number.MAX_SAFE_INTEGER : QUERY_MAX_LIMIT)
    if (isSystem(principal)) {
      const out: MeshNode[] = []
      if (limit > QUERY_MAX_LIMIT) {
        for await (const n of this.scan(query)) {
          out.push(n)
          if (out.length >= limit) break
        }
      } else {
        out.push(...(await this.storage.queryNodes({ ...query, limit })))
      }
      return { items: out, next: out.length >= limit ? out[out.length - 1]!.path : null }
    }
    const userId = principal.userId as string
    // Where to start: after a path (`after` + ',' is the least string above it among paths), or
    // at the position a sealed cursor holds.
    let start: string | null = null
    if (isSealedCursor(query.after)) start = this.cursors.unseal(userId, query.after)
    else if (query.after !== undefined) start = `${query.after},`
    // A parent's children lie in [parent/, parent0).
    const parent = query.parent
    const window = parent ? { from: `${parent}/`, to: `${parent}0` } : null
    const regions: { from: string; to: string }[] = []
    const inTrash = parent !== undefined && isInTrash(parent)
    for (const r of this.access.readRegions(userId)) {
      let from = r.from
      let to = r.to
      if (start !== null && start > from) from = start
      if (window) {
        if (window.from > from) from = window.from
        if (window.to < to) to = window.to
      }
      if (from < to) regions.push({ from, to })
    }
    const items: MeshNode[] = []
    const budget = this.opts.regionQueryBudget ?? REGION_QUERY_BUDGET
    let queries = 0
    for (let i = 0; i < regions.length && items.length < limit; ) {
      const region = regions[i]!
      if (queries >= budget) return { items, next: this.cursors.seal(userId, region.from) }
      const want = limit - items.length
      const rows = await this.storage.queryNodes({ ...query, after: undefined, limit: want }, region)
      queries++
      // The regions are exact; the check stays as a second line of defence.
      // [MOVE5] A trash is listed on the trash page, never in a query (unless asked for by parent).
      for (const row of rows) if (this.access.has(principal, row.path, 'Read') && (inTrash || !isInTrash(row.path))) items.push(row)
      if (rows.length < want) i++
      else regions[i] = { from: `${rows[rows.length - 1]!.path},`, to: region.to }
    }
    return { items, next: items.length >= limit ? items[items.length - 1]!.path : null }
  }

  node$(path: NodePath): Observable<MeshNode | null> {
    return new Observable<MeshNode | null>((subscriber) => {
      // Subscribe to the feed first so no change between the read and the subscription is lost.
      let current: MeshNode | null | undefined
      const buffered: LiveChange[] = []
      const emit = (c: LiveChange) => {
        if (current && c.node && c.version <= current.version) return
        current = c.node
        subscriber.next(c.node)
      }
      let subject = this.pathSubjects.get(path)
      if (!subject) this.pathSubjects.set(path, (subject = new Subject<LiveChange>()))
      const feed = subject
      const sub = feed.subscribe((c) => {
        if (current === undefined) buffered.push(c)
        else emit(c)
      })
      this.get(SYSTEM, path).then(
        (node) => {
          current = node
          subscriber.next(node)
          for (const c of buffered.splice(0)) emit(c)
        },
        (err) => subscriber.error(err),
      )
      return () => {
        sub.unsubscribe()
        if (!feed.observed && this.pathSubjects.get(path) === feed) this.pathSubjects.delete(path)
      }
    })
  }

  /** The readable changes after `version`; `changesPage` gives the cursor to continue from. */
  async changesSince(principal: Principal, version: number, limit = 1000): Promise<ChangeRecord[]> {
    return (await this.changesPage(principal, version, limit)).items
  }

  /**
   * [FEED1] [FEED2] Filters while paging: the change log is read page after page until `limit`
   * readable changes or its end, examining at most PAGE_SCAN_BUDGET records per call. `next` is
   * the last version EXAMINED, readable or not (`version` itself when nothing was): a client that
   * continues from it always advances, however many changes it may not read lie ahead.
   */
  async changesPage(principal: Principal, version: number, limit = 1000): Promise<{ items: ChangeRecord[]; next: number }> {
    const wanted = Math.min(Math.max(1, Math.floor(limit)), CHANGES_MAX_LIMIT)
    if (isSystem(principal)) {
      const rows = await this.storage.changesSince(version, wanted)
      return { items: rows, next: rows.length ? rows[rows.length - 1]!.version : version }
    }
    const items: ChangeRecord[] = []
    let next = version
    let examined = 0
    for (;;) {
      const want = Math.min(CHANGES_STORAGE_PAGE, PAGE_SCAN_BUDGET - examined)
      const rows = await this.storage.changesSince(next, want)
      let i = 0
      while (i < rows.length && items.length < wanted) {
        const row = rows[i++]!
        next = row.version
        if (this.access.has(principal, row.path, 'Read')) items.push(row)
      }
      examined += i
      if (rows.length < want || items.length >= wanted || examined >= PAGE_SCAN_BUDGET) return { items, next }
    }
  }

  // ---------------------------------------------------------------- access helpers

  permissions(principal: Principal, path: NodePath) {
    return this.access.permissions(principal, path)
  }

  private requirePermission(principal: Principal, path: NodePath, permission: Permission): void {
    if (!this.access.has(principal, path, permission)) {
      throw new WeftError('forbidden', `${principalName(principal)} lacks ${permission} on ${path}.`)
    }
  }

  private allows(principal: Principal, path: NodePath, rule: WriteRule): boolean {
    if (isSystem(principal)) return true
    if (rule === 'system') return false
    const perms = this.access.permissions(principal, path)
    // `owner` names a node's user; creating or deleting one needs Update.
    return perms.has(rule === 'admin' ? 'ManageAccess' : rule === 'owner' ? 'Update' : rule)
  }

  registerWriteRule(nodeType: string, rule: WriteRuleHook): void {
    if (this.writeRules.has(nodeType)) throw new Error(`A write rule for ${nodeType} is already registered.`)
    this.writeRules.set(nodeType, rule)
  }

  /** The type's write rule for a user's write: refuses it (throws), or names system fields to add. */
  private writeRuleFields(principal: Principal, nodeType: string, before: MeshNode | null, after: JsonObject): JsonObject | undefined {
    if (isSystem(principal)) return undefined
    const rule = this.writeRules.get(nodeType)
    if (!rule) return undefined
    const added = rule({ principal, before, after })
    return added && Object.keys(added).length > 0 ? added : undefined
  }

  /** The user a node's `owner` rule admits (its type's ownerField), if any. */
  private ownerOf(node: MeshNode): string | undefined {
    const field = nodeTypeDef(node.nodeType).ownerField
    const owner = field === undefined ? undefined : node.content[field]
    return typeof owner === 'string' ? owner : undefined
  }

  // ---------------------------------------------------------------- writes

  async put(principal: Principal, path: NodePath, draft: NodeDraft, origin: ChangeOrigin = 'http'): Promise<{ node: MeshNode; created: boolean }> {
    await this.requireParent(principal, path)
    const ln = await this.acquire(path)
    if (!ln.node) return { node: (await this.createIn(ln, principal, draft, origin))!, created: true }
    return { node: (await this.replaceIn(ln, principal, draft, origin))!, created: false }
  }

  async create(principal: Principal, path: NodePath, draft: NodeDraft, origin: ChangeOrigin = 'http'): Promise<MeshNode> {
    await this.requireParent(principal, path)
    const ln = await this.acquire(path)
    if (ln.node) throw new WeftError('already_exists', `A node already exists at ${path}.`)
    return (await this.createIn(ln, principal, draft, origin))!
  }

  async patch(principal: Principal, path: NodePath, patch: MergePatch, origin: ChangeOrigin = 'http'): Promise<MeshNode> {
    assertMergePatch(patch, this.maxJsonDepth)
    const ln = await this.acquire(path)
    const before = this.existing(ln, principal)
    const next = applyMergePatch(before.content, patch) as JsonObject
    return (await this.writeContent(ln, principal, before, before.name, next, patch, origin))!
  }

  async update(principal: Principal, path: NodePath, fn: UpdateFn, origin: ChangeOrigin = 'engine'): Promise<MeshNode | null> {
    const ln = await this.acquire(path)
    const current = ln.node
    const result = fn(current)
    if (result === undefined || result === current) return current
    if (result === null) {
      if (!current) return null
      await this.deleteIn(ln, principal, origin, false)
      return null
    }
    if (!current) return this.createIn(ln, principal, result, origin)
    return this.replaceIn(ln, principal, result, origin)
  }

  async delete(principal: Principal, path: NodePath, origin: ChangeOrigin = 'http'): Promise<void> {
    const ln = await this.acquire(path)
    this.existing(ln, principal)
    await this.deleteIn(ln, principal, origin, false)
  }

  /** A client's Yjs update (sockets): inspected before it may touch the authoritative doc. */
  async applyClientUpdate(principal: Principal, path: NodePath, update: Uint8Array, conn: RoomConnection | null, origin: ChangeOrigin): Promise<MeshNode | null> {
    return this.applyClientUpdateLoaded(await this.acquireDoc(path), principal, update, conn, origin)
  }

  /**
   * [ACC10] The synchronous part (admission, checks, application, enqueueing) happens before
   * this returns, so a socket's updates apply in arrival order; the returned promise settles once
   * durable. All or nothing: a refused update leaves the doc, the stored log and the room exactly
   * as they were.
   */
  applyClientUpdateLoaded(ln: LoadedNode, principal: Principal, update: Uint8Array, conn: RoomConnection | null, origin: ChangeOrigin): Written {
    const before = this.existing(ln, principal)
    if (!ln.hasDoc) throw new WeftError('internal', `${ln.path} was not opened for sync; reconnect.`)
    const perms = isSystem(principal) ? null : this.access.permissions(principal, ln.path)
    // The `owner` of a node (a run's creator) may change the fields the owner rule gives them; the
    // field rules below decide which.
    const mayWrite = perms === null || perms.has('Update') || (principal.kind === 'user' && this.ownerOf(before) === principal.userId)
    const admission = admitUpdate(ln.doc, update, { maxDepth: this.maxJsonDepth, mayWriteStructure: mayWrite })
    if (!admission.ok) {
      if (admission.code === 'forbidden') throw new WeftError('forbidden', `${principalName(principal)} may not change ${ln.path} (no Update permission).`)
      throw new WeftError(admission.code, `${admission.message} (${ln.path}; reload the node.)`)
    }
    if (!admission.update) return Promise.resolve(before)
    // [ACC12] Nobody writes under a client id another principal wrote with in this node.
    const bindings = ln.clientBindings.claim(principalName(principal), admission.clients, ln.path)
    const fields = admission.fields
    this.authorizeFields(principal, before, fields)
    // Types with a schema (or a write rule): the touched fields are checked on the shadow before
    // the doc sees anything.
    let added: JsonObject | undefined
    const check = isPermissiveContent(before.nodeType) && !this.writeRules.has(before.nodeType)
      ? null
      : (result: Y.Doc) => {
          const next = withFieldsFromDoc(before.content, result, fields)
          validateFields(before.nodeType, next, fields)
          this.checkInvariants(before, { ...before, content: next }, false, principal)
          added = this.writeRuleFields(principal, before.nodeType, before, next)
        }
    let applied: Uint8Array | null
    try {
      applied = ln.applyAdmitted(admission.update, conn, check)
    } catch (e) {
      if (!(e instanceof DocCorrupted)) throw e
      // Yjs failed half-way (the gate should have refused it): this copy is dropped and the next
      // use reloads what storage holds, which never saw the update.
      this.dropCorrupted(ln, e)
      throw new WeftError('invalid_update', `The update to ${ln.path} could not be applied; reload the node.`)
    }
    if (!applied) return Promise.resolve(before)
    ln.clientBindings.record(bindings)
    const next = withFieldsFromDoc(before.content, ln.doc, fields)
    const written = this.commitChange(ln, principal, before, { ...before, content: next, updatedAt: now() }, 'Updated', applied, origin, true, bindings)
    if (!added) return written
    // The write rule's fields, as system, in this same synchronous stretch: no write (and no
    // engine's claim) can come between the user's change and them. Relayed to every client.
    const amended = ln.node!
    const extra = added
    const system = ln.capture(() => applyPatchToDoc(ln.doc, extra, 'system', textPolicyFor(amended.nodeType)))
    const also = this.commitChange(ln, SYSTEM, amended, { ...amended, content: applyMergePatch(amended.content, extra) as JsonObject, updatedAt: now() }, 'Updated', system, 'system')
    return Promise.all([written, also]).then(([, n]) => n)
  }

  /** [STO5] Schedules the write of a deferred commit's row content. */
  private markContentDirty(ln: LoadedNode): void {
    ln.contentDirty = true
    this.dirtyContent.add(ln)
    if (this.flushTimer || this.closed) return
    this.flushTimer = setTimeout(() => {
      this.flushTimer = null
      void this.flushContent()
    }, CONTENT_FLUSH_MS)
    this.flushTimer.unref()
  }

  /** Writes the row content of every dirty copy, ordered after the commits it reflects. */
  private flushContent(): Promise<void> {
    const writes: Promise<void>[] = []
    for (const ln of this.dirtyContent) {
      this.dirtyContent.delete(ln)
      if (!ln.contentDirty) continue
      ln.contentDirty = false
      const node = ln.node
      if (!node || ln.poisoned) continue
      ln.commitStarted()
      writes.push(
        this.storage.writeContent(ln.path, node.content, this.contentJson(node.content)).then(
          () => this.commitLanded(ln),
          (err: unknown) => this.commitFailed(ln, err),
        ),
      )
    }
    return Promise.all(writes).then(() => undefined)
  }

  /**
   * [ACT12] The row's JSON, as JSON.stringify would write it, reusing what was serialised of the
   * arrays `append` grows: a log's coalesced rewrite serialises its new lines, not the log (at
   * 100,000 lines a full stringify held the event loop for about 100 ms every second).
   */
  private contentJson(content: JsonObject): string {
    const parts: string[] = []
    for (const key of Object.keys(content)) {
      const value = content[key]
      if (value === undefined) continue
      let json: string
      if (Array.isArray(value) && this.appendable.has(value)) {
        let cached = this.appendedJson.get(value)
        if (!cached || cached.count > value.length) cached = { json: '', count: 0 }
        if (cached.count < value.length) {
          const tail = value.slice(cached.count).map((v) => JSON.stringify(v) ?? 'null').join(',')
          cached = { json: cached.count === 0 ? tail : `${cached.json},${tail}`, count: value.length }
          this.appendedJson.set(value, cached)
        }
        json = `[${cached.json}]`
      } else json = JSON.stringify(value)
      parts.push(`${JSON.stringify(key)}:${json}`)
    }
    return `{${parts.join(',')}}`
  }

  private get maxJsonDepth(): number {
    return this.opts.maxJsonDepth ?? DEFAULT_MAX_JSON_DEPTH
  }

  /** Drops a copy whose doc may hold part of a failed update; its clients reconnect to a reload. */
  private dropCorrupted(ln: LoadedNode, err: DocCorrupted): void {
    this.opts.log.error({ err: err.cause, path: ln.path }, 'a Yjs update failed inside Yjs after admission; dropping the copy')
    ln.poisoned = true
    for (const conn of [...ln.connections]) conn.evict(1011, 'internal', 'The server reloaded this node; reconnect.')
    if (this.loaded.get(ln.path) === ln) this.loaded.delete(ln.path)
    if (ln.pendingCommits > 0) this.retired.set(ln.path, ln)
    else ln.destroy()
  }

  /**
   * Appends to an array field as ONE Yjs array insert (O(1) on the wire and in the update log,
   * whatever the length), through the same field-rule check as a patch of that field. A field
   * held as a plain array in the doc (written by a patch, or by a doc's catch-up) becomes a
   * Y.Array on the first append. [ACT12] The doc is built for an append (once per residency,
   * [DOC1]), so storage logs the insert and rewrites the row's JSON later, coalesced ([STO5]):
   * without a doc every line would rewrite the whole log's row.
   *
   * [ACT12] O(items) on the event loop, not O(array): only the items are validated, and the
   * loaded node's array grows in place (copied once, the first time this copy of the node appends
   * to it), so a MeshNode handed out earlier may show later items too; items are only ever added.
   * `opts.patch(current)` adds a merge patch of other top-level fields to the same transaction
   * (an activity's Progress, or its terminal fields), computed against the node as it is when
   * the write applies; `undefined` writes nothing at all (a compare-and-set).
   */
  async append(
    principal: Principal,
    path: NodePath,
    field: string,
    items: readonly JsonValue[],
    origin: ChangeOrigin = 'engine',
    opts: { patch?: (current: MeshNode) => MergePatch | undefined } = {},
  ): Promise<MeshNode> {
    assertMergePatch({ [field]: [...items] })
    let ln = await this.acquire(path)
    // Refused (missing, unreadable) before a doc is built for it.
    let before = this.existing(ln, principal)
    if (items.length === 0 && !opts.patch) return before
    if (!ln.hasDoc) {
      ln = await this.acquireDoc(path)
      before = this.existing(ln, principal)
    }
    const patch = opts.patch ? opts.patch(before) : {}
    if (patch === undefined) return before
    assertMergePatch(patch, this.maxJsonDepth)
    if (Object.prototype.hasOwnProperty.call(patch, field)) throw new WeftError('invalid_patch', `An append to ${field} cannot also patch ${field}.`)
    const patched = Object.keys(patch)
    if (items.length === 0 && patched.length === 0) return before
    const prev = before.content[field]
    if (prev !== undefined && prev !== null && !Array.isArray(prev)) {
      throw new WeftError('invalid_patch', `${field} of ${path} is not an array; nothing can be appended to it.`)
    }
    this.authorizeFields(principal, before, items.length > 0 ? [field, ...patched] : patched)
    // The array this copy of the node owns (grown in place); another array is copied once.
    let array = Array.isArray(prev) ? prev : []
    if (items.length > 0 && this.appendable.get(array) !== ln) {
      array = [...array]
      this.appendable.set(array, ln)
    }
    const merged = applyMergePatch(before.content, patch) as JsonObject
    if (items.length > 0) validateAppend(before.nodeType, field, items, () => ({ ...merged, [field]: [...array, ...items] }))
    if (patched.length > 0) validateFields(before.nodeType, merged, patched)
    this.checkInvariants(before, { ...before, content: merged }, false, principal)
    const doc = ln.doc
    const update = ln.capture(() =>
      doc.transact(() => {
        if (items.length > 0) {
          const map = doc.getMap(CONTENT_MAP)
          const current = map.get(field)
          if (current instanceof Y.Array) {
            // [ACT12] At the end by index (a search marker finds it in O(1), push walks the whole
            // list), after a placeholder inserted and deleted: at the transaction's end Yjs merges
            // a new item into its left neighbour by clock when they are adjacent, and merging
            // ContentAny concatenates the arrays, copying the whole log on every append.
            const at = current.length
            current.insert(at, [null])
            current.delete(at, 1)
            current.insert(at, [...items])
          } else {
            const yarray = new Y.Array<unknown>()
            yarray.push([...(Array.isArray(current) ? current : []), ...items])
            map.set(field, yarray)
          }
        }
        if (patched.length > 0) applyPatchToDoc(doc, patch, origin, textPolicyFor(before.nodeType))
      }, origin),
    )
    for (const item of items) array.push(item)
    const next = patched.length > 0 ? withFieldsFromDoc(before.content, doc, patched) : { ...before.content }
    if (items.length > 0) next[field] = array
    // [STO5] The row's JSON is written later, coalesced: a line costs its Yjs insert, not the log.
    return (await this.commitChange(ln, principal, before, { ...before, content: next, updatedAt: now() }, 'Updated', update, origin, true))!
  }

  // ---------------------------------------------------------------- write internals

  /** A caller creates under an existing node (reserved segments like `_Access` are not nodes). */
  private async requireParent(principal: Principal, path: NodePath): Promise<void> {
    if (isSystem(principal)) return
    let parent = parentPath(path)
    while (parent && isReservedSegment(lastSegment(parent))) parent = parentPath(parent)
    if (!parent) return
    // [ACC11] Whether the parent exists is told only to someone who may read it, or who holds a
    // right at the path itself (a partition's Admin writes under Admin/Partition without reading
    // it): the same refusal under an unreadable parent whether it is there or not.
    if (!this.access.has(principal, parent, 'Read') && this.access.permissions(principal, path).size === 0) {
      this.requirePermission(principal, parent, 'Read')
    }
    if (!(await this.exists(parent))) throw new WeftError('not_found', `Cannot create ${path}: its parent ${parent} does not exist.`)
    // [ACT11] A partition is defined for an existing top-level node; told only to someone with a
    // right at the definition's path (the rest are refused by the create's own check).
    const place = partitionPlace(path)
    if (place && 'name' in place && this.access.permissions(principal, path).size > 0 && !(await this.exists(place.name as NodePath))) {
      throw new WeftError('invalid_path', `${path} would define the partition of ${place.name}, and there is no top-level node ${place.name}.`)
    }
  }

  private async exists(path: NodePath): Promise<boolean> {
    const loaded = this.loaded.get(path)
    return loaded ? loaded.node !== null : (await this.storage.getNode(path)) !== null
  }

  private writable(ln: LoadedNode): void {
    if (ln.poisoned) throw new WeftError('unavailable', `A change to ${ln.path} could not be saved; retry in a moment.`)
    if (this.moving.size > 0 && this.underMove(ln.path)) throw new WeftError('conflict', `${ln.path} is being moved; retry in a moment.`)
  }

  private underMove(path: NodePath): boolean {
    for (let p: NodePath | null = path; p; p = parentPath(p)) if (this.moving.has(p)) return true
    return false
  }

  /**
   * [MOVE2] Moves the subtree at `from` to `to` (the caller checked the rules, move-service.ts):
   * writes inside either subtree wait it out (refused with `conflict`), the subtree's pending
   * commits settle first, storage moves every row in one transaction, then, in one synchronous
   * stretch, the access index follows the moved assignments, clients of the old paths are told
   * where it went (closed with `moved`) and the feed publishes a Deleted and a Created per node.
   */
  async relocate(principal: Principal, from: NodePath, to: NodePath, extra: Pick<MoveInput, 'redirect' | 'trash' | 'restore'>, origin: ChangeOrigin = 'http'): Promise<ChangeRecord[]> {
    if (this.underMove(from) || this.underMove(to) || this.deleting.has(from)) throw new WeftError('conflict', `${from} is being moved or deleted; retry in a moment.`)
    for (const p of this.moving) if (p.startsWith(`${from}/`) || p.startsWith(`${to}/`)) throw new WeftError('conflict', `Part of ${from} is being moved; retry in a moment.`)
    this.moving.add(from)
    this.moving.add(to)
    try {
      const inside = (path: NodePath, root: NodePath) => path === root || path.startsWith(`${root}/`)
      const copies = [...this.loaded.values()].filter((ln) => inside(ln.path, from))
      await Promise.all(copies.map((ln) => ln.settled()))
      for (const ln of copies) await this.retired.get(ln.path)?.settled()
      // The access nodes the move carries: the index drops the old paths and takes the new ones.
      const carried: MeshNode[] = []
      for (const nodeType of ['AccessAssignment', 'Membership']) {
        carried.push(...(await this.storage.queryNodes({ nodeType, limit: QUERY_MAX_LIMIT }, { from: `${from}/`, to: `${from}0` })))
      }
      const records = await this.storage.moveSubtree({ from, to, at: now(), ...extra })
      const moved = new Map<NodePath, MeshNode | null>()
      await Promise.all(records.filter((r) => r.kind === 'Created').map(async (r) => moved.set(r.path, await this.storage.getNode(r.path))))
      // From here on synchronous: no read or write sees half of it in memory.
      const newPath = (p: NodePath) => `${to}${p.slice(from.length)}` as NodePath
      for (const ln of [...this.loaded.values()]) {
        if (inside(ln.path, from)) {
          for (const conn of [...ln.connections]) conn.evict(4404, 'moved', `Moved to ${newPath(ln.path)}`)
          ln.contentDirty = false
          this.loaded.delete(ln.path)
          ln.destroy()
        } else if (inside(ln.path, to) && ln.node === null && ln.holds === 0) {
          this.loaded.delete(ln.path)
          ln.destroy()
        }
      }
      for (const path of [...this.readCache.keys()]) if (inside(path, from) || inside(path, to)) this.readCache.delete(path)
      this.writeEpoch++
      for (const node of carried) this.access.observe(node, moved.get(newPath(node.path)) ?? null)
      const by = principalName(principal)
      for (const r of records) {
        const change: LiveChange = { ...r, node: r.kind === 'Created' ? (moved.get(r.path) ?? null) : null, by, origin }
        this.changesSubject.next(change)
        this.pathSubjects.get(r.path)?.next(change)
      }
      return records
    } finally {
      this.moving.delete(from)
      this.moving.delete(to)
    }
  }

  /** [MOVE8] Renames: the name changes, the path (and every link to it) stays. Needs Update. */
  async rename(principal: Principal, path: NodePath, name: string, origin: ChangeOrigin = 'http'): Promise<MeshNode> {
    const ln = await this.acquire(path)
    const before = this.existing(ln, principal)
    return (await this.writeContent(ln, principal, before, name, before.content, {}, origin, []))!
  }

  /** [MOVE3] Where a path that is gone now lives, following recorded moves (null: nowhere known). */
  async movedTo(path: NodePath): Promise<NodePath | null> {
    let at = path
    for (let hop = 0; hop < 8; hop++) {
      const hit = await this.storage.movedFrom(selfAndAncestors(at))
      if (!hit) return null
      const next = `${hit.to}${at.slice(hit.from.length)}` as NodePath
      if (next === at) return null
      at = next
      if (await this.exists(at)) return at
    }
    return null
  }

  /** [MOVE6] Trash entries deleted before `before`, for the purge. */
  expiredTrash(before: string, limit: number) {
    return this.storage.expiredTrash(before, limit)
  }

  /** [MOVE5] The trash entries of a top-level node, for its Admins. */
  listTrash(top: NodePath) {
    return this.storage.listTrash(top)
  }

  private existing(ln: LoadedNode, principal: Principal): MeshNode {
    this.writable(ln)
    if (!ln.node) {
      // Never reveal absence to someone who could not read the node anyway.
      this.requirePermission(principal, ln.path, 'Read')
      throw new WeftError('not_found', `No node at ${ln.path}.`)
    }
    this.requirePermission(principal, ln.path, 'Read')
    return ln.node
  }

  private createIn(ln: LoadedNode, principal: Principal, draft: NodeDraft, origin: ChangeOrigin): Written {
    this.writable(ln)
    const path = ln.path
    for (let p = parentPath(path); p; p = parentPath(p)) {
      if (this.deleting.has(p)) throw new WeftError('conflict', `Cannot create ${path}: ${p} is being deleted.`)
    }
    const def = nodeTypeDef(draft.nodeType)
    let content = draft.content ?? {}
    assertJsonContent(content, this.maxJsonDepth)
    this.checkPlacement(principal, path, draft.nodeType)
    const parent = parentPath(path)
    if (!parent) {
      if (!isSystem(principal) && draft.nodeType !== 'Space') {
        throw new WeftError('forbidden', `Only a Space may be created at the top level (${path} is a ${draft.nodeType}).`)
      }
    } else {
      // A path the caller cannot read gets the refusal an existing unreadable node gets ([ACC11]).
      if (!isSystem(principal)) this.requirePermission(principal, path, 'Read')
      if (!this.allows(principal, path, def.create)) {
        throw new WeftError('forbidden', `${principalName(principal)} may not create a ${draft.nodeType} at ${path}.`)
      }
    }
    // Creating writes every field it names: the same rules as a patch ([ACC7]). The creator of a
    // top-level space becomes its Admin, so it may write whatever an Admin may.
    if (!isSystem(principal) && parent) {
      this.checkFieldRules(principal, this.access.permissions(principal, path), draft.nodeType, path, Object.keys(content))
    } else if (!isSystem(principal)) {
      this.checkFieldRules(principal, ALL_PERMISSIONS, draft.nodeType, path, Object.keys(content))
    }
    const added = this.writeRuleFields(principal, draft.nodeType, null, content)
    if (added) content = { ...content, ...added }
    validateContent(draft.nodeType, content)
    this.checkInvariants(null, { path, nodeType: draft.nodeType, content } as MeshNode)
    let update: Uint8Array | null = null
    let stored: JsonObject
    // A new doc has no log to read: cheap to build now for a node a client will likely open.
    if (!ln.hasDoc && buildsDocOnCreate(origin)) ln.setDoc(new Y.Doc({ guid: path }))
    if (ln.hasDoc) {
      const doc = ln.doc
      // [WEB3] Text fields become Y.Text on the server's writes too, so they merge from the start.
      // [PATCH4] The content is set, not patched: a null member is kept, as it was sent.
      update = ln.capture(() => replaceDocContent(doc, content, 'system', textPolicyFor(draft.nodeType))) ?? Y.encodeStateAsUpdate(doc)
      stored = docToJson(doc)
    } else {
      // [DOC1] No doc built: the JSON the doc would hold; it is built (and caught up) when a client opens the node.
      stored = replaceJsonContent(content)
    }
    const at = now()
    const node: MeshNode = {
      path,
      nodeType: draft.nodeType,
      name: draft.name ?? lastSegment(path),
      content: stored,
      createdBy: principalName(principal),
      createdAt: at,
      updatedAt: at,
      version: 0,
      state: 'Active',
    }
    const written = this.commitChange(ln, principal, null, node, 'Created', update, origin)
    if (!parent && draft.nodeType === 'Space' && !isSystem(principal)) {
      // The creator of a space becomes its Admin (DESIGN.md "Identity and access").
      const grant = this.update(
        SYSTEM,
        `${path}/${ACCESS_SEGMENT}/${principal.userId}_Access` as NodePath,
        () => ({ nodeType: 'AccessAssignment', content: { Subject: principal.userId, Role: 'Admin' } }),
        'system',
      )
      return Promise.all([written, grant]).then(
        ([n]) => n,
        async (err: unknown) => {
          // A space without its Admin could be read or fixed by nobody: take it back.
          await this.delete(SYSTEM, path, 'system').catch(() => undefined)
          throw err
        },
      )
    }
    return written
  }

  /** Structural rules of reserved places. */
  private checkPlacement(principal: Principal, path: NodePath, nodeType: string): void {
    const parent = parentPath(path)
    const inAccess = parent !== null && lastSegment(parent) === ACCESS_SEGMENT
    if (inAccess !== (nodeType === 'AccessAssignment')) {
      throw new WeftError('invalid_path', `An AccessAssignment lives at {scope}/_Access/{subject}_Access and nothing else does (${path}).`)
    }
    if (nodeType === 'Membership') {
      const group = parentPath(path)
      if (!lastSegment(path).endsWith('_Membership') || !group || !group.includes('/')) {
        throw new WeftError('invalid_path', `A Membership lives at {group}/{userId}_Membership under a Group inside a space (${path}).`)
      }
    }
    if (!isSystem(principal) && isReservedSegment(lastSegment(path))) {
      throw new WeftError('invalid_path', `Segments starting with _ are reserved for system children (${path}).`)
    }
    // [ACT11] Admin/Partition/{name} holds a Partition and nothing else, and nothing below it.
    const place = partitionPlace(path)
    if (place && 'refused' in place) throw new WeftError('invalid_path', place.refused)
    if ((place !== null) !== (nodeType === 'Partition')) {
      throw new WeftError('invalid_path', `A Partition lives at Admin/Partition/{name} and nothing else does (${path} would be a ${nodeType}).`)
    }
  }

  private replaceIn(ln: LoadedNode, principal: Principal, draft: NodeDraft | MeshNode, origin: ChangeOrigin): Written {
    const before = this.existing(ln, principal)
    if (draft.nodeType !== before.nodeType) {
      throw new WeftError('conflict', `${ln.path} is a ${before.nodeType}; it cannot become a ${draft.nodeType} (delete it first).`)
    }
    const content = draft.content ?? {}
    assertJsonContent(content, this.maxJsonDepth)
    // [PATCH4] A replace sets the content (a merge patch could not set a member to null).
    return this.writeContent(ln, principal, before, draft.name ?? before.name, content, null, origin)
  }

  private writeContent(
    ln: LoadedNode,
    principal: Principal,
    before: MeshNode,
    name: string,
    next: JsonObject,
    /** null: `next` replaces the content whole ([PATCH4]). */
    patch: MergePatch | null,
    origin: ChangeOrigin,
    changed: readonly string[] = changedFields(before.content, next),
  ): Written {
    if (changed.length === 0 && name === before.name) return Promise.resolve(before)
    this.authorizeFields(principal, before, changed)
    if (name !== before.name && !this.allows(principal, ln.path, 'Update')) {
      throw new WeftError('forbidden', `${principalName(principal)} may not rename ${ln.path}.`)
    }
    const added = this.writeRuleFields(principal, before.nodeType, before, next)
    if (added) {
      next = { ...next, ...added }
      // A replace (patch null) stays a replace of the amended content.
      if (patch) patch = { ...patch, ...added }
    }
    validateContent(before.nodeType, next)
    this.checkInvariants(before, { ...before, content: next }, false, principal)
    let update: Uint8Array | null = null
    let content: JsonObject
    if (ln.hasDoc) {
      const isText = textPolicyFor(before.nodeType)
      update = ln.capture(() => (patch ? applyPatchToDoc(ln.doc, patch, origin, isText) : replaceDocContent(ln.doc, next, origin, isText)))
      content = docToJson(ln.doc)
    } else {
      // [DOC1] JSON only until a client opens the node; the same merge the doc would apply.
      content = patch ? applyPatchToJson(before.content, patch) : replaceJsonContent(next)
    }
    const after: MeshNode = { ...before, name, content, updatedAt: now() }
    return this.commitChange(ln, principal, before, after, 'Updated', update, origin)
  }

  private authorizeFields(principal: Principal, node: MeshNode, fields: Iterable<string>): void {
    if (isSystem(principal)) return
    const perms = this.access.permissions(principal, node.path)
    if (!perms.has('Read')) throw new WeftError('forbidden', `${principalName(principal)} cannot read ${node.path}.`)
    this.checkFieldRules(principal, perms, node.nodeType, node.path, fields, this.ownerOf(node))
  }

  /** [ACC7] The one field-rule check: patch, replace, Yjs update and create alike. */
  private checkFieldRules(principal: Principal, perms: PermissionSet, nodeType: string, path: NodePath, fields: Iterable<string>, owner?: string): void {
    for (const field of fields) {
      const rule = fieldRule(nodeType, field)
      const isOwner = rule === 'owner' && owner !== undefined && principal.kind === 'user' && principal.userId === owner
      const ok = isOwner || (rule !== 'system' && perms.has(rule === 'admin' ? 'ManageAccess' : rule === 'owner' ? 'Update' : rule))
      if (!ok) {
        if (!perms.has('Update') && rule !== 'system') {
          throw new WeftError('forbidden', `${principalName(principal)} may not change ${path} (no Update permission).`)
        }
        const who = rule === 'system' ? 'only the system' : rule === 'admin' ? 'Admins' : rule === 'owner' ? 'its owner and holders of Update' : `holders of ${rule}`
        throw new WeftError('forbidden_field', `Field ${field} of a ${nodeType} is written by ${who}; your change to ${path} was not applied.`)
      }
    }
  }

  /** Invariants across nodes: an assignment's Subject is its path's; a Space keeps one Admin. */
  private checkInvariants(before: MeshNode | null, after: MeshNode | null, cascading = false, principal: Principal = SYSTEM): void {
    // [ACT10] A run reads its Inputs as it starts: once it has a Status they are history, and a
    // change would only show inputs the run never saw.
    if (before?.nodeType === 'ActivityLog' && after && !isSystem(principal) && before.content.Status !== undefined && before.content.Status !== null && !jsonEqual(before.content.Inputs ?? null, after.content.Inputs ?? null)) {
      throw new WeftError('conflict', `The run ${before.path} has started and read its Inputs then; they can no longer change. Run it again with the new inputs.`)
    }
    if (after?.nodeType === 'AccessAssignment') {
      const subject = after.content.Subject
      // [ACC0] The path names the subject: one assignment per subject and scope, never two.
      if (typeof subject !== 'string' || lastSegment(after.path) !== assignmentLabel(subject)) {
        throw new WeftError('invalid_content', `The Subject of ${after.path} must be the subject its name gives (${lastSegment(after.path)}).`)
      }
    }
    const node = before ?? after
    if (!node || node.nodeType !== 'AccessAssignment' || cascading) return
    const scope = assignmentScope(node.path)
    if (!scope || scope.includes('/')) return
    const wasAdmin = before && before.content.Role === 'Admin' && before.content.Denied !== true
    const isAdmin = after && after.content.Role === 'Admin' && after.content.Denied !== true
    if (!wasAdmin || isAdmin) return
    const subject = before.content.Subject
    const remaining = this.access.adminsOf(scope).filter((s) => s !== subject)
    if (remaining.length === 0) {
      throw new WeftError('last_admin', `${scope} must keep at least one Admin; grant Admin to someone else first.`)
    }
  }

  private async deleteIn(ln: LoadedNode, principal: Principal, origin: ChangeOrigin, cascading: boolean): Promise<void> {
    const before = ln.node
    if (!before) return
    if (!cascading && !this.allows(principal, ln.path, nodeTypeDef(before.nodeType).delete)) {
      throw new WeftError('forbidden', `${principalName(principal)} may not delete ${ln.path}.`)
    }
    this.checkInvariants(before, null, cascading)
    // Marked before the first await: no child can be created under the subtree meanwhile.
    const marked = !this.deleting.has(ln.path)
    if (marked) this.deleting.add(ln.path)
    // Held across the awaits below: this copy must stay the loaded one until its delete commits.
    ln.holds++
    try {
      // Children first, so a crash half-way never leaves orphans under a deleted parent. The
      // list is read again until empty: a child committed while the first list was read counts.
      for (let pass = 0; pass < 5; pass++) {
        // Stored children, and those whose creation is applied but not yet durable.
        const prefix = `${ln.path}/`
        const children = [...new Set([...(await this.storage.descendants(ln.path)), ...[...this.loaded.values()].filter((c) => c.node && c.path.startsWith(prefix)).map((c) => c.path)])]
        if (children.length === 0) break
        children.sort((a, b) => b.length - a.length)
        for (const child of children) {
          const cl = await this.acquire(child)
          await this.deleteIn(cl, principal, origin, true)
        }
      }
    } finally {
      if (marked) this.deleting.delete(ln.path)
      ln.holds--
    }
    const current = ln.node
    if (!current) return
    const written = this.commitChange(ln, principal, current, null, 'Deleted', null, origin)
    for (const conn of [...ln.connections]) conn.evict(4404, 'not_found', `${ln.path} was deleted.`)
    ln.resetDoc()
    await written
  }

  /**
   * The one place a change is committed: memory first (so the next write sees it), storage
   * enqueued in the same synchronous stretch, the feed published once durable.
   */
  private commitChange(
    ln: LoadedNode,
    principal: Principal,
    before: MeshNode | null,
    after: MeshNode | null,
    kind: MeshChangeKind,
    update: Uint8Array | null,
    origin: ChangeOrigin,
    deferContent = false,
    /** [ACC12] The client ids a client's update binds; absent for the server's own writes. */
    clients?: readonly ClientBinding[],
  ): Written {
    const target = after ?? before!
    // Only an update with a Yjs log entry can leave the row's content to a later write.
    const deferred = deferContent && kind === 'Updated' && update !== null
    if (deferred) this.markContentDirty(ln)
    // Every other commit writes the whole row (or removes it).
    else ln.contentDirty = false
    if (kind !== 'Updated') ln.generation++
    ln.node = after
    ln.lastUsed = Date.now()
    this.access.observe(before, after)
    ln.commitStarted()
    const committed = this.storage.commit({
      path: ln.path,
      kind,
      nodeType: target.nodeType,
      name: target.name,
      content: target.content,
      createdBy: target.createdBy,
      at: target.updatedAt,
      update,
      deferContent: deferred || undefined,
      // [ACC12] Stored with the update that introduces them; the server doc's own id with its first write.
      clients: clients !== undefined ? (clients.length > 0 ? clients : undefined) : update && ln.hasDoc ? ln.clientBindings.serverBinding() : undefined,
    })
    return committed.then(
      (record) => {
        this.settledWrite(ln.path)
        this.commitLanded(ln)
        const versioned = after ? { ...after, version: record.version } : null
        if (ln.node === after) ln.node = versioned
        const change: LiveChange = {
          version: record.version,
          path: record.path,
          nodeType: record.nodeType,
          kind: record.kind,
          node: versioned,
          by: principalName(principal),
          origin,
        }
        this.changesSubject.next(change)
        this.pathSubjects.get(ln.path)?.next(change)
        return versioned
      },
      (err: unknown) => {
        this.settledWrite(ln.path)
        this.access.observe(after, before)
        this.commitFailed(ln, err)
        throw err instanceof WeftError ? err : new WeftError('internal', 'The change could not be saved.')
      },
    )
  }

  /** A commit (or a doc's catch-up) of this copy is durable; a retired copy goes once its last one settles. */
  private commitLanded(ln: LoadedNode): void {
    ln.commitSettled()
    if (ln.poisoned && ln.pendingCommits === 0 && this.retired.get(ln.path) === ln) {
      this.retired.delete(ln.path)
      ln.destroy()
    }
  }

  /**
   * A commit (or a doc's catch-up) of this copy failed: memory is ahead of storage. Retire the
   * copy (no more writes on it), evict its clients, and let the next use reload the durable
   * state once its other commits settle.
   */
  private commitFailed(ln: LoadedNode, err: unknown): void {
    if (!ln.poisoned) {
      ln.poisoned = true
      this.opts.log.error({ err, path: ln.path }, 'commit failed; unloading node')
      for (const conn of [...ln.connections]) conn.evict(1011, 'internal', 'The server could not save a change; reconnect.')
      if (this.loaded.get(ln.path) === ln) this.loaded.delete(ln.path)
      this.retired.set(ln.path, ln)
    }
    ln.commitSettled()
    if (ln.pendingCommits === 0) {
      if (this.retired.get(ln.path) === ln) this.retired.delete(ln.path)
      ln.destroy()
    }
  }

  /** A commit settled: storage may have changed under any read of the path, cached or under way. */
  private settledWrite(path: NodePath): void {
    this.writeEpoch++
    this.readCache.delete(path)
  }

  async close(): Promise<void> {
    this.closed = true
    if (this.sweepTimer) clearInterval(this.sweepTimer)
    if (this.flushTimer) clearTimeout(this.flushTimer)
    // Deferred row content is written before storage closes (a crash instead is covered by the log).
    await this.flushContent().catch(() => undefined)
    this.changesSubject.complete()
    for (const s of this.pathSubjects.values()) s.complete()
    this.pathSubjects.clear()
    for (const ln of this.loaded.values()) ln.destroy()
    this.loaded.clear()
    this.readCache.clear()
  }
}

/** The top-level fields whose value differs between `a` and `b` (a member holding null differs from an absent one). */
function changedFields(a: JsonObject, b: JsonObject): string[] {
  const has = (o: JsonObject, k: string) => Object.prototype.hasOwnProperty.call(o, k) && o[k] !== undefined
  return Object.keys({ ...a, ...b }).filter((k) => has(a, k) !== has(b, k) || !jsonEqual(a[k], b[k]))
}

/**
 * [DOC1] Whether a create builds the node's doc at once. A client's new node is likely opened
 * soon, and then needs no catch-up; a server engine's (a grant, a claim) most likely never is.
 */
function buildsDocOnCreate(origin: ChangeOrigin): boolean {
  switch (origin) {
    case 'http':
    case 'sync':
    case 'mux':
      return true
    case 'engine':
    case 'system':
      return false
    default:
      return origin satisfies never
  }
}

let nowMs = 0
let nowIso = ''

/** The time as ISO text, formatted once per millisecond (a burst of writes shares it). */
function now(): string {
  const ms = Date.now()
  if (ms !== nowMs) {
    nowMs = ms
    nowIso = new Date(ms).toISOString()
  }
  return nowIso
}
