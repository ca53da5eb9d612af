import * as Y from 'yjs'
import * as awarenessProtocol from 'y-protocols/awareness'
import type { MeshNode, NodePath } from '../../shared/index.js'
import { ClientBindings } from '../admission/index.js'
import type { ClusterLink, RoomConnection, SyncRoom } from './types.js'

export type { RoomConnection } from './types.js'

/** [SCALE1] The origin of Yjs and awareness updates applied from another instance. */
export const REMOTE_ORIGIN = 'remote'

/**
 * [SCALE12] An update another instance relayed before it was durable there, taken by this doc:
 * `settled` resolves once that instance committed it and rejects if the commit failed or never
 * came. A commit here made while the doc held it is acknowledged only once it settles (it may
 * build on that update: nothing acknowledged may depend on what was lost).
 */
export class EarlyUpdate {
  readonly settled: Promise<void>
  /** Confirmed or failed. */
  done = false
  private resolve!: () => void
  private reject!: (err: Error) => void
  /** The doc was left with structs pending (a message it builds on missed): read the stored log on confirmation. */
  needsLog = false
  constructor(readonly at: number) {
    this.settled = new Promise<void>((resolve, reject) => {
      this.resolve = resolve
      this.reject = reject
    })
    // Nobody may be waiting on it.
    this.settled.catch(() => undefined)
  }

  confirm(): void {
    this.done = true
    this.resolve()
  }

  fail(err: Error): void {
    this.done = true
    this.reject(err)
  }
}

/** Yjs failed while applying an admitted update: the doc may hold part of it and must be dropped. */
export class DocCorrupted extends Error {
  constructor(
    readonly path: NodePath,
    override readonly cause: unknown,
  ) {
    super(`Applying an update to ${path} failed inside Yjs`)
  }
}

function cloneDoc(doc: Y.Doc): Y.Doc {
  const copy = new Y.Doc({ guid: doc.guid })
  Y.applyUpdate(copy, Y.encodeStateAsUpdate(doc))
  return copy
}

/**
 * A node in server memory. Its Y.Doc is built lazily ([DOC1]): a node that only the server writes
 * (a subscription claim, an access grant) keeps its JSON and skips Yjs until a client opens it.
 * Once built, the doc is authoritative: it only ever receives updates that passed the access and
 * schema checks, and every update, whatever its origin, is relayed to the room's connections
 * except the one it came from.
 */
export class LoadedNode implements SyncRoom {
  readonly path: NodePath
  private ydoc: Y.Doc | null = null
  node: MeshNode | null
  /** Set while the doc is being built and its catch-up made durable (NodeCache.materialize). */
  materializing: Promise<void> | null = null
  private awarenessState: awarenessProtocol.Awareness | null = null
  readonly connections = new Set<RoomConnection>()
  /** Commits applied in memory whose durability is not yet confirmed; unloading waits for 0. */
  pendingCommits = 0
  /** Of those, the node's changes (not a row rewrite or a fold): what a read may be ahead of ([CTX16]). */
  changesInFlight = 0
  /** Operations holding this copy across an await (a cascade delete): it is not unloaded meanwhile. */
  holds = 0
  /** Set when a commit of this copy failed: memory is ahead of storage, so it takes no more writes. */
  poisoned = false
  private settleWaiters: (() => void)[] = []
  private changeWaiters: (() => void)[] = []
  lastUsed = Date.now()
  /** When the node last moved to the back of the LRU order (NodeCache.acquire). */
  movedAt = this.lastUsed
  /** Counts Created and Deleted commits: a doc build that waited on storage checks it did not change. */
  generation = 0
  /**
   * [TOMB1] For a copy of a missing node, the tombstone at its path (null: none; undefined: not
   * known, storage is asked): read with the row, set by this copy's delete (a create right after
   * it, before its commit is durable, must not read storage's older state), cleared by a create.
   */
  leftTombstone: Uint8Array | null | undefined = undefined
  /** [STO5] Commits of this copy left the stored row's content stale; the content flush writes it soon. */
  contentDirty = false
  /** [STO5] When the content flush last wrote this copy's row, and that row's JSON length (its next write waits in proportion). */
  contentFlushedAt = 0
  rowBytes = 0
  /** [ACC12] Who writes under each Yjs client id of the doc; replaced with the doc. */
  clientBindings = new ClientBindings()
  /** [SCALE12] Updates from other instances this doc holds that are not yet durable there, by key. */
  readonly early = new Map<string, EarlyUpdate>()

