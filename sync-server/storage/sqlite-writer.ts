import Database from 'better-sqlite3'
import { WeftError } from '../../shared/errors.js'
import type { ChangeRecord, MeshChangeKind, NodePath } from '../../shared/index.js'
import { batchPaths, isFold, isRowContent, planBatch, tombstoneDigest, type CommitHeader, type ExistingNode, type PlannedCommit, type PreparedContent, type PreparedFold } from './commit-plan.js'
import { COMPACT_AFTER_UPDATES, compactUpdates, compactionDue, contentOfLog } from './compaction.js'
import type { ItemResult } from './group-commit.js'
import { pathColumns, toBuffer, toBytes } from './row-mapping.js'
import { RowPartsCache, type RowJson } from './row-parts.js'
import { SQLITE_ADDED_COLUMNS, SQLITE_ADDED_INDEXES, SQLITE_SCHEMA } from './sqlite-schema.js'
import type { Account, MoveInput } from './types.js'
import { applySqliteMoveSchema, sqliteMoveSubtree } from './sqlite-move.js'
import { SQLITE_DENIED_FROM, SQLITE_WITHHOLD, withholdBinding, type WithholdBinding } from './feed-withhold.js'
import { ensureSqliteSearchIndex } from './sqlite-search-index.js'
import { checkAttachment, contextualOp, contextualSchema, insertOutcome, runSync, type ContextualCall, type Row, type Stmt } from './contextual-store.js'

export interface PreparedCommit {
  /** Without the content object: the writer thread writes its JSON text, and cloning the object to it would be wasted. */
  input: CommitHeader
  /** Serialised before queueing so a value JSON cannot encode fails its own caller only. */
  contentJson: string
}

/** [STO5] A stale row's head its skipped deferred commits left behind (sqlite-writer.ts `heads`). */
interface StaleHead {
  name: string
  at: string
  version: number
  /** Deferred commits since the row was last updated (its update_count lacks them). */
  skipped: number
  /** The node's logged updates in all (what update_count will say). */
  count: number
}

/** What a group-commit batch carries, in submission order. */
export type BatchItem = PreparedCommit | PreparedFold | PreparedContent

/** Opens a connection with Weft's pragmas: WAL, `synchronous=FULL`, a busy timeout. */
export function openSqliteConnection(file: string, busyTimeoutMs: number): Database.Database {
  const db = new Database(file)
  db.pragma('journal_mode = WAL')
  // FULL (not NORMAL): in WAL mode NORMAL may lose the last commits on power loss.
  db.pragma('synchronous = FULL')
  db.pragma(`busy_timeout = ${Math.floor(busyTimeoutMs)}`)
  // JavaScript's toLowerCase, so case-insensitive matching agrees with PostgreSQL's lower() beyond ASCII.
  db.function('weft_lower', { deterministic: true }, (s: unknown) => (s === null ? null : String(s).toLowerCase()))
  db.exec(SQLITE_SCHEMA)
  // Before the added columns: some are of its tables.
  db.exec(contextualSchema('sqlite'))
  for (const { table, column, add } of SQLITE_ADDED_COLUMNS) {
    const columns = db.prepare(`PRAGMA table_info(${table})`).all() as { name: string }[]
    if (!columns.some((c) => c.name === column)) {
      try {
        db.exec(add)
      } catch (error) {
        // The other connection (reader or writer thread) may have added it a moment ago.
        if (!(error instanceof Database.SqliteError) || !/duplicate column/i.test(error.message)) throw error
      }
    }
  }
  db.exec(SQLITE_ADDED_INDEXES)
  // [FIND1] The full-text index and its triggers (filled at boot by repairSqliteSearchIndex).
  ensureSqliteSearchIndex(db)
  applySqliteMoveSchema(db)
  return db
}

/**
 * The write side of SQLite storage: group-committed batches, compaction, accounts and tokens.
 * Synchronous (better-sqlite3), so it runs in a worker thread: a batch's fsync never blocks the
 * server's event loop.
 */
