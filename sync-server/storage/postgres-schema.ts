import { FEED_INDEX_SQL, SCAN_INDEX_SQL } from './postgres-online-indexes.js'

/**
 * PostgreSQL schema, created idempotently at open (under an advisory lock, because concurrent
 * `CREATE TABLE IF NOT EXISTS` from several instances can still collide in the catalog).
 *
 * Paths use the "C" collation: ordering is bytewise like SQLite's, and the descendants range
 * `[path/, path0)` is only a prefix range under a bytewise order.
 *
 * Versions come from the single `version_counter` row rather than a sequence: a writer locks the
 * row for the whole transaction, so versions are handed out in commit order and a reader of the
 * change feed never sees version N+1 while N is still uncommitted (with a sequence it could, and
 * a consumer that remembers "last seen N+1" would skip N forever).
 */
export const POSTGRES_SCHEMA = `
CREATE TABLE IF NOT EXISTS nodes (
  path text COLLATE "C" PRIMARY KEY,
  node_type text NOT NULL,
  name text NOT NULL,
  parent text COLLATE "C",
  last_segment text NOT NULL,
  content jsonb NOT NULL,
  created_by text NOT NULL,
  created_at text NOT NULL,
  updated_at text NOT NULL,
  version bigint NOT NULL,
  state text NOT NULL DEFAULT 'Active',
  snapshot bytea,
  update_count integer NOT NULL DEFAULT 0,
  content_stale boolean NOT NULL DEFAULT false
);
ALTER TABLE nodes ADD COLUMN IF NOT EXISTS content_stale boolean NOT NULL DEFAULT false;
CREATE INDEX IF NOT EXISTS nodes_stale ON nodes (path) WHERE content_stale;
CREATE INDEX IF NOT EXISTS nodes_parent ON nodes (parent, path);
CREATE INDEX IF NOT EXISTS nodes_type ON nodes (node_type, path);
CREATE INDEX IF NOT EXISTS nodes_last_segment ON nodes (last_segment);
-- [KIT7] Engine scans (queryFields, exact): the few matches come from these, no row is read to match.
-- A value's first 200 characters only: a whole value in a btree entry refused any node whose field
-- held more than ~2.7 kB ("index row size exceeds"), and with it every commit of its batch.
-- [STO11] On a database holding nodes these were built CONCURRENTLY before this transaction.
${SCAN_INDEX_SQL}

CREATE TABLE IF NOT EXISTS node_updates (
  path text COLLATE "C" NOT NULL,
  seq bigint NOT NULL,
  data bytea NOT NULL,
  PRIMARY KEY (path, seq)
);

CREATE TABLE IF NOT EXISTS changes (
  version bigint PRIMARY KEY,
  path text NOT NULL,
  node_type text NOT NULL,
  kind text NOT NULL,
  withheld text,
  denied_from text
);
-- [FEED5] The subjects a record is withheld from (newline-separated; NULL: none). An older
-- database gains it empty: its records are withheld from nobody. Adding a nullable column with no
-- default is a catalog change only (no rewrite of the table).
ALTER TABLE changes ADD COLUMN IF NOT EXISTS withheld text;
-- [FEED8] The subject a Denied began standing for at this record. A Denied begun before the column
-- has no mark: its end withholds every record up to it, as before.
ALTER TABLE changes ADD COLUMN IF NOT EXISTS denied_from text;
CREATE INDEX IF NOT EXISTS changes_path ON changes (path, version);
${FEED_INDEX_SQL}

-- [ACC12] Which principal first wrote under each Yjs client id of a node (created at open, so an
-- existing database gains it empty).
CREATE TABLE IF NOT EXISTS node_clients (
  path text COLLATE "C" NOT NULL,
  client bigint NOT NULL,
  principal text NOT NULL,
  PRIMARY KEY (path, client)
);

-- [TOMB1] What a deleted or moved-away node left at its path (storage/tombstone.ts).
CREATE TABLE IF NOT EXISTS node_tombstones (
  path text COLLATE "C" PRIMARY KEY,
  state bytea NOT NULL,
  at text NOT NULL
);

CREATE TABLE IF NOT EXISTS version_counter (
  id integer PRIMARY KEY CHECK (id = 1),
  value bigint NOT NULL
);
INSERT INTO version_counter (id, value) VALUES (1, 0) ON CONFLICT (id) DO NOTHING;

CREATE TABLE IF NOT EXISTS accounts (
  user_id text PRIMARY KEY,
  email text NOT NULL UNIQUE,
  password_hash text NOT NULL,
  created_at text NOT NULL
);

CREATE TABLE IF NOT EXISTS tokens (
  hash text PRIMARY KEY,
  user_id text NOT NULL,
  expires_at text NOT NULL
);
CREATE INDEX IF NOT EXISTS tokens_user ON tokens (user_id);
`

/** Arbitrary constant key for the schema-creation advisory lock. */
export const SCHEMA_LOCK_KEY = 0x57_45_46_54 // "WEFT"
