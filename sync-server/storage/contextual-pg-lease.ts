import pg from 'pg'
import { WeftError, type MeshChangeKind } from '../../shared/index.js'
import { INCARNATION_SQL, INGEST_PAGE, INGEST_PAGES, NEXT_AT_SQL, nextAtOf, num, pgPrepared, pgSql, type LeaseCall, type LeaseResult, type Row } from './contextual-store.js'

/**
 * [CTX6] [CTX9] [CTX10] [SCALE11] The PostgreSQL lease: the steps of contextual-store.ts's `lease`
 * (which SQLite runs) as single statements, each its own transaction, so a pull is one round trip
 * when an event is due, and pulls of one consumer from several workers or instances do not queue
 * on the consumer row:
 *  - the due event is taken `FOR UPDATE SKIP LOCKED` (a row another pull is leasing is passed
 *    over), in the statement that checks the owner, counts the live leases and reads the history
 *    incarnation;
 *  - MaxInFlight holds between concurrent pulls through slots: a lease takes a slot in
 *    0..MaxInFlight-1 that no leased row holds (a redelivery keeps its own) and no concurrent
 *    pull is taking: a pull takes its slot's transaction-scoped advisory lock with
 *    `pg_try_advisory_xact_lock`, so another pull passes over it, like SKIP LOCKED does for
 *    rows. (All picking the lowest free slot, eight workers on one consumer waited on each other's
 *    commits through the unique index, then failed and pulled again: 133 lost slots for 200
 *    pulls.) A unique index over the leased rows' slots still makes the second of two pulls that
 *    picked the same slot fail (one whose snapshot predates the other's commit); it then pulls
 *    again (and sees the first one's lease);
 *  - only ingest from the change log locks the consumer row (its cursor), for one statement.
 */

type Query = (sql: string, params: unknown[]) => Promise<Row[]>

/** The one statement of a pull when something may be due. Parameters: see `leaseArgs`. */
const LEASE_SQL = pgSql(`
WITH c AS (SELECT owner FROM contextual_consumers WHERE id = ?),
held AS (SELECT slot, expires_at FROM contextual_events WHERE consumer_id = ? AND state = 'leased'),
live AS (SELECT count(*) AS n FROM held WHERE expires_at > ?),
-- A lock is tried on free slots only, one at a time up to the first taken (a subquery inside CASE
-- is not made a join: a hash or merge anti-join would read the whole series and lock every free slot).
free AS (
  SELECT s FROM generate_series(0, ?::int - 1) AS s
  WHERE CASE WHEN EXISTS (SELECT 1 FROM held WHERE held.slot = s) THEN false ELSE pg_try_advisory_xact_lock(hashtext(?), s) END
  LIMIT 1
),
due AS (
  SELECT event_id, attempt, state, slot FROM contextual_events
  WHERE consumer_id = ? AND ((state = 'pending' AND available_at <= ?) OR (state = 'leased' AND expires_at <= ?))
    AND (SELECT owner FROM c) = ? AND (SELECT n FROM live) < ?
  ORDER BY version LIMIT 1 FOR UPDATE SKIP LOCKED
),
taken AS (
  SELECT d.event_id, d.attempt >= ?::int AS dead, CASE WHEN d.state = 'leased' AND d.slot IS NOT NULL THEN d.slot ELSE (SELECT s FROM free) END AS slot FROM due d
),
done AS (
  UPDATE contextual_events e SET
    state = CASE WHEN t.dead THEN 'dead' ELSE 'leased' END,
    attempt = CASE WHEN t.dead THEN e.attempt ELSE e.attempt + 1 END,
    lease_token = CASE WHEN t.dead THEN NULL ELSE ? END,
    expires_at = CASE WHEN t.dead THEN e.expires_at ELSE ?::bigint END,
    last_error = CASE WHEN t.dead THEN coalesce(e.last_error, 'lease expired') ELSE e.last_error END,
    -- [CTX65] It died when its last lease ended (or now, had it no lease: $3 is the pull's now).
    died_at = CASE WHEN NOT t.dead THEN e.died_at WHEN e.state = 'leased' THEN e.expires_at ELSE $3::bigint END,
    slot = CASE WHEN t.dead THEN NULL ELSE t.slot END
  FROM taken t
  WHERE e.consumer_id = ? AND e.event_id = (SELECT event_id FROM taken) AND (t.dead OR t.slot IS NOT NULL)
  RETURNING e.event_id, e.version, e.path, e.node_type, e.kind, e.state, e.attempt
)
SELECT (SELECT owner FROM c) AS owner, (SELECT n FROM live) AS live, (SELECT count(*) FROM due) AS due, (${INCARNATION_SQL}) AS inc,
  (SELECT min(expires_at) FROM held WHERE expires_at > ?) AS first_end, d.*,
  (SELECT o.causation FROM contextual_outcomes o WHERE o.version = d.version LIMIT 1) AS caused_by
FROM (SELECT 1) AS one LEFT JOIN done d ON true`)

const leaseArgs = (c: LeaseCall, expiresAt: number) => [
  c.consumerId, c.consumerId, c.now, c.maxInFlight, c.consumerId,
  c.consumerId, c.now, c.now, c.owner, c.maxInFlight,
  c.maxAttempts, c.token, expiresAt, c.consumerId, c.now,
]

