import { createHash } from 'node:crypto'
import { withheldFrom, withheldOf } from './feed-withhold.js'
import type { ContextualStatus, MeshChangeKind, PathRange } from '../../shared/index.js'

/**
 * [CTX5]–[CTX14] Durable consumer state of contextual subscriptions, one algorithm for both
 * storages: each operation is a generator that yields its SQL statements (`?` placeholders) and
 * receives their answers, so SQLite runs it synchronously inside one writer-thread transaction and
 * PostgreSQL runs it with `await` inside one transaction (or, for a one-statement call, as that
 * statement alone). The exception is PostgreSQL's lease ([CTX41]): contextual-pg-lease.ts runs the
 * same steps as single statements with SKIP LOCKED, so concurrent pulls of one consumer do not
 * queue on its row; the contextual tests run both storages through the same interleavings.
 */

export type Dialect = 'sqlite' | 'postgres'

/**
 * [CTX6] PostgreSQL leases without a consumer-wide lock (contextual-pg-lease.ts): each lease holds
 * one of MaxInFlight slots, and a unique index over the leased rows' slots keeps two concurrent
 * pulls from holding more than MaxInFlight leases between them (the loser retries).
 */
const PG_SLOTS = `
ALTER TABLE contextual_events ADD COLUMN IF NOT EXISTS slot integer;
ALTER TABLE contextual_consumers ADD COLUMN IF NOT EXISTS acked_pruned bigint NOT NULL DEFAULT 0;
ALTER TABLE contextual_events ADD COLUMN IF NOT EXISTS died_at bigint;
CREATE UNIQUE INDEX IF NOT EXISTS contextual_events_slot ON contextual_events (consumer_id, slot) WHERE state = 'leased';
`

export function contextualSchema(d: Dialect): string {
  const int = d === 'sqlite' ? 'INTEGER' : 'bigint'
  return `
CREATE TABLE IF NOT EXISTS contextual_meta (
  id ${int} PRIMARY KEY CHECK (id = 1),
  database_id TEXT NOT NULL,
  incarnation ${int} NOT NULL,
  seal_key TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS contextual_consumers (
  id TEXT PRIMARY KEY,
  def_hash TEXT NOT NULL,
  operation TEXT NOT NULL,
  subscription_path TEXT NOT NULL,
  params TEXT NOT NULL,
  name TEXT NOT NULL,
  owner TEXT NOT NULL,
  limits TEXT NOT NULL,
  cursor ${int} NOT NULL,
  created_at TEXT NOT NULL,
  acked_pruned ${int} NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS contextual_events (
  consumer_id TEXT NOT NULL,
  event_id TEXT NOT NULL,
  version ${int} NOT NULL,
  path TEXT NOT NULL,
  node_type TEXT NOT NULL,
  kind TEXT NOT NULL,
  state TEXT NOT NULL,
  attempt ${int} NOT NULL,
  lease_token TEXT,
  expires_at ${int} NOT NULL,
  available_at ${int} NOT NULL,
  last_error TEXT,
  died_at ${int},
  PRIMARY KEY (consumer_id, event_id)
);
CREATE INDEX IF NOT EXISTS contextual_events_state ON contextual_events (consumer_id, state, version);
CREATE INDEX IF NOT EXISTS contextual_consumers_owner ON contextual_consumers (owner);
CREATE INDEX IF NOT EXISTS contextual_events_open ON contextual_events (consumer_id, version) WHERE state IN ('pending', 'leased');
${d === 'postgres' ? PG_SLOTS : ''}CREATE TABLE IF NOT EXISTS contextual_outcomes (
  key TEXT PRIMARY KEY,
  consumer_id TEXT NOT NULL,
  event_id TEXT NOT NULL,
  reaction TEXT NOT NULL,
  attempt ${int} NOT NULL,
  principal TEXT NOT NULL,
  outcome TEXT NOT NULL,
  causation TEXT NOT NULL,
  version ${int},
  at TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS contextual_outcomes_at_key ON contextual_outcomes (at, key);
CREATE INDEX IF NOT EXISTS contextual_outcomes_version ON contextual_outcomes (version) WHERE version IS NOT NULL;
`
}

export interface ContextualMeta {
  databaseId: string
  incarnation: number
  sealKey: string
}

export interface ConsumerRow {
  id: string
  defHash: string
  operation: string
  subscriptionPath: string
  params: string
  name: string
  owner: string
  /** JSON { leaseMs, maxInFlight, maxAttempts }: the definition's limits when the consumer was made. */
  limits: string
  cursor: number
  createdAt: string
}

export interface EventFilter {
  nodeTypes: readonly string[]
  kinds: readonly MeshChangeKind[]
  /** A path and everything under it. */
  prefix: string
}

export interface LeasedEvent {
  eventId: string
  version: number
  path: string
  nodeType: string
  kind: MeshChangeKind
  attempt: number
  token: string
  expiresAt: number
  /**
   * [CTX61] [CTX70] The causation record of the reaction whose commit the event is, read with the
   * lease (PostgreSQL: in its statement; SQLite: a statement of its transaction, no call more);
   * null or absent: a commit no reaction made.
   */
  causation?: string | null
}

/** Evidence of a work item: every ack, nack, extend and react is fenced by it. */
export interface Fence {
  consumerId: string
  eventId: string
  token: string
  attempt: number
  now: number
}

/** What storage knows of a consumer's status (the service adds its identity and lag). */
export type ConsumerStatus = Omit<ContextualStatus, 'consumerId' | 'subscription' | 'name' | 'lag' | 'current' | 'definitionHash' | 'createdAt'>

/** [OPS6] Every consumer's events together, for `/metrics`: how many wait, are leased, are dead letters; the largest lag. */
export interface ContextualTotals {
  consumers: number
  pending: number
  leased: number
  dead: number
  /** The change-log head minus the furthest-behind consumer's cursor (0: none behind). */
  maxLag: number
}

/**
 * [OPS10] What an operator acts on, for the operator's page: the newest dead letters of every
 * consumer, and the consumers furthest behind the change-log head.
 */
export interface ContextualAttention {
  headVersion: number
  deadLetters: Array<{ consumerId: string; subscriptionPath: string; name: string; eventId: string; path: string; attempt: number; lastError: string | null; diedAt: string | null }>
  /** `oldest`: the version of its oldest waiting event (the order of the list). */
  lagging: Array<{ consumerId: string; subscriptionPath: string; name: string; cursor: number; lag: number; waiting: number; oldest: number }>
}

/**
 * [OPS14] A consumer behind the change-log head with nothing waiting in its events: either idle
 * (nothing after its cursor is its event) or its worker stopped pulling with matching changes
 * never ingested. The service tells which with `unread` and its definition's filter.
 */
export interface QuietConsumer {
  consumerId: string
  subscriptionPath: string
  name: string
  cursor: number
  defHash: string
  owner: string
  createdAt: string
}

/** [OPS14] The changes after a cursor a pull would ingest, in one bounded page: how many, and the first's version. */
export interface UnreadEvents {
  count: number
  oldest: number | null
}

/** What decides whether a change becomes one of a consumer's events (a lease's ingest, and [OPS14] the overview's count of unread ones). */
export type IngestRule = Pick<LeaseCall, 'filter' | 'readable' | 'subjects'>

/** [CTX25] The durable truth of one event's lease. */
export interface LeaseTruth {
  state: string
  attempt: number
  token: string | null
  expiresAt: number
  path: string
  kind: MeshChangeKind
  version: number
}

/** [CTX24] [CTX27] What `react` checks before a new commit, read in one statement. */
export interface ReactTruth {
  /** The reaction's persisted outcome: a repeat resolves it. */
  outcome: OutcomeRow | null
  consumer: ConsumerRow | null
  lease: LeaseTruth | null
}

