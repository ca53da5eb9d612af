import type Database from 'better-sqlite3'
import type { NodePath } from '../../shared/index.js'
import { SEARCH_BODY_CHARS, fts5Phrase, type SearchHit, type SearchPlan } from './search-plan.js'

/**
 * [FIND1] The SQLite full-text index: an FTS5 table beside `nodes`, kept by triggers on `nodes`
 * so every write path (create, replace, patch, a Yjs update's row write, delete, and whatever
 * later rewrites a row's path or state) keeps it in the same transaction as the row.
 *
 * The `trigram` tokenizer: `unicode61` cuts words at spaces and punctuation, so "日本語のメモ"
 * (no spaces) would be one token and "日本語" would not find it. Trigrams match any substring of
 * three characters or more, in any script; a shorter term is checked with `instr` on the rows.
 *
 * The triggers use only SQLite's own functions (json_tree, group_concat), so any connection
 * (the writer thread, a backup tool, the sqlite3 shell) keeps the index right.
 *
 * FTS rowid = the node row's rowid. `nodes` has a TEXT primary key, so its rowids are stable
 * unless the file is VACUUMed; the boot check (repairSqliteSearchIndex) rebuilds the index when
 * its rows and the nodes disagree, and when SEARCH_INDEX_VERSION changes.
 */
export const SEARCH_INDEX_VERSION = 2

/** Whether a row is indexed: not under a reserved `_` segment, and Active (the hook for trash). */
export const searchable = (r: string) => `(${r}.state = 'Active' AND substr(${r}.path, 1, 1) <> '_' AND instr(${r}.path, '/_') = 0)`
/** A row's name as shown: its name, else its last path segment. */
export const displayName = (r: string) => `(CASE WHEN ${r}.name <> '' THEN ${r}.name ELSE ${r}.last_segment END)`
const bodyText = (r: string) =>
  `(CASE WHEN json_valid(${r}.content) THEN coalesce(substr((SELECT group_concat(value, char(10)) FROM json_tree(${r}.content) WHERE type = 'text'), 1, ${SEARCH_BODY_CHARS}), '') ELSE '' END)`

const SQLITE_SEARCH_SCHEMA = `
CREATE TABLE IF NOT EXISTS search_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
-- [FIND4] The readable regions' names, walked on this index alone (a covering, partial index:
-- only indexed rows, and what a name tier needs; state too, or SQLite reads the row to check the WHERE again), never the table's rows with their content.
CREATE INDEX IF NOT EXISTS nodes_search_names ON nodes (path, name, last_segment, node_type, state) WHERE ${searchable('nodes')};
-- [FIND4] Bumped whenever an indexed row is added or removed or its name, path, type or state
-- changes (never by a text edit): a list of readable names kept in memory is current while it holds.
CREATE TABLE IF NOT EXISTS search_names_generation (id INTEGER PRIMARY KEY CHECK (id = 1), n INTEGER NOT NULL);
INSERT OR IGNORE INTO search_names_generation (id, n) VALUES (1, 0);
CREATE TRIGGER IF NOT EXISTS search_names_insert AFTER INSERT ON nodes WHEN ${searchable('new')} BEGIN
  UPDATE search_names_generation SET n = n + 1 WHERE id = 1;
END;
CREATE TRIGGER IF NOT EXISTS search_names_delete AFTER DELETE ON nodes WHEN ${searchable('old')} BEGIN
  UPDATE search_names_generation SET n = n + 1 WHERE id = 1;
END;
CREATE TRIGGER IF NOT EXISTS search_names_update AFTER UPDATE OF path, node_type, name, last_segment, state ON nodes
WHEN old.path IS NOT new.path OR old.node_type IS NOT new.node_type OR old.name IS NOT new.name OR old.last_segment IS NOT new.last_segment OR old.state IS NOT new.state BEGIN
  UPDATE search_names_generation SET n = n + 1 WHERE id = 1;
END;
CREATE VIRTUAL TABLE IF NOT EXISTS node_search USING fts5(path UNINDEXED, node_type UNINDEXED, name, body, tokenize = 'trigram');
CREATE TRIGGER IF NOT EXISTS node_search_insert AFTER INSERT ON nodes WHEN ${searchable('new')} BEGIN
  INSERT INTO node_search (rowid, path, node_type, name, body) VALUES (new.rowid, new.path, new.node_type, ${displayName('new')}, ${bodyText('new')});
END;
CREATE TRIGGER IF NOT EXISTS node_search_delete AFTER DELETE ON nodes BEGIN
  DELETE FROM node_search WHERE rowid = old.rowid;
END;
CREATE TRIGGER IF NOT EXISTS node_search_update AFTER UPDATE OF path, node_type, name, last_segment, content, state ON nodes
WHEN old.path IS NOT new.path OR old.node_type IS NOT new.node_type OR old.name IS NOT new.name OR old.content IS NOT new.content OR old.state IS NOT new.state BEGIN
  DELETE FROM node_search WHERE rowid = old.rowid;
  INSERT INTO node_search (rowid, path, node_type, name, body) SELECT new.rowid, new.path, new.node_type, ${displayName('new')}, ${bodyText('new')} WHERE ${searchable('new')};
END;
`

