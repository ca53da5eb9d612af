import * as Y from 'yjs'
import { Dexie, type Table } from 'dexie'
import { BehaviorSubject, Subject } from 'rxjs'
import type { JsonObject, MergePatch, MeshNode } from '../../shared/index.js'
import { parentPath, type NodePath } from '../../shared/path.js'
import { isListedChild } from './listed.js'
import { NODE_REPLACED_MESSAGE } from './refused.js'
import { WeftDb, type IndexRow, type OpRow, type OutboxRow } from './db.js'

/** Rows of one node after which its updates are merged into one (keeps loads to one small read). */
const COMPACT_AFTER_ROWS = 64

export interface LocalQuery {
  /** '' lists top-level nodes. */
  parent?: string
  nodeType?: string
  /** Case-insensitive substring of the name or path. */
  text?: string
  /** Only nodes with unsent or refused changes. */
  pendingOnly?: boolean
  /** Only children a person browses ([WEB30] `isListedChild`), counted before `limit`. */
  listedOnly?: boolean
  limit?: number
}

/**
 * A node's Y.Doc. The guid is the path: Yjs only uses guids for subdocuments, and generating a
 * random one (uuidv4 over crypto) is most of what constructing a Y.Doc costs — ~0.1 ms, which
 * decides how fast a thousand nodes open.
 */
/**
 * The meta key marking a node whose doc must be rebuilt from the server's state on its next join
 * (a refusal's structs must leave it): kept across reloads.
 */
const rebuildKey = (path: string): string => `rebuild:${path}`

/** [SYNC23] The meta key of the tab replaying the queue of operations now. */
const OPS_CLAIM_KEY = 'ops-claim'
/** [SYNC23] Longer than one operation's HTTP request takes; a closed tab's claim lapses after it. */
const OPS_CLAIM_MS = 30_000

export function newNodeDoc(path: string): Y.Doc {
  return new Y.Doc({ guid: path })
}

function parentOf(path: string): string {
  return parentPath(path as NodePath) ?? ''
}

function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  if (a.byteLength !== b.byteLength) return false
  for (let i = 0; i < a.byteLength; i++) if (a[i] !== b[i]) return false
  return true
}

/** Is `p` the node at `path` or below it? */
function isWithin(p: string, path: string): boolean {
  return p === path || p.startsWith(path + '/')
}

/** A table's rows of the node at `path` and of every node below it (by its `path` index). */
function subtreeRows<T extends { path: string }, K>(table: Table<T, K>, path: string) {
  return table.where('path').between(path, path + '/\uffff', true, true).filter((r) => isWithin(r.path, path))
}

/**
 * The browser store: every read and write of IndexedDB goes through here. Writes of remote
 * updates are batched into one transaction per tick; a local patch is written with its outbox
 * entry in one transaction, so the intent and its effect are durable together.
 */
export class NodeStore {
  readonly db: WeftDb
  private queue: { path: string; update: Uint8Array }[] = []
  private flushing: Promise<void> | null = null
  private rowsSinceCompact = new Map<string, number>()
  private lastStamp = 0
  /**
   * [SYNC18] Local edits and queued operations begun: counted the moment the edit is made, before
   * its IndexedDB transaction. `settledLocalWrites` counts the ones whose transaction is done, so a
   * count of pending rows read after it was N holds every write settled by then, and the ones begun
   * since are not in it yet: the sync status adds them. Else it said "All changes synced" in the
   * moment between an edit and its outbox row (a reconnect in that moment did, and a script that
   * read the server then missed the edit).
   */
  readonly localWritesBegun$ = new BehaviorSubject(0)
  /** [SYNC21] This tab among the tabs sharing the database (a rebuild mark names the tab that rebuilds). */
  readonly tabId = `tab-${Math.random().toString(36).slice(2)}-${Date.now().toString(36)}`
  private localWritesSettled = 0

  constructor(dbName: string) {
    this.db = new WeftDb(dbName)
  }

  async open(): Promise<void> {
    await this.db.open()
  }

  close(): void {
    this.db.close()
  }

  get settledLocalWrites(): number {
    return this.localWritesSettled
  }

  /** One local write, counted from its call ([SYNC18]); a write that fails is uncounted. */
  private async localWrite<T>(write: () => Promise<T>): Promise<T> {
    this.localWritesBegun$.next(this.localWritesBegun$.value + 1)
    let result: T
    try {
      result = await write()
    } catch (e) {
      this.localWritesBegun$.next(this.localWritesBegun$.value - 1)
      throw e
    }
    this.localWritesSettled++
    return result
  }

