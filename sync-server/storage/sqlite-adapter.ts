import { Worker } from 'node:worker_threads'
import type Database from 'better-sqlite3'
import type { Logger } from 'pino'
import {
  WeftError,
  type ChangeRecord,
  type MeshChangeKind,
  type JsonObject,
  type JsonValue,
  type MeshNode,
  type NodePath,
  type NodeQuery,
  type PathRange,
} from '../../shared/index.js'
import { validateCommitInput, type CommitHeader } from './commit-plan.js'
import { GroupCommitter } from './group-commit.js'
import { assertFieldName, clampLimit, descendantRange, MAX_CHANGES_LIMIT, normaliseQuery } from './query.js'
import { NODE_COLUMNS, rowToNode, toBytes, type NodeRow } from './row-mapping.js'
import { contentOfLog } from './compaction.js'
import { FoldThread } from './fold-thread.js'
import { ENGINE_SCANS } from './sqlite-schema.js'
import type { RowJson } from './row-parts.js'
import { SqliteWriter, openSqliteConnection, type BatchItem } from './sqlite-writer.js'
import { deserializeError, fromWire, toWire, type WireItemResult, type WriterInit, type WriterRequest, type WriterResponse } from './sqlite-writer-protocol.js'
import type { Account, ClientBinding, CommitInput, FieldRow, MoveInput, StorageAdapter, StoredDoc, TrashEntry } from './types.js'
import { sqliteExpiredTrash, sqliteListTrash, sqliteMovedFrom } from './sqlite-move.js'
import { repairSqliteSearchIndex, searchSqlite } from './sqlite-search-index.js'
import type { SearchHit, SearchPlan } from './search-plan.js'
import { searchSqliteWithin } from './sqlite-search-within.js'
import type { ContextualCall } from './contextual-store.js'
import { holdSqlite, type HolderLock } from './holder-lock.js'
import { withheldOf, type StoredChange } from './feed-withhold.js'

export interface SqliteStorageOptions {
  /** Database file; `:memory:` works but is not durable (and cannot be shared with a writer thread). */
  file: string
  log?: Logger
  /** How long a statement waits for another connection's lock before failing. */
  busyTimeoutMs?: number
  /** Upper bound of commits in one group-commit transaction. */
  maxBatch?: number
  /**
   * `thread` (default): writes run in a worker thread, so an fsync never blocks the event loop.
   * `inline`: writes run on the calling thread (for `:memory:` and for comparison in benches).
   */
  writer?: 'thread' | 'inline'
}

type DistributiveOmit<T, K extends PropertyKey> = T extends unknown ? Omit<T, K> : never

/** Where writes go: the writer thread, or the same thread. Both answer asynchronously. */
interface WriterPort {
  request(message: DistributiveOmit<WriterRequest, 'id'>): Promise<WireItemResult[] | undefined>
  /** [CTX5] A contextual call's answer. */
  contextual(call: ContextualCall): Promise<unknown>
  close(): Promise<void>
}

class ThreadWriter implements WriterPort {
  private readonly worker: Worker
  private nextId = 1
  private readonly pending = new Map<number, { resolve(v: WriterResponse & { ok: true }): void; reject(e: unknown): void }>()
  private failure: Error | null = null
  private isClosing = false

  constructor(init: WriterInit, log: Logger | undefined) {
    this.worker = new Worker(new URL('./sqlite-writer-worker.mjs', import.meta.url), { workerData: init })
    this.worker.unref()
    this.worker.on('message', (response: WriterResponse) => {
      const p = this.pending.get(response.id)
      if (!p) return
      this.pending.delete(response.id)
      if (this.pending.size === 0) this.worker.unref()
      if (response.ok) p.resolve(response)
      else p.reject(deserializeError(response.error))
    })
    const fail = (error: Error) => {
      this.failure ??= error
      log?.error({ err: error }, 'storage: the SQLite writer thread stopped')
      for (const p of this.pending.values()) p.reject(new WeftError('unavailable', 'Storage is unavailable: the writer stopped.'))
      this.pending.clear()
    }
    this.worker.on('error', fail)
    this.worker.on('exit', (code) => {
      // terminate() after a clean close exits with 1: only an exit nobody asked for is a failure.
      if (this.pending.size > 0 || (code !== 0 && !this.isClosing)) fail(new Error(`writer thread exited with ${code}`))
    })
  }