/** One page of the change log into the consumer's events, the cursor moved past it, under the consumer row's lock. */
const INGEST_SQL = pgSql(`
WITH c AS (SELECT cursor FROM contextual_consumers WHERE id = ? AND owner = ? FOR UPDATE),
page AS (SELECT version, path, node_type, kind, withheld FROM changes WHERE version > (SELECT cursor FROM c) ORDER BY version LIMIT ?),
added AS (
  INSERT INTO contextual_events (consumer_id, event_id, version, path, node_type, kind, state, attempt, lease_token, expires_at, available_at, last_error)
  SELECT ?, version::text, version, path, node_type, kind, 'pending', 0, NULL, 0, 0, NULL FROM page
  WHERE node_type = ANY(?::text[]) AND kind = ANY(?::text[]) AND (path = ? OR left(path, length(?)) = ?)
    AND (?::boolean OR EXISTS (SELECT 1 FROM unnest(?::text[], ?::text[]) AS r(f, t) WHERE path COLLATE "C" >= r.f COLLATE "C" AND path COLLATE "C" < r.t COLLATE "C"))
    AND (withheld IS NULL OR NOT (string_to_array(withheld, chr(10)) && (?::text[] || '{*}'::text[])))
  ON CONFLICT DO NOTHING RETURNING 1
),
moved AS (UPDATE contextual_consumers SET cursor = GREATEST(cursor, (SELECT max(version) FROM page)) WHERE id = ? AND EXISTS (SELECT 1 FROM page) RETURNING cursor)
SELECT (SELECT count(*) FROM page) AS scanned, (SELECT count(*) FROM added) AS added, (SELECT count(*) FROM moved) AS moved`)

/** The slots of expired leases, freed (their events stay due and take a slot again when leased). */
const FREE_EXPIRED_SQL = pgSql(`UPDATE contextual_events SET slot = NULL WHERE consumer_id = ? AND state = 'leased' AND expires_at <= ? AND slot IS NOT NULL`)

/** How often a pull starts over after losing a slot to a concurrent one before it gives up. */
const SLOT_RETRIES = 50

export async function pgLease(pool: pg.Pool, c: LeaseCall): Promise<LeaseResult> {
  const q: Query = async (sql, params) => (await pool.query(pgPrepared(sql, params))).rows as Row[]
  let incarnation = 0
  let pages = 0
  let behind = false
  let lost = 0
  let freed = false
  let dueMayExist = true
  for (;;) {
    if (dueMayExist) {
      let r: Row
      try {
        r = (await q(LEASE_SQL, leaseArgs(c, c.now + c.leaseMs)))[0]!
      } catch (error) {
        // 23505: a concurrent pull took the same slot; 40P01: a deadlock. Either way: pull again.
        if (error instanceof pg.DatabaseError && (error.code === '23505' || error.code === '40P01') && ++lost < SLOT_RETRIES) continue
        if (error instanceof pg.DatabaseError && error.code === '23505') throw new WeftError('unavailable', 'Too many concurrent pulls of this consumer; pull again.')
        throw error
      }
      incarnation = num(r.inc)
      if (r.owner === null || String(r.owner) !== c.owner) return { kind: 'gone', incarnation }
      if (r.event_id !== null && r.event_id !== undefined) {
        if (String(r.state) === 'dead') continue // [CTX11] The last attempt's lease ran out: a dead letter; look again.
        return {
          kind: 'leased',
          incarnation,
          event: { eventId: String(r.event_id), version: num(r.version), path: String(r.path), nodeType: String(r.node_type), kind: String(r.kind) as MeshChangeKind, attempt: num(r.attempt), token: c.token, expiresAt: c.now + c.leaseMs, causation: r.caused_by === null || r.caused_by === undefined ? null : String(r.caused_by) },
        }
      }
      if (num(r.live) >= c.maxInFlight) return { kind: 'full', nextAt: nextAtOf({ at: r.first_end }), incarnation }
      if (num(r.due) > 0) {
        // Due, but every slot is held, some by expired leases: free those once and look again.
        if (freed) return { kind: 'none', nextAt: c.now + 1, incarnation } // taken meanwhile by concurrent pulls: look again shortly
        freed = true
        await q(FREE_EXPIRED_SQL, [c.consumerId, c.now])
        continue
      }
    }
    if (pages++ >= INGEST_PAGES) {
      behind = true
      break
    }
    const prefix = c.filter.prefix.endsWith('/') ? c.filter.prefix : `${c.filter.prefix}/`
    const regions = c.readable ?? []
    const g = (await q(INGEST_SQL, [
      c.consumerId, c.owner, INGEST_PAGE, c.consumerId, [...c.filter.nodeTypes], [...c.filter.kinds], c.filter.prefix, prefix, prefix,
      c.readable === undefined, regions.map((r) => r.from), regions.map((r) => r.to), [...(c.subjects ?? [])], c.consumerId,
    ]))[0]!
    if (num(g.scanned) === 0) break
    // A page with nothing of ours: read the next one without looking for due events again.
    dueMayExist = num(g.added) > 0
  }
  if (incarnation === 0) incarnation = num((await q(INCARNATION_SQL, []))[0]?.inc)
  return { kind: 'none', nextAt: nextAtOf((await q(pgSql(NEXT_AT_SQL), [c.consumerId]))[0]), incarnation, ...(behind ? { behind } : {}) }
}
