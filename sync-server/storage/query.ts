import { WeftError } from '../../shared/errors.js'
import type { NodeQuery } from '../../shared/index.js'

export const DEFAULT_QUERY_LIMIT = 100
export const MAX_QUERY_LIMIT = 1000
export const MAX_CHANGES_LIMIT = 10_000

const FIELD_NAME = /^[A-Za-z0-9_]+$/

export interface NormalisedQuery {
  parent: string | undefined
  nodeType: string | undefined
  /** Lower-cased field name and lower-cased value: both compare case-insensitively (NodeQuery). */
  where: { field: string; value: string }[]
  limit: number
  after: string | undefined
}

/** A field name an engine asks `queryFields` for: the same safe alphabet (it is spelled into SQL). */
export function assertFieldName(field: string): void {
  if (!FIELD_NAME.test(field)) throw new WeftError('invalid_request', `Invalid query field ${JSON.stringify(field)}: use letters, digits and _.`)
}

/** Field names reach SQL only as bound parameters, but are still restricted to a safe alphabet. */
export function normaliseQuery(query: NodeQuery): NormalisedQuery {
  const where = Object.entries(query.where ?? {}).map(([field, value]) => {
    assertFieldName(field)
    return { field: field.toLowerCase(), value: String(value).toLowerCase() }
  })
  return {
    parent: query.parent,
    nodeType: query.nodeType,
    where,
    limit: clampLimit(query.limit, DEFAULT_QUERY_LIMIT, MAX_QUERY_LIMIT),
    after: query.after,
  }
}

export function clampLimit(limit: number | undefined, fallback: number, max: number): number {
  if (limit === undefined || !Number.isFinite(limit)) return fallback
  return Math.max(1, Math.min(max, Math.floor(limit)))
}

/** The exclusive upper bound of the range of paths under `path/`: '0' is the character after '/'. */
export function descendantRange(path: string): [string, string] {
  return [`${path}/`, `${path}0`]
}