  async request(message: DistributiveOmit<WriterRequest, 'id'>): Promise<WireItemResult[] | undefined> {
    return (await this.send(message)).value
  }

  async contextual(call: ContextualCall): Promise<unknown> {
    return (await this.send({ op: 'contextual', call })).result
  }

  private send(message: DistributiveOmit<WriterRequest, 'id'>): Promise<WriterResponse & { ok: true }> {
    if (this.failure) return Promise.reject(new WeftError('unavailable', 'Storage is unavailable: the writer stopped.'))
    const id = this.nextId++
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject })
      // Keep the process alive while a write is in flight, not while the thread idles.
      this.worker.ref()
      this.worker.postMessage({ ...message, id } as WriterRequest)
    })
  }

  async close(): Promise<void> {
    if (!this.failure) await this.request({ op: 'close' }).catch(() => undefined)
    this.isClosing = true
    await this.worker.terminate()
  }
}

class InlineWriter implements WriterPort {
  constructor(private readonly writer: SqliteWriter) {}

  async request(message: DistributiveOmit<WriterRequest, 'id'>): Promise<WireItemResult[] | undefined> {
    switch (message.op) {
      case 'batch': {
        const results = toWire(this.writer.writeBatch(message.batch))
        setImmediate(() => this.compactSome())
        return results
      }
      case 'move':
        return this.writer.moveSubtree(message.move).map((value) => ({ ok: true, value }))
      case 'createAccount':
        this.writer.createAccount(message.account)
        return undefined
      case 'deleteAccount':
        this.writer.deleteAccount(message.userId, message.email)
        return undefined
      case 'saveToken':
        this.writer.saveToken(message.hash, message.userId, message.expiresAt)
        return undefined
      case 'revokeToken':
        this.writer.revokeToken(message.hash)
        return undefined
      case 'purgeTokens':
        this.writer.purgeTokens(message.before)
        return undefined
      case 'purgeChanges':
        this.writer.purgeChanges(message.below)
        return undefined
      case 'contextual':
      case 'close':
        return undefined
      default:
        message satisfies never
        return undefined
    }
  }

  async contextual(call: ContextualCall): Promise<unknown> {
    return this.writer.contextual(call)
  }

  private compactSome(): void {
    try {
      if (this.writer.compactNext()) setImmediate(() => this.compactSome())
    } catch {
      // The log stays as it is.
    }
  }

  async close(): Promise<void> {
    while (this.writer.compactNext()) {
      // finish waiting compactions
    }
    this.writer.close()
  }
}

/**
 * SQLite storage (better-sqlite3). WAL with `synchronous=FULL`: every transaction commit fsyncs
 * the WAL, so an acknowledged commit survives power loss. Commits arriving in the same turn of the
 * event loop share one transaction (group commit) so that the fsync is paid once per batch, and
 * the next batch gathers while one commits. Writes run in a worker thread (the fsync must not
 * block the event loop); reads use this thread's own connection, which WAL lets run alongside.
 */
export class SqliteStorage implements StorageAdapter {
  readonly kind = 'sqlite' as const
  private readonly db: Database.Database
  private readonly writer: WriterPort
  /** Commits resolve to their ChangeRecord, folds to null. */
  private readonly committer: GroupCommitter<BatchItem, ChangeRecord | null>
  private isClosing = false
  private closed: Promise<void> | null = null
  private readonly stmt
  private readonly readDoc: (path: string) => StoredDoc | null
  /** [BAK6] Held while open: `weft restore` refuses a database somebody has open. */
  private readonly holder: HolderLock | null
  /** [TOMB1] The writer thread has its own fold thread; this one makes tombstones for the event loop's deletes and moves. */
  private readonly folds = new FoldThread()

