import type Database from 'better-sqlite3'
import type { NodePath, PathRange } from '../../shared/index.js'
import { fts5Phrase, inRegions, type SearchHit, type SearchPlan } from './search-plan.js'
import { codePoints, compareRanked, displayName, nameTier, searchSqlite, searchable, type RankedHit } from './sqlite-search-index.js'

/** Where the strategy changes (tests set them low to take every path on small data). */
export const searchWithinLimits = {
  /** At most this many rows match the words: each match is checked against the regions (cost: the matches). */
  fewMatches: 2000,
  /** More readable rows than this: the caller shares the kept names of the whole index (readableNames). */
  walkAtMost: 30_000,
  /** More indexed rows than this in all: a caller past `walkAtMost` gets the index's own ranked stream (searchSqlite) instead. */
  allAtMost: 200_000,
  /** Text-only candidates read and checked at a time, in rank order. */
  batch: 250,
  /**
   * Past the first batch, the index's matching rowids narrow the text-only candidates only when
   * there are at most this many per candidate (the posting lists are read whole: for a word in
   * most of the mesh that costs more than reading the readable candidates' texts).
   */
  narrowPerCandidate: 1,
}
/** Rows read per statement by rowid (bound parameters of one `IN` list). */
const BATCH = 250
/** Readable-name lists kept per database (one per distinct set of regions), and rows in all of them. */
const CACHED_SETS = 8
const CACHED_ROWS = 120_000

/** A readable, indexed row as the walk reads it: what ranking needs, its name folded once. */
interface Walked {
  rowid: number
  hit: SearchHit
  folded: string
  length: number
}

interface Row extends RankedHit {
  rowid: number
  folded: string
}

interface NameList {
  generation: number
  /** In the text-only rank order: the shorter name, then the path. */
  rows: Walked[]
}

/** What is kept per database ([FIND4]). */
interface Kept {
  /** Regions (as a key) → their names, as of a names generation. */
  lists: Map<string, NameList>
  /** Keys of regions found to hold more than `walkAtMost` rows: they use `all`. */
  large: Set<string>
  /** Every indexed row's name, for the large callers; rows null: more than `allAtMost`. */
  all: { generation: number; rows: Walked[] | null } | null
}

const kept = new WeakMap<Database.Database, Kept>()
/** Keys of large regions remembered at most (a set of short strings; cleared when full). */
const LARGE_KEYS = 1000
/** Above every path: paths compare bytewise, and no UTF-8 text sorts after U+10FFFF. */
const PAST_EVERY_PATH = '\u{10FFFF}'

/** The names a walk yields: what the ranking needs, read on `nodes_search_names`, in text-only rank order; null past `most` rows. */
function walkNames(db: Database.Database, within: readonly PathRange[], most: number): Walked[] | null {
  const names = db.prepare<[string, string], [number, string, string, string]>(`SELECT rowid, path, ${displayName('nodes')}, node_type FROM nodes WHERE path >= ? AND path < ? AND ${searchable('nodes')}`).raw()
  const rows: Walked[] = []
  for (const region of within) {
    for (const [rowid, path, name, nodeType] of names.iterate(region.from, region.to)) {
      if (rows.length >= most) return null
      rows.push({ rowid, hit: { path: path as NodePath, name, nodeType }, folded: name.toLowerCase(), length: codePoints(name) })
    }
  }
  return rows.sort((a, b) => a.length - b.length || (a.hit.path < b.hit.path ? -1 : a.hit.path > b.hit.path ? 1 : 0))
}