export class SqliteWriter {
  private readonly db: Database.Database
  private readonly stmt
  private readonly toCompact = new Set<NodePath>()
  /**
   * [STO9] Bytes of the log and the snapshot of nodes past COMPACT_AFTER_UPDATES, kept as updates
   * are logged (read from the file the first time a node needs it): whether a compaction is due.
   */
  private readonly logSizes = new Map<NodePath, { log: number; snapshot: number }>()
  /** [ACT12] The JSON of the growing arrays of rows written in parts. */
  private readonly rowParts = new RowPartsCache()
  /**
   * [STO5] Rows already marked stale whose later deferred commits did not touch the row: updating
   * a row rewrites its whole record, so each deferred commit to a growing log copied megabytes
   * (20–40 ms of this thread per append at 50,000–100,000 lines, and as much WAL). Such a commit
   * now logs its update and its change only; the row's version, updated_at and update count catch
   * up at the row's next write (the coalesced content write, at most a second later), a compaction,
   * a move or close. Changed only once the batch's transaction committed (`staged`).
   */
  private readonly heads = new Map<NodePath, StaleHead>()
  /** The heads a batch under way changed (null: dropped), merged into `heads` once it commits. */
  private staged: Map<NodePath, StaleHead | null> | null = null

  constructor(file: string, busyTimeoutMs: number) {
    const db = (this.db = openSqliteConnection(file, busyTimeoutMs))
    this.stmt = {
      existing: db.prepare<[string], { node_type: string; created_by: string; created_at: string; version: number }>(
        'SELECT node_type, created_by, created_at, version FROM nodes WHERE path = ?',
      ),
      insertChange: db.prepare<[string, string, MeshChangeKind]>('INSERT INTO changes (path, node_type, kind) VALUES (?, ?, ?)'),
      withhold: db.prepare<[WithholdBinding]>(SQLITE_WITHHOLD),
      deniedFrom: db.prepare<[string, number]>(SQLITE_DENIED_FROM),
      insertNode: db.prepare(
        `INSERT INTO nodes (path, node_type, name, parent, last_segment, content, created_by, created_at, updated_at, version, state, snapshot, update_count)
         VALUES (@path, @nodeType, @name, @parent, @lastSegment, @content, @createdBy, @at, @at, @version, 'Active', NULL, @updateCount)`,
      ),
      updateNode: db.prepare<unknown[], { update_count: number }>(
        `UPDATE nodes SET name = @name, content = @content, content_stale = 0, updated_at = @at, version = @version, update_count = update_count + @added + @skipped
         WHERE path = @path RETURNING update_count`,
      ),
      updateNodeDeferred: db.prepare<unknown[], { update_count: number }>(
        `UPDATE nodes SET name = @name, content_stale = 1, updated_at = @at, version = @version, update_count = update_count + 1 + @skipped
         WHERE path = @path RETURNING update_count`,
      ),
      // [STO5] The row's content, and the head its skipped deferred commits left behind. Version
      // and update count come from the log itself (each logged update's seq is its commit's
      // version), so a row a crash left stale with a lagging head is exact again after its repair.
      rowContent: db.prepare<unknown[]>(
        `UPDATE nodes SET content = @content, content_stale = 0, updated_at = coalesce(@at, updated_at),
           version = max(version, coalesce((SELECT max(seq) FROM node_updates WHERE path = @path), 0)),
           update_count = (SELECT count(*) FROM node_updates WHERE path = @path)
         WHERE path = @path`,
      ),
      applyHead: db.prepare<unknown[]>('UPDATE nodes SET updated_at = @at, version = max(version, @version), update_count = update_count + @skipped WHERE path = @path'),
      deleteNode: db.prepare<[string]>('DELETE FROM nodes WHERE path = ?'),
      deleteUpdates: db.prepare<[string]>('DELETE FROM node_updates WHERE path = ?'),
      insertUpdate: db.prepare<[string, number, Buffer]>('INSERT INTO node_updates (path, seq, data) VALUES (?, ?, ?)'),
      bindClient: db.prepare<[string, number, string]>('INSERT OR IGNORE INTO node_clients (path, client, principal) VALUES (?, ?, ?)'),
      deleteClients: db.prepare<[string]>('DELETE FROM node_clients WHERE path = ?'),
      putTombstone: db.prepare<[string, Buffer, string]>(
        'INSERT INTO node_tombstones (path, state, at) VALUES (?, ?, ?) ON CONFLICT (path) DO UPDATE SET state = excluded.state, at = excluded.at',
      ),
      dropTombstone: db.prepare<[string]>('DELETE FROM node_tombstones WHERE path = ?'),
      tombstoneState: db.prepare<[string], { state: Buffer }>('SELECT state FROM node_tombstones WHERE path = ?'),
      snapshot: db.prepare<[string], { snapshot: Buffer | null; update_count: number }>(
        'SELECT snapshot, update_count FROM nodes WHERE path = ?',
      ),
      updates: db.prepare<[string], { seq: number; data: Buffer }>('SELECT seq, data FROM node_updates WHERE path = ? ORDER BY seq'),
      fold: db.prepare<[Buffer, string]>('UPDATE nodes SET snapshot = ?, update_count = 0 WHERE path = ?'),
      compacted: db.prepare<[Buffer, number, string]>('UPDATE nodes SET snapshot = ?, update_count = update_count + ? WHERE path = ?'),
      dropLogged: db.prepare<[string, number]>('DELETE FROM node_updates WHERE path = ? AND seq <= ?'),
      loggedUpTo: db.prepare<[string, number], { n: number; first: number | null }>('SELECT count(*) AS n, min(seq) AS first FROM node_updates WHERE path = ? AND seq <= ?'),
      logSizes: db.prepare<[string, string], { log: number; snapshot: number }>(
        'SELECT ifnull((SELECT sum(length(data)) FROM node_updates WHERE path = ?), 0) AS log, ifnull((SELECT length(snapshot) FROM nodes WHERE path = ?), 0) AS snapshot',
      ),
      insertAccount: db.prepare<[string, string, string, string]>(
        'INSERT INTO accounts (user_id, email, password_hash, created_at) VALUES (?, ?, ?, ?)',
      ),
      deleteAccount: db.prepare<[string, string]>('DELETE FROM accounts WHERE user_id = ? AND email = ?'),
      saveToken: db.prepare<[string, string, string]>('INSERT OR REPLACE INTO tokens (hash, user_id, expires_at) VALUES (?, ?, ?)'),
      revokeToken: db.prepare<[string]>('DELETE FROM tokens WHERE hash = ?'),
      purgeTokens: db.prepare<[string]>('DELETE FROM tokens WHERE expires_at <= ?'),
      purgeChanges: db.prepare<[number]>('DELETE FROM changes WHERE version < ? AND EXISTS (SELECT 1 FROM changes AS n WHERE n.path = changes.path AND n.version > changes.version)'),
    }
  }