export interface OutcomeRow {
  key: string
  consumerId: string
  eventId: string
  reaction: string
  attempt: number
  principal: string
  outcome: string
  causation: string
  version: number | null
  at: string
}

/** [CTX26] Carried by a node commit: the reaction's outcome, written in the same transaction after the lease is re-checked. */
export interface ContextualAttachment {
  fence: Fence
  outcome: Omit<OutcomeRow, 'version'>
  /**
   * [CTX25] The event's source row, which must still be the one the event was about when the
   * outcome commits: stored, and neither deleted nor created again after the event's version
   * (absent for a deletion event).
   */
  source?: { path: string; version: number }
  /**
   * [CTX47] The work item is settled (acked) in the same transaction as the outcome: the reaction
   * was the item's last word, so a crash can no longer fall between the two.
   */
  settle?: boolean
  /**
   * [CTX50] A step of the reaction's command before its last commit: checked exactly as an outcome
   * (the lease held, the source row stored, no outcome yet) but nothing is inserted or settled. A
   * command that commits more than once (a thread post, a delete of a subtree) fences each of its
   * commits so and carries the outcome on its last: a denial at any step commits nothing more.
   */
  fenceOnly?: boolean
  /**
   * [CTX50] Shared by the attachments of one reaction's commits: set once a commit of the command
   * deleted the event's source row (a delete of a subtree holding it), after which its later
   * commits are not refused for the row being gone: the command itself removed it.
   */
  sourceGone?: { value: boolean }
}

/** [CTX6] A pull's lease, as `owner`: a consumer that is missing or not theirs answers `gone`. */
export interface LeaseCall {
  op: 'lease'
  consumerId: string
  owner: string
  filter: EventFilter
  now: number
  leaseMs: number
  maxInFlight: number
  maxAttempts: number
  token: string
  /**
   * [CTX8] The owner's readable regions within the filter's prefix: a change outside them is not
   * ingested (never delivered, counted nowhere). Absent: every change the filter matches.
   */
  readable?: readonly PathRange[]
  /**
   * [CTX54] The owner and their groups: a change withheld from one of them ([FEED5]: a Denied
   * over it has ended since) is not ingested, though its path is readable now.
   */
  subjects?: readonly string[]
}


/** Whether `path` lies in one of `regions` (`from <= path < to`, bytewise). */
export function inRegions(regions: readonly PathRange[], path: string): boolean {
  return regions.some((r) => r.from <= path && path < r.to)
}

/** What a lease answers, with the history incarnation it ran under (a restore bumps it: [CTX37]). */
/** `full`: MaxInFlight leases held; `nextAt` when the first of them ends. */
/** `none` with `behind`: the scan stopped at its page budget with more of the log unread (pull again at once). */
export type LeaseAnswer = { kind: 'leased'; event: LeasedEvent } | { kind: 'none'; nextAt: number | null; behind?: boolean } | { kind: 'full'; nextAt: number | null } | { kind: 'gone' }
export type LeaseResult = LeaseAnswer & { incarnation: number }

export type ContextualCall =
  | { op: 'meta'; fresh: ContextualMeta }
  /** Made unless the owner has `most` consumers already (then: the row if it exists, else null). */
  /**
   * [CTX56] `continues`: a consumer made now continues the newest earlier one of its owner, path,
   * operation, parameters and name made since `since` (the subscription node's creation), taking
   * its cursor; [CTX69] those of its pending events `filter` (the definition's now) asks for follow
   * in `carryOver` batches.
   */
  | { op: 'ensureConsumer'; consumer: ConsumerRow; most: number; continues?: { since: string; filter: EventFilter } }
  /**
   * [CTX69] One batch of a continuing consumer's takeover of its predecessor's pending events
   * (versions after `after`, at most `limit` of them), its own transaction.
   */
  | CarryCall
  /** [CTX46] The consumer and its events (its outcomes, the causation records, are kept). */
  | { op: 'deleteConsumer'; id: string }
  | { op: 'consumer'; id: string }
  | { op: 'consumersOf'; subscriptionPath: string; owner: string | null; limit: number }
  /** [CTX49] One owner's consumers over every subscription, by id after `after`, and how many they have in all. */
  | { op: 'consumersOfOwner'; owner: string; after: string; limit: number }
  /** [CTX49] The path a consumer was last pulled from (its id does not hold the path: a subscription node moved keeps its consumers). */
  | { op: 'consumerPath'; id: string; path: string }
  | LeaseCall
  | { op: 'skip'; fence: Fence }
  | { op: 'ack'; fence: Fence; owner: string }
  /** [CTX60] The event was acked under exactly this lease (token and attempt), `owner`'s consumer. */
  | { op: 'ackedUnder'; fence: Fence; owner: string }
  | { op: 'nack'; fence: Fence; owner: string; availableAt: number; error: string; maxAttempts: number }
  | { op: 'extend'; fence: Fence; owner: string; expiresAt: number }
  /** [CTX53] A lease nobody was handed (its pull ended first) given back: due now, its attempt not spent. */
  | { op: 'release'; fence: Fence; owner: string }
  | { op: 'status'; consumerId: string; now: number }
  | { op: 'totals'; now: number }
  | { op: 'attention'; limit: number; now: number }
  /** [OPS14] Consumers behind the head with nothing waiting, the furthest behind first (at most `limit`). */
  | { op: 'quietConsumers'; limit: number; now: number }
  /** [OPS14] The changes after `after` the rule ingests, among the next `limit` change records only. */
  | ({ op: 'unread'; after: number; limit: number } & IngestRule)
  /**
   * [CTX56] `into`: the consumer of the current definition that continues a stale one (same
   * owner): the re-driven events move there when it exists, where its worker pulls them.
   */
  | RedriveCall
  | { op: 'outcome'; key: string }
  | { op: 'recordOutcome'; attachment: ContextualAttachment }
  | { op: 'reactTruth'; key: string; consumerId: string; eventId: string }
  /** [CTX45] Up to `limit` ids (in order, after `after`) of consumers with events settled before `settledBefore`, for the sweep. */
  | { op: 'consumerIds'; after: string; limit: number; settledBefore: number }
  /** [CTX45] Up to `limit` of the consumer's events settled (acked, skipped) before `before`, deleted; answers how many. */
  | { op: 'prune'; consumerId: string; before: number; limit: number }
  /**
   * [CTX51] Up to `limit` outcome rows recorded before `before` (ISO), after `after` in (at, key)
   * order, whose event no consumer row still holds open, deleted; answers how many and the last
   * deleted (where the next batch starts: the kept rows before it are not walked again).
   */
  | { op: 'pruneOutcomes'; before: string; limit: number; after: { at: string; key: string } | null }

/**
 * [CTX11] [CTX66] [CTX68] One batch of a re-drive: the consumer's dead letters with a version after
 * `after`, at most `limit` of them (or only `eventId`'s), pending again in one transaction. The
 * service runs batches until one comes back short, so no transaction grows with the dead letters.
 * [CTX56] `into`: the consumer of the current definition that continues a stale one (same owner):
 * the re-driven events of the batch's versions, and the stale one's pending events among them, move
 * there when it exists, where its worker pulls them.
 */
export interface RedriveCall {
  op: 'redrive'
  consumerId: string
  eventId?: string
  after: number
  limit: number
  into?: { id: string; owner: string; filter: EventFilter }
}

/**
 * [CTX56] [CTX69] One batch of a takeover: the consumer `consumerId` continues the newest earlier
 * consumer of its owner, path, Operation, parameters and name made since `since` (made before it);
 * that one's pending events of versions after `after` (at most `limit`) that `filter` asks for
 * move to it. The service runs batches until one comes back short (`last` null), as a re-drive.
 */
