import { createHash } from 'node:crypto'
import { setTimeout as sleep } from 'node:timers/promises'
import pg from 'pg'
import type { Logger } from 'pino'
import {
  WeftError,
  type ChangeRecord,
  type JsonObject,
  type JsonValue,
  type MeshChangeKind,
  type MeshNode,
  type NodePath,
  type NodeQuery,
  type PathRange,
} from '../../shared/index.js'
import { batchPaths, isFold, isRowContent, planBatch, validateCommitInput, type ExistingNode, type PreparedFold, type PreparedContent } from './commit-plan.js'
import { POSTGRES_DENIED_FROM, POSTGRES_WITHHOLD, withheldOf, withholdParams, type FeedWithhold, type StoredChange } from './feed-withhold.js'
import { COMPACT_AFTER_UPDATES, COMPACT_LOG_SHARE, compactionDue, contentOfLog } from './compaction.js'
import { FoldThread } from './fold-thread.js'
import type { RowJson } from './row-parts.js'
import { GroupCommitter, type ItemResult } from './group-commit.js'
import { pgLease } from './contextual-pg-lease.js'
import { REFUSED, attachOutcomePg, contextualOp, contextualSchema, pgPrepared, pgSql, runAsync, type ContextualCall, type Row, type Stmt } from './contextual-store.js'
import { POSTGRES_SCHEMA, SCHEMA_LOCK_KEY } from './postgres-schema.js'
import { POSTGRES_MOVE_SCHEMA } from './move-schema.js'
import { buildIndexesOnline } from './postgres-online-indexes.js'
import { assertFieldName, clampLimit, descendantRange, MAX_CHANGES_LIMIT, normaliseQuery } from './query.js'
import { NODE_COLUMNS, pathColumns, rowToNode, toBuffer, toBytes, type NodeRow } from './row-mapping.js'
import type { Account, ClientBinding, CommitInput, FieldRow, MoveInput, StorageAdapter, StoredDoc, TrashEntry } from './types.js'
import { PG_TOMBSTONE_DIGESTS, applyPostgresMoveSchema, postgresExpiredTrash, postgresListTrash, postgresMovedFrom, postgresMoveSubtree } from './postgres-move.js'
import { POSTGRES_SEARCH_DDL, ensurePostgresSearchIndex, searchPostgres } from './postgres-search-index.js'
import type { SearchHit, SearchPlan } from './search-plan.js'
import { holdPostgres, type HolderLock } from './holder-lock.js'
import { Flight } from './pg-flight.js'

export interface PostgresStorageOptions {
  connectionString: string
  /** Schema holding Weft's tables (created if missing); tests use a fresh one per run. */
  schema?: string
  log?: Logger
  poolSize?: number
  maxBatch?: number
  /** False: commits do not schedule compactions, only `compactNode` compacts (tests). */
  autoCompact?: boolean
}

interface PreparedCommit {
  input: CommitInput
  contentJson: string
}

type BatchItem = PreparedCommit | PreparedFold | PreparedContent

const SCHEMA_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/

/**
 * PostgreSQL storage. Commits are grouped like SQLite's (one transaction, one WAL flush per batch,
 * one batch in flight per instance); across instances the `version_counter` row lock serialises
 * writers, which keeps versions in commit order (see postgres-schema.ts).
 */
export class PostgresStorage implements StorageAdapter {
  readonly kind = 'postgres' as const
  private readonly pool: pg.Pool
  private readonly log: Logger | undefined
  /** Commits resolve to their ChangeRecord, folds to null. */
  private readonly committer: GroupCommitter<BatchItem, ChangeRecord | null>
  private readonly toCompact = new Set<NodePath>()
  /**
   * [STO9] Nodes last found not due for compaction: the log's entry count then, and the bytes it
   * still lacked (less what this instance has logged since). Asked again 50 entries on, or once
   * the bytes are there.
   */
  private readonly notDue = new Map<NodePath, { count: number; need: number }>()
  private compacting: Promise<void> | null = null
  private isClosing = false
  private closed: Promise<void> | null = null
  private readonly autoCompact: boolean
  /** [SCALE15] Big nodes' folds, off the event loop. */
  private readonly folds = new FoldThread()

  private constructor(pool: pg.Pool, options: PostgresStorageOptions, private readonly holder: HolderLock) {
    this.pool = pool
    this.log = options.log
    this.autoCompact = options.autoCompact ?? true
    this.committer = new GroupCommitter((batch) => this.writeBatch(batch), options.maxBatch ?? 1000)
  }

  static async open(options: PostgresStorageOptions): Promise<PostgresStorage> {
    const schema = options.schema
    if (schema !== undefined && !SCHEMA_NAME.test(schema)) {
      throw new WeftError('invalid_request', `Invalid PostgreSQL schema name ${JSON.stringify(schema)}.`)
    }
    // Session settings for every pooled connection: our schema first, and durable commits even if
    // the server default says otherwise.
    const settings = ['-c synchronous_commit=on']
    if (schema) settings.push(`-c search_path=${schema}`)
    // [SCALE13] Pipeline mode: a statement goes out without waiting for the one before it to answer
    // (a caller that awaits each statement sees no difference).
    const pool = new pg.Pool({ connectionString: options.connectionString, max: options.poolSize ?? 10, options: settings.join(' '), pipeline: true })
    pool.on('error', (err) => options.log?.error({ err }, 'storage: idle PostgreSQL client failed'))
    let holder: HolderLock | null = null
    try {
      // [STO11] Before the schema's transaction: built without stopping the writes of instances already serving.
      await buildIndexesOnline(options.connectionString, settings.join(' '), options.log)
      await applySchema(pool, schema, options.log)
      // [BAK6] Held while open: `weft restore` refuses a database somebody has open.
      holder = await holdPostgres(options.connectionString, schema, 10_000)
    } catch (error) {
      await pool.end()
      throw error
    }
    return new PostgresStorage(pool, options, holder)
  }

