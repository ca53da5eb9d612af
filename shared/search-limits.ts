/**
 * [FIND3] The bounds of a quick-find query, shared so the browser's field stops where the server
 * would refuse (sync-server/storage/search-plan.ts enforces them; the app's input holds to them).
 */

/** A query longer than this (in characters) is refused: `invalid_request`. */
export const SEARCH_MAX_QUERY_CHARS = 200
/** Terms of one query at most. */
export const SEARCH_MAX_TERMS = 8