export interface CarryCall {
  op: 'carryOver'
  consumerId: string
  since: string
  filter: EventFilter
  after: number
  limit: number
}

/** What a takeover batch did: how many events moved; `last`, the version the next batch starts after (null: nothing more). */
export interface CarryBatch {
  moved: number
  last: number | null
}

/**
 * What a batch did: how many letters went back to pending; `last`, the version the next batch
 * starts after (null: nothing more); `state`, with `eventId` and nothing re-driven, that event's
 * state in the consumer (null: it has no such event).
 */
export interface RedriveBatch {
  redriven: number
  last: number | null
  state?: string | null
}

/** A statement yielded to the driver: `all` answers rows, `run` the count of changed rows. */
export type Stmt = { sql: string; params: unknown[]; mode: 'all' | 'run' }
export type Row = Record<string, unknown>
export type Op<T> = Generator<Stmt, T, Row[] | number>

function* all(sql: string, ...params: unknown[]): Generator<Stmt, Row[], Row[] | number> {
  return (yield { sql, params, mode: 'all' }) as Row[]
}
function* run(sql: string, ...params: unknown[]): Generator<Stmt, number, Row[] | number> {
  return (yield { sql, params, mode: 'run' }) as number
}

export const num = (v: unknown): number => (v === null || v === undefined ? 0 : Number(v))
/** [CTX65] When a dead letter died (ISO), null for one that died before the time was kept. */
const diedAtOf = (r: Row): string | null => (r.died_at === null || r.died_at === undefined ? null : new Date(num(r.died_at)).toISOString())
/** How many change records one lease reads at most while looking for matching events. */
/** One page of the change log after a version: what a pull's ingest reads, and [OPS14] the overview's count of unread events. */
const CHANGE_PAGE = 'SELECT version, path, node_type, kind, withheld FROM changes WHERE version > ? ORDER BY version LIMIT ?'

export const INGEST_PAGE = 500
export const INGEST_PAGES = 8

/**
 * Does a pull ingest the change (a `changes` row: path, node_type, kind, withheld) as the
 * consumer's event? The one rule for SQLite's ingest (PostgreSQL's INGEST_SQL states it in SQL)
 * and for [OPS14] the overview's count of a stopped worker's unread events.
 */
export function ingests(c: IngestRule, r: Row): boolean {
  return matches(c.filter, r) && (!c.readable || inRegions(c.readable, String(r.path))) && !(c.subjects && withheldFrom(withheldOf(r.withheld as string | null).withheld, c.subjects))
}

/** Is the change (a `changes` row: path, node_type, kind) one the filter asks for? */
export function matches(f: Readonly<EventFilter>, r: Row): boolean {
  const path = String(r.path)
  return (
    f.nodeTypes.includes(String(r.node_type)) &&
    (f.kinds as readonly string[]).includes(String(r.kind)) &&
    (path === f.prefix || path.startsWith(f.prefix.endsWith('/') ? f.prefix : `${f.prefix}/`))
  )
}

function* lockConsumer(consumerId: string, dialect: Dialect): Generator<Stmt, Row | null, Row[] | number> {
  const rows = yield* all(`SELECT id, cursor, owner FROM contextual_consumers WHERE id = ?${dialect === 'postgres' ? ' FOR UPDATE' : ''}`, consumerId)
  return rows[0] ?? null
}

/** The history incarnation now (0 before the meta row exists). */
export const INCARNATION_SQL = 'SELECT coalesce((SELECT incarnation FROM contextual_meta WHERE id = 1), 0) AS inc'

function* lease(c: LeaseCall, dialect: Dialect): Op<LeaseResult> {
  const incarnation = num((yield* all(INCARNATION_SQL))[0]?.inc)
  return { ...(yield* leaseOnce(c, dialect)), incarnation }
}

/**
 * [CTX6] [CTX9] [CTX10] Leases at most one event: a due one (new, nacked and due, or whose lease
 * expired), else ingests from the change log. SQLite runs it; PostgreSQL runs the same steps as
 * the statements of contextual-pg-lease.ts (SKIP LOCKED, no consumer-wide lock but for ingest).
 */
function* leaseOnce(c: LeaseCall, dialect: Dialect): Op<LeaseAnswer> {
  const consumer = yield* lockConsumer(c.consumerId, dialect)
  if (!consumer || String(consumer.owner) !== c.owner) return { kind: 'gone' }
  let cursor = num(consumer.cursor)
  const inFlight = num((yield* all(`SELECT count(*) AS n FROM contextual_events WHERE consumer_id = ? AND state = 'leased' AND expires_at > ?`, c.consumerId, c.now))[0]?.n)
  if (inFlight >= c.maxInFlight) return { kind: 'full', nextAt: nextAtOf((yield* all(FIRST_END_SQL, c.consumerId, c.now))[0]) }
  let behind = false
  for (let pages = 0; ; ) {
    const due = (yield* all(
      `SELECT event_id, version, path, node_type, kind, attempt FROM contextual_events WHERE consumer_id = ?
       AND ((state = 'pending' AND available_at <= ?) OR (state = 'leased' AND expires_at <= ?)) ORDER BY version LIMIT 1`,
      c.consumerId, c.now, c.now,
    ))[0]
    if (due) {
      const attempt = num(due.attempt)
      if (attempt >= c.maxAttempts) {
        // [CTX11] The last attempt's lease ran out: dead letter.
        // [CTX65] It died when its last lease ended (or now, had it no lease).
        yield* run(
          `UPDATE contextual_events SET state = 'dead', lease_token = NULL, last_error = coalesce(last_error, 'lease expired'), died_at = CASE WHEN state = 'leased' THEN expires_at ELSE ? END WHERE consumer_id = ? AND event_id = ?`,
          c.now, c.consumerId, due.event_id,
        )
        continue
      }
      const expiresAt = c.now + c.leaseMs
      yield* run(`UPDATE contextual_events SET state = 'leased', attempt = ?, lease_token = ?, expires_at = ? WHERE consumer_id = ? AND event_id = ?`, attempt + 1, c.token, expiresAt, c.consumerId, due.event_id)
      // [CTX61] [CTX70] Its causation record (the reaction whose commit it is), in this transaction:
      // a worker's pull makes one call, as on PostgreSQL (whose lease statement reads it).
      const caused = (yield* all('SELECT causation FROM contextual_outcomes WHERE version = ? LIMIT 1', num(due.version)))[0]
      return {
        kind: 'leased',
        event: {
          eventId: String(due.event_id), version: num(due.version), path: String(due.path), nodeType: String(due.node_type), kind: String(due.kind) as MeshChangeKind, attempt: attempt + 1, token: c.token, expiresAt,
          causation: caused ? String(caused.causation) : null,
        },
      }
    }
    if (pages++ >= INGEST_PAGES) {
      behind = true
      break
    }
    const changes = yield* all(CHANGE_PAGE, cursor, INGEST_PAGE)
    if (changes.length === 0) break
    for (const r of changes) {
      if (!ingests(c, r)) continue
      yield* run(
        `INSERT INTO contextual_events (consumer_id, event_id, version, path, node_type, kind, state, attempt, lease_token, expires_at, available_at, last_error)
         VALUES (?, ?, ?, ?, ?, ?, 'pending', 0, NULL, 0, 0, NULL) ON CONFLICT DO NOTHING`,
        c.consumerId, String(r.version), num(r.version), r.path, r.node_type, r.kind,
      )
    }
    cursor = num(changes[changes.length - 1]!.version)
    yield* run('UPDATE contextual_consumers SET cursor = ? WHERE id = ?', cursor, c.consumerId)
  }
  return { kind: 'none', nextAt: nextAtOf((yield* all(NEXT_AT_SQL, c.consumerId))[0]), ...(behind ? { behind } : {}) }
}