/**
 * The readable regions' indexed rows, in text-only rank order (`inRegions`: whether each row
 * must still be checked against the regions), or null when the whole index holds more than
 * `allAtMost`. Read on the covering index `nodes_search_names` and kept while the names
 * generation (bumped by triggers whenever an indexed row is added, removed, renamed, moved,
 * retyped or changes state: never by a text edit) stays the same, so a typeahead's keystrokes
 * walk the regions once. The generation is read before the walk: a write between the two only
 * makes the list look older than it is.
 *
 * Regions of up to `walkAtMost` rows keep their own list (per set of regions, at most
 * CACHED_SETS lists and CACHED_ROWS rows in all). Larger ones (an Admin, the owner of every
 * space: on a self-hosted server the common case) share one list of the whole index's names,
 * kept once per database whatever the number of such callers, each row checked against the
 * caller's regions as it is ranked: the memory is bounded by `allAtMost` rows.
 */
function readableNames(db: Database.Database, within: readonly PathRange[]): { rows: Walked[]; inRegions: boolean } | null {
  const generation = db.prepare<[], number>('SELECT n FROM search_names_generation WHERE id = 1').pluck().get() ?? 0
  const key = within.map((r) => `${r.from}\u0000${r.to}`).join('\u0001')
  let k = kept.get(db)
  if (!k) kept.set(db, (k = { lists: new Map(), large: new Set(), all: null }))
  const lists = k.lists
  if (!k.large.has(key)) {
    const hit = lists.get(key)
    if (hit && hit.generation === generation && hit.rows.length <= searchWithinLimits.walkAtMost) {
      // Most recently used last: the first key is the one evicted.
      lists.delete(key)
      lists.set(key, hit)
      return { rows: hit.rows, inRegions: false }
    }
    lists.delete(key)
    const rows = walkNames(db, within, searchWithinLimits.walkAtMost)
    if (rows) {
      let total = rows.length
      for (const list of lists.values()) total += list.rows.length
      for (const [k2, list] of lists) {
        if (lists.size < CACHED_SETS && total <= CACHED_ROWS) break
        lists.delete(k2)
        total -= list.rows.length
      }
      if (total <= CACHED_ROWS) lists.set(key, { generation, rows })
      return { rows, inRegions: false }
    }
    if (k.large.size >= LARGE_KEYS) k.large.clear()
    k.large.add(key)
  }
  if (k.all?.generation !== generation) {
    k.all = null
    k.all = { generation, rows: walkNames(db, [{ from: '', to: PAST_EVERY_PATH }], searchWithinLimits.allAtMost) }
  }
  return k.all.rows ? { rows: k.all.rows, inRegions: true } : null
}

/**
 * [FIND4] Quick find for a user, driven by their readable regions ([QUERY1]): a row
 * outside them is never ranked or read beyond its rowid, so the cost follows what the caller
 * can read and what matches, not the size of the mesh.
 *
 *  - Words of 3+ characters matching few rows (the index's posting lists, read up to
 *    `fewMatches` + 1 rowids): each match is read and kept when its path is in a region.
 *  - Otherwise (many matches, or only 1–2 character words) the regions' names (readableNames:
 *    walked once, then kept until a name changes) give the name tiers (the name holds the whole
 *    query, so every word) alone; only when they do not fill the page are text-only candidates
 *    read in rank order (the shorter name, then the path), a batch at a time, their text checked
 *    for every word. Past the first batch, the index's matching rowids drop the candidates that
 *    cannot match, when that list is short next to the candidates (`narrowPerCandidate`), and
 *    then a query without 1–2 character words needs no text at all.
 *
 * Ranked as StorageAdapter.searchNodes says (tier from the folded name, then its length in code
 * points, then the path) and offered to `accept` (the access check again) in that order.
 */