  commit(input: CommitInput): Promise<ChangeRecord> {
    try {
      if (this.isClosing) throw new WeftError('unavailable', 'Storage is closing.')
      validateCommitInput(input)
      const contentJson = input.kind === 'Deleted' || input.deferContent ? '{}' : JSON.stringify(input.content)
      // jsonb cannot hold NUL characters; refusing here keeps the batch this commit joins intact.
      if (jsonHoldsNul(contentJson)) {
        throw new WeftError('invalid_content', 'Node content must not contain NUL characters.')
      }
      // A commit item always resolves to its record (only folds resolve to null).
      return this.committer.submit({ input, contentJson }) as Promise<ChangeRecord>
    } catch (error) {
      return Promise.reject(error)
    }
  }

  async foldDoc(path: NodePath, state: Uint8Array): Promise<void> {
    if (this.isClosing) throw new WeftError('unavailable', 'Storage is closing.')
    await this.committer.submit({ fold: { path, state } })
  }

  /**
   * [STO10] A batch, or (when PostgreSQL refused one of its values) each of its items alone: a value it
   * cannot hold fails the whole transaction, and so every commit that happened to share it. Alone,
   * only the item it belongs to fails (`invalid_content`); the others are written as they were.
   */
  private async writeBatch(items: readonly BatchItem[]): Promise<ItemResult<ChangeRecord | null>[]> {
    try {
      return await this.writeBatchOnce(items)
    } catch (error) {
      if (!refusedValue(error)) throw error
      if (items.length === 1) throw unstorable(error)
      this.log?.warn({ err: error, items: items.length }, 'storage: PostgreSQL refused a value; writing the batch item by item')
      const out: ItemResult<ChangeRecord | null>[] = []
      for (const item of items) {
        try {
          out.push(...(await this.writeBatchOnce([item])))
        } catch (e) {
          out.push({ ok: false, error: refusedValue(e) ? unstorable(e) : e })
        }
      }
      return out
    }
  }

  private async writeBatchOnce(items: readonly BatchItem[]): Promise<ItemResult<ChangeRecord | null>[]> {
    let flight: Flight | null = null
    const { out, updated } = await withClient(
      this.pool,
      (client) => this.writeBatchOn((flight = new Flight(client)), items),
      // The first statement that failed is the cause; the ones after it only echo the abort.
      async (error) => (await flight?.failure()) ?? error,
    )
    const compactCandidates: NodePath[] = []
    for (const r of updated) {
      const wait = this.notDue.get(r.path as NodePath)
      if (r.update_count > COMPACT_AFTER_UPDATES && (!wait || wait.need <= 0 || r.update_count >= wait.count + 50)) compactCandidates.push(r.path as NodePath)
    }
    if (compactCandidates.length > 0 && this.autoCompact) this.scheduleCompaction(compactCandidates)
    return out
  }