  /** The node's stored state as one update, or null when nothing is stored. */
  async loadState(path: string): Promise<Uint8Array | null> {
    const rows = await this.db.updates.where('path').equals(path).toArray()
    if (rows.length === 0) return null
    if (rows.length === 1) return rows[0]!.update
    return Y.mergeUpdates(rows.map((r) => r.update))
  }

  async loadDoc(path: string): Promise<Y.Doc> {
    const doc = newNodeDoc(path)
    const state = await this.loadState(path)
    if (state) Y.applyUpdate(doc, state, 'load')
    return doc
  }

  /**
   * Loads many nodes in ONE read transaction — what one database buys over a database per
   * document (a tree level, the nodes with pending changes after a restart).
   */
  async loadDocs(paths: readonly string[]): Promise<Map<string, Y.Doc>> {
    const rows = await this.db.updates.where('path').anyOf(paths as string[]).toArray()
    const byPath = new Map<string, Uint8Array[]>()
    for (const r of rows) {
      const list = byPath.get(r.path)
      if (list) list.push(r.update)
      else byPath.set(r.path, [r.update])
    }
    const docs = new Map<string, Y.Doc>()
    for (const path of paths) {
      const doc = newNodeDoc(path)
      const updates = byPath.get(path)
      if (updates) Y.applyUpdate(doc, updates.length === 1 ? updates[0]! : Y.mergeUpdates(updates), 'load')
      docs.set(path, doc)
    }
    return docs
  }

  /** Queues a remote update for the next batched write; resolves once it is durable. */
  appendUpdate(path: string, update: Uint8Array): Promise<void> {
    this.queue.push({ path, update })
    return this.flushSoon()
  }

  private flushSoon(): Promise<void> {
    if (this.flushing) return this.flushing
    this.flushing = new Promise<void>((resolve) => setTimeout(resolve, 0)).then(async () => {
      const batch = this.queue
      this.queue = []
      this.flushing = null
      if (batch.length === 0) return
      const now = new Date().toISOString()
      const paths = new Set(batch.map((b) => b.path))
      await this.db.transaction('rw', this.db.updates, this.db.nodes, async () => {
        await this.db.updates.bulkAdd(batch)
        for (const path of paths) await this.db.nodes.update(path, { updatedAt: now })
      })
      for (const b of batch) this.noteRows(b.path, 1)
    })
    return this.flushing
  }

  private noteRows(path: string, n: number): void {
    const count = (this.rowsSinceCompact.get(path) ?? 0) + n
    this.rowsSinceCompact.set(path, count)
    if (count >= COMPACT_AFTER_ROWS) {
      this.rowsSinceCompact.set(path, 0)
      void this.compact(path)
    }
  }

  /** Merges a node's rows into one. One transaction, so another tab's append is never lost. */
  async compact(path: string): Promise<void> {
    await this.db.transaction('rw', this.db.updates, async () => {
      const rows = await this.db.updates.where('path').equals(path).toArray()
      if (rows.length < 2) return
      const merged = Y.mergeUpdates(rows.map((r) => r.update))
      await this.db.updates.bulkDelete(rows.map((r) => r.id!))
      await this.db.updates.add({ path, update: merged })
    })
  }

  /** Replaces every stored update of a node by one state (after a rebuild from the server's state). */
  async replaceState(path: string, state: Uint8Array, outboxUpdates: Map<number, Uint8Array>): Promise<void> {
    await this.db.transaction('rw', this.db.updates, this.db.outbox, async () => {
      await this.db.updates.where('path').equals(path).delete()
      await this.db.updates.add({ path, update: state })
      for (const [id, update] of outboxUpdates) await this.db.outbox.update(id, { update, bytesRefused: false })
    })
    this.rowsSinceCompact.set(path, 0)
  }

  /** Outbox entries given new bytes (replayed onto the doc being shown): stored, with their updates. */
  async storeReplayed(path: string, outboxUpdates: Map<number, Uint8Array>): Promise<void> {
    await this.db.transaction('rw', this.db.updates, this.db.outbox, async () => {
      for (const [id, update] of outboxUpdates) {
        await this.db.updates.add({ path, update })
        await this.db.outbox.update(id, { update, bytesRefused: false })
      }
    })
    this.noteRows(path, outboxUpdates.size)
  }

  /** Records a local edit: its update, its outbox entry and the pending count, atomically. */
  async recordLocalPatch(path: string, patch: MergePatch, update: Uint8Array, base?: OutboxRow['base']): Promise<number> {
    const at = new Date().toISOString()
    const id = await this.localWrite(() =>
      this.db.transaction('rw', this.db.updates, this.db.outbox, this.db.nodes, async () => {
        await this.db.updates.add({ path, update })
        // [SYNC22] Which node at the path the edit is of.
        const nodeCreatedAt = (await this.db.nodes.get(path))?.createdAt
        const id = await this.db.outbox.add({ path, patch, update, status: 'pending', at, ...(base ? { base } : {}), ...(nodeCreatedAt ? { nodeCreatedAt } : {}) })
        await this.refreshCounts(path, at)
        return id
      }),
    )
    this.noteRows(path, 1)
    return id
  }

