/**
 * [BAK2] The tables a backup carries, column by column, with a portable value per column kind so
 * one file restores into SQLite or PostgreSQL whichever wrote it:
 *
 *   text / text?   a string (or null)
 *   int / int?     a number (versions, clocks and counters stay below 2^53)
 *   bytes / bytes? base64 (or null)
 *   json           the JSON text as stored (PostgreSQL's jsonb is read as ::text)
 *   bool           0 or 1 (SQLite INTEGER, PostgreSQL boolean)
 *
 * Not carried: the search index (rebuilt by triggers as rows go in), `engine_leases` and the
 * holder locks (run-time ownership, never history), the contextual seal key (a restore makes a
 * new one) and the version counter (the header's `headVersion`).
 */
export type ColumnKind = 'text' | 'text?' | 'int' | 'int?' | 'bytes' | 'bytes?' | 'json' | 'bool'
export type Dialect = 'sqlite' | 'postgres'
export type PortableValue = string | number | null
export type PortableRow = PortableValue[]
export type DbRow = Record<string, unknown>

export interface TableSpec {
  readonly name: string
  readonly columns: readonly (readonly [string, ColumnKind])[]
  /** The primary key, the order a backup reads in (keyset pages). */
  readonly key: readonly string[]
  /** The values of the last columns, added after files were written without them: an older file's rows get these. */
  readonly added?: readonly PortableValue[]
}

const spec = (name: string, key: readonly string[], columns: readonly (readonly [string, ColumnKind])[], added?: readonly PortableValue[]): TableSpec => ({
  name,
  key,
  columns,
  ...(added ? { added } : {}),
})

/** A row of an older file, its columns added since given their values (any other row as it is). */
export function withAdded(t: TableSpec, r: unknown): unknown {
  if (!t.added || !Array.isArray(r)) return r
  const missing = t.columns.length - r.length
  return missing > 0 && missing <= t.added.length ? [...(r as PortableValue[]), ...t.added.slice(t.added.length - missing)] : r
}

export const NODES = spec('nodes', ['path'], [
  ['path', 'text'], ['node_type', 'text'], ['name', 'text'], ['parent', 'text?'], ['last_segment', 'text'], ['content', 'json'],
  ['created_by', 'text'], ['created_at', 'text'], ['updated_at', 'text'], ['version', 'int'], ['state', 'text'], ['snapshot', 'bytes?'],
  ['update_count', 'int'], ['content_stale', 'bool'],
])
export const NODE_UPDATES = spec('node_updates', ['path', 'seq'], [['path', 'text'], ['seq', 'int'], ['data', 'bytes?']])
export const NODE_CLIENTS = spec('node_clients', ['path', 'client'], [['path', 'text'], ['client', 'int'], ['principal', 'text']])

/** Tables replaced whole by a restore, in the order a backup writes them. */
export const PLAIN_TABLES: readonly TableSpec[] = [
  spec('accounts', ['user_id'], [['user_id', 'text'], ['email', 'text'], ['password_hash', 'text'], ['created_at', 'text']]),
  spec('tokens', ['hash'], [['hash', 'text'], ['user_id', 'text'], ['expires_at', 'text']]),
  spec('node_moves', ['path'], [['path', 'text'], ['moved_to', 'text'], ['at', 'text']]),
  spec('trash', ['path'], [['path', 'text'], ['original_path', 'text'], ['name', 'text'], ['node_type', 'text'], ['deleted_by', 'text'], ['deleted_at', 'text']]),
  // [TOMB1] What deleted and moved-away nodes left at their paths (a restore merges the target's in).
  spec('node_tombstones', ['path'], [['path', 'text'], ['state', 'bytes'], ['at', 'text']]),
  // [FEED5] Whom each record is withheld from (null in a file written before it: from nobody).
  // [FEED8] Where a Denied began standing (null in a file written before it: no mark, every record up to its end withheld).
  spec('changes', ['version'], [['version', 'int'], ['path', 'text'], ['node_type', 'text'], ['kind', 'text'], ['withheld', 'text?'], ['denied_from', 'text?']], [null, null]),
  spec('contextual_consumers', ['id'], [
    ['id', 'text'], ['def_hash', 'text'], ['operation', 'text'], ['subscription_path', 'text'], ['params', 'text'], ['name', 'text'],
    ['owner', 'text'], ['limits', 'text'], ['cursor', 'int'], ['created_at', 'text'],
    // [CTX45] Acked events the sweep deleted (0 in a file written before it).
    ['acked_pruned', 'int'],
  ], [0]),
  spec('contextual_events', ['consumer_id', 'event_id'], [
    ['consumer_id', 'text'], ['event_id', 'text'], ['version', 'int'], ['path', 'text'], ['node_type', 'text'], ['kind', 'text'], ['state', 'text'],
    ['attempt', 'int'], ['lease_token', 'text?'], ['expires_at', 'int'], ['available_at', 'int'], ['last_error', 'text?'],
    // [CTX65] When a dead letter died (null in a file written before it: unknown).
    ['died_at', 'int?'],
  ], [null]),
  spec('contextual_outcomes', ['key'], [
    ['key', 'text'], ['consumer_id', 'text'], ['event_id', 'text'], ['reaction', 'text'], ['attempt', 'int'], ['principal', 'text'],
    ['outcome', 'text'], ['causation', 'text'], ['version', 'int?'], ['at', 'text'],
  ]),
]