/** When the first live lease of a consumer ends (at its in-flight limit, the soonest it may lease again). */
export const FIRST_END_SQL = `SELECT min(expires_at) AS at FROM contextual_events WHERE consumer_id = ? AND state = 'leased' AND expires_at > ?`

/** When a consumer's next event may become due (a nack's delay or a lease ending), for a long poll. */
export const NEXT_AT_SQL = `SELECT min(CASE WHEN state = 'pending' THEN available_at ELSE expires_at END) AS at FROM contextual_events WHERE consumer_id = ? AND state IN ('pending', 'leased')`
export const nextAtOf = (r: Row | undefined): number | null => (r?.at === null || r?.at === undefined ? null : num(r.at))

/** [CTX12] [CTX45] [CTX47] A leased event settled as acked, stamped with when (the sweep deletes it a day later); its one parameter is that moment. */
/**
 * A settle by a reaction ([CTX47]); its token is cleared, as PostgreSQL's commit batch does
 * (postgres-adapter.ts): a repeat of that reaction answers it, an ack after it is stale.
 */
const ACK_SET = `UPDATE contextual_events SET state = 'acked', lease_token = NULL, available_at = ?`
/** [CTX60] An ack keeps the lease token on the acked row: a repeat of the same ack (its answer lost) is told it is settled. */
const ACK_KEEP = `UPDATE contextual_events SET state = 'acked', available_at = ?`
const FENCED = `consumer_id = ? AND event_id = ? AND state = 'leased' AND lease_token = ? AND attempt = ? AND expires_at > ?`
const fenceArgs = (f: Fence) => [f.consumerId, f.eventId, f.token, f.attempt, f.now]
/** [CTX5] [CTX12] The fence and the owner check in one statement: nobody but the consumer's owner settles its work. */
const OWNED = `${FENCED} AND EXISTS (SELECT 1 FROM contextual_consumers WHERE id = ? AND owner = ?)`
const ownedArgs = (f: Fence, owner: string) => [...fenceArgs(f), f.consumerId, owner]

function* nack(c: Extract<ContextualCall, { op: 'nack' }>): Op<'pending' | 'dead' | null> {
  const dead = c.fence.attempt >= c.maxAttempts
  const n = yield* run(
    `UPDATE contextual_events SET state = ?, lease_token = NULL, available_at = ?, last_error = ?, died_at = ? WHERE ${OWNED}`,
    dead ? 'dead' : 'pending', c.availableAt, c.error, dead ? c.fence.now : null, ...ownedArgs(c.fence, c.owner),
  )
  return n === 1 ? (dead ? 'dead' : 'pending') : null
}

function* status(c: Extract<ContextualCall, { op: 'status' }>): Op<ConsumerStatus | null> {
  // The consumer row and its counts in one statement (one snapshot: a sweep committing between two
  // reads would be counted in neither, and `acked` would dip).
  const counts = yield* all(
    `SELECT c.cursor, c.acked_pruned, e.s, e.n FROM contextual_consumers c LEFT JOIN (
       SELECT CASE WHEN state = 'leased' AND expires_at <= ? THEN 'pending' ELSE state END AS s, count(*) AS n FROM contextual_events WHERE consumer_id = ? GROUP BY 1
     ) e ON 1 = 1 WHERE c.id = ?`,
    c.now, c.consumerId, c.consumerId,
  )
  const consumer = counts[0]
  if (!consumer) return null
  const by = Object.fromEntries(counts.filter((r) => r.s !== null && r.s !== undefined).map((r) => [String(r.s), num(r.n)]))
  const head = num((yield* all('SELECT coalesce(max(version), 0) AS v FROM changes'))[0]?.v)
  const dead = yield* all(`SELECT event_id, path, kind, attempt, last_error, died_at FROM contextual_events WHERE consumer_id = ? AND state = 'dead' ORDER BY version LIMIT 20`, c.consumerId)
  return {
    pending: by.pending ?? 0,
    leased: by.leased ?? 0,
    // [CTX45] Acked events deleted by the sweep still count.
    acked: (by.acked ?? 0) + num(consumer.acked_pruned),
    dead: by.dead ?? 0,
    cursor: num(consumer.cursor),
    headVersion: head,
    deadLetters: dead.map((r) => ({ eventId: String(r.event_id), path: String(r.path), kind: String(r.kind), attempt: num(r.attempt), lastError: r.last_error === null ? null : String(r.last_error), diedAt: diedAtOf(r) })),
  }
}

/**
 * [CTX45] Deletes up to `limit` of a consumer's events settled before `before` (the
 * `contextual_events_state` index: consumer, state), counting the acked ones on the consumer row so
 * its status still tells them. What a settled event's row served is over: the cursor is past it
 * (never ingested again), its lease is void, and a repeated reaction resolves its outcome row,
 * which is kept (the causation record).
 */
function* prune(c: Extract<ContextualCall, { op: 'prune' }>, dialect: Dialect): Op<number> {
  // By the rows' physical ids: matched by key, SQLite's plan walked every settled row left for each
  // batch (a sweep quadratic in the rows). RETURNING: two instances sweeping at once each count
  // only the rows they deleted (PostgreSQL re-checks the condition on a row another deleted first).
  const id = dialect === 'postgres' ? 'ctid' : 'rowid'
  // The consumer row first, as every other writer of both (a delete of the consumer, an ingest):
  // in the other order a sweep and a delete deadlocked. Gone: nothing to sweep.
  if (!(yield* lockConsumer(c.consumerId, dialect))) return 0
  const gone = yield* all(
    `DELETE FROM contextual_events WHERE ${id} IN (
       SELECT ${id} FROM contextual_events WHERE consumer_id = ? AND state IN ('acked', 'skipped') AND available_at < ? LIMIT ?)
     AND consumer_id = ? AND state IN ('acked', 'skipped') AND available_at < ? RETURNING state`,
    c.consumerId, c.before, c.limit, c.consumerId, c.before,
  )
  const acked = gone.filter((r) => r.state === 'acked').length
  if (acked > 0) yield* run('UPDATE contextual_consumers SET acked_pruned = acked_pruned + ? WHERE id = ?', acked, c.consumerId)
  return gone.length
}

/** [CTX51] One batch of the outcome sweep (see the op): how many went, and the last in (at, key) order. */
function* pruneOutcomes(c: Extract<ContextualCall, { op: 'pruneOutcomes' }>, dialect: Dialect): Op<{ deleted: number; last: { at: string; key: string } | null }> {
  const gone = yield* all(
    `DELETE FROM contextual_outcomes WHERE key IN (
       SELECT o.key FROM contextual_outcomes o WHERE o.at < ? AND (o.at, o.key) > (?, ?)
         AND NOT EXISTS (SELECT 1 FROM contextual_events e WHERE e.consumer_id = o.consumer_id AND e.event_id = o.event_id AND e.state IN ('pending', 'leased', 'dead'))
       ORDER BY o.at, o.key LIMIT ?${dialect === 'postgres' ? ' FOR UPDATE OF o SKIP LOCKED' : ''})
     RETURNING at, key`,
    c.before, c.after?.at ?? '', c.after?.key ?? '', c.limit,
  )
  let last: { at: string; key: string } | null = null
  for (const r of gone) {
    const at = String(r.at)
    const key = String(r.key)
    if (!last || at > last.at || (at === last.at && key > last.key)) last = { at, key }
  }
  return { deleted: gone.length, last }
}

