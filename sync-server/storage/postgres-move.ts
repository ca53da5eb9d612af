import type pg from 'pg'
import { WeftError, lastSegment, parentPath, type ChangeRecord, type NodePath } from '../../shared/index.js'
import { POSTGRES_MOVE_SCHEMA } from './move-schema.js'
import { descendantRange } from './query.js'
import { checkMoveBasis, movesOnBasis } from './commit-plan.js'
import { POSTGRES_WITHHOLD, withholdParams } from './feed-withhold.js'
import { TRASH_LIST_LIMIT, trashRowToEntry } from './sqlite-move.js'
import type { MoveInput, TrashEntry } from './types.js'

/** [SCALE18] [SCALE21] The digests (tombstoneDigest's, in SQL) of the tombstones at the paths $1. */
export const PG_TOMBSTONE_DIGESTS = `SELECT path, encode(sha256(state), 'hex') AS digest FROM node_tombstones WHERE path = ANY($1::text[])`

/** [MOVE2] Creates the move and trash tables (idempotent; run under the schema lock). */
export async function applyPostgresMoveSchema(client: pg.PoolClient): Promise<void> {
  await client.query(POSTGRES_MOVE_SCHEMA)
}

/**
 * [MOVE2] The move as statements of the caller's transaction. The version counter is locked
 * first, as a commit batch locks it: the two never deadlock, and versions stay in commit order.
 */
export async function postgresMoveSubtree(client: pg.PoolClient, input: MoveInput): Promise<ChangeRecord[]> {
  const { from, to } = input
  const counter = await client.query<{ value: string }>('SELECT value FROM version_counter WHERE id = 1 FOR UPDATE')
  let version = Number(counter.rows[0]?.value ?? 0)
  const [lo, hi] = descendantRange(from)
  const rows = (
    await client.query<{ path: string; node_type: string; version: string }>('SELECT path, node_type, version FROM nodes WHERE path = $1 OR (path >= $2 AND path < $3) ORDER BY path FOR UPDATE', [from, lo, hi])
  ).rows
  if (rows.length === 0 || rows[0]!.path !== from) throw new WeftError('not_found', `No node at ${from}.`)
  // [SCALE21] Several instances: the move was worked out on what storage held then.
  if (movesOnBasis(input)) {
    const arriving = rows.map((r) => `${to}${r.path.slice(from.length)}`)
    const there = input.arrivalsSeen
      ? (await client.query<{ path: string; digest: string }>(PG_TOMBSTONE_DIGESTS, [arriving])).rows
      : []
    checkMoveBasis(input, rows.map((r) => ({ path: r.path, version: Number(r.version) })), new Map(there.map((r) => [r.path, r.digest])), arriving)
  }
  const [tlo, thi] = descendantRange(to)
  const taken = await client.query('SELECT 1 FROM nodes WHERE path = $1 OR (path >= $2 AND path < $3) LIMIT 1', [to, tlo, thi])
  if ((taken.rowCount ?? 0) > 0) throw new WeftError('conflict', `A node already exists at ${to}.`)
  const out: ChangeRecord[] = []
  for (const row of rows) out.push({ version: ++version, path: row.path as NodePath, nodeType: row.node_type, kind: 'Deleted' })
  for (const row of rows) {
    const next = `${to}${row.path.slice(from.length)}` as NodePath
    const v = ++version
    await client.query('UPDATE nodes SET path = $1, parent = $2, last_segment = $3, version = $4 WHERE path = $5', [next, parentPath(next), lastSegment(next), v, row.path])
    await client.query('UPDATE node_updates SET path = $1 WHERE path = $2', [next, row.path])
    await client.query('UPDATE node_clients SET path = $1 WHERE path = $2', [next, row.path])
    out.push({ version: v, path: next, nodeType: row.node_type, kind: 'Created' })
  }
  await client.query('INSERT INTO changes (version, path, node_type, kind) SELECT * FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[])', [
    out.map((c) => c.version),
    out.map((c) => c.path),
    out.map((c) => c.nodeType),
    out.map((c) => c.kind),
  ])
  await client.query('UPDATE version_counter SET value = $1 WHERE id = 1', [version])
  // [FEED5] The Denied assignments carried away: their old scopes' records, the move's included.
  for (const w of input.withhold ?? []) await client.query(POSTGRES_WITHHOLD, withholdParams(w, version))
  // [TOMB1] A node arriving over a tombstone takes it into its log (a stale copy of the path's old
  // node adds nothing old to it); each node leaving a path leaves its own there.
  const arrived = out.filter((c) => c.kind === 'Created')
  const takes = arrived.filter((c) => input.arrivals?.has(c.path))
  await client.query(
    `WITH dropped AS (DELETE FROM node_tombstones WHERE path = ANY($1::text[])),
       logged AS (INSERT INTO node_updates (path, seq, data) SELECT * FROM unnest($2::text[], $3::bigint[], $4::bytea[]) RETURNING path)
     UPDATE nodes SET update_count = update_count + 1 WHERE path IN (SELECT path FROM logged)`,
    [
      arrived.map((c) => c.path),
      takes.map((c) => c.path),
      takes.map((c) => c.version),
      takes.map((c) => {
        const t = input.arrivals!.get(c.path)!
        return Buffer.from(t.buffer, t.byteOffset, t.byteLength)
      }),
    ],
  )
  if (input.tombstones?.length) {
    await client.query(
      `INSERT INTO node_tombstones (path, state, at) SELECT p, s, $3 FROM unnest($1::text[], $2::bytea[]) AS t(p, s)
       ON CONFLICT (path) DO UPDATE SET state = excluded.state, at = excluded.at`,
      [input.tombstones.map((t) => t.path), input.tombstones.map((t) => Buffer.from(t.state.buffer, t.state.byteOffset, t.state.byteLength)), input.at],
    )
  }
  if (input.redirect) {
    await client.query('INSERT INTO node_moves (path, moved_to, at) VALUES ($1, $2, $3) ON CONFLICT (path) DO UPDATE SET moved_to = $2, at = $3', [from, to, input.at])
  }
  if (input.trash) {
    await client.query(
      `INSERT INTO trash (path, original_path, name, node_type, deleted_by, deleted_at) SELECT $1, $2, name, node_type, $3, $4 FROM nodes WHERE path = $1
       ON CONFLICT (path) DO NOTHING`,
      [to, input.trash.originalPath, input.trash.deletedBy, input.at],
    )
  }
  if (input.restore) await client.query('DELETE FROM trash WHERE path = $1', [from])
  return out
}

