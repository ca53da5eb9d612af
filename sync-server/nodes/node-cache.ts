import * as Y from 'yjs'
import type { Logger } from 'pino'
import { WeftError, docToJson, isDescendantOrSelf, jsonEqual, replaceDocContent, textPolicyFor, type MeshNode, type NodePath } from '../../shared/index.js'
import { elsewhereRefusal, replayLog, type StorageAdapter } from '../storage/index.js'
import { ClientBindings } from '../admission/index.js'
import { LoadedNode, type DocCorrupted } from './loaded-node.js'
import type { ClusterLink } from './types.js'

export interface NodeCacheOptions {
  idleUnloadMs: number
  /** Soft cap on loaded docs: beyond it, docs without clients unload least recently used first. */
  maxLoadedDocs?: number
  log: Logger
}

/** Nodes read but not loaded that `get` remembers (an engine checking the same space 10,000 times). */
const READ_CACHE_SIZE = 4096
/** A doc used this recently is never unloaded for the cap: a write may be between its acquire and its commit. */
const MIN_RESIDENCY_MS = 1000
/** Loaded docs one trim looks at, at most: the cap is enforced a little at a time. */
const TRIM_SCAN = 256

/**
 * The nodes of one server in memory: loads each once (its row; its Y.Doc when a room needs it),
 * unloads idle ones and enforces the cap, remembers recent reads of nodes not loaded, and runs
 * the lifecycle of a loaded copy (a commit lands; a commit fails and the copy is retired until
 * its other commits settle; a copy whose doc Yjs corrupted is dropped).
 */
export class NodeCache {
  private readonly loaded = new Map<NodePath, LoadedNode>()
  private readonly loading = new Map<NodePath, Promise<LoadedNode>>()
  /** Copies dropped after a failed commit, until their other commits settle: no reload before. */
  private readonly retired = new Map<NodePath, LoadedNode>()
  /**
   * Recent reads of nodes that are not loaded, oldest first. Only a node that is not loaded is
   * cached, and a write loads it (which drops the entry); every commit drops it again when it
   * settles (a dropped copy's commits land while the node is not loaded), and a read that
   * overlapped a settling commit is not remembered (writeEpoch).
   */
  private readonly readCache = new Map<NodePath, MeshNode | null>()
  private writeEpoch = 0
  private sweepTimer: NodeJS.Timeout | null = null
  private closed = false

  constructor(
    private readonly storage: StorageAdapter,
    private readonly opts: NodeCacheOptions,
    /** [SCALE2] [SCALE3] The other instances (given to every loaded copy); with them a node's Yjs log holds all its content (buildDoc). */
    private readonly cluster: ClusterLink,
  ) {
    const every = Math.max(50, Math.min(5_000, Math.floor(opts.idleUnloadMs / 2)))
    this.sweepTimer = setInterval(() => this.unloadIdle(), every)
    this.sweepTimer.unref()
  }

  get size(): number {
    return this.loaded.size
  }

  /** [OPS2] Loaded nodes with at least one client connected (sync rooms); counted on scrape. */
  roomCount(): number {
    let n = 0
    for (const ln of this.loaded.values()) if (ln.connections.size > 0) n++
    return n
  }

  /** The loaded copy of a node, if any (no load, no LRU move). */
  peek(path: NodePath): LoadedNode | undefined {
    return this.loaded.get(path)
  }

