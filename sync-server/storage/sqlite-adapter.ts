import Database from 'better-sqlite3'
import type { Logger } from 'pino'
import {
  WeftError,
  type ChangeRecord,
  type MeshChangeKind,
  type MeshNode,
  type NodePath,
  type NodeQuery,
} from '../../shared/index.js'
import { batchPaths, planBatch, validateCommitInput, type ExistingNode, type PlannedCommit } from './commit-plan.js'
import { COMPACT_AFTER_UPDATES, compactUpdates } from './compaction.js'
import { GroupCommitter, type ItemResult } from './group-commit.js'
import { clampLimit, descendantRange, MAX_CHANGES_LIMIT, normaliseQuery } from './query.js'
import { NODE_COLUMNS, pathColumns, rowToNode, toBuffer, toBytes, type NodeRow } from './row-mapping.js'
import { SQLITE_SCHEMA } from './sqlite-schema.js'
import type { Account, CommitInput, StorageAdapter, StoredDoc } from './types.js'

export interface SqliteStorageOptions {
  /** Database file; `:memory:` works but is not durable. */
  file: string
  log?: Logger
  /** How long a statement waits for another connection's lock before failing. */
  busyTimeoutMs?: number
  /** Upper bound of commits in one group-commit transaction. */
  maxBatch?: number
}

interface PreparedCommit {
  input: CommitInput
  /** Serialised before queueing so a value JSON cannot encode fails its own caller only. */
  contentJson: string
}

/**
 * SQLite storage (better-sqlite3). WAL with `synchronous=FULL`: every transaction commit fsyncs
 * the WAL, so an acknowledged commit survives power loss. Commits arriving in the same turn of the
 * event loop share one transaction (group commit) so that the fsync is paid once per batch.
 */
export class SqliteStorage implements StorageAdapter {
  readonly kind = 'sqlite' as const
  private readonly db: Database.Database
  private readonly log: Logger | undefined
  private readonly committer: GroupCommitter<PreparedCommit, ChangeRecord>
  private readonly toCompact = new Set<NodePath>()
  private compacting: Promise<void> | null = null
  private isClosing = false
  private closed: Promise<void> | null = null
  private readonly stmt

  constructor(options: SqliteStorageOptions) {
    this.log = options.log
    this.db = new Database(options.file)
    this.db.pragma('journal_mode = WAL')
    // FULL (not NORMAL): in WAL mode NORMAL may lose the last commits on power loss.
    this.db.pragma('synchronous = FULL')
    this.db.pragma(`busy_timeout = ${Math.floor(options.busyTimeoutMs ?? 5000)}`)
    // JavaScript's toLowerCase, so case-insensitive matching agrees with PostgreSQL's lower() beyond ASCII.
    this.db.function('weft_lower', { deterministic: true }, (s: unknown) => (s === null ? null : String(s).toLowerCase()))
    this.db.exec(SQLITE_SCHEMA)
    const db = this.db
    this.stmt = {
      existing: db.prepare<[string], { node_type: string; created_by: string; created_at: string }>(
        'SELECT node_type, created_by, created_at FROM nodes WHERE path = ?',
      ),
      insertChange: db.prepare<[string, string, MeshChangeKind]>('INSERT INTO changes (path, node_type, kind) VALUES (?, ?, ?)'),
      insertNode: db.prepare(
        `INSERT INTO nodes (path, node_type, name, parent, last_segment, content, created_by, created_at, updated_at, version, state, snapshot, update_count)
         VALUES (@path, @nodeType, @name, @parent, @lastSegment, @content, @createdBy, @at, @at, @version, 'Active', NULL, @updateCount)`,
      ),
      updateNode: db.prepare<unknown[], { update_count: number }>(
        `UPDATE nodes SET name = @name, content = @content, updated_at = @at, version = @version, update_count = update_count + @added
         WHERE path = @path RETURNING update_count`,
      ),
      deleteNode: db.prepare<[string]>('DELETE FROM nodes WHERE path = ?'),
      deleteUpdates: db.prepare<[string]>('DELETE FROM node_updates WHERE path = ?'),
      insertUpdate: db.prepare<[string, number, Buffer]>('INSERT INTO node_updates (path, seq, data) VALUES (?, ?, ?)'),
      getNode: db.prepare<[string], NodeRow>(`SELECT ${NODE_COLUMNS} FROM nodes WHERE path = ?`),
      snapshot: db.prepare<[string], { snapshot: Buffer | null; update_count: number }>(
        'SELECT snapshot, update_count FROM nodes WHERE path = ?',
      ),
      updates: db.prepare<[string], { seq: number; data: Buffer }>('SELECT seq, data FROM node_updates WHERE path = ? ORDER BY seq'),
      compacted: db.prepare<[Buffer, number, string]>('UPDATE nodes SET snapshot = ?, update_count = update_count - ? WHERE path = ?'),
      dropLogged: db.prepare<[string, number]>('DELETE FROM node_updates WHERE path = ? AND seq <= ?'),
      descendants: db.prepare<[string, string], { path: string }>('SELECT path FROM nodes WHERE path >= ? AND path < ? ORDER BY path'),
      changesSince: db.prepare<[number, number], { version: number; path: string; node_type: string; kind: MeshChangeKind }>(
        'SELECT version, path, node_type, kind FROM changes WHERE version > ? ORDER BY version LIMIT ?',
      ),
      lastVersion: db.prepare<[], { v: number }>('SELECT coalesce(max(version), 0) AS v FROM changes'),
      insertAccount: db.prepare<[string, string, string, string]>(
        'INSERT INTO accounts (user_id, email, password_hash, created_at) VALUES (?, ?, ?, ?)',
      ),
      accountByEmail: db.prepare<[string], { user_id: string; email: string; password_hash: string; created_at: string }>(
        'SELECT user_id, email, password_hash, created_at FROM accounts WHERE email = ?',
      ),
      saveToken: db.prepare<[string, string, string]>('INSERT OR REPLACE INTO tokens (hash, user_id, expires_at) VALUES (?, ?, ?)'),
      findToken: db.prepare<[string], { user_id: string; expires_at: string }>('SELECT user_id, expires_at FROM tokens WHERE hash = ?'),
      revokeToken: db.prepare<[string]>('DELETE FROM tokens WHERE hash = ?'),
    }
    this.committer = new GroupCommitter((batch) => this.writeBatch(batch), options.maxBatch ?? 1000)
  }