  constructor(options: SqliteStorageOptions) {
    const busyTimeoutMs = options.busyTimeoutMs ?? 5000
    this.holder = options.file === ':memory:' ? null : holdSqlite(options.file, busyTimeoutMs)
    // This connection creates the schema before the writer opens its own.
    const db = (this.db = openSqliteConnection(options.file, busyTimeoutMs))
    // [FIND1] Before the writer opens: an older data dir gains its full-text index here, once.
    if (repairSqliteSearchIndex(db)) options.log?.info('storage: built the full-text search index')
    const inline = options.writer === 'inline' || options.file === ':memory:'
    this.writer = inline ? new InlineWriter(new SqliteWriter(options.file, busyTimeoutMs)) : new ThreadWriter({ file: options.file, busyTimeoutMs }, options.log)
    this.stmt = {
      getNode: db.prepare<[string], NodeRow>(`SELECT ${NODE_COLUMNS} FROM nodes WHERE path = ?`),
      snapshot: db.prepare<[string], { snapshot: Buffer | null; update_count: number }>(
        'SELECT snapshot, update_count FROM nodes WHERE path = ?',
      ),
      updates: db.prepare<[string], { seq: number; data: Buffer }>('SELECT seq, data FROM node_updates WHERE path = ? ORDER BY seq'),
      lastSeq: db.prepare<[string], { seq: number | null }>('SELECT max(seq) AS seq FROM node_updates WHERE path = ?'),
      tombstone: db.prepare<[string], { state: Buffer }>('SELECT state FROM node_tombstones WHERE path = ?'),
      clients: db.prepare<[string], { client: number; principal: string }>('SELECT client, principal FROM node_clients WHERE path = ?'),
      descendants: db.prepare<[string, string], { path: string }>('SELECT path FROM nodes WHERE path >= ? AND path < ? ORDER BY path'),
      changesSince: db.prepare<[number, number], { version: number; path: string; node_type: string; kind: MeshChangeKind; withheld: string | null }>(
        'SELECT version, path, node_type, kind, withheld FROM changes WHERE version > ? ORDER BY version LIMIT ?',
      ),
      lastVersion: db.prepare<[], { v: number }>('SELECT coalesce(max(version), 0) AS v FROM changes'),
      accountByEmail: db.prepare<[string], { user_id: string; email: string; password_hash: string; created_at: string }>(
        'SELECT user_id, email, password_hash, created_at FROM accounts WHERE email = ?',
      ),
      findToken: db.prepare<[string], { user_id: string; expires_at: string }>('SELECT user_id, expires_at FROM tokens WHERE hash = ?'),
    }
    // Prepared once: building a transaction function per read shows in profiles.
    this.readDoc = db.transaction((path: string): StoredDoc | null => {
      const node = this.stmt.snapshot.get(path)
      if (!node) return null
      return { snapshot: node.snapshot ? toBytes(node.snapshot) : null, updates: this.stmt.updates.all(path).map((u) => toBytes(u.data)) }
    })
    this.committer = new GroupCommitter(
      async (batch) => fromWire((await this.writer.request({ op: 'batch', batch: [...batch] })) ?? []),
      options.maxBatch ?? 1000,
      // The writer thread takes the next batch as soon as it is done with one, and a queue of 64
      // goes at once: a long turn of the event loop feeds the writer as it goes instead of handing
      // it everything at its end. Under load batches still grow to maxBatch (all slots busy).
      inline ? 1 : 4,
      64,
    )
  }

