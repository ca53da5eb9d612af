import { WeftError } from '../../shared/errors.js'
import { SEARCH_MAX_QUERY_CHARS, SEARCH_MAX_TERMS } from '../../shared/search-limits.js'
import type { NodePath, PathRange } from '../../shared/index.js'

/**
 * [FIND1] What the full-text index holds of a node, the same on both backends: its display name
 * (the node's name, else its last path segment) and the string values of its content, joined in
 * document order and cut at SEARCH_BODY_CHARS characters (a 1 MB node costs the index what a
 * 4 KB one does). Nodes under a reserved segment (`_Access`, `_Activity`, `_Pin`, ... and any
 * `_Trash` to come) and nodes whose state is not `Active` are not indexed: the hook for trash.
 */
export const SEARCH_BODY_CHARS = 4000
// [FIND3] The query's bounds live in shared/ (the browser's field holds to them too).
export { SEARCH_MAX_QUERY_CHARS, SEARCH_MAX_TERMS }
/** Terms this long or longer go through the trigram index; shorter ones are checked on the matches (or scanned). */
export const TRIGRAM_CHARS = 3

/** A parsed quick-find query: every term must occur in the name or the text. */
export interface SearchPlan {
  /** The whole query, trimmed, spaces collapsed, lower-cased: ranks names that equal, start with or contain it. */
  phrase: string
  /** Lower-cased terms of at least TRIGRAM_CHARS characters (index lookups). */
  long: string[]
  /** Lower-cased shorter terms (checked with `instr`, never through the FTS syntax). */
  short: string[]
}

/** One match, before the access check: what ranking and the answer need, nothing of the content. */
export interface SearchHit {
  path: NodePath
  name: string
  nodeType: string
}

/**
 * [FIND3] Parses a user's query. Terms are split on white space and lower-cased; none of the FTS
 * syntax (`"`, `*`, `NEAR(`, `)`, `AND`, `:`) means anything: adapters quote every term. Empty,
 * over-long or over-many terms are `invalid_request`.
 */
export function planSearch(q: string): SearchPlan {
  const phrase = q.normalize('NFC').trim().split(/\s+/u).filter(Boolean).join(' ').toLowerCase()
  if (phrase === '') throw new WeftError('invalid_request', 'Type something to search for (q is empty).')
  if ([...phrase].length > SEARCH_MAX_QUERY_CHARS) {
    throw new WeftError('invalid_request', `A search is at most ${SEARCH_MAX_QUERY_CHARS} characters.`)
  }
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u001f\u007f]/u.test(phrase)) throw new WeftError('invalid_request', 'A search cannot contain control characters.')
  const terms = [...new Set(phrase.split(' '))]
  if (terms.length > SEARCH_MAX_TERMS) throw new WeftError('invalid_request', `A search has at most ${SEARCH_MAX_TERMS} words.`)
  return {
    phrase,
    long: terms.filter((t) => [...t].length >= TRIGRAM_CHARS),
    short: terms.filter((t) => [...t].length < TRIGRAM_CHARS),
  }
}

/** An FTS5 string literal: the term between double quotes, inner quotes doubled. Operators inside mean nothing. */
export function fts5Phrase(term: string): string {
  return `"${term.replaceAll('"', '""')}"`
}

/** A tsquery prefix term: the term between single quotes (inner ones doubled, backslashes escaped), then `:*`. */
export function tsqueryPrefix(term: string): string {
  return `'${term.replaceAll('\\', '\\\\').replaceAll("'", "''")}':*`
}

/** Whether `path` lies in one of `regions` (sorted, disjoint, as AccessService.readRegions gives them): a binary search. */
export function inRegions(path: string, regions: readonly PathRange[]): boolean {
  let lo = 0
  let hi = regions.length - 1
  while (lo <= hi) {
    const mid = (lo + hi) >> 1
    const r = regions[mid]!
    if (path < r.from) hi = mid - 1
    else if (path >= r.to) lo = mid + 1
    else return true
  }
  return false
}