  commit(input: CommitInput): Promise<ChangeRecord> {
    try {
      if (this.isClosing) throw new WeftError('unavailable', 'Storage is closing.')
      validateCommitInput(input)
      const contentJson = input.kind === 'Deleted' ? '' : JSON.stringify(input.content)
      return this.committer.submit({ input, contentJson })
    } catch (error) {
      return Promise.reject(error)
    }
  }

  /** One transaction for the whole batch; BEGIN IMMEDIATE takes the write lock up front. */
  private writeBatch(batch: readonly PreparedCommit[]): ItemResult<ChangeRecord>[] {
    const compactCandidates: NodePath[] = []
    const results = this.db
      .transaction((): ItemResult<ChangeRecord>[] => {
        const inputs = batch.map((p) => p.input)
        const stored = new Map<NodePath, ExistingNode>()
        for (const path of batchPaths(inputs)) {
          const row = this.stmt.existing.get(path)
          if (row) stored.set(path, { nodeType: row.node_type, createdBy: row.created_by, createdAt: row.created_at })
        }
        const { plans, results: refused } = planBatch(inputs, stored)
        return plans.map((plan, i) => {
          const prepared = batch[i]
          if (!plan || !prepared) return refused[i] ?? { ok: false, error: new Error('Invariant: unplanned commit') }
          return { ok: true, value: this.applyCommit(plan, prepared.contentJson, compactCandidates) }
        })
      })
      .immediate()
    if (compactCandidates.length > 0) this.scheduleCompaction(compactCandidates)
    return results
  }