  commit(input: CommitInput): Promise<ChangeRecord> {
    try {
      if (this.isClosing) throw new WeftError('unavailable', 'Storage is closing.')
      validateCommitInput(input)
      // A deferred commit leaves the row's content alone: no need to serialise a big node ([STO5]).
      const contentJson = input.kind === 'Deleted' || input.deferContent ? '' : JSON.stringify(input.content)
      // The header without the content object (spelled out: a rest spread is a slow path here).
      const header: CommitHeader = {
        path: input.path,
        kind: input.kind,
        nodeType: input.nodeType,
        name: input.name,
        createdBy: input.createdBy,
        at: input.at,
        update: input.update,
        deferContent: input.deferContent,
        clients: input.clients,
        contextual: input.contextual,
        tombstone: input.tombstone,
        nodeCreatedAt: input.nodeCreatedAt,
        tombstoneDigest: input.tombstoneDigest,
        tombstoneBase: input.tombstoneBase,
        withhold: input.withhold,
        deniedFrom: input.deniedFrom,
      }
      // A commit item always resolves to its record (only folds resolve to null).
      return this.committer.submit({ input: header, contentJson }) as Promise<ChangeRecord>
    } catch (error) {
      return Promise.reject(error)
    }
  }

  async foldDoc(path: NodePath, state: Uint8Array): Promise<void> {
    if (this.isClosing) throw new WeftError('unavailable', 'Storage is closing.')
    await this.committer.submit({ fold: { path, state } })
  }

  /** [ACT12] The writer thread puts a row's JSON together from its parts. */
  readonly rowParts = true

  async writeContent(path: NodePath, content: JsonObject, json?: RowJson): Promise<void> {
    if (this.isClosing) throw new WeftError('unavailable', 'Storage is closing.')
    await this.committer.submit({ rowContent: { path, json: json ?? JSON.stringify(content) } })
  }

  async getNode(path: NodePath): Promise<MeshNode | null> {
    const row = this.stmt.getNode.get(path)
    return row ? this.toNode(row) : null
  }

  /** A row whose content is stale ([STO5]) is read from its Yjs log instead. */
  private toNode(row: NodeRow): MeshNode {
    const node = rowToNode(row)
    if (row.content_stale) {
      const stored = this.readDoc(row.path)
      if (stored) node.content = contentOfLog(stored.snapshot, stored.updates)
      // [STO5] The writer leaves a stale row's version to its next write: the log's last update says it.
      const seq = this.stmt.lastSeq.get(row.path)?.seq
      if (typeof seq === 'number' && seq > node.version) node.version = seq
    }
    return node
  }

  async loadDoc(path: NodePath): Promise<StoredDoc | null> {
    return this.readDoc(path)
  }

  async loadClientBindings(path: NodePath): Promise<ClientBinding[]> {
    return this.stmt.clients.all(path).map((r) => ({ client: r.client, principal: r.principal }))
  }

  tombstoneOf(snapshot: Uint8Array | null, updates: readonly Uint8Array[]): Promise<Uint8Array | null> {
    return this.folds.tombstone(snapshot, updates)
  }

  async getNodeOrTombstone(path: NodePath): Promise<{ node: MeshNode; tombstone: null } | { node: null; tombstone: Uint8Array | null }> {
    const node = await this.getNode(path)
    return node ? { node, tombstone: null } : { node: null, tombstone: await this.loadTombstone(path) }
  }

  async loadTombstone(path: NodePath): Promise<Uint8Array | null> {
    const row = this.stmt.tombstone.get(path)
    return row ? toBytes(row.state) : null
  }

  async queryNodes(query: NodeQuery, within?: PathRange): Promise<MeshNode[]> {
    const { where, params, limit } = sqliteFilter(query, within)
    const sql = `SELECT ${NODE_COLUMNS} FROM nodes ${where} ORDER BY path LIMIT ?`
    return this.db
      .prepare<unknown[], NodeRow>(sql)
      .all(...params, limit)
      .map((row) => this.toNode(row))
  }

  async queryFields(query: NodeQuery, fields: readonly string[]): Promise<FieldRow[]> {
    // One read transaction: the index reads below see the rows the first statement found.
    return this.db.transaction(() => this.readFields(query, fields))()
  }