  constructor(
    path: NodePath,
    node: MeshNode | null,
    /** [SCALE3] The other instances: this room's presence goes to them, read at each use (null hooks: none). */
    private readonly cluster: ClusterLink,
  ) {
    this.path = path
    this.node = node
  }

  /** Whether the Y.Doc is built; until it is, writes change the JSON only. */
  get hasDoc(): boolean {
    return this.ydoc !== null
  }

  /** The built doc; only rooms (which materialise before joining) and Yjs-path writes use it. */
  get doc(): Y.Doc {
    if (!this.ydoc) throw new Error(`Invariant: the doc of ${this.path} is used before it is built`)
    return this.ydoc
  }

  /**
   * Installs the built doc (once): from now on every write to the node goes through it. Its
   * client-id bindings come with it (none for a new doc; a reset doc starts over).
   */
  setDoc(doc: Y.Doc, bindings = new ClientBindings()): void {
    if (this.ydoc) throw new Error(`Invariant: the doc of ${this.path} is built twice`)
    bindings.adoptServerDoc(doc)
    this.clientBindings = bindings
    this.ydoc = doc
    doc.on('update', this.onDocUpdate)
  }

  /**
   * Presence of the room, created when the first client joins: nodes loaded only for engine
   * writes carry no Awareness (each runs an interval timer and holds a doc of its own).
   */
  get awareness(): awarenessProtocol.Awareness {
    if (!this.awarenessState) {
      const awareness = new awarenessProtocol.Awareness(new Y.Doc({ guid: `${this.path}#awareness` }))
      // The server has no presence of its own.
      awareness.setLocalState(null)
      awareness.on('update', this.onAwarenessUpdate)
      this.awarenessState = awareness
      this.cluster.hooks?.presenceOpened(this.path)
    }
    return this.awarenessState
  }

  private dropAwareness(): void {
    if (!this.awarenessState) return
    this.awarenessState.off('update', this.onAwarenessUpdate)
    this.awarenessState.destroy()
    this.awarenessState.doc.destroy()
    this.awarenessState = null
  }

  /** After a delete the room starts over with an empty doc (a doc not built stays unbuilt). */
  resetDoc(): void {
    if (!this.ydoc) return
    this.dropDoc()
    this.setDoc(new Y.Doc({ guid: this.path }))
  }

  private dropDoc(): void {
    this.destroyDoc()
    this.ydoc = null
  }

  private destroyDoc(): void {
    this.ydoc?.off('update', this.onDocUpdate)
    this.ydoc?.destroy()
    this.dropShadow()
  }

  /**
   * Runs `change` on the doc and returns the Yjs update it produced (merged; null when nothing
   * changed). The doc's one update listener collects it: no listener added and removed per write.
   */
  capture(change: () => void): Uint8Array | null {
    const outer = this.captured
    const mine: Uint8Array[] = []
    this.captured = mine
    try {
      change()
    } finally {
      this.captured = outer
      if (outer) outer.push(...mine)
    }
    if (mine.length === 0) return null
    return mine.length === 1 ? mine[0]! : Y.mergeUpdates(mine)
  }

  private captured: Uint8Array[] | null = null

  /** Relays held while an admitted update is applied: sent once it applied whole, dropped if it threw. */
  private held: { update: Uint8Array; origin: unknown }[] | null = null
  /**
   * A copy of the doc kept in step with it, for node types with a schema: an admitted update is
   * tried there first, so a refusal never touches the doc ([ACC10]). Built on the first client
   * update that needs it; dropped (and built again later) after a refusal dirtied it.
   */
  private shadow: Y.Doc | null = null
  /** Set while the doc applies an update the shadow already has. */
  private shadowHasIt = false

  private readonly onDocUpdate = (update: Uint8Array, origin: unknown): void => {
    this.captured?.push(update)
    if (this.shadow && !this.shadowHasIt) {
      try {
        Y.applyUpdate(this.shadow, update)
      } catch {
        this.dropShadow()
      }
    }
    if (this.connections.size === 0) return
    if (this.held) {
      this.held.push({ update, origin })
      return
    }
    for (const c of this.connections) if (c !== origin) c.sendUpdate(update)
  }