  private async refreshCounts(path: string, updatedAt?: string): Promise<void> {
    const pending = await this.db.outbox.where('[path+status]').equals([path, 'pending']).count()
    const refused = await this.db.outbox.where('[path+status]').equals([path, 'refused']).count()
    const row = await this.db.nodes.get(path)
    if (row) {
      if (row.pending !== pending || row.refused !== refused || (updatedAt && updatedAt !== row.updatedAt)) {
        await this.db.nodes.update(path, updatedAt ? { pending, refused, updatedAt } : { pending, refused })
      }
    } else {
      await this.db.nodes.put({
        path,
        parent: parentOf(path),
        nodeType: 'Document',
        name: path.split('/').pop() ?? path,
        updatedAt: updatedAt ?? new Date().toISOString(),
        version: 0,
        pending,
        refused,
        typeUnknown: 1,
      })
    }
  }

  private pendingReads = new Map<string, ((rows: OutboxRow[]) => void)[]>()

  /**
   * A node's unsent outbox entries, oldest first. Reads asked for in the same tick share one
   * transaction: after a reconnect every joined room asks at once.
   */
  pendingEntries(path: string): Promise<OutboxRow[]> {
    return new Promise<OutboxRow[]>((resolve, reject) => {
      const waiting = this.pendingReads.get(path)
      if (waiting) return waiting.push(resolve)
      this.pendingReads.set(path, [resolve])
      if (this.pendingReads.size > 1) return
      setTimeout(() => {
        const batch = this.pendingReads
        this.pendingReads = new Map()
        const paths = [...batch.keys()]
        // Many paths (a reconnect): one range read of every pending entry beats `anyOf`, which
        // walks the index with one cursor step per key.
        const read =
          paths.length > 16
            ? this.db.outbox.where('status').equals('pending').toArray()
            : this.db.outbox
                .where('[path+status]')
                .anyOf(paths.map((p) => [p, 'pending']))
                .toArray()
        read
          .then((rows) => {
            const byPath = new Map<string, OutboxRow[]>(paths.map((p) => [p, []]))
            for (const r of rows.sort((a, b) => a.id! - b.id!)) byPath.get(r.path)?.push(r)
            for (const [p, resolvers] of batch) for (const done of resolvers) done(byPath.get(p) ?? [])
          }, reject)
      }, 0)
    })
  }

  async outboxFor(path: string): Promise<OutboxRow[]> {
    return this.db.outbox.where('path').equals(path).sortBy('id')
  }

  async pathsWithPending(): Promise<string[]> {
    const rows = await this.db.outbox.where('status').equals('pending').toArray()
    return [...new Set(rows.map((r) => r.path))]
  }

  private ackQueue: number[] = []
  private ackFlush: Promise<void> | null = null

  /**
   * The server made the entry durable: the intent is fulfilled. Acks that arrive together
   * (a reconnect settles hundreds) are settled in one transaction.
   */
  ack(id: number): Promise<void> {
    this.ackQueue.push(id)
    this.ackFlush ??= new Promise<void>((resolve) => setTimeout(resolve, 0)).then(async () => {
      const ids = this.ackQueue
      this.ackQueue = []
      this.ackFlush = null
      await this.db.transaction('rw', this.db.outbox, this.db.nodes, async () => {
        const rows = (await this.db.outbox.bulkGet(ids)).filter((r): r is OutboxRow => !!r && r.status === 'pending')
        if (rows.length === 0) return
        await this.db.outbox.bulkDelete(rows.map((r) => r.id!))
        // Every change of an entry's status adjusts its node's counts in the same transaction,
        // so a decrement is exact, and it costs three requests instead of four per node.
        const settled = new Map<string, number>()
        for (const r of rows) settled.set(r.path, (settled.get(r.path) ?? 0) + 1)
        const paths = [...settled.keys()]
        const nodes = (await this.db.nodes.bulkGet(paths)).filter((n): n is IndexRow => !!n)
        await this.db.nodes.bulkPut(nodes.map((n) => ({ ...n, pending: Math.max(0, n.pending - (settled.get(n.path) ?? 0)) })))
      })
    })
    return this.ackFlush
  }

