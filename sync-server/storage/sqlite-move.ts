import type Database from 'better-sqlite3'
import { WeftError } from '../../shared/errors.js'
import { lastSegment, parentPath } from '../../shared/path.js'
import type { ChangeRecord, MeshChangeKind, NodePath } from '../../shared/index.js'
import { SQLITE_MOVE_SCHEMA } from './move-schema.js'
import { descendantRange } from './query.js'
import { checkMoveBasis, movesOnBasis, tombstoneDigest } from './commit-plan.js'
import { SQLITE_WITHHOLD, withholdBinding, type WithholdBinding } from './feed-withhold.js'
import type { MoveInput, TrashEntry } from './types.js'

/** [MOVE2] Creates the move and trash tables (idempotent). */
export function applySqliteMoveSchema(db: Database.Database): void {
  db.exec(SQLITE_MOVE_SCHEMA)
}

/** The rows of a subtree (root first, then in path order). */
function subtreeRows(db: Database.Database, root: string): { path: string; node_type: string; version: number }[] {
  const [from, to] = descendantRange(root)
  return db
    .prepare<[string, string, string], { path: string; node_type: string; version: number }>('SELECT path, node_type, version FROM nodes WHERE path = ? OR (path >= ? AND path < ?) ORDER BY path')
    .all(root, from, to)
}

/**
 * [MOVE2] The move as statements of the caller's transaction (the writer runs it in one
 * `BEGIN IMMEDIATE`): rows, logs and bindings change path together, or not at all.
 */
export function sqliteMoveSubtree(db: Database.Database, input: MoveInput): ChangeRecord[] {
  const { from, to } = input
  const rows = subtreeRows(db, from)
  if (rows.length === 0 || rows[0]!.path !== from) throw new WeftError('not_found', `No node at ${from}.`)
  if (subtreeRows(db, to).length > 0) throw new WeftError('conflict', `A node already exists at ${to}.`)
  const moved = (p: string) => `${to}${p.slice(from.length)}`
  // [SCALE21] The move was worked out on what storage held then.
  if (movesOnBasis(input)) {
    const arriving = rows.map((r) => moved(r.path))
    const read = db.prepare<[string], { state: Buffer }>('SELECT state FROM node_tombstones WHERE path = ?')
    const there = new Map<string, string>()
    if (input.arrivalsSeen) for (const p of arriving) {
      const t = read.get(p)
      if (t) there.set(p, tombstoneDigest(t.state))
    }
    checkMoveBasis(input, rows, there, arriving)
  }
  const insertChange = db.prepare<[string, string, MeshChangeKind]>('INSERT INTO changes (path, node_type, kind) VALUES (?, ?, ?)')
  const moveRow = db.prepare<[string, string | null, string, number, string]>('UPDATE nodes SET path = ?, parent = ?, last_segment = ?, version = ? WHERE path = ?')
  const moveLog = db.prepare<[string, string]>('UPDATE node_updates SET path = ? WHERE path = ?')
  const moveClients = db.prepare<[string, string]>('UPDATE node_clients SET path = ? WHERE path = ?')
  // [TOMB1] A node arriving over a tombstone takes it into its log (a stale copy of the path's old
  // node adds nothing old to it); each node leaving a path leaves its own there.
  const takeTombstone = db.prepare<[string, number, Buffer]>('INSERT INTO node_updates (path, seq, data) VALUES (?, ?, ?)')
  const countTaken = db.prepare<[string]>('UPDATE nodes SET update_count = update_count + 1 WHERE path = ?')
  const dropTombstone = db.prepare<[string]>('DELETE FROM node_tombstones WHERE path = ?')
  const putTombstone = db.prepare<[string, Buffer, string]>(
    'INSERT INTO node_tombstones (path, state, at) VALUES (?, ?, ?) ON CONFLICT (path) DO UPDATE SET state = excluded.state, at = excluded.at',
  )
  const deleted: ChangeRecord[] = []
  const created: ChangeRecord[] = []
  for (const row of rows) {
    const v = Number(insertChange.run(row.path, row.node_type, 'Deleted').lastInsertRowid)
    deleted.push({ version: v, path: row.path as NodePath, nodeType: row.node_type, kind: 'Deleted' })
  }
  for (const row of rows) {
    const next = moved(row.path) as NodePath
    const v = Number(insertChange.run(next, row.node_type, 'Created').lastInsertRowid)
    moveRow.run(next, parentPath(next), lastSegment(next), v, row.path)
    moveLog.run(next, row.path)
    moveClients.run(next, row.path)
    const taken = input.arrivals?.get(next)
    if (taken) {
      takeTombstone.run(next, v, Buffer.from(taken.buffer, taken.byteOffset, taken.byteLength))
      countTaken.run(next)
    }
    dropTombstone.run(next)
    created.push({ version: v, path: next, nodeType: row.node_type, kind: 'Created' })
  }
  // [FEED5] The Denied assignments carried away: their old scopes' records, the move's included.
  if (input.withhold?.length) {
    const withhold = db.prepare<[WithholdBinding]>(SQLITE_WITHHOLD)
    const through = created.at(-1)?.version ?? 0
    for (const w of input.withhold) withhold.run(withholdBinding(w, through))
  }
  for (const t of input.tombstones ?? []) putTombstone.run(t.path, Buffer.from(t.state.buffer, t.state.byteOffset, t.state.byteLength), input.at)
  if (input.redirect) db.prepare<[string, string, string]>('INSERT OR REPLACE INTO node_moves (path, moved_to, at) VALUES (?, ?, ?)').run(from, to, input.at)
  if (input.trash) {
    db.prepare('INSERT OR REPLACE INTO trash (path, original_path, name, node_type, deleted_by, deleted_at) VALUES (?, ?, (SELECT name FROM nodes WHERE path = ?), ?, ?, ?)').run(
      to,
      input.trash.originalPath,
      to,
      rows[0]!.node_type,
      input.trash.deletedBy,
      input.at,
    )
  }
  if (input.restore) db.prepare<[string]>('DELETE FROM trash WHERE path = ?').run(from)
  return [...deleted, ...created]
}