  /**
   * [SCALE13] One batch's transaction, its statements sent as a pipeline (`Flight`): the begin,
   * the version counter's lock, the read of the batch's rows and the verdicts of the contextual
   * outcomes the batch carries go out together; then every write and the COMMIT together (a
   * refused outcome skips that commit alone). Returns each item's result and the rows' update
   * counts (compaction).
   */
  private async writeBatchOn(
    flight: Flight,
    items: readonly BatchItem[],
  ): Promise<{ out: ItemResult<ChangeRecord | null>[]; updated: { path: string; update_count: number }[] }> {
    const batch = items.filter((item): item is PreparedCommit => !isFold(item) && !isRowContent(item))
    const inputs = batch.map((p) => p.input)
    // [SCALE10] BEGIN and the counter's lock in one simple query; the rows' read beside them.
    const begun = flight.sendSimple('BEGIN; SELECT value FROM version_counter WHERE id = 1 FOR UPDATE')
    const existing = flight.send<{ path: string; node_type: string; created_by: string; created_at: string; version: string }>(
      'SELECT path, node_type, created_by, created_at, version FROM nodes WHERE path = ANY($1::text[])',
      [batchPaths(inputs)],
    )
    // [SCALE18] A create made on the knowledge of the path's tombstone: the tombstones as they are now.
    const checked = inputs.filter((c) => c.kind === 'Created' && c.tombstoneDigest !== undefined).map((c) => c.path)
    const left = checked.length > 0
      ? flight.send<{ path: string; digest: string }>(PG_TOMBSTONE_DIGESTS, [[...new Set(checked)]])
      : null
    // [CTX26] Every outcome's verdict in the same flight, after the counter's lock: each lease row
    // locked, the outcome inserted (its version set once the commit's is known) only while the lease
    // is held, none exists and the source row is stored. One wait for all of them, not one each: a
    // batch of reactions took a round trip per reaction with the counter's lock held.
    const verdicts = inputs.map((input) =>
      input.contextual ? runAsync(attachOutcomePg(input.contextual), async (s) => answerOf(s, await flight.send(pgSql(s.sql), s.params))) : null,
    )
    // Read after the flight settles; a failed flight throws its own cause there.
    for (const v of verdicts) v?.catch(() => undefined)
    await flight.settle()
    const begin = await begun
    let version = Number((Array.isArray(begin) ? begin.at(-1) : begin)?.rows[0]?.value ?? 0)
    const stored = new Map<NodePath, ExistingNode>(
      (await existing).rows.map((r) => [r.path as NodePath, { nodeType: r.node_type, createdBy: r.created_by, createdAt: r.created_at, version: Number(r.version) }]),
    )
    const tombstones = left ? new Map((await left).rows.map((r) => [r.path as NodePath, r.digest])) : undefined
    const { plans, results: refused } = planBatch(inputs, stored, tombstones)

    const changes = { version: [] as number[], path: [] as string[], nodeType: [] as string[], kind: [] as string[] }
    const logged: { path: string; seq: number; data: Buffer }[] = []
    // [ACC12] Client-id bindings, written in the same transaction as the updates that introduce them.
    const bound: { path: string; client: number; principal: string }[] = []
    const out: ItemResult<ChangeRecord | null>[] = []
    // [CTX26] The outcomes recorded with the verdicts: each one's commit version, or dropped.
    const outcomes: { key: string; version: number }[] = []
    // [CTX47] The work items settled with their outcomes (rows locked by the verdicts).
    const settled: { consumerId: string; eventId: string; token: string; at: number }[] = []
    const settledHere = new Set<string>()
    /** [CTX50] Paths created or deleted by an earlier commit of this batch (the verdicts ran before them). */
    const replacedHere = new Set<string>()
    const dropped: string[] = []
    /** [FEED5] The Denied assignments the batch's commits end, each with its commit's version. */
    const withholds: (FeedWithhold & { through: number })[] = []
    /** [FEED8] The Denied assignments the batch's commits begin: (subject, the commit's version). */
    const deniedFrom: [string, number][] = []
    // [SCALE10] Updates of distinct rows, written by one statement when the next item needs the
    // rows as they are (or at the end).
    const rows: BulkUpdate[] = []
    const updates: Promise<pg.QueryResult<{ path: string; update_count: number }>>[] = []
    const flushRows = () => {
      if (rows.length > 0) updates.push(updateRows(flight, rows.splice(0)))
    }
    let next = 0
    for (const item of items) {
      const bulk = !isFold(item) && !isRowContent(item) && item.input.kind === 'Updated' && !item.input.contextual
      if (!bulk || rows.some((r) => r.path === item.input.path)) flushRows()
      if (isFold(item)) {
        // Earlier entries of this batch are in the folded state: drop them with the stored log.
        const { path, state } = item.fold
        for (let j = logged.length - 1; j >= 0; j--) if (logged[j]?.path === path) logged.splice(j, 1)
        // The node row first, like compaction: the same lock order, so the two never deadlock.
        flight.send('UPDATE nodes SET snapshot = $2, update_count = 0 WHERE path = $1', [path, toBuffer(state)])
        flight.send('DELETE FROM node_updates WHERE path = $1', [path])
        out.push({ ok: true, value: null })
        continue
      }
      if (isRowContent(item)) {
        // [SCALE2] With a base version: only while the row is not past it (else it stays stale).
        flight.send('UPDATE nodes SET content = $2::jsonb, content_stale = false WHERE path = $1 AND ($3::bigint IS NULL OR version <= $3::bigint)', [
          item.rowContent.path,
          item.rowContent.json,
          item.rowContent.baseVersion ?? null,
        ])
        out.push({ ok: true, value: null })
        continue
      }
      const i = next++
      const plan = plans[i]
      const prepared = batch[i]
      if (!plan || !prepared) {
        // Its outcome, inserted with the verdict, goes with the commit that does not happen.
        const attached = inputs[i]?.contextual
        if (attached && !attached.fenceOnly && (await verdicts[i]) === null) dropped.push(attached.outcome.key)
        out.push(refused[i] ?? { ok: false, error: new Error('Invariant: unplanned commit') })
        continue
      }
      const { input } = plan
      const refusal = await verdicts[i]
      if (refusal) {
        out.push({ ok: false, error: new WeftError('stale_lease', refusal) })
        continue
      }
      // The verdicts all ran before any of the batch's writes; SQLite checks each commit after the
      // earlier ones. So: [CTX47] an item settled by an earlier commit of this batch (its lease is
      // over), and [CTX25] [CTX50] the event's source deleted (or deleted and made again) by one.
      const attached = input.contextual
      const fenced = attached ? `${attached.fence.consumerId}\n${attached.fence.eventId}` : null
      const stale = fenced !== null && settledHere.has(fenced) ? REFUSED.lease : attached?.source && replacedHere.has(attached.source.path) ? REFUSED.source : null
      if (stale) {
        if (!attached!.fenceOnly) dropped.push(attached!.outcome.key)
        out.push({ ok: false, error: new WeftError('stale_lease', stale) })
        continue
      }
      if (input.kind !== 'Updated') replacedHere.add(input.path)
      version += 1
      if (input.contextual && !input.contextual.fenceOnly) {
        const { outcome, fence, settle } = input.contextual
        outcomes.push({ key: outcome.key, version })
        if (settle) {
          settled.push({ consumerId: fence.consumerId, eventId: fence.eventId, token: fence.token, at: fence.now })
          settledHere.add(fenced!)
        }
      }
      switch (input.kind) {
        case 'Created': {
          const { parent, lastSegment } = pathColumns(input.path)
          flight.send(
            `INSERT INTO nodes (path, node_type, name, parent, last_segment, content, created_by, created_at, updated_at, version, state, update_count)
             VALUES ($1, $2, $3, $4, $5, $6::jsonb, $7, $8, $8, $9, 'Active', $10)`,
            [input.path, input.nodeType, input.name, parent, lastSegment, prepared.contentJson, input.createdBy, input.at, version, input.update ? 1 : 0],
          )
          if (input.update) logged.push({ path: input.path, seq: version, data: toBuffer(input.update) })
          for (const b of input.clients ?? []) bound.push({ path: input.path, ...b })
          if (input.tombstone === 'taken') flight.send('DELETE FROM node_tombstones WHERE path = $1', [input.path])
          break
        }
        case 'Updated': {
          rows.push({
            path: input.path,
            name: input.name,
            // [STO5] A deferred commit leaves the content column alone and marks it stale.
            content: input.deferContent ? null : prepared.contentJson,
            at: input.at,
            version,
            count: input.update ? 1 : 0,
            base: input.baseVersion ?? null,
          })
          const wait = this.notDue.get(input.path)
          if (wait && input.update) wait.need -= input.update.byteLength
          if (!bulk) flushRows()
          if (input.update) logged.push({ path: input.path, seq: version, data: toBuffer(input.update) })
          for (const b of input.clients ?? []) bound.push({ path: input.path, ...b })
          break
        }
        case 'Deleted': {
          // The log is inserted at the end of the batch: drop what this batch queued for the path too.
          for (let j = logged.length - 1; j >= 0; j--) if (logged[j]?.path === input.path) logged.splice(j, 1)
          for (let j = bound.length - 1; j >= 0; j--) if (bound[j]?.path === input.path) bound.splice(j, 1)
          // The row's lock first, like every other writer of the node (a compaction holding it
          // while this waited on its log rows would deadlock).
          flight.send('SELECT 1 FROM nodes WHERE path = $1 FOR UPDATE', [input.path])
          flight.send('DELETE FROM node_updates WHERE path = $1', [input.path])
          flight.send('DELETE FROM node_clients WHERE path = $1', [input.path])
          flight.send('DELETE FROM nodes WHERE path = $1', [input.path])
          if (input.tombstone instanceof Uint8Array) {
            flight.send(
              'INSERT INTO node_tombstones (path, state, at) VALUES ($1, $2, $3) ON CONFLICT (path) DO UPDATE SET state = excluded.state, at = excluded.at',
              [input.path, toBuffer(input.tombstone), input.at],
            )
          }
          break
        }
        default:
          input.kind satisfies never
      }
      for (const w of input.withhold ?? []) withholds.push({ ...w, through: version })
      if (input.deniedFrom !== undefined) deniedFrom.push([input.deniedFrom, version])
      changes.version.push(version)
      changes.path.push(input.path)
      changes.nodeType.push(plan.nodeType)
      changes.kind.push(input.kind)
      out.push({ ok: true, value: { version, path: input.path, nodeType: plan.nodeType, kind: input.kind } })
    }
    flushRows()
    if (changes.version.length > 0 || logged.length > 0 || bound.length > 0) {
      // [SCALE10] The counter, the feed's rows, the log, the outcomes' versions and the bindings: one statement.
      flight.send(
        `WITH counter AS (UPDATE version_counter SET value = $5 WHERE id = 1 AND cardinality($1::bigint[]) > 0),
           feed AS (INSERT INTO changes (version, path, node_type, kind) SELECT * FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[])),
           log AS (INSERT INTO node_updates (path, seq, data) SELECT * FROM unnest($6::text[], $7::bigint[], $8::bytea[])),
           outcome AS (UPDATE contextual_outcomes AS o SET version = v.version FROM unnest($12::text[], $13::bigint[]) AS v(key, version) WHERE o.key = v.key),
           settled AS (
             UPDATE contextual_events AS e SET state = 'acked', lease_token = NULL, available_at = s.at
             FROM unnest($14::text[], $15::text[], $16::text[], $17::bigint[]) AS s(consumer_id, event_id, token, at)
             WHERE e.consumer_id = s.consumer_id AND e.event_id = s.event_id AND e.state = 'leased' AND e.lease_token = s.token)
         INSERT INTO node_clients (path, client, principal) SELECT * FROM unnest($9::text[], $10::bigint[], $11::text[]) ON CONFLICT (path, client) DO NOTHING`,
        [
          changes.version,
          changes.path,
          changes.nodeType,
          changes.kind,
          version,
          logged.map((u) => u.path),
          logged.map((u) => u.seq),
          logged.map((u) => u.data),
          bound.map((b) => b.path),
          bound.map((b) => b.client),
          bound.map((b) => b.principal),
          outcomes.map((o) => o.key),
          outcomes.map((o) => o.version),
          settled.map((x) => x.consumerId),
          settled.map((x) => x.eventId),
          settled.map((x) => x.token),
          settled.map((x) => x.at),
        ],
      )
    }
    // [FEED5] After the feed's rows: each withholding covers its own commit's record.
    // [FEED8] A withholding of this batch may end a Denied an earlier commit of it began: marks first.
    for (const d of deniedFrom) flight.send(POSTGRES_DENIED_FROM, d)
    for (const w of withholds) flight.send(POSTGRES_WITHHOLD, withholdParams(w, w.through))
    if (dropped.length > 0) flight.send('DELETE FROM contextual_outcomes WHERE key = ANY($1::text[])', [dropped])
    const committed = flight.sendSimple('COMMIT')
    await flight.settle()
    // A COMMIT of an aborted transaction answers ROLLBACK; settle has thrown its cause already.
    const tag = await committed
    if ((Array.isArray(tag) ? tag.at(-1) : tag)?.command !== 'COMMIT') throw new Error('Invariant: the batch was rolled back without an error.')
    const updated = (await Promise.all(updates)).flatMap((r) => r.rows)
    return { out, updated }
  }