export async function postgresMovedFrom(pool: pg.Pool, paths: readonly NodePath[]): Promise<{ from: NodePath; to: NodePath } | null> {
  if (paths.length === 0) return null
  const r = await pool.query<{ path: string; moved_to: string }>('SELECT path, moved_to FROM node_moves WHERE path = ANY($1::text[]) ORDER BY length(path) DESC LIMIT 1', [[...paths]])
  const row = r.rows[0]
  return row ? { from: row.path as NodePath, to: row.moved_to as NodePath } : null
}

export async function postgresListTrash(pool: pg.Pool, top: NodePath): Promise<TrashEntry[]> {
  const [lo, hi] = descendantRange(`${top}/_Trash`)
  const r = await pool.query(
    `SELECT t.path, t.original_path, n.name, t.node_type, t.deleted_by, t.deleted_at FROM trash t JOIN nodes n ON n.path = t.path
     WHERE t.path >= $1 AND t.path < $2 ORDER BY t.deleted_at DESC LIMIT $3`,
    [lo, hi, TRASH_LIST_LIMIT],
  )
  return r.rows.map(trashRowToEntry)
}

export async function postgresExpiredTrash(pool: pg.Pool, before: string, limit: number): Promise<NodePath[]> {
  const r = await pool.query<{ path: string }>('SELECT t.path FROM trash t JOIN nodes n ON n.path = t.path WHERE t.deleted_at < $1 ORDER BY t.deleted_at LIMIT $2', [before, limit])
  return r.rows.map((row) => row.path as NodePath)
}