  /** The loaded copies whose path starts with `prefix` and whose node exists. */
  loadedUnder(prefix: string): NodePath[] {
    return [...this.loaded.values()].filter((c) => c.node && c.path.startsWith(prefix)).map((c) => c.path)
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
    // [TOMB1] A missing node's tombstone comes with its row read (a create needs it next).
    const read = cached !== undefined ? { node: cached, tombstone: undefined } : await this.storage.getNodeOrTombstone(path)
    const node = read.node
    const ln = new LoadedNode(path, node, this.cluster)
    if (!node) ln.leftTombstone = read.tombstone
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
        replayLog(doc, stored.snapshot, stored.updates)
      }
      const logged = docToJson(doc)
      // [SCALE2] Several instances: every write goes through a doc, so the log holds every
      // change, and a row read before the log may miss one another instance committed in
      // between: the log is the content (a catch-up from the row would undo that change).
      if (this.cluster.hooks && ln.node && stored && ln.generation === generation) ln.node = { ...ln.node, content: logged }
      const content = ln.node?.content ?? {}
      const lags = !jsonEqual(logged, content)
      // Before the catch-up: the server's own writes use an id nobody else holds.
      bindings.adoptServerDoc(doc)
      if (lags) replaceDocContent(doc, content, 'system', textPolicyFor(ln.node?.nodeType ?? 'Document'), 'as stored')
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

  // ---------------------------------------------------------------- unloading

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

  // ---------------------------------------------------------------- reads of nodes not loaded