  private readFields(query: NodeQuery, fields: readonly string[]): FieldRow[] {
    const { where, params, limit } = sqliteExactFilter(query)
    // A stale row answers from the row as it is ([STO5]: at most a second old, a big row up to 10 s); rebuilding it
    // from its Yjs log here held the event loop for seconds on a running 100,000-line log.
    // A field with an engine-scan index is read from that index ([ACT19]): `content -> …` makes
    // SQLite parse the whole row on the event loop (a running log's megabytes: a reconcile pass
    // held the loop ~400 ms during a 100,000-line flood). Any other field is `->` (JSON text).
    const scanned = scanFieldsOf(query.nodeType)
    const parsed = fields.filter((f) => !scanned.includes(f))
    const cols = parsed.map((f, i) => `, content -> ${sqlJsonPath(f)} AS f${i}`).join('')
    const sql = `SELECT rowid AS id, path, node_type, content_stale${cols} FROM nodes${scanIndex(query)} ${where} ORDER BY path LIMIT ?`
    const rows = this.db.prepare<unknown[], Record<string, unknown>>(sql).all(...params, limit)
    const out = rows.map((row) => ({
      path: row.path as NodePath,
      nodeType: row.node_type as string,
      stale: Boolean(row.content_stale),
      fields: Object.fromEntries(parsed.map((f, i) => [f, row[`f${i}`] == null ? undefined : (JSON.parse(row[`f${i}`] as string) as JsonValue)])) as Record<string, JsonValue | undefined>,
    }))
    const indexed = fields.filter((f) => scanned.includes(f))
    if (indexed.length > 0 && rows.length > 0) this.fieldsFromScanIndexes(query.nodeType!, indexed, rows, out)
    return out
  }

  /**
   * [ACT19] Fills `fields` (each with an engine-scan index of `type`) from their indexes, which
   * cover `json_extract`: no row is parsed. `json_extract` gives SQL values, so a value it cannot
   * tell apart (NULL: missing or JSON null; an integer: a number or a boolean; text starting with
   * `{` or `[`: an object or a string) is read from that row as JSON text instead.
   */
  private fieldsFromScanIndexes(type: string, fields: readonly string[], rows: readonly Record<string, unknown>[], out: FieldRow[]): void {
    const at = new Map(rows.map((r, i) => [r.id as number, i]))
    const ids = JSON.stringify(rows.map((r) => r.id))
    for (const f of fields) {
      const fromIndex = this.db
        .prepare<[string], { id: number; v: unknown }>(`SELECT rowid AS id, json_extract(content, ${sqlJsonPath(f)}) AS v FROM nodes INDEXED BY nodes_scan_${type}_${f} WHERE node_type = '${type}' AND rowid IN (SELECT value FROM json_each(?))`)
        .all(ids)
      const seen = new Set<number>()
      for (const { id, v } of fromIndex) {
        const row = out[at.get(id)!]!
        if (typeof v === 'string' && v[0] !== '{' && v[0] !== '[') row.fields[f] = v
        else if (typeof v === 'number' && !Number.isInteger(v)) row.fields[f] = v
        else continue
        seen.add(id)
      }
      for (const [id, i] of at) {
        if (seen.has(id)) continue
        const json = this.db.prepare<[number], { v: string | null }>(`SELECT content -> ${sqlJsonPath(f)} AS v FROM nodes WHERE rowid = ?`).get(id)?.v
        out[i]!.fields[f] = json == null ? undefined : (JSON.parse(json) as JsonValue)
      }
    }
  }

  async searchNodes(plan: SearchPlan, accept: (path: NodePath) => boolean, limit: number, within?: readonly PathRange[]): Promise<SearchHit[]> {
    return within ? searchSqliteWithin(this.db, plan, within, accept, limit) : searchSqlite(this.db, plan, accept, limit)
  }