  private scheduleCompaction(paths: NodePath[]): void {
    for (const p of paths) this.toCompact.add(p)
    if (this.compacting) return
    this.compacting = (async () => {
      while (this.toCompact.size > 0 && !this.isClosing) {
        const [path] = this.toCompact
        if (path === undefined) break
        this.toCompact.delete(path)
        try {
          await this.compactNode(path)
        } catch (error) {
          this.log?.error({ err: error, path }, 'storage: compaction failed; the log stays as it is')
        }
      }
    })().finally(() => {
      this.compacting = null
    })
  }

  /**
   * Folds the node's snapshot and logged updates into a new snapshot, holding the node's row lock
   * only for the write. The snapshot and log are read and folded unlocked (one statement, so one
   * snapshot); the write then goes out as one flight — lock the row, write only if the snapshot
   * and the folded entries are still exactly what was read, drop them, COMMIT — so the lock is
   * held for one server-side step, no round trip and no fold. Every commit batch holds the
   * version counter while it waits for its rows' locks: a compaction holding a hot node's lock
   * across its reads and its fold stalled the commits of every node on every instance (the
   * cross-instance edit p99, stop 29). Entries logged meanwhile have later seqs and stay; a fold
   * or another compaction meanwhile makes the check fail, and the next commit schedules it again.
   */
  async compactNode(path: NodePath, seam: { beforeWrite?: () => Promise<void> } = {}): Promise<'compacted' | 'not-due' | 'changed'> {
    const sizes = await this.pool.query<{ update_count: number; snapshot_bytes: number; log_bytes: string }>(
      `SELECT update_count, coalesce(octet_length(snapshot), 0) AS snapshot_bytes,
         (SELECT coalesce(sum(octet_length(data)), 0) FROM node_updates WHERE path = $1) AS log_bytes
       FROM nodes WHERE path = $1`,
      [path],
    )
    const due = sizes.rows[0]
    if (!due || due.update_count <= 1) return 'not-due'
    // [STO9] A big node waits until its log's bytes are a share of its snapshot's (compaction.ts).
    if (!compactionDue(due.update_count, Number(due.log_bytes), due.snapshot_bytes)) {
      if (this.notDue.size > 10_000) this.notDue.clear()
      this.notDue.set(path, { count: due.update_count, need: due.snapshot_bytes / COMPACT_LOG_SHARE - Number(due.log_bytes) })
      return 'not-due'
    }
    this.notDue.delete(path)
    const read = await this.readLog(path)
    const first = read?.logged[0]
    const last = read?.logged.at(-1)
    if (!read || !first || !last) return 'changed'
    const folded = await this.folds.fold(read.snapshot, read.logged.map((u) => u.data))
    const was = read.snapshot ? createHash('sha256').update(read.snapshot).digest() : null
    // A test's seam: what other instances do between the read and the write.
    await seam.beforeWrite?.()
    return withClient(this.pool, async (client) => {
      const flight = new Flight(client)
      flight.sendSimple('BEGIN')
      // The row's lock first, like a commit batch and a fold: the statement after it reads the
      // snapshot and log as they are once no one else can change them. The UPDATE checks the
      // snapshot again itself: should the lock have found no row (the node moved away and back
      // meanwhile), a write that waits for another's lock re-checks only its own WHERE.
      flight.send('SELECT 1 FROM nodes WHERE path = $1 FOR UPDATE', [path])
      const written = flight.send(
        `WITH same AS (
           SELECT 1 FROM nodes
           WHERE path = $1 AND sha256(snapshot) IS NOT DISTINCT FROM $5::bytea
             AND (SELECT count(*) = $3 AND min(seq) = $6 FROM node_updates WHERE path = $1 AND seq <= $4)
         ), written AS (
           UPDATE nodes SET snapshot = $2, update_count = update_count - $3
           WHERE path = $1 AND EXISTS (SELECT 1 FROM same) AND sha256(snapshot) IS NOT DISTINCT FROM $5::bytea RETURNING 1
         )
         DELETE FROM node_updates WHERE path = $1 AND seq <= $4 AND EXISTS (SELECT 1 FROM written)`,
        [path, toBuffer(folded), read.logged.length, last.seq, was, first.seq],
      )
      flight.sendSimple('COMMIT')
      await flight.settle()
      return (await written).rowCount ? 'compacted' : 'changed'
    })
  }