export function sqliteMovedFrom(db: Database.Database, paths: readonly NodePath[]): { from: NodePath; to: NodePath } | null {
  if (paths.length === 0) return null
  const rows = db
    .prepare<string[], { path: string; moved_to: string }>(`SELECT path, moved_to FROM node_moves WHERE path IN (${paths.map(() => '?').join(',')})`)
    .all(...paths)
  const best = rows.sort((a, b) => b.path.length - a.path.length)[0]
  return best ? { from: best.path as NodePath, to: best.moved_to as NodePath } : null
}

interface TrashRow {
  path: string
  original_path: string
  name: string
  node_type: string
  deleted_by: string
  deleted_at: string
}

export const TRASH_LIST_LIMIT = 500

export function trashRowToEntry(r: TrashRow): TrashEntry {
  return {
    path: r.path as NodePath,
    originalPath: r.original_path as NodePath,
    name: r.name,
    nodeType: r.node_type,
    deletedBy: r.deleted_by,
    deletedAt: r.deleted_at,
  }
}

export function sqliteListTrash(db: Database.Database, top: NodePath): TrashEntry[] {
  const [from, to] = descendantRange(`${top}/_Trash`)
  return db
    .prepare<[string, string, number], TrashRow>(
      `SELECT t.path, t.original_path, n.name, t.node_type, t.deleted_by, t.deleted_at FROM trash t JOIN nodes n ON n.path = t.path
       WHERE t.path >= ? AND t.path < ? ORDER BY t.deleted_at DESC LIMIT ?`,
    )
    .all(from, to, TRASH_LIST_LIMIT)
    .map(trashRowToEntry)
}

export function sqliteExpiredTrash(db: Database.Database, before: string, limit: number): NodePath[] {
  return db
    .prepare<[string, number], { path: string }>('SELECT t.path FROM trash t JOIN nodes n ON n.path = t.path WHERE t.deleted_at < ? ORDER BY t.deleted_at LIMIT ?')
    .all(before, limit)
    .map((r) => r.path as NodePath)
}