export function searchSqliteWithin(db: Database.Database, plan: SearchPlan, within: readonly PathRange[], accept: (path: NodePath) => boolean, limit: number): SearchHit[] {
  if (limit < 1 || within.length === 0) return []
  const out: SearchHit[] = []
  const offer = (rows: Iterable<{ hit: SearchHit }>): boolean => {
    for (const row of rows) {
      if (!accept(row.hit.path)) continue
      out.push(row.hit)
      if (out.length >= limit) return true
    }
    return false
  }
  const terms = [...plan.long, ...plan.short]
  const holdsAll = (name: string, body: string) => terms.every((t) => name.includes(t) || body.includes(t))
  const words = plan.long.map(fts5Phrase).join(' ')
  if (plan.long.length > 0) {
    const ids = db.prepare<[string, number], number>('SELECT rowid FROM node_search WHERE node_search MATCH ? LIMIT ?').pluck().all(words, searchWithinLimits.fewMatches + 1)
    if (ids.length <= searchWithinLimits.fewMatches) {
      const kept: Row[] = []
      for (const [rowid, path, name, nodeType, body] of byRowids<[number, string, string, string, string]>(db, 'rowid, path, name, node_type, body', ids)) {
        if (!inRegions(path, within)) continue
        const row = toRow(rowid, path, name, nodeType, plan.phrase)
        if (holdsAll(row.folded, body.toLowerCase())) kept.push(row)
      }
      offer(kept.sort(compareRanked))
      return out
    }
  }
  const walked = readableNames(db, within)
  if (!walked) return searchSqlite(db, plan, accept, limit)
  // The list is in the text-only order already: split by tier, each stays in rank order.
  // The whole index's list (a large caller): a row outside the regions is dropped before it is
  // offered (text-only candidates only when the names do not fill the page).
  const outside = (row: Walked) => walked.inRegions && !inRegions(row.hit.path, within)
  const tiers: Walked[][] = [[], [], []]
  // Tiers 0 and 1 are offered as the walk meets them, so the walk stops once they fill the page:
  // a name equal to the phrase is no longer than it in code points (lower-casing never shortens),
  // so past that length tier 0 is complete; tier 1 rows are met in their rank order.
  // [FIND5] Only the names holding the phrase are met (rowsHolding), in the list's order.
  const phraseLength = codePoints(plan.phrase)
  let tier0Done = false
  for (const [row, at] of rowsHolding(walked.rows, plan.phrase)) {
    if (!tier0Done && row.length > phraseLength) {
      tier0Done = true
      if (offer(tiers[0]!) || offer(tiers[1]!)) return out
    }
    if (outside(row)) continue
    const tier = at > 0 ? 2 : row.folded === plan.phrase ? 0 : 1
    if (tier === 1 && tier0Done) {
      if (offer([row])) return out
    } else tiers[tier]!.push(row)
  }
  if (!tier0Done && (offer(tiers[0]!) || offer(tiers[1]!))) return out
  if (offer(tiers[2]!)) return out
  if (plan.long.length === 0) {
    // Only 1–2 character words: names only ([FIND1]), holding every word in any order.
    const longest = terms.reduce((a, b) => (b.length > a.length ? b : a))
    offer(rowsWhere(rowsHolding(walked.rows, longest), (row) => !row.folded.includes(plan.phrase) && terms.every((t) => row.folded.includes(t)) && !outside(row)))
  }
  else textOnlyTier(db, plan, walked.rows, (row) => !row.folded.includes(plan.phrase) && !outside(row), holdsAll, offer)
  return out
}

/**
 * [FIND5] The text-only tier: the kept rows (`rows`, in rank order) that are `candidate`s (the
 * name does not hold the phrase; in the caller's regions) and whose name or text holds every
 * word, offered in rank order until `offer` says the page is full. Nothing here walks the whole
 * list: the first `batch` candidates are checked in rank order (common words fill the page
 * there); then the index's rows matching every 3+ character word (one FTS5 statement for all of
 * them, which skips through the longer posting lists) are placed in the list through a rowid →
 * position map, sorted, and only they are checked, in rank order. A 1–2 character word is
 * checked on the kept name, else on the text. The cost follows the matches, not the 100,000 rows
 * of a reader of everything (issue 16: two words, or a word and a number, whose names do not
 * fill the page). Past `narrowPerCandidate` matches per candidate left (tests set it to 0), the
 * rest of the list is checked in rank order, a batch at a time.
 */
