import * as Y from 'yjs'
import * as awarenessProtocol from 'y-protocols/awareness'
import { docToJson, type ChangeRecord, type MeshNode, type NodePath } from '../../shared/index.js'
import { isAccessType, type AccessService } from '../access/index.js'
import type { ClientBinding, StorageAdapter } from '../storage/index.js'
import type { CommitFeed } from './commit-feed.js'
import { REMOTE_ORIGIN, type EarlyUpdate, type LoadedNode } from './loaded-node.js'
import type { NodeCache } from './node-cache.js'
import type { ChangeOrigin } from './types.js'

/** [SCALE1] A change another instance made durable, as the fan-out hands it over. */
export interface RemoteChange extends ChangeRecord {
  /** Its Yjs update, when the message carried it (a catch-up from storage does not). */
  update?: Uint8Array | null
  /** [ACC12] The client ids its update bound. */
  clients?: readonly ClientBinding[]
  by?: string
  origin?: ChangeOrigin
  /** [SCALE9] The node's name and updatedAt after the change, when the message carried them. */
  name?: string
  at?: string
  /** [SCALE12] The key of the early message that carried its update (the change's message then does not). */
  early?: string
}

/**
 * [SCALE1] Applies a change made by another instance on the same database to this instance's
 * memory: the copy of the node here, the access indexes (the gate decides alike on every
 * instance) and the local feed (engines and watchers see it). Idempotent: Yjs updates apply
 * once, and a catch-up may hand over the same change again.
 *
 * [SCALE9] A copy with its doc built takes the update the message carried (and relays it to
 * its room's clients), whether or not a client has it open: the next write here goes through a
 * doc that is already current, instead of reading the row and rebuilding the doc from the log.
 * The node is read from storage only when something here needs it (the access indexes, or a
 * feed watcher) and no doc here holds it; an instance that neither holds the node nor watches
 * does no work beyond its bookkeeping.
 */
export class RemoteApply {
  constructor(
    private readonly storage: StorageAdapter,
    private readonly access: AccessService,
    private readonly cache: NodeCache,
    private readonly feed: CommitFeed,
  ) {}

  async apply(change: RemoteChange): Promise<void> {
    const { path } = change
    this.cache.settledWrite(path)
    const kept = await this.refreshCopy(path, change)
    const node = change.kind === 'Deleted' ? null : kept ? kept.node : this.needsNode(change) ? await this.storage.getNode(path) : null
    this.publish(change, node)
  }

  /** Whether this instance needs the node of a change it holds no doc of: the access indexes or a watcher of the feed. */
  private needsNode(change: RemoteChange): boolean {
    return isAccessType(change.nodeType) || this.feed.wants(change.path)
  }

  /**
   * [SCALE2] A page of changes read from storage (a catch-up), in order: each path's node is read
   * once and its copy refreshed once (from the stored log, which holds every change of the page),
   * before its first change is published; every change is still published, in order. `fresh`
   * says whether a change is still to apply (asked again as it comes: this instance's own commit
   * may land meanwhile); `applied` is told each change applied.
   */
  async applyPage(changes: readonly RemoteChange[], fresh: (change: RemoteChange) => boolean, applied: (change: RemoteChange) => void): Promise<void> {
    // What each path's refresh stands for: its first creation or deletion (the copy is dropped),
    // else its last update (the doc takes the stored log, the copy that version).
    const refreshes = new Map<NodePath, RemoteChange | null>()
    for (const c of changes) {
      const prev = refreshes.get(c.path)
      if (fresh(c) && (!prev || prev.kind === 'Updated')) refreshes.set(c.path, c)
    }
    const nodes = new Map<NodePath, MeshNode | null>()
    for (const change of changes) {
      if (!fresh(change)) continue
      const { path } = change
      let node: MeshNode | null = null
      if (change.kind !== 'Deleted') {
        if (!nodes.has(path)) nodes.set(path, await this.storage.getNode(path))
        node = nodes.get(path)!
      }
      const refresh = refreshes.get(path) ?? null
      refreshes.set(path, null)
      await this.take(change, node, refresh)
      applied(change)
    }
  }

  /** One change into the access indexes, the copy here (refreshed as `refresh` says; null: already) and the local feed. */
  private async take(change: RemoteChange, node: MeshNode | null, refresh: RemoteChange | null): Promise<void> {
    this.cache.settledWrite(change.path)
    if (refresh) await this.refreshCopy(change.path, refresh)
    this.publish(change, node)
  }

  /** The change into the access indexes and the local feed, with the node as it is after it here. */
  private publish(change: RemoteChange, node: MeshNode | null): void {
    const { path } = change
    if (isAccessType(change.nodeType)) {
      // The indexes key an assignment by its path: the stub stands for whatever was there.
      this.access.observe({ path, nodeType: change.nodeType } as MeshNode, node)
    }
    this.feed.publishLocal({ version: change.version, path, nodeType: change.nodeType, kind: change.kind, node, by: change.by ?? 'remote', origin: change.origin ?? 'system' })
  }