function* totals(now: number): Op<ContextualTotals> {
  const counts = yield* all(
    `SELECT CASE WHEN state = 'leased' AND expires_at <= ? THEN 'pending' ELSE state END AS s, count(*) AS n FROM contextual_events WHERE state IN ('pending', 'leased', 'dead') GROUP BY 1`,
    now,
  )
  const by = Object.fromEntries(counts.map((r) => [String(r.s), num(r.n)]))
  const c = (yield* all('SELECT count(*) AS n, coalesce(min(cursor), 0) AS m FROM contextual_consumers'))[0]
  const consumers = num(c?.n)
  const head = num((yield* all('SELECT coalesce(max(version), 0) AS v FROM changes'))[0]?.v)
  return { consumers, pending: by.pending ?? 0, leased: by.leased ?? 0, dead: by.dead ?? 0, maxLag: consumers > 0 ? Math.max(0, head - num(c?.m)) : 0 }
}

function* attention(limit: number, now: number): Op<ContextualAttention> {
  const head = num((yield* all('SELECT coalesce(max(version), 0) AS v FROM changes'))[0]?.v)
  const dead = yield* all(
    `SELECT e.consumer_id, c.subscription_path, c.name, e.event_id, e.path, e.attempt, e.last_error, e.died_at FROM contextual_events e JOIN contextual_consumers c ON c.id = e.consumer_id WHERE e.state = 'dead' ORDER BY e.version DESC LIMIT ?`,
    limit,
  )
  // [OPS12] Lagging is having events waiting (pending, or leased past their lease), the oldest
  // first: a consumer whose cursor is behind the head with nothing waiting is idle, not lagging
  // (the changes since its last pull are mostly not its events; those that are become pending at
  // its next pull). The condition repeats contextual_events_open's, so the partial index serves it.
  const behind = yield* all(
    `SELECT c.id, c.subscription_path, c.name, c.cursor, count(*) AS waiting, min(e.version) AS oldest FROM contextual_consumers c JOIN contextual_events e ON e.consumer_id = c.id
     WHERE e.state IN ('pending', 'leased') AND (e.state = 'pending' OR e.expires_at <= ?)
     GROUP BY c.id, c.subscription_path, c.name, c.cursor ORDER BY min(e.version), c.id LIMIT ?`,
    now, limit,
  )
  return {
    headVersion: head,
    deadLetters: dead.map((r) => ({
      consumerId: String(r.consumer_id), subscriptionPath: String(r.subscription_path), name: String(r.name), eventId: String(r.event_id),
      path: String(r.path), attempt: num(r.attempt), lastError: r.last_error === null ? null : String(r.last_error), diedAt: diedAtOf(r),
    })),
    lagging: behind.map((r) => ({ consumerId: String(r.id), subscriptionPath: String(r.subscription_path), name: String(r.name), cursor: num(r.cursor), lag: Math.max(0, head - num(r.cursor)), waiting: num(r.waiting), oldest: num(r.oldest) })),
  }
}

/** [OPS14] See the op: the condition on waiting events repeats attention's (contextual_events_open serves it). */
function* quietConsumers(limit: number, now: number): Op<QuietConsumer[]> {
  const rows = yield* all(
    `SELECT c.id, c.subscription_path, c.name, c.cursor, c.def_hash, c.owner, c.created_at FROM contextual_consumers c
     WHERE c.cursor < (SELECT coalesce(max(version), 0) FROM changes)
       AND NOT EXISTS (SELECT 1 FROM contextual_events e WHERE e.consumer_id = c.id AND e.state IN ('pending', 'leased') AND (e.state = 'pending' OR e.expires_at <= ?))
     ORDER BY c.cursor, c.id LIMIT ?`,
    now, limit,
  )
  return rows.map((r) => ({ consumerId: String(r.id), subscriptionPath: String(r.subscription_path), name: String(r.name), cursor: num(r.cursor), defHash: String(r.def_hash), owner: String(r.owner), createdAt: String(r.created_at) }))
}

const CONSUMER_COLUMNS = ['id', 'def_hash', 'operation', 'subscription_path', 'params', 'name', 'owner', 'limits', 'cursor', 'created_at'] as const
const OUTCOME_COLUMNS = ['key', 'consumer_id', 'event_id', 'reaction', 'attempt', 'principal', 'outcome', 'causation', 'version', 'at'] as const
const LEASE_COLUMNS = ['state', 'attempt', 'lease_token', 'expires_at', 'path', 'kind', 'version'] as const
/** `t.c AS t_c, ...`: a table's columns under a prefix, for one statement that reads several rows. */
const prefixed = (t: string, columns: readonly string[]) => columns.map((c) => `${t}.${c} AS ${t}_${c}`).join(', ')
/** The row's columns under `t_`, unprefixed; null when the joined row is absent (its `key` column null). */
function unprefix(r: Row, t: string, key: string): Row | null {
  if (r[`${t}_${key}`] === null || r[`${t}_${key}`] === undefined) return null
  const out: Row = {}
  for (const [k, v] of Object.entries(r)) if (k.startsWith(`${t}_`)) out[k.slice(t.length + 1)] = v
  return out
}

function* consumer(id: string): Op<ConsumerRow | null> {
  const r = (yield* all(`SELECT ${CONSUMER_COLUMNS.join(', ')} FROM contextual_consumers WHERE id = ?`, id))[0]
  return r ? toConsumer(r) : null
}

function toConsumer(r: Row): ConsumerRow {
  return {
    id: String(r.id), defHash: String(r.def_hash), operation: String(r.operation), subscriptionPath: String(r.subscription_path),
    params: String(r.params), name: String(r.name), owner: String(r.owner), limits: String(r.limits), cursor: num(r.cursor), createdAt: String(r.created_at),
  }
}

function toLease(r: Row): LeaseTruth {
  return {
    state: String(r.state), attempt: num(r.attempt), token: r.lease_token === null ? null : String(r.lease_token), expiresAt: num(r.expires_at),
    path: String(r.path), kind: String(r.kind) as MeshChangeKind, version: num(r.version),
  }
}

/** [CTX24] [CTX27] The outcome, the consumer and the lease `react` checks, in one statement (one round trip on PostgreSQL). */
function* reactTruth(key: string, consumerId: string, eventId: string): Op<ReactTruth> {
  const r = (yield* all(
    `SELECT ${prefixed('o', OUTCOME_COLUMNS)}, ${prefixed('c', CONSUMER_COLUMNS)}, ${prefixed('e', LEASE_COLUMNS)}
     FROM (SELECT 1 AS one) x
     LEFT JOIN contextual_outcomes o ON o.key = ?
     LEFT JOIN contextual_consumers c ON c.id = ?
     LEFT JOIN contextual_events e ON e.consumer_id = ? AND e.event_id = ?`,
    key, consumerId, consumerId, eventId,
  ))[0]!
  const o = unprefix(r, 'o', 'key')
  const c = unprefix(r, 'c', 'id')
  const e = unprefix(r, 'e', 'state')
  return { outcome: o ? toOutcome(o) : null, consumer: c ? toConsumer(c) : null, lease: e ? toLease(e) : null }
}

function toOutcome(r: Row): OutcomeRow {
  return {
    key: String(r.key),
    consumerId: String(r.consumer_id),
    eventId: String(r.event_id),
    reaction: String(r.reaction),
    attempt: num(r.attempt),
    principal: String(r.principal),
    outcome: String(r.outcome),
    causation: String(r.causation),
    version: r.version === null || r.version === undefined ? null : num(r.version),
    at: String(r.at),
  }
}