  /** Nodes whose log passed the compaction threshold, waiting for `compactNext`. */
  get compactionBacklog(): number {
    return this.toCompact.size
  }

  /** One transaction for the whole batch; BEGIN IMMEDIATE takes the write lock up front. */
  writeBatch(batch: readonly BatchItem[]): ItemResult<ChangeRecord | null>[] {
    const compactCandidates: NodePath[] = []
    const staged = (this.staged = new Map())
    let results: ItemResult<ChangeRecord | null>[]
    try {
      results = this.writeBatchIn(batch, compactCandidates)
    } finally {
      this.staged = null
    }
    for (const [path, head] of staged) {
      if (head) this.heads.set(path, head)
      else this.heads.delete(path)
    }
    for (const p of compactCandidates) this.toCompact.add(p)
    return results
  }

  private writeBatchIn(batch: readonly BatchItem[], compactCandidates: NodePath[]): ItemResult<ChangeRecord | null>[] {
    return this.db
      .transaction((): ItemResult<ChangeRecord | null>[] => {
        const commits = batch.filter((item): item is PreparedCommit => !isFold(item) && !isRowContent(item))
        const inputs = commits.map((p) => p.input)
        const stored = new Map<NodePath, ExistingNode>()
        for (const path of batchPaths(inputs)) {
          const row = this.stmt.existing.get(path)
          if (row) stored.set(path, { nodeType: row.node_type, createdBy: row.created_by, createdAt: row.created_at, version: row.version })
        }
        // [SCALE18] A create made on the knowledge of the path's tombstone: the tombstones as they are now.
        let tombstones: Map<NodePath, string> | undefined
        if (inputs.some((c) => c.kind === 'Created' && c.tombstoneDigest !== undefined)) {
          tombstones = new Map()
          for (const path of batchPaths(inputs)) {
            const t = this.stmt.tombstoneState.get(path)
            if (t) tombstones.set(path, tombstoneDigest(t.state))
          }
        }
        const { plans, results: refused } = planBatch(inputs, stored, tombstones)
        let next = 0
        return batch.map((item): ItemResult<ChangeRecord | null> => {
          if (isFold(item)) {
            this.logSizes.delete(item.fold.path)
            this.stmt.deleteUpdates.run(item.fold.path)
            this.stmt.fold.run(toBuffer(item.fold.state), item.fold.path)
            // The log is gone and the count reset: nothing skipped is left to count.
            const head = this.head(item.fold.path)
            if (head) this.setHead(item.fold.path, { ...head, skipped: 0, count: 0 })
            return { ok: true, value: null }
          }
          if (isRowContent(item)) {
            const path = item.rowContent.path
            this.stmt.rowContent.run({ content: this.rowJson(path, item.rowContent.json), at: this.head(path)?.at ?? null, path })
            this.setHead(path, null)
            return { ok: true, value: null }
          }
          const i = next++
          const plan = plans[i]
          if (!plan) return refused[i] ?? { ok: false, error: new Error('Invariant: unplanned commit') }
          const attached = plan.input.contextual
          if (attached) {
            const refusal = runSync(checkAttachment(attached), this.exec)
            if (refusal) return { ok: false, error: new WeftError('stale_lease', refusal) }
          }
          const record = this.applyCommit(plan, item.contentJson, compactCandidates)
          if (attached && !attached.fenceOnly) runSync(insertOutcome(attached, record.version), this.exec)
          return { ok: true, value: record }
        })
      })
      .immediate()
  }