  private applyCommit(plan: PlannedCommit, contentJson: string, compactCandidates: NodePath[]): ChangeRecord {
    const { input } = plan
    const version = Number(this.stmt.insertChange.run(input.path, plan.nodeType, input.kind).lastInsertRowid)
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
        break
      }
      case 'Updated': {
        const row = this.stmt.updateNode.get({
          path: input.path,
          name: input.name,
          content: contentJson,
          at: input.at,
          version,
          added: input.update ? 1 : 0,
        })
        if (input.update) this.stmt.insertUpdate.run(input.path, version, toBuffer(input.update))
        if (row && row.update_count > COMPACT_AFTER_UPDATES) compactCandidates.push(input.path)
        break
      }
      case 'Deleted':
        this.stmt.deleteUpdates.run(input.path)
        this.stmt.deleteNode.run(input.path)
        break
      default:
        input.kind satisfies never
    }
    return { version, path: input.path, nodeType: plan.nodeType, kind: input.kind }
  }

  /** Compaction runs after the flush, one node per turn of the event loop, off the commit path. */
  private scheduleCompaction(paths: NodePath[]): void {
    for (const p of paths) this.toCompact.add(p)
    if (this.compacting) return
    this.compacting = (async () => {
      while (this.toCompact.size > 0 && !this.isClosing) {
        await new Promise<void>((resolve) => setImmediate(resolve))
        const [path] = this.toCompact
        if (path === undefined) break
        this.toCompact.delete(path)
        try {
          this.compactNode(path)
        } catch (error) {
          this.log?.error({ err: error, path }, 'storage: compaction failed; the log stays as it is')
        }
      }
    })().finally(() => {
      this.compacting = null
    })
  }

  /** Folds the node's snapshot and logged updates into a new snapshot, atomically. */
  compactNode(path: NodePath): void {
    this.db
      .transaction(() => {
        const node = this.stmt.snapshot.get(path)
        if (!node || node.update_count <= 1) return
        const logged = this.stmt.updates.all(path)
        const last = logged.at(-1)
        if (!last) return
        const snapshot = compactUpdates(node.snapshot ? toBytes(node.snapshot) : null, logged.map((u) => toBytes(u.data)))
        this.stmt.compacted.run(toBuffer(snapshot), logged.length, path)
        this.stmt.dropLogged.run(path, last.seq)
      })
      .immediate()
  }

  async getNode(path: NodePath): Promise<MeshNode | null> {
    const row = this.stmt.getNode.get(path)
    return row ? rowToNode(row) : null
  }

  async loadDoc(path: NodePath): Promise<StoredDoc | null> {
    return this.db.transaction((): StoredDoc | null => {
      const node = this.stmt.snapshot.get(path)
      if (!node) return null
      return {
        snapshot: node.snapshot ? toBytes(node.snapshot) : null,
        updates: this.stmt.updates.all(path).map((u) => toBytes(u.data)),
      }
    })()
  }

  async queryNodes(query: NodeQuery): Promise<MeshNode[]> {
    const q = normaliseQuery(query)
    const clauses: string[] = []
    const params: unknown[] = []
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
    const sql = `SELECT ${NODE_COLUMNS} FROM nodes ${clauses.length ? `WHERE ${clauses.join(' AND ')}` : ''} ORDER BY path LIMIT ?`
    params.push(q.limit)
    return this.db
      .prepare<unknown[], NodeRow>(sql)
      .all(...params)
      .map(rowToNode)
  }

  async descendants(path: NodePath): Promise<NodePath[]> {
    const [from, to] = descendantRange(path)
    return this.stmt.descendants.all(from, to).map((r) => r.path as NodePath)
  }

  async changesSince(version: number, limit: number): Promise<ChangeRecord[]> {
    return this.stmt.changesSince
      .all(Math.floor(version), clampLimit(limit, 1000, MAX_CHANGES_LIMIT))
      .map((r) => ({ version: r.version, path: r.path as NodePath, nodeType: r.node_type, kind: r.kind }))
  }

  async lastVersion(): Promise<number> {
    return this.stmt.lastVersion.get()?.v ?? 0
  }

  async createAccount(account: Account): Promise<void> {
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

  async findAccountByEmail(email: string): Promise<Account | null> {
    const row = this.stmt.accountByEmail.get(email.toLowerCase())
    return row ? { userId: row.user_id, email: row.email, passwordHash: row.password_hash, createdAt: row.created_at } : null
  }

  async saveToken(tokenHash: string, userId: string, expiresAt: string): Promise<void> {
    this.stmt.saveToken.run(tokenHash, userId, expiresAt)
  }

  async findToken(tokenHash: string): Promise<{ userId: string; expiresAt: string } | null> {
    const row = this.stmt.findToken.get(tokenHash)
    return row ? { userId: row.user_id, expiresAt: row.expires_at } : null
  }

  async revokeToken(tokenHash: string): Promise<void> {
    this.stmt.revokeToken.run(tokenHash)
  }

  close(): Promise<void> {
    this.closed ??= (async () => {
      this.isClosing = true
      await this.committer.drain()
      await this.compacting
      this.db.close()
    })()
    return this.closed
  }
}

export function openSqliteStorage(options: SqliteStorageOptions): SqliteStorage {
  return new SqliteStorage(options)
}