/** [CTX25] The source row is stored and was not deleted or created again after the event (`changes_path` index). */
const SOURCE_STORED = `path = ? AND NOT EXISTS (SELECT 1 FROM changes WHERE changes.path = ? AND changes.version > ? AND changes.kind IN ('Created', 'Deleted'))`
const sourceArgs = (s: { path: string; version: number }) => [s.path, s.path, s.version]
/** Why a commit carrying an outcome is refused (both storages, both statements alike). */
export const REFUSED = {
  lease: 'The lease of this work item is no longer held.',
  source: 'The source of this work item is gone.',
  done: 'This reaction already has an outcome.',
} as const
/** An outcome row's values, in OUTCOME_COLUMNS' order. */
const outcomeArgs = (o: ContextualAttachment['outcome'], version: number | null) => [o.key, o.consumerId, o.eventId, o.reaction, o.attempt, o.principal, o.outcome, o.causation, version, o.at]

/**
 * [CTX26] SQLite, inside the commit's transaction (the writer holds the database's write lock for
 * all of it): is the lease still the one the reaction was verified against, and no outcome yet?
 * PostgreSQL does the same in one statement (`attachOutcomePg`).
 */
export function* checkAttachment(a: ContextualAttachment): Op<string | null> {
  const held = (yield* all(`SELECT 1 AS ok FROM contextual_events WHERE ${FENCED}`, ...fenceArgs(a.fence)))[0]
  if (!held) return REFUSED.lease
  // [CTX25] In the same transaction: the row that caused the event is still there, the same one.
  if (a.source !== undefined && !(yield* all(`SELECT 1 AS ok FROM nodes WHERE ${SOURCE_STORED}`, ...sourceArgs(a.source)))[0]) return REFUSED.source
  const done = (yield* all('SELECT 1 AS ok FROM contextual_outcomes WHERE key = ?', a.outcome.key))[0]
  return done ? REFUSED.done : null
}

/** [CTX50] PostgreSQL: `checkAttachment` as one statement, the lease row locked FOR UPDATE (a step's fence, no outcome). */
function* fencePg(a: ContextualAttachment): Op<string | null> {
  const r = (yield* all(
    `WITH held AS (SELECT 1 AS ok FROM contextual_events WHERE ${FENCED} FOR UPDATE),
          src AS (SELECT 1 AS ok FROM nodes WHERE ${SOURCE_STORED})
     SELECT EXISTS (SELECT 1 FROM held) AS held, EXISTS (SELECT 1 FROM src) AS src, EXISTS (SELECT 1 FROM contextual_outcomes WHERE key = ?) AS done`,
    ...fenceArgs(a.fence), ...(a.source ? sourceArgs(a.source) : [null, null, null]), a.outcome.key,
  ))[0]!
  if (!r.held) return REFUSED.lease
  if (a.source !== undefined && !r.src) return REFUSED.source
  return r.done ? REFUSED.done : null
}

/**
 * [CTX25] [CTX26] PostgreSQL: `checkAttachment` and `insertOutcome` as one statement (one round
 * trip inside the commit's transaction, which holds the version counter every commit waits on):
 * the lease row locked FOR UPDATE, the outcome inserted only while the lease is held, none exists
 * and the source row is stored. The same refusals, in the same order. The outcome goes in without
 * a version: a commit that carries it sets the commit's in its own transaction.
 */
export function* attachOutcomePg(a: ContextualAttachment, settleHere = false): Op<string | null> {
  if (a.fenceOnly) return yield* fencePg(a)
  // [CTX47] An outcome recorded alone (no commit carries it) settles its item in this statement;
  // a commit's batch settles its items with the outcomes' versions (postgres-adapter.ts).
  const settle = settleHere && a.settle === true
  const r = (yield* all(
    `WITH held AS (SELECT 1 AS ok FROM contextual_events WHERE ${FENCED} FOR UPDATE),
          src AS (SELECT 1 AS ok FROM nodes WHERE ${SOURCE_STORED}),
          ins AS (
            INSERT INTO contextual_outcomes (${OUTCOME_COLUMNS.join(', ')})
            SELECT ?::text, ?::text, ?::text, ?::text, ?::bigint, ?::text, ?::text, ?::text, ?::bigint, ?::text
            WHERE EXISTS (SELECT 1 FROM held) AND (?::text IS NULL OR EXISTS (SELECT 1 FROM src))
            ON CONFLICT (key) DO NOTHING
            RETURNING 1 AS ok)${settle ? `,
          settled AS (${ACK_SET} WHERE ${FENCED} AND EXISTS (SELECT 1 FROM ins))` : ''}
     SELECT EXISTS (SELECT 1 FROM held) AS held, EXISTS (SELECT 1 FROM src) AS src, EXISTS (SELECT 1 FROM ins) AS ins`,
    ...fenceArgs(a.fence), ...(a.source ? sourceArgs(a.source) : [null, null, null]),
    ...outcomeArgs(a.outcome, null),
    a.source?.path ?? null,
    ...(settle ? [a.fence.now, ...fenceArgs(a.fence)] : []),
  ))[0]!
  if (!r.held) return REFUSED.lease
  if (a.source !== undefined && !r.src) return REFUSED.source
  return r.ins ? null : REFUSED.done
}

/** SQLite, after `checkAttachment` passed in the same transaction: the outcome, and [CTX47] the item settled when asked. */
export function* insertOutcome(a: ContextualAttachment, version: number | null): Op<void> {
  yield* run(`INSERT INTO contextual_outcomes (${OUTCOME_COLUMNS.join(', ')}) VALUES (${OUTCOME_COLUMNS.map(() => '?').join(', ')})`, ...outcomeArgs(a.outcome, version))
  if (a.settle) yield* run(`${ACK_SET} WHERE ${FENCED}`, a.fence.now, ...fenceArgs(a.fence))
}

/**
 * [CTX56] A consumer made for a changed definition continues its predecessor: the newest consumer
 * of the same owner, subscription path, Operation, canonical parameters and name (another
 * definition hash: the identity stays the seed's). The new one starts at the predecessor's cursor,
 * not the head, and takes over its pending events (ingested, not leased, no outcome recorded for
 * them): nothing committed between the two pulls is skipped. Leased events and dead letters stay
 * with the predecessor (its leases' tokens name the old definition; an Admin re-drives or deletes
 * it, marked stale).
 */
/** [CTX11] A consumer's dead letters of a range of versions due again, their attempts starting over. */
const REDRIVE = `UPDATE contextual_events SET state = 'pending', attempt = 0, available_at = 0, lease_token = NULL, died_at = NULL
  WHERE consumer_id = ? AND state = 'dead' AND version > ? AND version <= ?`

/** [CTX68] The versions a batch takes: dead letters (and, into a continuing consumer, pending events), by version after `after`. */
function* redriveBatch(c: RedriveCall, dialect: Dialect): Op<RedriveBatch> {
  const into = c.into
  let target: Row | null | undefined = null
  if (into) {
    // Both consumer rows locked first, as every writer of their events does (in one order: by id).
    const [a, b] = [c.consumerId, into.id].sort()
    yield* lockConsumer(a!, dialect)
    const locked = yield* lockConsumer(b!, dialect)
    target = locked && String(locked.id) === into.id ? locked : (yield* all('SELECT id, owner FROM contextual_consumers WHERE id = ?', into.id))[0]
  } else if (!(yield* lockConsumer(c.consumerId, dialect))) return { redriven: 0, last: null, ...(c.eventId !== undefined ? { state: null } : {}) }
  const states = into && c.eventId === undefined ? `state IN ('dead', 'pending')` : `state = 'dead'`
  const one = c.eventId !== undefined ? ' AND event_id = ?' : ''
  const rows = yield* all(
    `SELECT version FROM contextual_events WHERE consumer_id = ? AND ${states} AND version > ?${one} ORDER BY version LIMIT ?`,
    c.consumerId, c.after, ...(c.eventId !== undefined ? [c.eventId] : []), c.limit,
  )
  if (rows.length === 0) {
    if (c.eventId === undefined) return { redriven: 0, last: null }
    const r = (yield* all('SELECT state FROM contextual_events WHERE consumer_id = ? AND event_id = ?', c.consumerId, c.eventId))[0]
    return { redriven: 0, last: null, state: r ? String(r.state) : null }
  }
  const through = num(rows[rows.length - 1]!.version)
  const redriven = yield* run(`${REDRIVE}${one}`, c.consumerId, c.after, through, ...(c.eventId !== undefined ? [c.eventId] : []))
  // [CTX66] One letter moves alone (event ids are versions: one per consumer), not the stale one's pending events before it.
  const moveAfter = c.eventId !== undefined ? through - 1 : c.after
  if (into && target && String(target.owner) === into.owner) yield* moveEvents(c.consumerId, into.id, into.filter, { after: moveAfter, through })
  return { redriven, last: rows.length === c.limit ? through : null }
}