  async writeContent(path: NodePath, content: JsonObject, given?: RowJson, baseVersion?: number): Promise<void> {
    if (this.isClosing) throw new WeftError('unavailable', 'Storage is closing.')
    // Parts are the SQLite writer's ([ACT12]); this adapter does not ask for them.
    const json = typeof given === 'string' ? given : JSON.stringify(content)
    if (jsonHoldsNul(json)) throw new WeftError('invalid_content', 'Node content must not contain NUL characters.')
    await this.committer.submit({ rowContent: { path, json, ...(baseVersion !== undefined ? { baseVersion } : {}) } })
  }

  async getNode(path: NodePath): Promise<MeshNode | null> {
    const r = await this.pool.query<NodeRow>(`SELECT ${NODE_COLUMNS} FROM nodes WHERE path = $1`, [path])
    const row = r.rows[0]
    return row ? this.toNode(row) : null
  }

  /** A row whose content is stale ([STO5]) is read from its Yjs log instead. */
  private async toNode(row: NodeRow): Promise<MeshNode> {
    const node = rowToNode(row)
    if (row.content_stale) {
      const stored = await this.loadDoc(node.path)
      if (stored) node.content = contentOfLog(stored.snapshot, stored.updates)
    }
    return node
  }

  async loadDoc(path: NodePath): Promise<StoredDoc | null> {
    const read = await this.readLog(path)
    return read && { snapshot: read.snapshot, updates: read.logged.map((u) => u.data) }
  }

  /**
   * The node's snapshot and log in ONE statement, so from one moment (a compaction or fold between
   * two reads would lose updates): one round trip, where a REPEATABLE READ transaction around two
   * reads took four (begin, two reads, commit).
   */
  private async readLog(path: NodePath): Promise<{ snapshot: Uint8Array | null; logged: { seq: string; data: Uint8Array }[] } | null> {
    // The row first (seq null: the snapshot, null itself when there is none), then the log in order.
    const r = await this.pool.query<{ seq: string | null; data: Buffer | null }>(
      pgPrepared(
        `SELECT NULL::bigint AS seq, snapshot AS data FROM nodes WHERE path = $1
         UNION ALL
         SELECT seq, data FROM node_updates WHERE path = $1 AND EXISTS (SELECT 1 FROM nodes WHERE path = $1)
         ORDER BY seq NULLS FIRST`,
        [path],
      ),
    )
    const [head, ...logged] = r.rows
    if (!head || head.seq !== null) return null
    return { snapshot: head.data ? toBytes(head.data) : null, logged: logged.map((u) => ({ seq: String(u.seq), data: toBytes(u.data!) })) }
  }

  async loadClientBindings(path: NodePath): Promise<ClientBinding[]> {
    const r = await this.pool.query<{ client: string; principal: string }>('SELECT client, principal FROM node_clients WHERE path = $1', [path])
    return r.rows.map((row) => ({ client: Number(row.client), principal: row.principal }))
  }

  tombstoneOf(snapshot: Uint8Array | null, updates: readonly Uint8Array[]): Promise<Uint8Array | null> {
    return this.folds.tombstone(snapshot, updates)
  }

  async getNodeOrTombstone(path: NodePath): Promise<{ node: MeshNode; tombstone: null } | { node: null; tombstone: Uint8Array | null }> {
    // Named, so each connection plans it once (planned each time, it cost ~80 µs more than the row's plain read).
    const r = await this.pool.query<NodeRow & { tombstone: Buffer | null }>({
      name: 'weft_node_or_tombstone',
      text: `SELECT n.*, (SELECT state FROM node_tombstones WHERE path = $1 AND n.path IS NULL) AS tombstone
       FROM (SELECT 1) one LEFT JOIN LATERAL (SELECT ${NODE_COLUMNS} FROM nodes WHERE path = $1) n ON true`,
      values: [path],
    })
    const row = r.rows[0]
    if (row?.path) return { node: await this.toNode(row), tombstone: null }
    return { node: null, tombstone: row?.tombstone ? toBytes(row.tombstone) : null }
  }