const DROP_SEARCH_INDEX = `
DROP TRIGGER IF EXISTS node_search_insert;
DROP TRIGGER IF EXISTS node_search_delete;
DROP TRIGGER IF EXISTS node_search_update;
DROP TABLE IF EXISTS node_search;
`

/** Creates the index's table and triggers when missing (an older data dir gains them; repairSqliteSearchIndex fills them). */
export function ensureSqliteSearchIndex(db: Database.Database): void {
  db.exec(SQLITE_SEARCH_SCHEMA)
}

/**
 * [FIND1] At boot, before any write: builds the index for a data dir that had none (or one of
 * another SEARCH_INDEX_VERSION), and rebuilds it when its rows and the indexable nodes disagree
 * (a VACUUM renumbered rowids, a file restored from elsewhere). One transaction: a crash halfway
 * leaves the old index and the next boot starts over. Returns whether it rebuilt.
 */
export function repairSqliteSearchIndex(db: Database.Database): boolean {
  return db.transaction((): boolean => {
    const version = db.prepare<[], { value: string }>("SELECT value FROM search_meta WHERE key = 'version'").get()?.value
    const indexed = db.prepare<[], { n: number }>('SELECT count(*) AS n FROM node_search').get()!.n
    const expected = db.prepare<[], { n: number }>(`SELECT count(*) AS n FROM nodes WHERE ${searchable('nodes')}`).get()!.n
    const mismatched =
      indexed !== expected ||
      // Same count, other rows: a sample of rowids must name the same paths.
      db.prepare<[], { n: number }>('SELECT count(*) AS n FROM (SELECT s.path, n.path AS np FROM node_search s LEFT JOIN nodes n ON n.rowid = s.rowid LIMIT 1000) WHERE np IS NOT path').get()!.n > 0
    if (version === String(SEARCH_INDEX_VERSION) && !mismatched) return false
    db.exec(DROP_SEARCH_INDEX)
    db.exec(SQLITE_SEARCH_SCHEMA)
    db.exec(`INSERT INTO node_search (rowid, path, node_type, name, body) SELECT rowid, path, node_type, ${displayName('nodes')}, ${bodyText('nodes')} FROM nodes WHERE ${searchable('nodes')}`)
    db.prepare("INSERT INTO search_meta (key, value) VALUES ('version', ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value").run(String(SEARCH_INDEX_VERSION))
    // Rowids may have changed (a VACUUM): no list of readable names read before stays current.
    db.exec('UPDATE search_names_generation SET n = n + 1 WHERE id = 1')
    return true
  }).immediate()
}

/**
 * [FIND2] The matches of `plan`, best first (see StorageAdapter.searchNodes), of which the first
 * `limit` that `accept` takes. Long terms go through the index as quoted phrases (nothing of the
 * user's text is FTS syntax); short ones are `instr` checks on the matched rows. The rank is
 * computed by the index too (the name starts with the phrase: `name : ^"…"`; holds it:
 * `name : "…"`), so SQLite sorts the matches and this reads them only until `limit` are taken.
 * A query of only short terms (one or two characters: a typeahead's first keys) matches names
 * only, a scan of the name column ranked here. Rows `accept` refuses cost time, never a place.
 */