/** Every count a header carries. */
export const COUNTED_TABLES: readonly string[] = [...PLAIN_TABLES.map((t) => t.name), NODES.name, NODE_UPDATES.name, NODE_CLIENTS.name]

export const q = (name: string) => `"${name}"`

/** The SELECT list of a table: jsonb read as its text. */
export function selectList(t: TableSpec, d: Dialect): string {
  return t.columns.map(([c, k]) => (k === 'json' && d === 'postgres' ? `${q(c)}::text AS ${q(c)}` : q(c))).join(', ')
}

export function toPortable(kind: ColumnKind, v: unknown): PortableValue {
  if (v === null || v === undefined) return kind.endsWith('?') ? null : kind === 'bool' ? 0 : null
  switch (kind) {
    case 'text':
    case 'text?':
      return String(v)
    case 'int':
    case 'int?':
      return Number(v)
    case 'bytes':
    case 'bytes?':
      return Buffer.from(v as Uint8Array).toString('base64')
    case 'json':
      return typeof v === 'string' ? v : JSON.stringify(v)
    case 'bool':
      return v === true || v === 1 || v === '1' || v === 't' ? 1 : 0
    default:
      kind satisfies never
      return null
  }
}

export function rowToPortable(t: TableSpec, r: DbRow): PortableRow {
  return t.columns.map(([c, k]) => toPortable(k, r[c]))
}

/** A portable value as a statement parameter of the dialect. */
export function toParam(kind: ColumnKind, v: PortableValue, d: Dialect): unknown {
  if (v === null) return null
  if (kind === 'bytes' || kind === 'bytes?') return Buffer.from(String(v), 'base64')
  if (kind === 'bool') return d === 'postgres' ? v === 1 : v
  return v
}

/** Whether a value read from a file fits its column (a corrupted but checksummed file still cannot smuggle a wrong type in). */
export function fitsKind(kind: ColumnKind, v: unknown): boolean {
  switch (kind) {
    case 'text':
    case 'json':
      return typeof v === 'string'
    case 'text?':
      return v === null || typeof v === 'string'
    case 'int':
      return Number.isSafeInteger(v)
    case 'int?':
      return v === null || Number.isSafeInteger(v)
    case 'bytes':
      return typeof v === 'string' && /^[A-Za-z0-9+/]*={0,2}$/.test(v)
    case 'bytes?':
      return v === null || (typeof v === 'string' && /^[A-Za-z0-9+/]*={0,2}$/.test(v))
    case 'bool':
      return v === 0 || v === 1
    default:
      kind satisfies never
      return false
  }
}

export function fitsTable(t: TableSpec, r: unknown): r is PortableRow {
  return Array.isArray(r) && r.length === t.columns.length && t.columns.every(([, k], i) => fitsKind(k, r[i]))
}

/** `INSERT INTO t (...) VALUES (...), (...)` for `rows` rows, `?` placeholders (PostgreSQL's jsonb cast added). */
export function insertSql(t: TableSpec, rows: number, d: Dialect, conflict = ''): string {
  const one = `(${t.columns.map(([, k]) => (k === 'json' && d === 'postgres' ? '?::jsonb' : '?')).join(', ')})`
  return `INSERT INTO ${q(t.name)} (${t.columns.map(([c]) => q(c)).join(', ')}) VALUES ${Array.from({ length: rows }, () => one).join(', ')}${conflict}`
}

export function insertParams(t: TableSpec, rows: readonly PortableRow[], d: Dialect): unknown[] {
  const out: unknown[] = []
  for (const r of rows) t.columns.forEach(([, k], i) => out.push(toParam(k, r[i]!, d)))
  return out
}

/** About how many characters a row holds (what a batch of rows costs in memory). */
export function rowChars(r: PortableRow): number {
  let n = 0
  for (const v of r) n += typeof v === 'string' ? v.length : 8
  return n
}