  async loadTombstone(path: NodePath): Promise<Uint8Array | null> {
    const r = await this.pool.query<{ state: Buffer }>('SELECT state FROM node_tombstones WHERE path = $1', [path])
    return r.rows[0] ? toBytes(r.rows[0].state) : null
  }

  async queryNodes(query: NodeQuery, within?: PathRange): Promise<MeshNode[]> {
    const { where, params, param, limit } = pgFilter(query, within)
    const sql = `SELECT ${NODE_COLUMNS} FROM nodes ${where} ORDER BY path LIMIT ${param(limit)}`
    const r = await this.pool.query<NodeRow>(sql, params)
    return Promise.all(r.rows.map((row) => this.toNode(row)))
  }

  async queryFields(query: NodeQuery, fields: readonly string[]): Promise<FieldRow[]> {
    // [KIT7] An engine's filter is exact (field and value as written), `content ->> 'F' = $n`:
    // the engine-scan indexes hold the values' first 200 characters (postgres-schema.ts), so the
    // prefix finds the few candidates and the whole value decides.
    const { clauses, params, param, limit } = pgFilter({ ...query, where: undefined })
    for (const [f, v] of Object.entries(query.where ?? {})) {
      assertFieldName(f)
      const value = param(v)
      clauses.push(`left(content ->> '${f}', 200) = left(${value}, 200) AND content ->> '${f}' = ${value}`)
    }
    const where = clauses.join(' AND ')
    for (const f of fields) assertFieldName(f)
    const cols = fields.map((f, i) => `content -> ${param(f)}::text AS f${i}`).join(', ')
    const sql = `SELECT path, node_type, content_stale${cols ? `, ${cols}` : ''} FROM nodes ${where ? `WHERE ${where}` : ''} ORDER BY path LIMIT ${param(limit)}`
    const r = await this.pool.query<Record<string, unknown>>(sql, params)
    // A stale row answers from the row as it is ([STO5]: at most a second old, a big row up to 10 s), never its log.
    return r.rows.map((row) => ({
      path: row.path as NodePath,
      nodeType: row.node_type as string,
      stale: Boolean(row.content_stale),
      fields: Object.fromEntries(fields.map((f, i) => [f, row[`f${i}`] == null ? undefined : (row[`f${i}`] as JsonValue)])),
    }))
  }

  async searchNodes(plan: SearchPlan, accept: (path: NodePath) => boolean, limit: number, within?: readonly PathRange[]): Promise<SearchHit[]> {
    return searchPostgres(this.pool, plan, accept, limit, within)
  }

  async stalePaths(after: string | null, limit: number): Promise<NodePath[]> {
    const r = await this.pool.query<{ path: string }>('SELECT path FROM nodes WHERE content_stale AND path > $1 ORDER BY path LIMIT $2', [after ?? '', Math.max(1, Math.floor(limit))])
    return r.rows.map((row) => row.path as NodePath)
  }

  async descendants(path: NodePath): Promise<NodePath[]> {
    const [from, to] = descendantRange(path)
    const r = await this.pool.query<{ path: string }>('SELECT path FROM nodes WHERE path >= $1 AND path < $2 ORDER BY path', [from, to])
    return r.rows.map((row) => row.path as NodePath)
  }

  async changesSince(version: number, limit: number): Promise<StoredChange[]> {
    const r = await this.pool.query<{ version: string; path: string; node_type: string; kind: MeshChangeKind; withheld: string | null }>(
      'SELECT version, path, node_type, kind, withheld FROM changes WHERE version > $1 ORDER BY version LIMIT $2',
      [Math.floor(version), clampLimit(limit, 1000, MAX_CHANGES_LIMIT)],
    )
    return r.rows.map((row) => ({ version: Number(row.version), path: row.path as NodePath, nodeType: row.node_type, kind: row.kind, ...withheldOf(row.withheld) }))
  }

  async moveSubtree(input: MoveInput): Promise<ChangeRecord[]> {
    if (this.isClosing) throw new WeftError('unavailable', 'Storage is closing.')
    return withTransaction(this.pool, (client) => postgresMoveSubtree(client, input))
  }

  async movedFrom(paths: readonly NodePath[]): Promise<{ from: NodePath; to: NodePath } | null> {
    return postgresMovedFrom(this.pool, paths)
  }

  async listTrash(top: NodePath): Promise<TrashEntry[]> {
    return postgresListTrash(this.pool, top)
  }

  async expiredTrash(before: string, limit: number): Promise<NodePath[]> {
    return postgresExpiredTrash(this.pool, before, limit)
  }

  async contextual(call: ContextualCall): Promise<unknown> {
    if (this.isClosing) throw new WeftError('unavailable', 'Storage is closing.')
    if (call.op === 'lease') return pgLease(this.pool, call)
    // One statement: no transaction around it (one round trip, not three).
    if (SINGLE_STATEMENT.has(call.op)) return runAsync(contextualOp(call, 'postgres'), pgExec(this.pool, true))
    return withTransaction(this.pool, (client) => runAsync(contextualOp(call, 'postgres'), pgExec(client)))
  }

  async lastVersion(): Promise<number> {
    const r = await this.pool.query<{ value: string }>('SELECT value FROM version_counter WHERE id = 1')
    return Number(r.rows[0]?.value ?? 0)
  }

  async createAccount(account: Account): Promise<void> {
    try {
      await this.pool.query('INSERT INTO accounts (user_id, email, password_hash, created_at) VALUES ($1, $2, $3, $4)', [
        account.userId,
        account.email.toLowerCase(),
        account.passwordHash,
        account.createdAt,
      ])
    } catch (error) {
      if (error instanceof pg.DatabaseError && error.code === '23505') {
        if (error.constraint === 'accounts_email_key') throw new WeftError('email_taken', 'An account with this email already exists.')
        throw new WeftError('already_exists', `An account already exists for user ${account.userId}.`)
      }
      throw error
    }
  }

