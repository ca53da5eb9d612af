/**
 * SQLite schema. `changes.version` is AUTOINCREMENT so a version is never reused, even after the
 * newest change rows are rolled back or deleted: it is the mesh-wide commit sequence.
 * `node_updates.seq` is the version of the commit that logged the update, so the log replays in
 * commit order.
 */
export const SQLITE_SCHEMA = `
CREATE TABLE IF NOT EXISTS nodes (
  path TEXT PRIMARY KEY,
  node_type TEXT NOT NULL,
  name TEXT NOT NULL,
  parent TEXT,
  last_segment TEXT NOT NULL,
  content TEXT NOT NULL,
  created_by TEXT NOT NULL,
  created_at TEXT NOT NULL,
  updated_at TEXT NOT NULL,
  version INTEGER NOT NULL,
  state TEXT NOT NULL DEFAULT 'Active',
  snapshot BLOB,
  update_count INTEGER NOT NULL DEFAULT 0,
  content_stale INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS nodes_parent ON nodes (parent, path);
CREATE INDEX IF NOT EXISTS nodes_type ON nodes (node_type, path);
CREATE INDEX IF NOT EXISTS nodes_last_segment ON nodes (last_segment);

CREATE TABLE IF NOT EXISTS node_updates (
  path TEXT NOT NULL,
  seq INTEGER NOT NULL,
  data BLOB NOT NULL,
  PRIMARY KEY (path, seq)
);

CREATE TABLE IF NOT EXISTS changes (
  version INTEGER PRIMARY KEY AUTOINCREMENT,
  path TEXT NOT NULL,
  node_type TEXT NOT NULL,
  kind TEXT NOT NULL,
  -- [FEED5] The subjects this record is withheld from (newline-separated; NULL: none).
  withheld TEXT,
  -- [FEED8] The subject a Denied began standing for at this record (its assignment's own commit).
  denied_from TEXT
);
CREATE INDEX IF NOT EXISTS changes_path ON changes (path, version);

-- [ACC12] Which principal first wrote under each Yjs client id of a node. Created at open, so an
-- existing database gains it empty: an id written before it is bound by its next writer.
CREATE TABLE IF NOT EXISTS node_clients (
  path TEXT NOT NULL,
  client INTEGER NOT NULL,
  principal TEXT NOT NULL,
  PRIMARY KEY (path, client)
) WITHOUT ROWID;

-- [TOMB1] What a deleted or moved-away node left at its path: a content-free Yjs update covering
-- every struct it had (storage/tombstone.ts). A node created at the path starts from it.
CREATE TABLE IF NOT EXISTS node_tombstones (
  path TEXT PRIMARY KEY,
  state BLOB NOT NULL,
  at TEXT NOT NULL
) WITHOUT ROWID;

CREATE TABLE IF NOT EXISTS accounts (
  user_id TEXT PRIMARY KEY,
  email TEXT NOT NULL UNIQUE,
  password_hash TEXT NOT NULL,
  created_at TEXT NOT NULL
);

CREATE TABLE IF NOT EXISTS tokens (
  hash TEXT PRIMARY KEY,
  user_id TEXT NOT NULL,
  expires_at TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS tokens_user ON tokens (user_id);
`

/** [STO5] Indexes over added columns: created after the columns exist (an older file gains them first). */
/**
 * [KIT7] The fields engines scan by (`queryFields`, exact match), per node type, each with an index
 * on its value: a reconcile pass finds its few matches in the index, never parsing a row (a
 * running activity's log is megabytes; json_each over every ActivityLog row held the event loop
 * ~300 ms each pass). The index's values are computed on the writer thread as rows are written;
 * each index is partial on `node_type = '…'`, which the query spells the same way (SQLite uses a
 * partial index only when the query's terms imply its WHERE).
 */
export const ENGINE_SCANS: Readonly<Record<string, readonly string[]>> = {
  ActivityLog: ['Status', 'RequestedStatus'],
  CodeCheck: ['Status'],
  Thread: ['Status', 'RequestedStatus', 'HasPending'],
}

export const SQLITE_ADDED_INDEXES = `
CREATE INDEX IF NOT EXISTS nodes_stale ON nodes (path) WHERE content_stale = 1;
${Object.entries(ENGINE_SCANS)
  .flatMap(([type, fields]) => fields.map((f) => `CREATE INDEX IF NOT EXISTS nodes_scan_${type}_${f} ON nodes (json_extract(content, '$."${f}"')) WHERE node_type = '${type}';`))
  .join('\n')}
`

/** Columns added after the first release, with the statement that adds each to an older file. */
export const SQLITE_ADDED_COLUMNS: readonly { table: string; column: string; add: string }[] = [
  { table: 'nodes', column: 'content_stale', add: 'ALTER TABLE nodes ADD COLUMN content_stale INTEGER NOT NULL DEFAULT 0' },
  // [FEED5] Records written before it are withheld from nobody (which Denied stood over them then is not known).
  { table: 'changes', column: 'withheld', add: 'ALTER TABLE changes ADD COLUMN withheld TEXT' },
  // [FEED8] A Denied begun before it has no mark: its end withholds every record up to it, as before.
  { table: 'changes', column: 'denied_from', add: 'ALTER TABLE changes ADD COLUMN denied_from TEXT' },
  { table: 'contextual_consumers', column: 'acked_pruned', add: 'ALTER TABLE contextual_consumers ADD COLUMN acked_pruned INTEGER NOT NULL DEFAULT 0' },
  // [CTX65] A dead letter that died before it has no time (told as unknown).
  { table: 'contextual_events', column: 'died_at', add: 'ALTER TABLE contextual_events ADD COLUMN died_at INTEGER' },
]