  /**
   * Settles a refusal. A `retryable` refusal (the update only depended on one the server
   * refused) keeps the entry pending for one replay on a rebuilt doc; a second refusal is final.
   *
   * [SYNC21] `sent`: the bytes the refused frame carried. Tabs share the outbox and each sends its
   * entries, so the server may refuse the same bytes once per tab: a refusal of bytes already
   * refused (or since replaced by a replay) is the same refusal told again, and is not counted
   * (null). Counted twice, the second made the edit refused for good before its one replay. The
   * replay is one per node across tabs too: `rebuildHere` is false when another tab's refusal
   * marked the node first (that tab rebuilds and replays every pending entry, then tells the
   * others to reload).
   */
  async refuse(id: number, code: string, message: string, retryable = false, sent?: Uint8Array): Promise<(OutboxRow & { rebuildHere: boolean }) | null> {
    return this.db.transaction('rw', this.db.outbox, this.db.nodes, this.db.meta, async () => {
      const row = await this.db.outbox.get(id)
      if (!row || row.status !== 'pending') return null
      if (retryable && sent && (row.bytesRefused === true || !sameBytes(sent, row.update))) return null
      if (retryable && (row.replays ?? 0) < 1) {
        await this.db.outbox.update(id, { replays: (row.replays ?? 0) + 1, bytesRefused: true })
        const mark = await this.db.meta.get(rebuildKey(row.path))
        const rebuildHere = mark === undefined || mark.value === this.tabId || typeof mark.value !== 'string'
        if (rebuildHere) await this.markRebuild(row.path)
        return { ...row, replays: (row.replays ?? 0) + 1, bytesRefused: true, rebuildHere }
      }
      await this.db.outbox.update(id, { status: 'refused', code, message })
      await this.refreshCounts(row.path)
      await this.markRebuild(row.path)
      return { ...row, status: 'refused' as const, code, message, rebuildHere: true }
    })
  }

  /**
   * The room was refused for good (access removed, node gone): every unsent entry of the node
   * becomes refused with that reason instead of staying pending forever.
   */
  async refuseAllPending(path: string, code: string, message: string): Promise<number> {
    return this.db.transaction('rw', this.db.outbox, this.db.nodes, async () => {
      const n = await this.db.outbox.where('[path+status]').equals([path, 'pending']).modify({ status: 'refused', code, message })
      if (n > 0) await this.refreshCounts(path)
      return n
    })
  }

  /**
   * [WEB42] An entry of the node was refused for a reason its later entries share (`forbidden`:
   * the role cannot write the node; `forbidden_field`: nor these fields): those still pending
   * after `afterId` (all of them, or those touching one of `fields`) become refused with the same
   * cause. Replayed instead, each would be refused again, and a socket that keeps earning
   * refusals is closed ([SYNC4]).
   */
  async refuseLaterPending(path: string, afterId: number, code: string, message: string, fields: readonly string[] | null): Promise<number> {
    return this.db.transaction('rw', this.db.outbox, this.db.nodes, async () => {
      const touches = (r: OutboxRow) => fields === null || Object.keys(r.patch ?? {}).some((k) => fields.includes(k))
      const n = await this.db.outbox
        .where('[path+status]')
        .equals([path, 'pending'])
        .filter((r) => r.id! > afterId && touches(r))
        .modify({ status: 'refused', code, message })
      if (n > 0) await this.refreshCounts(path)
      return n
    })
  }

  /**
   * Discards several refused entries at once (a field's whole group, or every group). [WEB81] Each
   * node they were of is marked to be rebuilt from the server's state (rebuildKey): a refused
   * edit's structs may still be in the doc on this device (a room denied keeps them), and after a
   * discard the doc must not show them as if saved. Returns those nodes' paths.
   */
  async discardMany(ids: readonly number[]): Promise<string[]> {
    return this.db.transaction('rw', this.db.outbox, this.db.nodes, this.db.meta, async () => {
      // [SYNC22] Never an edit of a node replaced since: sent again, it would land in the other node.
      const rows = (await this.db.outbox.bulkGet(ids as number[])).filter((r): r is OutboxRow => !!r && r.status === 'refused' && !r.nodeReplaced)
      await this.db.outbox.bulkDelete(rows.map((r) => r.id!))
      return this.refreshAndMarkRebuild(rows)
    })
  }

  /** The nodes of `rows`: their counts refreshed, each marked to be rebuilt from the server's state (rebuildKey). */
  private async refreshAndMarkRebuild(rows: readonly OutboxRow[]): Promise<string[]> {
    const paths = [...new Set(rows.map((r) => r.path))]
    for (const path of paths) {
      await this.refreshCounts(path)
      await this.markRebuild(path)
    }
    return paths
  }

  /** Marks the node's doc to be rebuilt from the server's state at its next join (kept across reloads). */
  async markRebuild(path: string): Promise<void> {
    // [SYNC21] Whose: the tab that rebuilds it (refuse).
    await this.db.meta.put({ key: rebuildKey(path), value: this.tabId })
  }