  async deleteAccount(userId: string, email: string): Promise<void> {
    await this.pool.query('DELETE FROM accounts WHERE user_id = $1 AND email = $2', [userId, email.toLowerCase()])
  }

  async findAccountByEmail(email: string): Promise<Account | null> {
    const r = await this.pool.query<{ user_id: string; email: string; password_hash: string; created_at: string }>(
      'SELECT user_id, email, password_hash, created_at FROM accounts WHERE email = $1',
      [email.toLowerCase()],
    )
    const row = r.rows[0]
    return row ? { userId: row.user_id, email: row.email, passwordHash: row.password_hash, createdAt: row.created_at } : null
  }

  async saveToken(tokenHash: string, userId: string, expiresAt: string): Promise<void> {
    await this.pool.query(
      `INSERT INTO tokens (hash, user_id, expires_at) VALUES ($1, $2, $3)
       ON CONFLICT (hash) DO UPDATE SET user_id = excluded.user_id, expires_at = excluded.expires_at`,
      [tokenHash, userId, expiresAt],
    )
  }

  async findToken(tokenHash: string): Promise<{ userId: string; expiresAt: string } | null> {
    const r = await this.pool.query<{ user_id: string; expires_at: string }>('SELECT user_id, expires_at FROM tokens WHERE hash = $1', [tokenHash])
    const row = r.rows[0]
    return row ? { userId: row.user_id, expiresAt: row.expires_at } : null
  }

  async revokeToken(tokenHash: string): Promise<void> {
    await this.pool.query('DELETE FROM tokens WHERE hash = $1', [tokenHash])
  }

  async purgeSupersededChanges(below: number): Promise<void> {
    await this.pool.query('DELETE FROM changes WHERE version < $1 AND EXISTS (SELECT 1 FROM changes AS n WHERE n.path = changes.path AND n.version > changes.version)', [below])
  }

  async purgeExpiredTokens(before: string): Promise<void> {
    await this.pool.query('DELETE FROM tokens WHERE expires_at <= $1', [before])
  }

  close(): Promise<void> {
    this.closed ??= (async () => {
      this.isClosing = true
      await this.committer.drain()
      await this.compacting
      await this.folds.close()
      await this.pool.end()
      await this.holder.release()
    })()
    return this.closed
  }
}

export function openPostgresStorage(options: PostgresStorageOptions): Promise<PostgresStorage> {
  return PostgresStorage.open(options)
}

/** The contextual calls that are one statement (contextual-store.ts), run without BEGIN/COMMIT around them. */
const SINGLE_STATEMENT: ReadonlySet<ContextualCall['op']> = new Set(['consumer', 'skip', 'ack', 'nack', 'release', 'extend', 'outcome', 'reactTruth', 'recordOutcome', 'consumerIds', 'consumerPath', 'quietConsumers', 'unread'])

/** Runs contextual statements (contextual-store.ts) on one transaction's client, or (`single`) the one statement of a call on the pool. */
function pgExec(client: pg.PoolClient | pg.Pool, single = false): (s: Stmt) => Promise<Row[] | number> {
  let ran = 0
  return async (s) => {
    if (single && ran++ > 0) throw new Error('A single-statement contextual call ran a second statement outside a transaction.')
    return answerOf(s, single ? await client.query(pgPrepared(pgSql(s.sql), s.params)) : await client.query(pgSql(s.sql), s.params))
  }
}

/** What a contextual statement answers: its rows, or the count of rows it changed. */
function answerOf(s: Stmt, r: pg.QueryResult): Row[] | number {
  return s.mode === 'all' ? (r.rows as Row[]) : (r.rowCount ?? 0)
}

/**
 * [STO12] The schema as this release has it, by its statements' hash: a boot of a database already
 * at it runs no DDL. Even `IF NOT EXISTS` takes its table's lock first (`ALTER TABLE` an exclusive
 * one), which waits behind any open transaction on `nodes` (a `weft backup` reads in one) while every
 * other instance's reads and writes queue behind it.
 */
const SCHEMA_FINGERPRINT = createHash('sha256')
  .update([POSTGRES_SCHEMA, POSTGRES_SEARCH_DDL, POSTGRES_MOVE_SCHEMA, contextualSchema('postgres')].join('\n;\n'))
  .digest('hex')
/** How long one try of a schema change waits for a lock: the others queue behind it meanwhile. */
const SCHEMA_LOCK_WAIT_MS = 250
const SCHEMA_RETRY_MAX_MS = 5_000

async function schemaFingerprint(q: pg.Pool | pg.PoolClient): Promise<string | null> {
  const t = await q.query<{ t: string | null }>("SELECT to_regclass('schema_state')::text AS t")
  if (t.rows[0]?.t == null) return null
  return (await q.query<{ fingerprint: string }>('SELECT fingerprint FROM schema_state WHERE id = 1')).rows[0]?.fingerprint ?? null
}

/**
 * The schema's statements, in one transaction under the schema lock, when the database is not at
 * this release's schema ([STO12]). A lock not granted within SCHEMA_LOCK_WAIT_MS gives the try up
 * (it holds nobody up longer than that) and it is tried again later, logged.
 */
async function applySchema(pool: pg.Pool, schema: string | undefined, log?: Logger): Promise<void> {
  if ((await schemaFingerprint(pool).catch(() => null)) === SCHEMA_FINGERPRINT) return
  for (let attempt = 1; ; attempt++) {
    try {
      await withTransaction(
        pool,
        async (client) => {
          // Waited for without a timeout: the instance holding it is changing the schema.
          await client.query('SELECT pg_advisory_xact_lock($1)', [SCHEMA_LOCK_KEY])
          await client.query(`SET LOCAL lock_timeout = '${SCHEMA_LOCK_WAIT_MS}ms'`)
          if (schema) await client.query(`CREATE SCHEMA IF NOT EXISTS "${schema}"`)
          // Another instance applied it meanwhile.
          if ((await schemaFingerprint(client)) === SCHEMA_FINGERPRINT) return
          await client.query(POSTGRES_SCHEMA)
          // [FIND1] The full-text column, its trigger and GIN index (an existing data set is filled once).
          await ensurePostgresSearchIndex(client)
          await applyPostgresMoveSchema(client)
          await client.query(contextualSchema('postgres'))
          await client.query('CREATE TABLE IF NOT EXISTS schema_state (id integer PRIMARY KEY CHECK (id = 1), fingerprint text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())')
          await client.query(
            'INSERT INTO schema_state (id, fingerprint) VALUES (1, $1) ON CONFLICT (id) DO UPDATE SET fingerprint = EXCLUDED.fingerprint, applied_at = now()',
            [SCHEMA_FINGERPRINT],
          )
        },
      )
      return
    } catch (err) {
      // 55P03: a lock not granted in time; 40P01: a deadlock (with another release's schema work).
      const code = (err as { code?: string }).code
      if (code !== '55P03' && code !== '40P01') throw err
      const wait = Math.min(SCHEMA_RETRY_MAX_MS, SCHEMA_LOCK_WAIT_MS * 2 ** Math.min(attempt, 5))
      log?.warn({ attempt, waitMs: wait }, 'storage: the schema change waits for transactions on its tables to end (a backup?); trying again')
      await sleep(wait)
    }
  }
}