export function searchSqlite(db: Database.Database, plan: SearchPlan, accept: (path: NodePath) => boolean, limit: number): SearchHit[] {
  if (limit < 1) return []
  if (plan.long.length === 0) return searchNamesSqlite(db, plan, accept, limit)
  const phrase = fts5Phrase(plan.phrase)
  const terms = plan.long.map(fts5Phrase).join(' ')
  const shortParams: unknown[] = []
  const shortClauses: string[] = []
  for (const term of plan.short) {
    shortClauses.push('AND (instr(weft_lower(s.name), ?) > 0 OR instr(weft_lower(s.body), ?) > 0)')
    shortParams.push(term, term)
  }
  const out: SearchHit[] = []
  const take = (sql: string, params: unknown[]): boolean => {
    for (const [path, name, nodeType] of db.prepare<unknown[], [string, string, string]>(sql).raw().iterate(...params)) {
      if (!accept(path as NodePath)) continue
      out.push({ path: path as NodePath, name, nodeType })
      if (out.length >= limit) return true
    }
    return false
  }
  // A tier at a time: the names that hold the phrase (tiers 0–2) are few next to a common word's
  // text matches, and when they fill the page the text-only matches are never sorted.
  // No join with `nodes`: the index row carries what the answer needs; the triggers and the boot
  // check keep it the row's.
  const named = `SELECT s.path, s.name, s.node_type,
      CASE WHEN s.rowid IN (SELECT rowid FROM node_search WHERE node_search MATCH ?) THEN (CASE WHEN length(s.name) = ? THEN 0 ELSE 1 END) ELSE 2 END AS tier
    FROM node_search s
    WHERE node_search MATCH ? ${shortClauses.join(' ')}
    ORDER BY tier, length(s.name), s.path`
  if (take(named, [`name : ^${phrase}`, [...plan.phrase].length, `(name : ${phrase}) AND ${terms}`, ...shortParams])) return out
  const textOnly = `SELECT s.path, s.name, s.node_type FROM node_search s
    WHERE node_search MATCH ? AND s.rowid NOT IN (SELECT rowid FROM node_search WHERE node_search MATCH ?) ${shortClauses.join(' ')}
    ORDER BY length(s.name), s.path`
  take(textOnly, [terms, `name : ${phrase}`, ...shortParams])
  return out
}

/**
 * Only one- and two-character terms: names that hold each, ranked here (names are short). Read
 * from `nodes` (a plain table scan is about twice as fast as one of the FTS table's content).
 */
function searchNamesSqlite(db: Database.Database, plan: SearchPlan, accept: (path: NodePath) => boolean, limit: number): SearchHit[] {
  const name = displayName('nodes')
  const clauses = plan.short.map(() => `instr(weft_lower(${name}), ?) > 0`)
  const sql = `SELECT path, ${name}, node_type FROM nodes WHERE ${searchable('nodes')} AND ${clauses.join(' AND ')}`
  const ranked: RankedHit[] = []
  for (const [path, display, nodeType] of db.prepare<unknown[], [string, string, string]>(sql).raw().iterate(...plan.short)) {
    if (!accept(path as NodePath)) continue
    ranked.push({ hit: { path: path as NodePath, name: display, nodeType }, tier: nameTier(display, plan.phrase), length: codePoints(display) })
  }
  return rankHits(ranked, limit)
}

/** 0: the name is the query; 1: it starts with it; 2: it holds it; 3: only the text does. */
export function nameTier(name: string, phrase: string): number {
  const lower = name.toLowerCase()
  if (lower === phrase) return 0
  const at = lower.indexOf(phrase)
  return at === 0 ? 1 : at > 0 ? 2 : 3
}

/** The length of `s` in code points. */
export function codePoints(s: string): number {
  let n = 0
  for (const _ of s) n++
  return n
}

/** A hit as ranked: its name's tier (nameTier) and length in code points. */
export interface RankedHit {
  hit: SearchHit
  tier: number
  length: number
}

/** The rank order: by tier, then the shorter name, then the path (bytewise, as paths are ASCII). */
export function compareRanked(a: RankedHit, b: RankedHit): number {
  return a.tier - b.tier || a.length - b.length || (a.hit.path < b.hit.path ? -1 : a.hit.path > b.hit.path ? 1 : 0)
}

/** The best `limit`, in rank order (compareRanked). */
export function rankHits(ranked: RankedHit[], limit: number): SearchHit[] {
  ranked.sort(compareRanked)
  return ranked.slice(0, Math.max(0, limit)).map((r) => r.hit)
}