/** The fields of a consumer that name its predecessor (ConsumerRow's, or its stored row's). */
type Lineage = Pick<ConsumerRow, 'id' | 'owner' | 'subscriptionPath' | 'operation' | 'params' | 'name' | 'createdAt'>

/**
 * [CTX56] The consumer `c` continues: the newest other one of its owner, path, Operation,
 * parameters and name made since `since`, and made no later than `c` ([CTX69] a consumer resumed
 * after a later one, its definition changed back, does not continue that later one).
 */
function* predecessor(c: Lineage, since: string, dialect: Dialect, lock: boolean): Op<Row | null> {
  return (yield* all(
    `SELECT id, cursor FROM contextual_consumers WHERE owner = ? AND subscription_path = ? AND operation = ? AND params = ? AND name = ? AND id <> ? AND created_at >= ? AND created_at <= ?
     ORDER BY created_at DESC, id DESC LIMIT 1${lock && dialect === 'postgres' ? ' FOR UPDATE' : ''}`,
    c.owner, c.subscriptionPath, c.operation, c.params, c.name, c.id, since, c.createdAt,
  ))[0] ?? null
}

/** [CTX56] A consumer made now starts at its predecessor's cursor; its pending events follow in batches ([CTX69] `carryBatch`). */
function* carryOver(c: ConsumerRow, continues: { since: string; filter: EventFilter }, dialect: Dialect): Op<void> {
  const prior = yield* predecessor(c, continues.since, dialect, true)
  if (prior) yield* run('UPDATE contextual_consumers SET cursor = ? WHERE id = ?', num(prior.cursor), c.id)
}

/**
 * [CTX69] One batch of the takeover, its own transaction: the predecessor's pending events of
 * versions after `after`, at most `limit`, of which those the filter asks for (and the consumer
 * holds not) move in one statement. The move was one statement in the transaction that made the
 * consumer, which held both consumer rows (PostgreSQL) or SQLite's writer for every event. None
 * needs to move with the making: the events are at or before the cursor the consumer starts at
 * (it never ingests them itself), and the stale consumer is pulled by no worker of the definition
 * now. An event is in one consumer or the other at every commit, so a crash between batches loses
 * none and delivers none twice; the next pull that makes or first reads the consumer runs the
 * batches again from the start, moving what is left.
 */
function* carryBatch(c: CarryCall, dialect: Dialect): Op<CarryBatch> {
  const self = (yield* all('SELECT id, owner, subscription_path, operation, params, name, created_at FROM contextual_consumers WHERE id = ?', c.consumerId))[0]
  if (!self) return { moved: 0, last: null }
  const lineage: Lineage = {
    id: String(self.id), owner: String(self.owner), subscriptionPath: String(self.subscription_path), operation: String(self.operation),
    params: String(self.params), name: String(self.name), createdAt: String(self.created_at),
  }
  const prior = yield* predecessor(lineage, c.since, dialect, false)
  if (!prior) return { moved: 0, last: null }
  // Both consumer rows locked, as every writer of their events does (in one order, by id, as a
  // re-drive into this consumer: no deadlock); one deleted meanwhile, nothing moves.
  for (const id of [c.consumerId, String(prior.id)].sort()) if (!(yield* lockConsumer(id, dialect))) return { moved: 0, last: null }
  const rows = yield* all(`SELECT version FROM contextual_events WHERE consumer_id = ? AND state = 'pending' AND version > ? ORDER BY version LIMIT ?`, String(prior.id), c.after, c.limit)
  if (rows.length === 0) return { moved: 0, last: null }
  const through = num(rows[rows.length - 1]!.version)
  const moved = yield* moveEvents(String(prior.id), c.consumerId, c.filter, { after: c.after, through })
  return { moved, last: rows.length === c.limit ? through : null }
}

/**
 * [CTX56] A stale consumer's pending events (no outcome recorded for them under it: a repeat there
 * resolves it, a new consumer would commit again) move to the consumer that continues it, unless
 * that one holds the event already.
 */
function* moveEvents(from: string, to: string, filter: EventFilter, range?: { after: number; through: number }): Op<number> {
  if (filter.nodeTypes.length === 0 || filter.kinds.length === 0) return 0
  // One statement, whatever the count (a row at a time was a round trip each on PostgreSQL, in a
  // transaction holding both consumer rows). Only what the definition now asks for, `matches` in
  // SQL: an event of the old filter alone stays (stale, pending). The prefix is compared by
  // characters, as startsWith compares a well-formed string.
  const under = filter.prefix.endsWith('/') ? filter.prefix : `${filter.prefix}/`
  const list = (n: number) => Array.from({ length: n }, () => '?').join(', ')
  return yield* run(
    `UPDATE contextual_events AS e SET consumer_id = ? WHERE consumer_id = ? AND state = 'pending'${range ? ' AND version > ? AND version <= ?' : ''}
       AND node_type IN (${list(filter.nodeTypes.length)}) AND kind IN (${list(filter.kinds.length)}) AND (path = ? OR substr(path, 1, ?) = ?)
       AND NOT EXISTS (SELECT 1 FROM contextual_outcomes o WHERE o.consumer_id = ? AND o.event_id = e.event_id)
       AND NOT EXISTS (SELECT 1 FROM contextual_events t WHERE t.consumer_id = ? AND t.event_id = e.event_id)`,
    to, from, ...(range ? [range.after, range.through] : []), ...filter.nodeTypes, ...filter.kinds, filter.prefix, [...under].length, under, from, to,
  )
}