  /** The row's head left behind by skipped deferred commits, as this batch sees it. */
  private head(path: NodePath): StaleHead | undefined {
    const staged = this.staged?.get(path)
    if (staged !== undefined) return staged ?? undefined
    return this.heads.get(path)
  }

  private setHead(path: NodePath, head: StaleHead | null): void {
    if (this.staged) this.staged.set(path, head)
    else if (head) this.heads.set(path, head)
    else this.heads.delete(path)
  }

  /** Writes every head into its row (the caller clears `heads` once its transaction committed). */
  private writeHeads(): void {
    for (const [path, head] of this.heads) this.stmt.applyHead.run({ at: head.at, version: head.version, skipped: head.skipped, path })
  }

  private applyCommit(plan: PlannedCommit, contentJson: string, compactCandidates: NodePath[]): ChangeRecord {
    const { input } = plan
    const version = Number(this.stmt.insertChange.run(input.path, plan.nodeType, input.kind).lastInsertRowid)
    // [FEED5] The Denied assignments this commit ends: their scopes' records, this one included.
    for (const w of input.withhold ?? []) this.stmt.withhold.run(withholdBinding(w, version))
    // [FEED8] A Denied begun here: its end withholds from this record on.
    if (input.deniedFrom !== undefined) this.stmt.deniedFrom.run(input.deniedFrom, version)
    switch (input.kind) {
      case 'Created': {
        const { parent, lastSegment } = pathColumns(input.path)
        this.stmt.insertNode.run({
          path: input.path,
          nodeType: input.nodeType,
          name: input.name,
          parent,
          lastSegment,
          content: contentJson,
          createdBy: input.createdBy,
          at: input.at,
          version,
          updateCount: input.update ? 1 : 0,
        })
        if (input.update) this.stmt.insertUpdate.run(input.path, version, toBuffer(input.update))
        if (input.tombstone === 'taken') this.stmt.dropTombstone.run(input.path)
        this.bindClients(input)
        break
      }
      case 'Updated': {
        const head = this.head(input.path)
        let count: number | undefined
        if (input.deferContent && head && head.name === input.name) {
          // [STO5] The row already says stale: the update and the change are the commit.
          count = head.count + 1
          this.setHead(input.path, { name: input.name, at: input.at, version, skipped: head.skipped + 1, count })
        } else {
          const skipped = head?.skipped ?? 0
          const row = input.deferContent
            ? this.stmt.updateNodeDeferred.get({ path: input.path, name: input.name, at: input.at, version, skipped })
            : this.stmt.updateNode.get({
                path: input.path,
                name: input.name,
                content: contentJson,
                at: input.at,
                version,
                added: input.update ? 1 : 0,
                skipped,
              })
          count = row?.update_count
          this.setHead(input.path, input.deferContent && row ? { name: input.name, at: input.at, version, skipped: 0, count: row.update_count } : null)
        }
        if (input.update) {
          this.stmt.insertUpdate.run(input.path, version, toBuffer(input.update))
          const sizes = this.logSizes.get(input.path)
          if (sizes) sizes.log += input.update.byteLength
        }
        this.bindClients(input)
        if (count !== undefined && this.compactionDue(input.path, count)) compactCandidates.push(input.path)
        break
      }
      case 'Deleted':
        this.logSizes.delete(input.path)
        this.setHead(input.path, null)
        this.rowParts.forget(input.path)
        this.stmt.deleteUpdates.run(input.path)
        this.stmt.deleteClients.run(input.path)
        this.stmt.deleteNode.run(input.path)
        if (input.tombstone instanceof Uint8Array) this.stmt.putTombstone.run(input.path, toBuffer(input.tombstone), input.at)
        break
      default:
        input.kind satisfies never
    }
    return { version, path: input.path, nodeType: plan.nodeType, kind: input.kind }
  }