  async isMarkedForRebuild(path: string): Promise<boolean> {
    return (await this.db.meta.get(rebuildKey(path))) !== undefined
  }

  async clearRebuildMark(path: string): Promise<void> {
    await this.db.meta.delete(rebuildKey(path))
  }

  /**
   * [WEB82] Refused entries sent again (the role may write again): pending once more, their bytes
   * marked refused so they are replayed, as a replayable refusal's are, on a doc rebuilt from the
   * server's state (rebuildKey); a refusal now is their cause again. Returns those nodes' paths.
   */
  async retryRefused(ids: readonly number[]): Promise<string[]> {
    return this.db.transaction('rw', this.db.outbox, this.db.nodes, this.db.meta, async () => {
      const rows = (await this.db.outbox.bulkGet(ids as number[])).filter((r): r is OutboxRow => !!r && r.status === 'refused')
      for (const r of rows) {
        const { code: _code, message: _message, ...rest } = r
        await this.db.outbox.put({ ...rest, status: 'pending', replays: 0, bytesRefused: true })
      }
      return this.refreshAndMarkRebuild(rows)
    })
  }

  /** Every refused entry of this device, oldest first. */
  async refusedRows(): Promise<OutboxRow[]> {
    return this.db.outbox.where('status').equals('refused').sortBy('id')
  }

  async discard(id: number): Promise<void> {
    await this.db.transaction('rw', this.db.outbox, this.db.nodes, async () => {
      const row = await this.db.outbox.get(id)
      if (!row) return
      await this.db.outbox.delete(id)
      await this.refreshCounts(row.path)
    })
  }

  // ---- index ----

  /**
   * A moment on this device's clock, later than every stamp this store gave before: rows learned
   * from the server carry one (`seen`), and a listing takes one as it is asked.
   */
  stamp(): number {
    this.lastStamp = Math.max(Date.now(), this.lastStamp + 1)
    return this.lastStamp
  }

  async upsertNodes(nodes: readonly MeshNode[]): Promise<void> {
    if (nodes.length === 0) return
    const seen = this.stamp()
    const replaced = await this.db.transaction('rw', [this.db.nodes, this.db.outbox, this.db.meta, this.db.ops], async () => {
      const existing = await this.db.nodes.bulkGet(nodes.map((n) => n.path))
      // [WEB131] A rename queued on this device is its name here until the server has it.
      const renamed = new Map<string, string>()
      for (const o of await this.db.ops.where('path').anyOf(nodes.map((n) => n.path)).toArray()) if (o.kind === 'rename' && !o.refusal) renamed.set(o.path, o.name)
      await this.db.nodes.bulkPut(
        nodes.map((n, i) => ({
          path: n.path,
          parent: parentOf(n.path),
          nodeType: n.nodeType,
          name: renamed.get(n.path) ?? (n.name || n.path.split('/').pop() || n.path),
          updatedAt: n.updatedAt,
          version: n.version,
          pending: existing[i]?.pending ?? 0,
          refused: existing[i]?.refused ?? 0,
          seen,
          ...(n.createdAt ? { createdAt: n.createdAt } : {}),
        })),
      )
      const replaced: string[] = []
      for (const n of nodes) if (n.createdAt && (await this.refuseEditsOfReplaced(n.path, n.createdAt)) > 0) replaced.push(n.path)
      return replaced
    })
    for (const path of replaced) this.replaced$.next(path)
  }

  /**
   * [SYNC22] Paths whose node turned out to be another one (deleted elsewhere, another made at the
   * path) while this device held unsent edits of the old one: those were refused (upsertNodes), and
   * the doc shown must become the new node's (the coordinator rebuilds an open replica).
   */
  readonly replaced$ = new Subject<string>()

  /**
   * [SYNC22] The node at `path` is now the one created at `createdAt`: unsent edits made on another
   * node there (one deleted since) are refused, kept for their author, never sent or replayed into
   * the new node as if they were of it; the doc is marked to be rebuilt from the new node's state.
   * Edits whose node is not known (made before this device learned it) are left as they are.
   */
  private async refuseEditsOfReplaced(path: string, createdAt: string): Promise<number> {
    const n = await this.db.outbox
      .where('[path+status]')
      .equals([path, 'pending'])
      .filter((r) => r.nodeCreatedAt !== undefined && r.nodeCreatedAt !== createdAt)
      .modify({ status: 'refused', code: 'not_found', message: NODE_REPLACED_MESSAGE, nodeReplaced: 1 })
    if (n === 0) return 0
    await this.refreshCounts(path)
    await this.markRebuild(path)
    return n
  }