  async stalePaths(after: string | null, limit: number): Promise<NodePath[]> {
    // The partial index nodes_stale holds exactly these rows: a boot reads only them.
    const rows = this.db
      .prepare<[string, number], { path: string }>('SELECT path FROM nodes WHERE content_stale = 1 AND path > ? ORDER BY path LIMIT ?')
      .all(after ?? '', Math.max(1, Math.floor(limit)))
    return rows.map((r) => r.path as NodePath)
  }

  async descendants(path: NodePath): Promise<NodePath[]> {
    const [from, to] = descendantRange(path)
    return this.stmt.descendants.all(from, to).map((r) => r.path as NodePath)
  }

  async changesSince(version: number, limit: number): Promise<StoredChange[]> {
    return this.stmt.changesSince
      .all(Math.floor(version), clampLimit(limit, 1000, MAX_CHANGES_LIMIT))
      .map((r) => ({ version: r.version, path: r.path as NodePath, nodeType: r.node_type, kind: r.kind, ...withheldOf(r.withheld) }))
  }

  async moveSubtree(input: MoveInput): Promise<ChangeRecord[]> {
    if (this.isClosing) throw new WeftError('unavailable', 'Storage is closing.')
    // The node service waits for the subtree's commits to settle and holds its writes meanwhile.
    const results = (await this.writer.request({ op: 'move', move: input })) ?? []
    return results.flatMap((r) => (r.ok && r.value ? [r.value] : []))
  }

  async movedFrom(paths: readonly NodePath[]): Promise<{ from: NodePath; to: NodePath } | null> {
    return sqliteMovedFrom(this.db, paths)
  }

  async listTrash(top: NodePath): Promise<TrashEntry[]> {
    return sqliteListTrash(this.db, top)
  }

  async expiredTrash(before: string, limit: number): Promise<NodePath[]> {
    return sqliteExpiredTrash(this.db, before, limit)
  }

  async lastVersion(): Promise<number> {
    return this.stmt.lastVersion.get()?.v ?? 0
  }

  async contextual(call: ContextualCall): Promise<unknown> {
    if (this.isClosing) throw new WeftError('unavailable', 'Storage is closing.')
    return this.writer.contextual(call)
  }

  async createAccount(account: Account): Promise<void> {
    await this.writer.request({ op: 'createAccount', account })
  }

  async deleteAccount(userId: string, email: string): Promise<void> {
    await this.writer.request({ op: 'deleteAccount', userId, email })
  }

  async findAccountByEmail(email: string): Promise<Account | null> {
    const row = this.stmt.accountByEmail.get(email.toLowerCase())
    return row ? { userId: row.user_id, email: row.email, passwordHash: row.password_hash, createdAt: row.created_at } : null
  }

  async saveToken(tokenHash: string, userId: string, expiresAt: string): Promise<void> {
    await this.writer.request({ op: 'saveToken', hash: tokenHash, userId, expiresAt })
  }

  async findToken(tokenHash: string): Promise<{ userId: string; expiresAt: string } | null> {
    const row = this.stmt.findToken.get(tokenHash)
    return row ? { userId: row.user_id, expiresAt: row.expires_at } : null
  }

  async revokeToken(tokenHash: string): Promise<void> {
    await this.writer.request({ op: 'revokeToken', hash: tokenHash })
  }

  async purgeSupersededChanges(below: number): Promise<void> {
    await this.writer.request({ op: 'purgeChanges', below })
  }

  async purgeExpiredTokens(before: string): Promise<void> {
    await this.writer.request({ op: 'purgeTokens', before })
  }

  close(): Promise<void> {
    this.closed ??= (async () => {
      this.isClosing = true
      await this.committer.drain()
      await this.writer.close()
      await this.folds.close()
      this.db.close()
      await this.holder?.release()
    })()
    return this.closed
  }
}

export function openSqliteStorage(options: SqliteStorageOptions): SqliteStorage {
  return new SqliteStorage(options)
}