  /**
   * [ACT12] A row's JSON from its parts; when they continue arrays this thread no longer holds, the
   * row is rebuilt from the node's Yjs log (what the row says, [STO5]) and its arrays kept again.
   */
  private rowJson(path: NodePath, json: RowJson): string {
    if (typeof json === 'string') return json
    const assembled = this.rowParts.assemble(path, json.parts)
    if (assembled !== null) return assembled
    const node = this.stmt.snapshot.get(path)
    if (!node) return '{}'
    const content = contentOfLog(node.snapshot ? toBytes(node.snapshot) : null, this.stmt.updates.all(path).map((u) => toBytes(u.data)))
    this.rowParts.prime(path, content, json.parts.filter((p) => 'tail' in p).map((p) => p.key))
    return JSON.stringify(content)
  }

  /** [ACC12] In the commit's transaction: an Ack never stands for an update whose binding could be lost. */
  private bindClients(input: CommitHeader): void {
    if (input.clients) for (const b of input.clients) this.stmt.bindClient.run(input.path, b.client, b.principal)
  }

  /** [STO9] Whether a node whose log holds `count` entries (this commit's included) is due for compaction. */
  private compactionDue(path: NodePath, count: number): boolean {
    if (count <= COMPACT_AFTER_UPDATES) return false
    let sizes = this.logSizes.get(path)
    if (!sizes) {
      sizes = { ...this.stmt.logSizes.get(path, path)! }
      this.logSizes.set(path, sizes)
    }
    return compactionDue(count, sizes.log, sizes.snapshot)
  }

  /** Compacts one waiting node; false when none waits. Called between batches, off the commit path. */
  compactNext(): boolean {
    const path = this.takeCompaction()
    if (path === undefined) return false
    this.compactNode(path)
    return true
  }

  /** The next node waiting for compaction, taken off the list (undefined when none waits). */
  takeCompaction(): NodePath | undefined {
    const [path] = this.toCompact
    if (path !== undefined) this.toCompact.delete(path)
    return path
  }

  /** Folds the node's snapshot and logged updates into a new snapshot, atomically. */
  compactNode(path: NodePath): void {
    const read = this.readCompaction(path)
    if (read) this.writeCompaction(read, compactUpdates(read.snapshot, read.logged.map((u) => u.data)))
  }

  /**
   * [SCALE15] What a compaction of `path` folds: its snapshot and log as they are now (one read
   * transaction), or null when there is nothing to fold. The fold can then run elsewhere (a big
   * node's on the fold thread) while this thread goes on serving commits; `writeCompaction` writes
   * it if nothing it folded changed meanwhile.
   */
  readCompaction(path: NodePath): PendingCompaction | null {
    return this.db.transaction((): PendingCompaction | null => {
      const node = this.stmt.snapshot.get(path)
      if (!node || node.update_count + (this.heads.get(path)?.skipped ?? 0) <= 1) return null
      const logged = this.stmt.updates.all(path)
      if (logged.length === 0) return null
      return { path, snapshot: node.snapshot ? toBytes(node.snapshot) : null, logged: logged.map((u) => ({ seq: u.seq, data: toBytes(u.data) })) }
    })()
  }