function textOnlyTier(
  db: Database.Database,
  plan: SearchPlan,
  rows: readonly Walked[],
  candidate: (row: Walked) => boolean,
  holdsAll: (name: string, body: string) => boolean,
  offer: (rows: Iterable<{ hit: SearchHit }>) => boolean,
): void {
  // A 1–2 character word no case folding can reach (digits, CJK, Hangul) is checked by SQLite on
  // the raw text: a candidate without it is never handed over (the common "a word and a number").
  const caseless = plan.short.filter(isCaseless)
  const where = caseless.map(() => 'AND (instr(name, ?) > 0 OR instr(body, ?) > 0)').join(' ')
  const whereParams = caseless.flatMap((t) => [t, t])
  /** Offers the rows of `batch` that hold every word: by the kept name alone, else with their text. */
  const checked = (batch: Walked[]): boolean => {
    const needText = batch.filter((r) => !holdsAll(r.folded, ''))
    const bodies = new Map<number, string>()
    for (const [rowid, body] of byRowids<[number, string]>(db, 'rowid, body', needText.map((r) => r.rowid), where, whereParams)) bodies.set(rowid, body)
    return offer(batch.filter((r) => holdsAll(r.folded, bodies.get(r.rowid)?.toLowerCase() ?? '')))
  }
  /** The next `size` of `next()`'s candidates (fewer: they ran out). */
  const take = (next: () => Walked | undefined, size: number): Walked[] => {
    const batch: Walked[] = []
    for (let row: Walked | undefined; batch.length < size && (row = next()); ) batch.push(row)
    return batch
  }
  /** Checks `next()`'s candidates a batch at a time until the page is full or they run out. */
  const inBatches = (next: () => Walked | undefined): void => {
    for (let batch = take(next, BATCH); !checked(batch) && batch.length === BATCH; batch = take(next, BATCH));
  }
  let scanned = 0
  const nextInList = (): Walked | undefined => {
    while (scanned < rows.length) {
      const row = rows[scanned++]!
      if (candidate(row)) return row
    }
    return undefined
  }
  if (checked(take(nextInList, searchWithinLimits.batch)) || scanned >= rows.length) return
  // The rows matching every long word, read only while they are few next to the candidates left.
  const most = Math.floor((rows.length - scanned) * searchWithinLimits.narrowPerCandidate)
  const words = plan.long.map(fts5Phrase).join(' ')
  const matching = db.prepare<[string, number], number>('SELECT rowid FROM node_search WHERE node_search MATCH ? LIMIT ?').pluck().all(words, most + 1)
  if (matching.length > most) {
    inBatches(nextInList)
    return
  }
  // Their places in the list, past what the first batch scanned, in rank order.
  const position = positionsOf(rows)
  const places = new Int32Array(matching.length)
  let n = 0
  for (const rowid of matching) {
    const at = position(rowid)
    if (at >= scanned) places[n++] = at
  }
  const ranked = places.subarray(0, n).sort()
  let k = 0
  const nextMatch = (): Walked | undefined => {
    while (k < ranked.length) {
      const row = rows[ranked[k++]!]!
      if (candidate(row)) return row
    }
    return undefined
  }
  // Every long word matched by the index: with no short word, nothing left to check.
  if (plan.short.length > 0) inBatches(nextMatch)
  else offer(each(nextMatch))
}

/** What a kept list's names are searched in ([FIND5]): every folded name, joined by NUL (never in a query: planSearch refuses control characters), and where each starts. */
interface Haystack {
  text: string
  starts: Int32Array
}
const haystacks = new WeakMap<readonly Walked[], Haystack>()

/**
 * [FIND5] The rows of `rows` whose folded name holds `needle`, in the list's order, each with
 * where its first occurrence starts: one native `indexOf` over the joined names (built once per
 * list) instead of one per row, so a phrase that few names hold costs a pass over the text, not a
 * call per row of a reader of everything.
 */