  /** The node as memory or storage has it, remembering reads of nodes not loaded. */
  async read(path: NodePath): Promise<MeshNode | null> {
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

  async exists(path: NodePath): Promise<boolean> {
    const loaded = this.loaded.get(path)
    return loaded ? loaded.node !== null : (await this.storage.getNode(path)) !== null
  }

  /**
   * [SCALE1] Another instance changed the node: a copy nobody uses here (no client, no commit,
   * no hold) is dropped, so the next use reads storage. Says whether it was dropped.
   */
  forget(path: NodePath): boolean {
    this.settledWrite(path)
    const ln = this.loaded.get(path)
    if (!ln) return true
    if (ln.connections.size > 0 || ln.pendingCommits > 0 || ln.holds > 0 || ln.contentDirty || ln.materializing) return false
    this.unload(path, ln)
    return true
  }

  /** Whether the node is being loaded right now (a remote change must be re-read after it). */
  isLoading(path: NodePath): boolean {
    return this.loading.has(path)
  }

  /** A commit settled: storage may have changed under any read of the path, cached or under way. */
  settledWrite(path: NodePath): void {
    this.writeEpoch++
    this.readCache.delete(path)
  }

  // ---------------------------------------------------------------- a copy's commits

  /** A commit (or a doc's catch-up) of this copy is durable; a retired copy goes once its last one settles. */
  commitLanded(ln: LoadedNode, change = false): void {
    ln.commitSettled(change)
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
  commitFailed(ln: LoadedNode, err: unknown, change = false): void {
    if (!ln.poisoned) {
      ln.poisoned = true
      const expected = expectedRefusal(err)
      if (expected) {
        this.opts.log.info({ path: ln.path, code: expected.code }, `commit refused: ${expected.why}; reloading the node`)
        for (const conn of [...ln.connections]) conn.evict(1012, expected.code, expected.tell)
      } else {
        this.opts.log.error({ err, path: ln.path }, 'commit failed; unloading node')
        for (const conn of [...ln.connections]) conn.evict(1011, 'internal', 'The server could not save a change; reconnect.')
      }
      if (this.loaded.get(ln.path) === ln) this.loaded.delete(ln.path)
      this.retired.set(ln.path, ln)
    }
    ln.commitSettled(change)
    if (ln.pendingCommits === 0) {
      if (this.retired.get(ln.path) === ln) this.retired.delete(ln.path)
      ln.destroy()
    }
  }

  /** Drops a copy whose doc may hold part of a failed update; its clients reconnect to a reload. */
  dropCorrupted(ln: LoadedNode, err: DocCorrupted): void {
    this.opts.log.error({ err: err.cause, path: ln.path }, 'a Yjs update failed inside Yjs after admission; dropping the copy')
    this.drop(ln)
  }

  /** [SCALE12] Drops a copy holding an update that another instance failed to make durable; its clients reconnect to a reload. */
  dropDiverged(ln: LoadedNode): void {
    this.opts.log.warn({ path: ln.path }, 'an update relayed early by another instance was not committed there; dropping the copy')
    this.drop(ln)
  }

  /**
   * [SCALE2] The node was created or deleted on another instance: this copy is of a node that is
   * no longer there. Dropped at once, even with a room open or its row write still due (that
   * write is cancelled: it would be the old node's content): its clients reconnect to what
   * storage holds now. Waiting for the room to empty instead left the old node served here, and
   * its clients' edits committed onto the new node, for as long as a stock client kept
   * reconnecting to it.
   */
  dropReplaced(ln: LoadedNode): void {
    this.drop(ln, 1012, 'unavailable', 'The node was replaced on another server; reconnect.')
  }

  private drop(ln: LoadedNode, closeCode = 1011, code = 'internal', message = 'The server reloaded this node; reconnect.'): void {
    ln.poisoned = true
    ln.contentDirty = false
    for (const conn of [...ln.connections]) conn.evict(closeCode, code, message)
    if (this.loaded.get(ln.path) === ln) this.loaded.delete(ln.path)
    if (ln.pendingCommits > 0) this.retired.set(ln.path, ln)
    else ln.destroy()
  }

  // ---------------------------------------------------------------- a subtree's move

  /**
   * [MOVE2] Waits until every copy inside `root` (loaded, or retired after a failed commit) has
   * no commit in flight: a move reads the rows after them.
   */
  async settleUnder(root: NodePath): Promise<void> {
    const copies = [...this.loaded.values()].filter((ln) => isDescendantOrSelf(ln.path, root))
    await Promise.all(copies.map((ln) => ln.settled()))
    for (const ln of copies) await this.retired.get(ln.path)?.settled()
  }

  /**
   * [MOVE2] The subtree at `from` now lives at `to` in storage: the copies of the old paths are
   * dropped (their clients evicted with `moved`), empty copies at the new paths too (they said
   * "absent"), and no remembered read of either survives. Synchronous.
   */
  dropMoved(from: NodePath, to: NodePath): void {
    const newPath = (p: NodePath) => `${to}${p.slice(from.length)}`
    for (const ln of [...this.loaded.values()]) {
      if (isDescendantOrSelf(ln.path, from)) {
        for (const conn of [...ln.connections]) conn.evict(4404, 'moved', `Moved to ${newPath(ln.path)}`)
        ln.contentDirty = false
        this.unload(ln.path, ln)
      } else if (isDescendantOrSelf(ln.path, to) && ln.node === null && ln.holds === 0) {
        this.unload(ln.path, ln)
      }
    }
    for (const path of [...this.readCache.keys()]) if (isDescendantOrSelf(path, from) || isDescendantOrSelf(path, to)) this.readCache.delete(path)
    this.writeEpoch++
  }

  /** Stops loading and drops every copy (after the content flush wrote what was dirty). */
  close(): void {
    this.closed = true
    if (this.sweepTimer) clearInterval(this.sweepTimer)
  }

  /** Destroys every loaded copy; the last step of closing. */
  clear(): void {
    for (const ln of this.loaded.values()) ln.destroy()
    this.loaded.clear()
    this.readCache.clear()
  }
}

/**
 * A commit refused as it should be, not a failure of this server: its clients reconnect to the
 * node as it is now (1012). [SCALE18]-[SCALE20] another instance changed the node a moment ago;
 * [CTX44] an agent's reaction whose lease ended before its commit (through another server).
 */
function expectedRefusal(err: unknown): { code: string; why: string; tell: string } | null {
  if (!(err instanceof WeftError)) return null
  if (elsewhereRefusal(err)) return { code: err.code, why: 'the node changed on another server', tell: 'The node changed on another server; reconnect.' }
  if (err.code === 'stale_lease') return { code: err.code, why: "a reaction's lease ended before it was saved", tell: "An agent's change to this node was not saved; reconnect." }
  return null
}