  /**
   * Nodes the server answered outside a listing (a query by type): their index rows, where this
   * device has none or an older one, so their names are known here (and offline).
   */
  async learnNodes(nodes: readonly MeshNode[]): Promise<void> {
    const existing = await this.db.nodes.bulkGet(nodes.map((n) => n.path))
    await this.upsertNodes(nodes.filter((n, i) => !existing[i] || existing[i]!.version < n.version))
  }

  /**
   * A server listing of `parent` is the truth for it as of when it was asked (`askedAt`, a
   * `stamp()` taken before the request): forget children the server no longer lists, except rows
   * learned since (a child created while the listing was on its way vanished from its parent's
   * list until the next refresh).
   */
  async reconcileChildren(parent: string, nodes: readonly MeshNode[], fullListing: boolean, askedAt = Number.POSITIVE_INFINITY): Promise<void> {
    await this.upsertNodes(nodes)
    if (!fullListing) return
    const listed = new Set<string>(nodes.map((n) => n.path))
    await this.db.transaction('rw', this.db.nodes, this.db.ops, async () => {
      const localOps = new Set((await this.db.ops.toArray()).filter((o) => !o.refusal).map((o) => o.path))
      const gone = (await this.db.nodes.where('parent').equals(parent).toArray()).filter(
        (r) => !listed.has(r.path) && !localOps.has(r.path) && r.pending === 0 && r.refused === 0 && !r.localOnly && !((r.seen ?? 0) > askedAt),
      )
      await this.db.nodes.bulkDelete(gone.map((r) => r.path))
    })
  }

  async getIndexRow(path: string): Promise<IndexRow | undefined> {
    return this.db.nodes.get(path)
  }

  async query(q: LocalQuery): Promise<IndexRow[]> {
    if (q.parent !== undefined && !q.nodeType && !q.text && !q.pendingOnly) {
      // The common case (a tree level, a child list): name order straight from the index, so
      // the first screen of a 10,000-child parent reads only what it shows.
      const ordered = () => this.db.nodes.where('[parent+name]').between([q.parent, Dexie.minKey], [q.parent, Dexie.maxKey])
      if (!q.listedOnly || q.limit === undefined) {
        const rows = await (q.limit !== undefined ? ordered().limit(q.limit) : ordered()).toArray()
        return q.listedOnly ? rows.filter(isListedChild) : rows
      }
      // [WEB30] Counted after the filter, but read without one: a filtered Dexie collection walks
      // a cursor (a main-thread event per row, ~200 of them on a cold start's first screen)
      // where a plain limit is one getAll. Outside threads (whose message cells are hidden) hidden
      // rows are rare, so one read is the usual case; otherwise the read grows fourfold until the
      // limit is filled or the parent runs out (~1.33× the children read, in a few getAlls).
      for (let n = q.limit; ; n *= 4) {
        const rows = await ordered().limit(n).toArray()
        const listed = rows.filter(isListedChild)
        if (listed.length >= q.limit || rows.length < n) return listed.slice(0, q.limit)
      }
    }
    let coll = q.parent !== undefined ? this.db.nodes.where('parent').equals(q.parent) : this.db.nodes.toCollection()
    if (q.nodeType) {
      const t = q.nodeType
      coll = coll.filter((r) => r.nodeType === t)
    }
    if (q.text) {
      const t = q.text.toLowerCase()
      coll = coll.filter((r) => r.name.toLowerCase().includes(t) || r.path.toLowerCase().includes(t))
    }
    if (q.pendingOnly) coll = coll.filter((r) => r.pending > 0 || r.refused > 0)
    if (q.listedOnly) coll = coll.filter(isListedChild)
    if (q.limit !== undefined) coll = coll.limit(q.limit)
    const rows = await coll.toArray()
    return rows.sort((a, b) => a.name.localeCompare(b.name))
  }

  async countChildren(parent: string): Promise<number> {
    return this.db.nodes.where('parent').equals(parent).count()
  }

  // ---- offline create / delete ----

  /**
   * Queues a creation made offline. A sealed one (`sealed`: its whole content and the Yjs state
   * that holds it) is stored with its state in the same transaction: it shows on this device at
   * once, and its content travels with the create, not as later edits.
   */
  async queueCreate(path: string, nodeType: string, name: string, sealed?: { content: JsonObject; state: Uint8Array }): Promise<void> {
    const at = new Date().toISOString()
    await this.localWrite(() =>
      this.db.transaction('rw', this.db.ops, this.db.nodes, this.db.updates, async () => {
        await this.db.ops.add(sealed ? { kind: 'create', path, nodeType, name, at, content: sealed.content } : { kind: 'create', path, nodeType, name, at })
        await this.db.nodes.put({ path, parent: parentOf(path), nodeType, name, updatedAt: at, version: 0, pending: 0, refused: 0, localOnly: 1 })
        if (sealed) await this.db.updates.add({ path, update: sealed.state })
      }),
    )
  }