function* rowsHolding(rows: readonly Walked[], needle: string): Generator<[Walked, number]> {
  let hay = haystacks.get(rows)
  if (!hay) {
    const starts = new Int32Array(rows.length)
    let at = 0
    rows.forEach((row, i) => {
      starts[i] = at
      at += row.folded.length + 1
    })
    haystacks.set(rows, (hay = { text: rows.map((row) => row.folded).join('\u0000'), starts }))
  }
  const { text, starts } = hay
  let i = 0
  for (let found = text.indexOf(needle); found >= 0 && needle !== ''; found = i < rows.length ? text.indexOf(needle, starts[i]!) : -1) {
    while (i + 1 < rows.length && starts[i + 1]! <= found) i++
    yield [rows[i]!, found - starts[i]!]
    i++
  }
}

/** The rows of `found` (rowsHolding) that `keep` takes. */
function* rowsWhere(found: Iterable<[Walked, number]>, keep: (row: Walked) => boolean): Generator<Walked> {
  for (const [row] of found) if (keep(row)) yield row
}

/** `next()`'s values until it has none. */
function* each<T>(next: () => T | undefined): Generator<T> {
  for (let value = next(); value !== undefined; value = next()) yield value
}

/** Each kept list's rowid → position map (built on first use; the list is replaced when a name changes, and its map goes with it). */
const positions = new WeakMap<readonly Walked[], Int32Array | Map<number, number>>()

/** `rows`' position of a rowid, -1 when it is not in the list (not readable, not indexed). */
function positionsOf(rows: readonly Walked[]): (rowid: number) => number {
  let index = positions.get(rows)
  if (!index) {
    let max = 0
    for (const row of rows) max = Math.max(max, row.rowid)
    // A typed array while the rowids are dense enough (a file with many deleted rows: a map).
    if (max <= 4 * rows.length + 1024) {
      const array = new Int32Array(max + 1).fill(-1)
      rows.forEach((row, at) => (array[row.rowid] = at))
      index = array
    } else index = new Map(rows.map((row, at) => [row.rowid, at]))
    positions.set(rows, index)
  }
  const found = index
  return found instanceof Int32Array ? (rowid) => (rowid >= 0 && rowid < found.length ? found[rowid]! : -1) : (rowid) => found.get(rowid) ?? -1
}

function toRow(rowid: number, path: string, name: string, nodeType: string, phrase: string): Row {
  return { rowid, hit: { path: path as NodePath, name, nodeType }, folded: name.toLowerCase(), tier: nameTier(name, phrase), length: codePoints(name) }
}

/** Rows of the index by rowid (and `where`, more conditions on them), BATCH at a time, in no particular order. */
function* byRowids<R extends unknown[]>(db: Database.Database, columns: string, ids: readonly number[], where = '', whereParams: readonly unknown[] = []): Generator<R> {
  for (let i = 0; i < ids.length; i += BATCH) {
    const batch = ids.slice(i, i + BATCH)
    yield* db.prepare<unknown[], R>(`SELECT ${columns} FROM node_search WHERE rowid IN (${batch.map(() => '?').join(',')}) ${where}`).raw().iterate(...batch, ...whereParams)
  }
}

/**
 * Whether lower-casing can neither change `term` nor produce it from other text: ASCII other than
 * letters, CJK symbols, kana and ideographs (U+3000–U+9FFF) and Hangul syllables (U+AC00–U+D7A3),
 * blocks without a cased letter (unlike U+A640–U+ABBF between them). Lower-casing maps letters to
 * letters and combining marks only, so for such a term `text.toLowerCase().includes(term)` is
 * `text.includes(term)`, and SQLite's `instr` on the raw text decides it.
 */
export function isCaseless(term: string): boolean {
  for (const ch of term) {
    const c = ch.codePointAt(0)!
    const asciiNonLetter = c >= 0x20 && c < 0x7f && !/[A-Za-z]/u.test(ch)
    if (!asciiNonLetter && !(c >= 0x3000 && c <= 0x9fff) && !(c >= 0xac00 && c <= 0xd7a3)) return false
  }
  return true
}