  /**
   * Brings the copy here (if any) up to `change`: a copy with its doc takes the update (or, from
   * a catch-up, the stored log) and stays loaded ([SCALE9]; returned); a copy without a doc that
   * nobody uses is dropped (the next use reads storage); a room whose node was created or
   * deleted elsewhere is evicted (its clients resync).
   */
  private async refreshCopy(path: NodePath, change: RemoteChange): Promise<LoadedNode | null> {
    if (this.cache.isLoading(path)) await this.cache.acquire(path).catch(() => undefined)
    for (let attempt = 0; attempt < 50; attempt++) {
      const ln = this.cache.peek(path)
      if (!ln) return null
      // [TOMB1] Created or deleted elsewhere: the tombstone at the path is storage's to tell.
      if (change.kind !== 'Updated') ln.leftTombstone = undefined
      if (ln.materializing) await ln.materializing.catch(() => undefined)
      if (this.cache.peek(path) !== ln) continue
      if (change.kind === 'Updated' && ln.hasDoc && ln.node && !ln.poisoned) return (await this.applyToDoc(ln, change)) ? ln : null
      if (this.cache.forget(path)) return null
      if (change.kind !== 'Updated' && ln.holds === 0) {
        // Created or deleted elsewhere: what this copy holds is another node's, or none's.
        this.cache.dropReplaced(ln)
        return null
      }
      if (ln.connections.size > 0 && ln.pendingCommits === 0 && ln.holds === 0) {
        // Created or deleted elsewhere under a room here: its clients resync from storage.
        for (const conn of [...ln.connections]) conn.evict(1012, 'unavailable', 'The node was replaced on another server; reconnect.')
        continue
      }
      await ln.settled()
      await new Promise((r) => setTimeout(r, 20))
    }
    return null
  }

  /**
   * [SCALE12] An update another instance accepted and is committing: a copy here with its doc
   * takes it at once and relays it to its room (as that instance's own room got it), so a client
   * here sees an edit made there without waiting for the commit. Its change message confirms it
   * later; if the commit fails (or never comes) the copy is dropped (`dropEarly`). Returns
   * whether a copy took it.
   */
  applyEarly(path: NodePath, key: string, update: Uint8Array, clients: readonly ClientBinding[], early: EarlyUpdate): boolean {
    const ln = this.cache.peek(path)
    if (!ln || !ln.hasDoc || !ln.node || ln.poisoned || ln.materializing) return false
    ln.clientBindings.record(clients)
    Y.applyUpdate(ln.doc, update, REMOTE_ORIGIN)
    if (ln.doc.store.pendingStructs || ln.doc.store.pendingDs) early.needsLog = true
    ln.node = { ...ln.node, content: docToJson(ln.doc) }
    ln.early.set(key, early)
    return true
  }

  /** [SCALE12] The commit of an update a copy here took early failed or never came: the copy goes (its clients reload from storage). */
  dropEarly(path: NodePath, key: string): void {
    const ln = this.cache.peek(path)
    if (ln?.early.delete(key)) this.cache.dropDiverged(ln)
  }

  /** The update (or, from a catch-up, the stored log: Yjs applies only what the doc lacks) into the room's doc, relayed to its clients. */
  private async applyToDoc(ln: LoadedNode, change: RemoteChange): Promise<boolean> {
    const taken = change.early !== undefined ? ln.early.get(change.early) : undefined
    if (taken) {
      // [SCALE12] The doc took the update early: only the version and what came with it are new.
      ln.early.delete(change.early!)
      if (taken.needsLog) return this.applyToDoc(ln, { ...change, early: undefined, update: null })
      const newer = change.version > ln.node!.version
      ln.node = {
        ...ln.node!,
        ...(newer && change.name !== undefined ? { name: change.name } : {}),
        ...(newer && change.at !== undefined ? { updatedAt: change.at } : {}),
        version: Math.max(ln.node!.version, change.version),
      }
      return true
    }
    const updates = change.update ? [change.update] : await this.storedUpdates(ln.path)
    const bindings = change.clients ?? (change.update ? [] : await this.storage.loadClientBindings(ln.path))
    if (!ln.hasDoc || !ln.node || ln.poisoned) return false
    // One synchronous stretch: no local write interleaves between the doc and its JSON.
    ln.clientBindings.record(bindings)
    for (const u of updates) Y.applyUpdate(ln.doc, u, REMOTE_ORIGIN)
    if (change.update && (ln.doc.store.pendingStructs || ln.doc.store.pendingDs)) {
      // An update this doc missed came later (its message lost): the stored log has it.
      const stored = await this.storedUpdates(ln.path)
      if (!ln.hasDoc || !ln.node || ln.poisoned) return false
      for (const u of stored) Y.applyUpdate(ln.doc, u, REMOTE_ORIGIN)
    }
    const newer = change.version > ln.node.version
    ln.node = {
      ...ln.node,
      ...(newer && change.name !== undefined ? { name: change.name } : {}),
      ...(newer && change.at !== undefined ? { updatedAt: change.at } : {}),
      content: docToJson(ln.doc),
      version: Math.max(ln.node.version, change.version),
    }
    return true
  }

  /** The node's stored log: its snapshot (if any), then its updates. */
  private async storedUpdates(path: NodePath): Promise<Uint8Array[]> {
    const stored = await this.storage.loadDoc(path)
    return stored ? [...(stored.snapshot ? [stored.snapshot] : []), ...stored.updates] : []
  }

  /** [SCALE3] Presence from another instance's clients, into this instance's room (if one is open here). */
  applyPresence(path: NodePath, update: Uint8Array): void {
    const presence = this.cache.peek(path)?.presence
    if (presence) awarenessProtocol.applyAwarenessUpdate(presence, update, REMOTE_ORIGIN)
  }

  /** [SCALE3] The presence of this instance's own clients in a room, for an instance whose room just opened. */
  localPresence(path: NodePath): Uint8Array | null {
    const ln = this.cache.peek(path)
    const presence = ln?.presence
    if (!ln || !presence) return null
    const ids = [...ln.connections].flatMap((c) => [...c.awarenessIds])
    return ids.length > 0 ? awarenessProtocol.encodeAwarenessUpdate(presence, ids) : null
  }
}