  /**
   * [SCALE15] Writes a folded snapshot when the node's snapshot and the entries folded are still
   * the ones read (entries logged since have later seqs and stay); false, writing nothing, when a
   * fold, a delete, a move or a restore changed them meanwhile (the next commit past the threshold
   * asks again).
   */
  writeCompaction(read: PendingCompaction, folded: Uint8Array): boolean {
    const { path, logged } = read
    const first = logged[0]
    const last = logged.at(-1)
    if (!first || !last) return false
    const head = this.heads.get(path)
    const written = this.db
      .transaction((): boolean => {
        const node = this.stmt.snapshot.get(path)
        if (!node || !sameBytes(node.snapshot, read.snapshot)) return false
        const still = this.stmt.loggedUpTo.get(path, last.seq)
        if (still?.n !== logged.length || still.first !== first.seq) return false
        // The row is rewritten here anyway: its head goes with it, and the count is exact again.
        if (head) this.stmt.applyHead.run({ at: head.at, version: head.version, skipped: 0, path })
        this.stmt.compacted.run(toBuffer(folded), (head?.skipped ?? 0) - logged.length, path)
        this.stmt.dropLogged.run(path, last.seq)
        return true
      })
      .immediate()
    if (written) {
      this.heads.delete(path)
      // Entries logged since the read are still there: measured again, and the node stays on the
      // list only if they are due by themselves (commits during the fold put it back by the log
      // as it was before this write).
      this.logSizes.delete(path)
      if (this.toCompact.has(path) && !this.compactionDue(path, this.stmt.snapshot.get(path)?.update_count ?? 0)) this.toCompact.delete(path)
    }
    return written
  }

  /** [MOVE2] One subtree's move in one transaction. */
  moveSubtree(input: MoveInput): ChangeRecord[] {
    const records = this.db
      .transaction(() => {
        // Rows move with their columns: every head is written first (moves are rare).
        this.writeHeads()
        return sqliteMoveSubtree(this.db, input)
      })
      .immediate()
    this.heads.clear()
    this.logSizes.clear()
    return records
  }

  createAccount(account: Account): void {
    try {
      this.stmt.insertAccount.run(account.userId, account.email.toLowerCase(), account.passwordHash, account.createdAt)
    } catch (error) {
      if (error instanceof Database.SqliteError && error.code.startsWith('SQLITE_CONSTRAINT')) {
        if (error.message.includes('accounts.email')) {
          throw new WeftError('email_taken', 'An account with this email already exists.')
        }
        throw new WeftError('already_exists', `An account already exists for user ${account.userId}.`)
      }
      throw error
    }
  }

  deleteAccount(userId: string, email: string): void {
    this.stmt.deleteAccount.run(userId, email.toLowerCase())
  }

  saveToken(tokenHash: string, userId: string, expiresAt: string): void {
    this.stmt.saveToken.run(tokenHash, userId, expiresAt)
  }

  revokeToken(tokenHash: string): void {
    this.stmt.revokeToken.run(tokenHash)
  }

  purgeChanges(below: number): void {
    this.stmt.purgeChanges.run(below)
  }

  /** Drops tokens that expired by `before` (ISO times compare as text). */
  purgeTokens(before: string): void {
    this.stmt.purgeTokens.run(before)
  }

  private readonly prepared = new Map<string, Database.Statement>()
  /** Runs one statement of a contextual op (contextual-store.ts), prepared once. */
  private readonly exec = (s: Stmt): Row[] | number => {
    let st = this.prepared.get(s.sql)
    if (!st) this.prepared.set(s.sql, (st = this.db.prepare(s.sql)))
    return s.mode === 'all' ? (st.all(...s.params) as Row[]) : st.run(...s.params).changes
  }

  /** [CTX5] One contextual call, in one transaction (BEGIN IMMEDIATE: the lease decision and its write are one). */
  contextual(call: ContextualCall): unknown {
    return this.db.transaction(() => runSync(contextualOp(call, 'sqlite'), this.exec)).immediate()
  }

  close(): void {
    this.db.transaction(() => this.writeHeads())()
    this.heads.clear()
    this.db.close()
  }
}

/** [SCALE15] A compaction read and not written yet (sqlite-writer-worker.ts folds it meanwhile). */
export interface PendingCompaction {
  path: NodePath
  snapshot: Uint8Array | null
  logged: { seq: number; data: Uint8Array }[]
}

function sameBytes(stored: Buffer | null, read: Uint8Array | null): boolean {
  if (!stored || !read) return stored === null && read === null
  return stored.byteLength === read.byteLength && Buffer.compare(stored, read) === 0
}