/** The WHERE of a node query (and its parameters), shared by `queryNodes` and `queryFields`. */
function sqliteFilter(query: NodeQuery, within?: PathRange): { where: string; clauses: string[]; params: unknown[]; limit: number } {
  const q = normaliseQuery(query)
  const clauses: string[] = []
  const params: unknown[] = []
  if (within) {
    clauses.push('path >= ? AND path < ?')
    params.push(within.from, within.to)
  }
  // An empty parent means the top level, whose rows have no parent.
  if (q.parent === '') clauses.push('parent IS NULL')
  else if (q.parent !== undefined) {
    clauses.push('parent = ?')
    params.push(q.parent)
  }
  if (q.after !== undefined) {
    clauses.push('path > ?')
    params.push(q.after)
  }
  if (q.nodeType !== undefined) {
    clauses.push('node_type = ?')
    params.push(q.nodeType)
  }
  for (const { field, value } of q.where) {
    // Field names match case-insensitively (NodeQuery), hence json_each rather than a json path.
    // JSON true/false surface as 1/0 in SQLite; spell them as JSON does, like PostgreSQL's ->>.
    clauses.push(
      `EXISTS (SELECT 1 FROM json_each(nodes.content) AS f WHERE weft_lower(f.key) = ?
         AND (CASE f.type WHEN 'true' THEN 'true' WHEN 'false' THEN 'false' ELSE weft_lower(CAST(f.value AS TEXT)) END) = ?)`,
    )
    params.push(field, value)
  }
  return { where: whereOf(clauses), clauses, params, limit: q.limit }
}

function whereOf(clauses: readonly string[]): string {
  return clauses.length ? `WHERE ${clauses.join(' AND ')}` : ''
}

/** A top-level field as a JSON path literal; the name is checked against the query alphabet first. */
/**
 * [KIT7] An engine's filter: `where` is exact (field name and value as written; "true"/"false"
 * are JSON booleans) and written as `json_extract(content, '$."F"') = ?` with the node type
 * inline, the very expressions of the engine-scan indexes (sqlite-schema.ts), so SQLite answers
 * from the index instead of parsing every row.
 */
function sqliteExactFilter(query: NodeQuery): { where: string; params: unknown[]; limit: number } {
  // A type with engine-scan indexes is spelled inline (its name is ours, from ENGINE_SCANS), as
  // the partial indexes' WHERE is; any other type stays a bound parameter.
  const inline = query.nodeType !== undefined && Object.prototype.hasOwnProperty.call(ENGINE_SCANS, query.nodeType)
  const { clauses, params, limit } = sqliteFilter({ ...query, where: undefined, ...(inline ? { nodeType: undefined } : {}) })
  if (inline) clauses.push(`node_type = '${query.nodeType}'`)
  for (const [field, value] of Object.entries(query.where ?? {})) {
    clauses.push(`json_extract(content, ${sqlJsonPath(field)}) = ?`)
    params.push(value === 'true' ? 1 : value === 'false' ? 0 : value)
  }
  return { where: whereOf(clauses), params, limit }
}

/**
 * [KIT7] The engine-scan index for the query, forced (` INDEXED BY …`): without statistics the
 * planner prefers `nodes_type` (node_type, path), which saves the sort and parses every row.
 */
function scanIndex(query: NodeQuery): string {
  const fields = Object.keys(query.where ?? {})
  const type = query.nodeType
  if (!type || fields.length === 0 || !Object.prototype.hasOwnProperty.call(ENGINE_SCANS, type)) return ''
  const field = fields.find((f) => ENGINE_SCANS[type]!.includes(f))
  return field ? ` INDEXED BY nodes_scan_${type}_${field}` : ''
}

/** [KIT7] The fields of `type` with an engine-scan index (none for other types). */
function scanFieldsOf(type: string | undefined): readonly string[] {
  return type !== undefined && Object.prototype.hasOwnProperty.call(ENGINE_SCANS, type) ? ENGINE_SCANS[type]! : []
}

function sqlJsonPath(field: string): string {
  assertFieldName(field)
  return `'$."${field}"'`
}