  /**
   * [WEB131] Queues a rename made offline and shows the name on this device at once (the node's
   * index row). A second rename before it is sent replaces the first; one back to the name the
   * server has cancels it; a node created offline and not sent yet is created with the name.
   */
  async queueRename(path: string, name: string): Promise<void> {
    const at = new Date().toISOString()
    await this.localWrite(() =>
      this.db.transaction('rw', this.db.ops, this.db.nodes, async () => {
        const row = await this.db.nodes.get(path)
        const queued = (await this.db.ops.where('path').equals(path).toArray()).filter((o) => !o.refusal)
        const create = queued.find((o) => o.kind === 'create')
        const rename = queued.find((o) => o.kind === 'rename')
        if (create?.kind === 'create') await this.db.ops.put({ ...create, name })
        else if (rename?.kind === 'rename' && rename.from === name) await this.db.ops.delete(rename.id!)
        else if (rename?.kind === 'rename') await this.db.ops.put({ ...rename, name, at })
        else await this.db.ops.add({ kind: 'rename', path, name, from: row?.name ?? path.split('/').pop() ?? path, at })
        if (row) await this.db.nodes.update(path, { name })
      }),
    )
  }

  /**
   * [SYNC24] The server refused a queued operation for good (a 4xx with its code): it is kept as
   * refused (no longer replayed nor pending) for its author to read and discard. A refused rename
   * gives the node back the name it had ([WEB132]: the name typed stays on the operation).
   */
  async refuseOp(op: OpRow, code: string, message: string): Promise<void> {
    await this.db.transaction('rw', this.db.ops, this.db.nodes, async () => {
      if (!(await this.db.ops.get(op.id!))) return
      await this.db.ops.update(op.id!, { refusal: { code, message } })
      if (op.kind === 'rename') await this.db.nodes.update(op.path, { name: op.from })
    })
  }

  /** [SYNC24] Queued operations the server refused, oldest first. */
  async refusedOps(): Promise<OpRow[]> {
    return (await this.db.ops.orderBy('id').toArray()).filter((o) => o.refusal)
  }

  /** [SYNC24] How many queued operations the server refused (the status's count). */
  async countRefusedOps(): Promise<number> {
    return this.db.ops.filter((o) => !!o.refusal).count()
  }

  /** Whether an operation on `path` is still to send (through the table's `path` index). */
  async hasPendingOp(path: string): Promise<boolean> {
    return (await this.db.ops.where('path').equals(path).filter((o) => !o.refusal).count()) > 0
  }

  /** [SYNC24] Forgets a refused operation (its author read it). */
  async discardOp(id: number): Promise<void> {
    await this.db.transaction('rw', this.db.ops, async () => {
      if ((await this.db.ops.get(id))?.refusal) await this.db.ops.delete(id)
    })
  }

  /** Removes the node and its descendants locally; `queue` records the delete for the server. */
  async removeLocal(path: string, queue: boolean): Promise<void> {
    const at = new Date().toISOString()
    const remove = () => this.db.transaction('rw', [this.db.ops, this.db.nodes, this.db.updates, this.db.outbox], async () => {
      const queued = (await this.db.ops.toArray()).filter((o) => !o.refusal && isWithin(o.path, path))
      const created = queued.filter((o) => o.kind === 'create')
      const createdHere = created.some((o) => o.path === path)
      // A rename queued for a node deleted since is moot.
      await this.db.ops.bulkDelete([...created, ...queued.filter((o) => o.kind === 'rename')].map((o) => o.id!))
      // A node created and deleted while offline never reaches the server.
      if (queue && !createdHere) await this.db.ops.add({ kind: 'delete', path, at })
      await subtreeRows(this.db.nodes, path).delete()
      await subtreeRows(this.db.updates, path).delete()
      await subtreeRows(this.db.outbox, path).delete()
    })
    // A delete queued for the server is an edit the status counts from now ([SYNC18]).
    await (queue ? this.localWrite(remove) : remove())
  }

  /**
   * A queued creation the server refused (the path was taken meanwhile, `already_exists`): the
   * op is dropped, every unsent edit made to the offline node becomes refused with that reason
   * (kept for the author, as refused edits are), and the offline doc state is dropped so the
   * path shows the server's node from now on instead of mixing two documents.
   */
  async refuseCreate(op: OpRow, code: string, message: string): Promise<void> {
    await this.db.transaction('rw', [this.db.ops, this.db.nodes, this.db.updates, this.db.outbox], async () => {
      await this.db.ops.delete(op.id!)
      await this.db.outbox.where('[path+status]').equals([op.path, 'pending']).modify({ status: 'refused', code, message })
      await this.db.updates.where('path').equals(op.path).delete()
      await this.db.nodes.update(op.path, { localOnly: 0 })
      await this.refreshCounts(op.path)
    })
    this.rowsSinceCompact.set(op.path, 0)
  }