async function withTransaction<T>(pool: pg.Pool, fn: (client: pg.PoolClient, begun: pg.QueryResult[]) => Promise<T>, begin = 'BEGIN'): Promise<T> {
  return withClient(pool, async (client) => {
    // A begin of several statements (a simple query) answers one result per statement.
    const begun: pg.QueryResult | pg.QueryResult[] = await client.query(begin)
    const result = await fn(client, Array.isArray(begun) ? begun : [begun])
    await client.query('COMMIT')
    return result
  })
}

/**
 * A pooled connection for `fn`, which runs a transaction on it: on a throw it is rolled back (the
 * connection released as broken if even that fails) and `cause` names the error thrown.
 */
async function withClient<T>(pool: pg.Pool, fn: (client: pg.PoolClient) => Promise<T>, cause: (error: unknown) => Promise<unknown> = async (e) => e): Promise<T> {
  const client = await pool.connect()
  let isBroken = false
  try {
    return await fn(client)
  } catch (error) {
    const thrown = await cause(error)
    try {
      await client.query('ROLLBACK')
    } catch {
      isBroken = true
    }
    throw thrown
  } finally {
    client.release(isBroken)
  }
}

/** [SCALE10] One Updated commit's row, for `updateRows` (content null: deferred, [STO5]). */
interface BulkUpdate {
  path: string
  name: string
  content: string | null
  at: string
  version: number
  count: number
  base: number | null
}

const unstorable = (error: unknown) =>
  new WeftError('invalid_content', `This change holds a value the database cannot store (PostgreSQL ${String((error as { code?: unknown }).code)}: too large for an index, or text it refuses); change it and save again.`)

/**
 * A PostgreSQL error about a value (data exception 22…, program limit 54…), not about the server.
 * Not an integrity error (23…): those are the server's own faults here, not a person's input.
 */
function refusedValue(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code
  return typeof code === 'string' && /^(22|54)/.test(code)
}

/**
 * Whether JSON text (JSON.stringify's) holds a NUL character, which jsonb cannot: `\u0000` after an
 * even number of backslashes. The text `\u0000` itself (a backslash, then five characters) is
 * written `\\u0000` and stored as it is.
 */
export function jsonHoldsNul(json: string): boolean {
  return json.includes('\\u0000') && /(?<!\\)(?:\\\\)*\\u0000/.test(json)
}

/**
 * [SCALE10] Writes the rows of Updated commits (distinct paths) in one statement, as the
 * statement per commit did: a deferred one ([STO5]) leaves the content and marks it stale; another
 * writes it, stale when the row is past the copy's base version ([SCALE2]). Returns each row's
 * update count (compaction).
 */
function updateRows(flight: Flight, rows: readonly BulkUpdate[]): Promise<pg.QueryResult<{ path: string; update_count: number }>> {
  return flight.send<{ path: string; update_count: number }>(
    `UPDATE nodes AS n SET
       name = u.name,
       content = CASE WHEN u.content IS NULL THEN n.content ELSE u.content::jsonb END,
       content_stale = CASE WHEN u.content IS NULL THEN true ELSE (u.base IS NOT NULL AND n.version > u.base) END,
       updated_at = u.at, version = u.version, update_count = n.update_count + u.count
     FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::bigint[], $6::int[], $7::bigint[]) AS u(path, name, content, at, version, count, base)
     WHERE n.path = u.path
     RETURNING n.path, n.update_count`,
    [rows.map((x) => x.path), rows.map((x) => x.name), rows.map((x) => x.content), rows.map((x) => x.at), rows.map((x) => x.version), rows.map((x) => x.count), rows.map((x) => x.base)],
  )
}

/** The WHERE of a node query (and its parameters), shared by `queryNodes` and `queryFields`. */
function pgFilter(query: NodeQuery, within?: PathRange): { where: string; clauses: string[]; params: unknown[]; param: (v: unknown) => string; limit: number } {
  const q = normaliseQuery(query)
  const clauses: string[] = []
  const params: unknown[] = []
  const param = (value: unknown): string => {
    params.push(value)
    return `$${params.length}`
  }
  if (within) clauses.push(`path >= ${param(within.from)} AND path < ${param(within.to)}`)
  // An empty parent means the top level, whose rows have no parent.
  if (q.parent === '') clauses.push('parent IS NULL')
  else if (q.parent !== undefined) clauses.push(`parent = ${param(q.parent)}`)
  if (q.after !== undefined) clauses.push(`path > ${param(q.after)}`)
  if (q.nodeType !== undefined) clauses.push(`node_type = ${param(q.nodeType)}`)
  for (const { field, value } of q.where) {
    // Field names match case-insensitively (NodeQuery), hence jsonb_each_text rather than ->>.
    clauses.push(`EXISTS (SELECT 1 FROM jsonb_each_text(nodes.content) AS f WHERE lower(f.key) = ${param(field)} AND lower(f.value) = ${param(value)})`)
  }
  return { where: clauses.length ? `WHERE ${clauses.join(' AND ')}` : '', clauses, params, param, limit: q.limit }
}
