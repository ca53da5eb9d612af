/**
 * [MOVE3] [MOVE5] The tables moves and the trash add, kept apart from the base schemas so another
 * feature's schema change merges without touching them. Both are created at open (an older file
 * gains them empty).
 *
 *  - `node_moves`: where a moved path went (`path` -> `moved_to`); the latest move of a path wins.
 *  - `trash`: one row per trashed subtree, keyed by its entry's path `{top}/_Trash/{id}`. A row
 *    whose node is gone (purged) is ignored by the listing.
 */
export const SQLITE_MOVE_SCHEMA = `
CREATE TABLE IF NOT EXISTS node_moves (
  path TEXT PRIMARY KEY,
  moved_to TEXT NOT NULL,
  at TEXT NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS trash (
  path TEXT PRIMARY KEY,
  original_path TEXT NOT NULL,
  name TEXT NOT NULL,
  node_type TEXT NOT NULL,
  deleted_by TEXT NOT NULL,
  deleted_at TEXT NOT NULL
) WITHOUT ROWID;
`

export const POSTGRES_MOVE_SCHEMA = `
CREATE TABLE IF NOT EXISTS node_moves (
  path text COLLATE "C" PRIMARY KEY,
  moved_to text COLLATE "C" NOT NULL,
  at text NOT NULL
);
CREATE TABLE IF NOT EXISTS trash (
  path text COLLATE "C" PRIMARY KEY,
  original_path text COLLATE "C" NOT NULL,
  name text NOT NULL,
  node_type text NOT NULL,
  deleted_by text NOT NULL,
  deleted_at text NOT NULL
);
`