  /**
   * [WEB97] A queued creation the server refused for another reason than the path being taken
   * (a Viewer, Create rights lost meanwhile): no node was made, so the device's copy of it goes
   * (its index row, which listed it under its parent as a link to nothing, its doc state, and any
   * creation queued under it, refused the same way); its unsent edits stay, refused with that
   * reason, so the author still sees and can copy what they typed (#/refused).
   */
  async refuseCreateGone(op: OpRow, code: string, message: string, serverMessage = message): Promise<void> {
    await this.db.transaction('rw', [this.db.ops, this.db.nodes, this.db.updates, this.db.outbox], async () => {
      const created = (await this.db.ops.toArray()).filter((o) => o.kind === 'create' && !o.refusal && isWithin(o.path, op.path) && o.id !== op.id)
      await this.db.ops.bulkDelete(created.map((o) => o.id!))
      // [WEB133] The creation itself is kept, refused: its page and toast say so from the store
      // (in every tab, after a reload) until its author discards it.
      await this.db.ops.update(op.id!, { refusal: { code, message: serverMessage } })
      await subtreeRows(this.db.outbox, op.path).filter((r) => r.status === 'pending').modify({ status: 'refused', code, message })
      await subtreeRows(this.db.nodes, op.path).delete()
      await subtreeRows(this.db.updates, op.path).delete()
    })
    this.rowsSinceCompact.set(op.path, 0)
  }

  /** Queued operations still to send, oldest first ([SYNC24]: not the refused ones). */
  async pendingOps(): Promise<OpRow[]> {
    return (await this.db.ops.orderBy('id').toArray()).filter((o) => !o.refusal)
  }

  /** [SYNC24] Queued operations still to send (refused ones are kept in the same table). */
  async countPendingOps(): Promise<number> {
    return this.db.ops.filter((o) => !o.refusal).count()
  }

  /**
   * [SYNC23] Tabs share the queue of operations and each replays it after a reconnect: the queue
   * is replayed by one tab at a time, the one holding this claim, renewed before each operation.
   * A claim not renewed for `OPS_CLAIM_MS` (its tab closed mid-replay) is taken over. Sent twice, a
   * rename replayed late by a second tab undid a later one.
   */
  async claimOps(): Promise<boolean> {
    const now = Date.now()
    return this.db.transaction('rw', this.db.meta, async () => {
      const held = (await this.db.meta.get(OPS_CLAIM_KEY))?.value
      if (held && typeof held === 'object' && held.tab !== this.tabId && typeof held.until === 'number' && held.until > now) return false
      await this.db.meta.put({ key: OPS_CLAIM_KEY, value: { tab: this.tabId, until: now + OPS_CLAIM_MS } })
      return true
    })
  }

  /** [SYNC23] Whether `op` is still to send (another tab may have sent it since it was read). */
  async isOpQueued(op: OpRow): Promise<boolean> {
    const row = await this.db.ops.get(op.id!)
    return !!row && !row.refusal
  }

  /** [SYNC23] Lets the other tabs replay the queue again. */
  async releaseOps(): Promise<void> {
    await this.db.transaction('rw', this.db.meta, async () => {
      const held = (await this.db.meta.get(OPS_CLAIM_KEY))?.value
      if (held && typeof held === 'object' && held.tab === this.tabId) await this.db.meta.delete(OPS_CLAIM_KEY)
    })
  }

  /** [SYNC19] A replay of `op` failed for now (the network, a 5xx): it stays queued, its failure noted. */
  async noteOpFailure(op: OpRow, code: string, message: string): Promise<void> {
    await this.db.transaction('rw', this.db.ops, async () => {
      const row = await this.db.ops.get(op.id!)
      if (row) await this.db.ops.update(op.id!, { tries: (row.tries ?? 0) + 1, lastCode: code, lastMessage: message })
    })
  }

  async completeOp(op: OpRow): Promise<void> {
    await this.db.transaction('rw', this.db.ops, this.db.nodes, async () => {
      await this.db.ops.delete(op.id!)
      if (op.kind === 'create') await this.db.nodes.update(op.path, { localOnly: 0 })
    })
  }

  async totalPending(): Promise<number> {
    return (await this.db.outbox.where('status').equals('pending').count()) + (await this.countPendingOps())
  }

  static async deleteDatabase(name: string): Promise<void> {
    await Dexie.delete(name)
  }
}
