import type pg from 'pg'
import type { NodePath, PathRange } from '../../shared/index.js'
import { SEARCH_BODY_CHARS, tsqueryPrefix, type SearchHit, type SearchPlan } from './search-plan.js'

/**
 * [FIND1] The PostgreSQL full-text index: a `search` tsvector column on `nodes` with a GIN index,
 * set by a BEFORE trigger from the same row, so every write path keeps it in its own statement.
 * The `simple` configuration (no stemming, no stop words: names in any language stay as
 * written); the name weighs A, the text B. PostgreSQL's parser keeps a run of CJK characters as
 * one word, so a term matches as a word prefix (`'日本語':*` finds "日本語のメモ"); a term with
 * no lexeme (an emoji, punctuation) is matched against the display name instead.
 *
 * Created idempotently at open, inside the schema lock; an existing data set is filled once,
 * when the column is first added (the same statement that adds it).
 */
const POSTGRES_SEARCH_FUNCTIONS = `
CREATE OR REPLACE FUNCTION weft_search_vector(p_path text, p_name text, p_last text, p_content jsonb, p_state text)
RETURNS tsvector LANGUAGE sql IMMUTABLE AS $fn$
  SELECT CASE WHEN p_state = 'Active' AND left(p_path, 1) <> '_' AND strpos(p_path, '/_') = 0 THEN
    setweight(to_tsvector('simple', CASE WHEN p_name <> '' THEN p_name ELSE p_last END), 'A') ||
    setweight(to_tsvector('simple', left(coalesce(
      (SELECT string_agg(v #>> '{}', ' ') FROM jsonb_path_query(p_content, 'strict $.**') AS v WHERE jsonb_typeof(v) = 'string'),
      ''), ${SEARCH_BODY_CHARS})), 'B')
  END
$fn$;
CREATE OR REPLACE FUNCTION weft_nodes_search() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
  NEW.search := weft_search_vector(NEW.path, NEW.name, NEW.last_segment, NEW.content, NEW.state);
  RETURN NEW;
END
$fn$;
`

const POSTGRES_SEARCH_TRIGGER = `
    CREATE INDEX IF NOT EXISTS nodes_search ON nodes USING gin (search);
    DROP TRIGGER IF EXISTS nodes_search ON nodes;
    CREATE TRIGGER nodes_search BEFORE INSERT OR UPDATE OF path, name, last_segment, content, state ON nodes
      FOR EACH ROW EXECUTE FUNCTION weft_nodes_search();
  `

/** What `ensurePostgresSearchIndex` applies, for the schema's fingerprint ([STO12]). */
export const POSTGRES_SEARCH_DDL = `${POSTGRES_SEARCH_FUNCTIONS}ALTER TABLE nodes ADD COLUMN search tsvector${POSTGRES_SEARCH_TRIGGER}`

/** Applied inside the open transaction that holds the schema lock. */
export async function ensurePostgresSearchIndex(client: pg.PoolClient): Promise<void> {
  await client.query(POSTGRES_SEARCH_FUNCTIONS)
  const has = await client.query("SELECT 1 FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = 'nodes' AND column_name = 'search'")
  if (has.rowCount === 0) {
    await client.query('ALTER TABLE nodes ADD COLUMN search tsvector')
    // An existing data set: every row once, before the trigger keeps them.
    await client.query('UPDATE nodes SET search = weft_search_vector(path, name, last_segment, content, state)')
  }
  await client.query(POSTGRES_SEARCH_TRIGGER)
}

/** Matches read per round trip while `accept` refuses rows. */
const PAGE = 500

/**
 * [FIND2] As searchSqlite: matches best first, offered to `accept` until `limit` are accepted.
 * [FIND4] `within` (the caller's readable regions): only rows inside them are matched and sorted
 * (the planner combines the GIN index with the path index); none: nothing.
 */
export async function searchPostgres(pool: pg.Pool, plan: SearchPlan, accept: (path: NodePath) => boolean, limit: number, within?: readonly PathRange[]): Promise<SearchHit[]> {
  if (within && within.length === 0) return []
  const terms = [...plan.long, ...plan.short]
  // Which terms have a lexeme (an emoji or punctuation has none): those go through the index.
  const lexemes = await pool.query<{ n: number }>(`SELECT numnode(to_tsquery('simple', t)) AS n FROM unnest($1::text[]) WITH ORDINALITY AS u(t, i) ORDER BY i`, [terms.map(tsqueryPrefix)])
  const params: unknown[] = [plan.phrase]
  const param = (value: unknown): string => {
    params.push(value)
    return `$${params.length}`
  }
  const clauses: string[] = []
  const indexed = terms.filter((_, i) => (lexemes.rows[i]?.n ?? 0) > 0)
  if (indexed.length) clauses.push(`search @@ to_tsquery('simple', ${param(indexed.map(tsqueryPrefix).join(' & '))})`)
  else clauses.push('search IS NOT NULL')
  for (const term of terms.filter((_, i) => (lexemes.rows[i]?.n ?? 0) === 0)) clauses.push(`strpos(lower(dname), ${param(term)}) > 0`)
  if (within) clauses.push(`(${within.map((r) => `(path >= ${param(r.from)} AND path < ${param(r.to)})`).join(' OR ')})`)
  const sql = `SELECT path, dname AS name, node_type,
      CASE WHEN lower(dname) = $1 THEN 0 WHEN strpos(lower(dname), $1) = 1 THEN 1 WHEN strpos(lower(dname), $1) > 0 THEN 2 ELSE 3 END AS tier
    FROM (SELECT path, node_type, search, CASE WHEN name <> '' THEN name ELSE last_segment END AS dname FROM nodes) AS n
    WHERE ${clauses.join(' AND ')}
    ORDER BY tier, char_length(dname), path
    LIMIT ${PAGE} OFFSET `
  const out: SearchHit[] = []
  for (let offset = 0; out.length < limit; offset += PAGE) {
    const r = await pool.query<{ path: string; name: string; node_type: string }>(sql + String(offset), params)
    for (const row of r.rows) {
      if (!accept(row.path as NodePath)) continue
      out.push({ path: row.path as NodePath, name: row.name, nodeType: row.node_type })
      if (out.length >= limit) break
    }
    if (r.rows.length < PAGE) break
  }
  return out
}
