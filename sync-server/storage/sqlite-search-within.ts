import type Database from 'better-sqlite3'
import type { NodePath, PathRange } from '../../shared/index.js'
import { fts5Phrase, inRegions, type SearchHit, type SearchPlan } from './search-plan.js'
import { codePoints, compareRanked, displayName, nameTier, searchSqlite, searchable, type RankedHit } from './sqlite-search-index.js'

/** Where the strategy changes (tests set them low to take every path on small data). */
export const searchWithinLimits = {
  /** At most this many rows match the words: each match is checked against the regions (cost: the matches). */
  fewMatches: 2000,
  /** More readable rows walked than this: most rows are the caller's; the index's own ranked stream (searchSqlite) is cheaper. */
  walkAtMost: 30_000,
  /** Text-only candidates read and checked at a time, in rank order, before the index's rowids narrow the rest. */
  batch: 250,
}
/** Rows read per statement by rowid (bound parameters of one `IN` list). */
const BATCH = 250

interface Row extends RankedHit {
  rowid: number
  folded: string
}

/**
 * [FIND4] Quick find for a user, driven by their readable regions ([QUERY1]): a row
 * outside them is never ranked or read beyond its rowid, so the cost follows what the caller
 * can read and what matches, not the size of the mesh.
 *
 *  - Words of 3+ characters matching few rows (the index's posting lists, read up to
 *    `fewMatches` + 1 rowids): each match is read and kept when its path is in a region.
 *  - Otherwise (many matches, or only 1–2 character words) the regions' rows are walked on the
 *    path index (their names, folded in JavaScript: no SQL callback). The name tiers (the name
 *    holds the whole query, so every word) come from the names alone; only when they do not fill
 *    the page are text-only candidates read in rank order (the shorter name, then the path): a
 *    first batch, their text checked for every word (a common word fills the page there); then
 *    the index's matching rowids, read once, drop the candidates that cannot match, and the rest
 *    are read a batch at a time (no text at all when the query has no 1–2 character word).
 *
 * Ranked as StorageAdapter.searchNodes says (tier from the folded name, then its length in code
 * points, then the path) and offered to `accept` (the access check again) in that order.
 */
export function searchSqliteWithin(db: Database.Database, plan: SearchPlan, within: readonly PathRange[], accept: (path: NodePath) => boolean, limit: number): SearchHit[] {
  if (limit < 1 || within.length === 0) return []
  const out: SearchHit[] = []
  const offer = (rows: Iterable<Row>): boolean => {
    for (const row of rows) {
      if (!accept(row.hit.path)) continue
      out.push(row.hit)
      if (out.length >= limit) return true
    }
    return false
  }
  const terms = [...plan.long, ...plan.short]
  const holdsAll = (name: string, body: string) => terms.every((t) => name.includes(t) || body.includes(t))
  if (plan.long.length > 0) {
    const ids = db.prepare<[string, number], number>('SELECT rowid FROM node_search WHERE node_search MATCH ? LIMIT ?').pluck().all(plan.long.map(fts5Phrase).join(' '), searchWithinLimits.fewMatches + 1)
    if (ids.length <= searchWithinLimits.fewMatches) {
      const kept: Row[] = []
      for (const [rowid, path, name, nodeType, body] of byRowids<[number, string, string, string, string]>(db, 'rowid, path, name, node_type, body', ids)) {
        if (!inRegions(path, within)) continue
        const row = toRow(rowid, path, name, nodeType, plan.phrase)
        if (holdsAll(row.folded, body.toLowerCase())) kept.push(row)
      }
      offer(sorted(kept))
      return out
    }
  }
  const named: Row[] = []
  const textOnly: Row[] = []
  const names = db.prepare<[string, string], [number, string, string, string]>(`SELECT rowid, path, ${displayName('nodes')}, node_type FROM nodes WHERE path >= ? AND path < ? AND ${searchable('nodes')}`).raw()
  let walked = 0
  for (const region of within) {
    for (const [rowid, path, name, nodeType] of names.iterate(region.from, region.to)) {
      // Most rows are the caller's: the index's own ranked stream is cheaper than the walk.
      if (++walked > searchWithinLimits.walkAtMost) return searchSqlite(db, plan, accept, limit)
      const row = toRow(rowid, path, name, nodeType, plan.phrase)
      if (row.tier < 3) named.push(row)
      else if (plan.long.length === 0 ? terms.every((t) => row.folded.includes(t)) : true) textOnly.push(row)
    }
  }
  // Only 1–2 character words: names only ([FIND1]); the names holding every word, ranked.
  if (plan.long.length === 0) {
    offer(sorted([...named, ...textOnly]))
    return out
  }
  if (offer(sorted(named))) return out
  // Text-only candidates in rank order. The first batch is read and checked as it is (a common
  // word fills the page from it); past it, the index's matching rowids (all of them, once) drop
  // the rows that cannot match before any text is read, and a query without short words needs
  // no text at all.
  const rest = sorted(textOnly)
  const checked = (batch: Row[]): boolean => {
    const bodies = new Map<number, string>()
    for (const [rowid, body] of byRowids<[number, string]>(db, 'rowid, body', batch.map((r) => r.rowid))) bodies.set(rowid, body)
    return offer(batch.filter((r) => bodies.has(r.rowid) && holdsAll(r.folded, bodies.get(r.rowid)!.toLowerCase())))
  }
  const first = searchWithinLimits.batch
  if (checked(rest.slice(0, first)) || rest.length <= first) return out
  const matching = new Set(db.prepare<[string], number>('SELECT rowid FROM node_search WHERE node_search MATCH ?').pluck().all(plan.long.map(fts5Phrase).join(' ')))
  const left = rest.slice(first).filter((r) => matching.has(r.rowid))
  if (plan.short.length === 0) offer(left)
  else for (let i = 0; i < left.length && !checked(left.slice(i, i + BATCH)); i += BATCH);
  return out
}

function toRow(rowid: number, path: string, name: string, nodeType: string, phrase: string): Row {
  return { rowid, hit: { path: path as NodePath, name, nodeType }, folded: name.toLowerCase(), tier: nameTier(name, phrase), length: codePoints(name) }
}

function sorted(rows: Row[]): Row[] {
  return rows.sort(compareRanked)
}

/** Rows of the index by rowid, BATCH at a time, in no particular order. */
function* byRowids<R extends unknown[]>(db: Database.Database, columns: string, ids: readonly number[]): Generator<R> {
  for (let i = 0; i < ids.length; i += BATCH) {
    const batch = ids.slice(i, i + BATCH)
    yield* db.prepare<unknown[], R>(`SELECT ${columns} FROM node_search WHERE rowid IN (${batch.map(() => '?').join(',')})`).raw().iterate(...batch)
  }
}