  /**
   * Applies an admitted update all-or-nothing and returns what the doc integrated (null when
   * nothing). With `check`, the update is applied to the shadow first and `check` reads the
   * result there: a throw refuses the update and the doc never sees it. Relays go out only once
   * the doc applied the update whole. Throws `DocCorrupted` when Yjs itself failed on the doc:
   * the caller must drop this copy (storage never saw the update).
   */
  applyAdmitted(update: Uint8Array, origin: unknown, check: ((result: Y.Doc) => void) | null): Uint8Array | null {
    if (check) {
      const shadow = (this.shadow ??= cloneDoc(this.doc))
      try {
        Y.applyUpdate(shadow, update, origin)
        if (shadow.store.pendingStructs || shadow.store.pendingDs) throw new Error('Invariant: an admitted update left structs pending')
        check(shadow)
      } catch (e) {
        this.dropShadow()
        throw e
      }
    }
    this.held = []
    this.shadowHasIt = check !== null
    let applied: Uint8Array | null
    try {
      applied = this.capture(() => Y.applyUpdate(this.doc, update, origin))
      if (this.doc.store.pendingStructs || this.doc.store.pendingDs) throw new Error('Invariant: an admitted update left structs pending')
    } catch (e) {
      this.held = null
      throw new DocCorrupted(this.path, e)
    } finally {
      this.shadowHasIt = false
    }
    const held = this.held
    this.held = null
    for (const { update: relayed, origin: from } of held) for (const c of this.connections) if (c !== from) c.sendUpdate(relayed)
    return applied
  }

  private dropShadow(): void {
    this.shadow?.destroy()
    this.shadow = null
  }

  private readonly onAwarenessUpdate = (
    { added, updated, removed }: { added: number[]; updated: number[]; removed: number[] },
    origin: unknown,
  ): void => {
    const changed = added.concat(updated, removed)
    if (origin && typeof origin === 'object' && 'awarenessIds' in origin) {
      const ids = (origin as RoomConnection).awarenessIds
      for (const id of added) ids.add(id)
      for (const id of removed) ids.delete(id)
    }
    const update = awarenessProtocol.encodeAwarenessUpdate(this.awareness, changed)
    // Presence applied from another instance (origin REMOTE_ORIGIN) is not sent back.
    if (origin !== REMOTE_ORIGIN) this.cluster.hooks?.presence(this.path, update)
    for (const c of this.connections) c.sendAwareness(update)
  }

  /** The room's presence if a client has joined since it was last empty (null: none; nothing is created). */
  get presence(): awarenessProtocol.Awareness | null {
    return this.awarenessState
  }

  join(conn: RoomConnection): void {
    this.connections.add(conn)
    this.lastUsed = Date.now()
  }

  leave(conn: RoomConnection): void {
    if (!this.connections.delete(conn)) return
    if (conn.awarenessIds.size > 0 && this.awarenessState) {
      awarenessProtocol.removeAwarenessStates(this.awarenessState, [...conn.awarenessIds], 'leave')
    }
    if (this.connections.size === 0) this.dropAwareness()
    this.lastUsed = Date.now()
  }

  /** `change`: a change of the node (commit-feed.ts), not a rewrite of its row or a fold of its log. */
  commitStarted(change = false): void {
    this.pendingCommits++
    if (change) this.changesInFlight++
  }

  commitSettled(change = false): void {
    this.pendingCommits--
    if (change && --this.changesInFlight === 0) for (const w of this.changeWaiters.splice(0)) w()
    if (this.pendingCommits === 0) for (const w of this.settleWaiters.splice(0)) w()
  }

  /** Resolves once every change of this copy in flight has settled (ok or failed). */
  changesSettled(): Promise<void> {
    if (this.changesInFlight === 0) return Promise.resolve()
    return new Promise((resolve) => this.changeWaiters.push(resolve))
  }

  /** Resolves once every commit this copy started has settled (ok or failed). */
  settled(): Promise<void> {
    if (this.pendingCommits === 0) return Promise.resolve()
    return new Promise((resolve) => this.settleWaiters.push(resolve))
  }

  /** The connection whose client owns an awareness client id, if another one already does. */
  awarenessOwner(clientId: number): RoomConnection | null {
    for (const c of this.connections) if (c.awarenessIds.has(clientId)) return c
    return null
  }

  isIdle(now: number, idleMs: number): boolean {
    return this.connections.size === 0 && this.pendingCommits === 0 && this.holds === 0 && !this.contentDirty && now - this.lastUsed >= idleMs
  }

  destroy(): void {
    // The destroyed doc stays referenced: a message still in flight for the room finds a dead
    // doc (as before docs were lazy), not an invariant error.
    this.destroyDoc()
    this.dropAwareness()
  }
}