export function* contextualOp(call: ContextualCall, dialect: Dialect): Op<unknown> {
  switch (call.op) {
    case 'meta': {
      const row = (yield* all('SELECT database_id, incarnation, seal_key FROM contextual_meta WHERE id = 1'))[0]
      if (row) return { databaseId: String(row.database_id), incarnation: num(row.incarnation), sealKey: String(row.seal_key) } satisfies ContextualMeta
      yield* run('INSERT INTO contextual_meta (id, database_id, incarnation, seal_key) VALUES (1, ?, ?, ?) ON CONFLICT DO NOTHING', call.fresh.databaseId, call.fresh.incarnation, call.fresh.sealKey)
      return yield* contextualOp({ op: 'meta', fresh: call.fresh }, dialect)
    }
    case 'ensureConsumer': {
      const c = call.consumer
      // [CTX46] Not past the owner's bound. On PostgreSQL the owner's makes are one at a time (each
      // counted under its own snapshot, concurrent ones passed the bound together).
      if (dialect === 'postgres') yield* all('SELECT pg_advisory_xact_lock(hashtext(?)) AS ok', `weft-consumers:${c.owner}`)
      const made = yield* run(
        `INSERT INTO contextual_consumers (${CONSUMER_COLUMNS.join(', ')}) SELECT ${CONSUMER_COLUMNS.map((col) => (col === 'cursor' ? 'CAST(? AS BIGINT)' : 'CAST(? AS TEXT)')).join(', ')}
         WHERE (SELECT count(*) FROM contextual_consumers WHERE owner = ?) < ? ON CONFLICT DO NOTHING`,
        c.id, c.defHash, c.operation, c.subscriptionPath, c.params, c.name, c.owner, c.limits, c.cursor, c.createdAt, c.owner, call.most,
      )
      if (made === 1 && call.continues) yield* carryOver(c, call.continues, dialect)
      return yield* consumer(c.id)
    }
    case 'deleteConsumer': {
      // The row first: a lease or an ingest under way holds or waits for it, and then finds it gone.
      const n = yield* run('DELETE FROM contextual_consumers WHERE id = ?', call.id)
      yield* run('DELETE FROM contextual_events WHERE consumer_id = ?', call.id)
      return n === 1
    }
    case 'consumer':
      return yield* consumer(call.id)
    case 'consumersOf': {
      const rows = call.owner === null
        ? yield* all('SELECT id FROM contextual_consumers WHERE subscription_path = ? ORDER BY created_at, id LIMIT ?', call.subscriptionPath, call.limit)
        : yield* all('SELECT id FROM contextual_consumers WHERE subscription_path = ? AND owner = ? ORDER BY created_at, id LIMIT ?', call.subscriptionPath, call.owner, call.limit)
      const out: ConsumerRow[] = []
      for (const r of rows) {
        const c = yield* consumer(String(r.id))
        if (c) out.push(c)
      }
      return out
    }
    case 'consumersOfOwner': {
      const rows = yield* all(`SELECT ${CONSUMER_COLUMNS.join(', ')} FROM contextual_consumers WHERE owner = ? AND id > ? ORDER BY id LIMIT ?`, call.owner, call.after, call.limit)
      const total = num((yield* all('SELECT count(*) AS n FROM contextual_consumers WHERE owner = ?', call.owner))[0]?.n)
      return { consumers: rows.map(toConsumer), total }
    }
    case 'consumerPath':
      return (yield* run('UPDATE contextual_consumers SET subscription_path = ? WHERE id = ?', call.path, call.id)) === 1
    case 'lease':
      return yield* lease(call, dialect)
    // [CTX45] A settled event's available_at is when it was settled (the sweep deletes it a day later).
    case 'skip':
      return (yield* run(`UPDATE contextual_events SET state = 'skipped', lease_token = NULL, available_at = ? WHERE ${FENCED}`, call.fence.now, ...fenceArgs(call.fence))) === 1
    case 'ack':
      return (yield* run(`${ACK_KEEP} WHERE ${OWNED}`, call.fence.now, ...ownedArgs(call.fence, call.owner))) === 1
    case 'ackedUnder':
      return (yield* all(
        `SELECT 1 AS ok FROM contextual_events WHERE consumer_id = ? AND event_id = ? AND state = 'acked' AND lease_token = ? AND attempt = ?
           AND EXISTS (SELECT 1 FROM contextual_consumers WHERE id = ? AND owner = ?)`,
        call.fence.consumerId, call.fence.eventId, call.fence.token, call.fence.attempt, call.fence.consumerId, call.owner,
      )).length === 1
    case 'nack':
      return yield* nack(call)
    case 'release':
      return (yield* run(`UPDATE contextual_events SET state = 'pending', attempt = attempt - 1, lease_token = NULL, available_at = ? WHERE ${OWNED}`, call.fence.now, ...ownedArgs(call.fence, call.owner))) === 1
    case 'extend':
      return (yield* run(`UPDATE contextual_events SET expires_at = ? WHERE ${OWNED}`, call.expiresAt, ...ownedArgs(call.fence, call.owner))) === 1
    case 'status':
      return yield* status(call)
    case 'totals':
      return yield* totals(call.now)
    case 'attention':
      return yield* attention(call.limit, call.now)
    case 'quietConsumers':
      return yield* quietConsumers(call.limit, call.now)
    case 'unread': {
      // [OPS14] One page of the log after the cursor, by version (the primary key): bounded rows
      // read whatever the history's size, as one page of a pull's ingest.
      const page = yield* all(CHANGE_PAGE, call.after, call.limit)
      const hits = page.filter((r) => ingests(call, r))
      return { count: hits.length, oldest: hits.length ? num(hits[0]!.version) : null } satisfies UnreadEvents
    }
    case 'redrive':
      return yield* redriveBatch(call, dialect)
    case 'carryOver':
      return yield* carryBatch(call, dialect)
    case 'outcome': {
      const r = (yield* all('SELECT * FROM contextual_outcomes WHERE key = ?', call.key))[0]
      return r ? toOutcome(r) : null
    }
    case 'recordOutcome': {
      // An outcome with no commit (a business rejection): on PostgreSQL the one statement.
      if (dialect === 'postgres') return yield* attachOutcomePg(call.attachment, true)
      const refusal = yield* checkAttachment(call.attachment)
      if (refusal) return refusal
      yield* insertOutcome(call.attachment, null)
      return null
    }
    case 'reactTruth':
      return yield* reactTruth(call.key, call.consumerId, call.eventId)
    case 'consumerIds':
      return (yield* all(
        `SELECT id FROM contextual_consumers c WHERE id > ?
           AND EXISTS (SELECT 1 FROM contextual_events e WHERE e.consumer_id = c.id AND e.state IN ('acked', 'skipped') AND e.available_at < ?)
         ORDER BY id LIMIT ?`,
        call.after, call.settledBefore, call.limit,
      )).map((r) => String(r.id))
    case 'prune':
      return yield* prune(call, dialect)
    case 'pruneOutcomes':
      // [CTX51] An outcome is a repeat's answer while its event may still be leased: kept while its
      // consumer's row of that event is pending, leased or dead (a re-drive leases it again). Once
      // that row is settled or gone (swept, or the consumer deleted: made again, it starts at the
      // head), no token can authorize a commit for it again, and the row is history only. Two
      // instances at once: each skips the rows the other is deleting (no lock waits, no deadlock).
      return yield* pruneOutcomes(call, dialect)
    default:
      call satisfies never
      return null
  }
}

/** Runs an op synchronously (SQLite, inside a transaction). */
export function runSync<T>(op: Op<T>, exec: (s: Stmt) => Row[] | number): T {
  let step = op.next(undefined as never)
  while (!step.done) step = op.next(exec(step.value))
  return step.value
}

/** Runs an op asynchronously (PostgreSQL, inside a transaction). */
export async function runAsync<T>(op: Op<T>, exec: (s: Stmt) => Promise<Row[] | number>): Promise<T> {
  let step = op.next(undefined as never)
  while (!step.done) step = op.next(await exec(step.value))
  return step.value
}

/**
 * A statement PostgreSQL keeps prepared on each pooled connection (parsed and planned once per
 * connection, not per call): the hot contextual statements.
 */
export function pgPrepared(sql: string, values: unknown[]): { name: string; text: string; values: unknown[] } {
  let name = PREPARED.get(sql)
  if (!name) PREPARED.set(sql, (name = `weft_ctx_${createHash('sha256').update(sql).digest('hex').slice(0, 16)}`))
  return { name, text: sql, values }
}
const PREPARED = new Map<string, string>()

/** `?` placeholders as PostgreSQL's `$n`. */
export function pgSql(sql: string): string {
  let i = 0
  return sql.replace(/\?/g, () => `$${++i}`)
}
