import { SYSTEM, type JsonValue, type NodePath, type NodeQuery } from '../../../shared/index.js'
import type { NodeApi } from '../../nodes/index.js'

/**
 * What a reconciler reads to find work: a node's path and the few top-level fields that say
 * whether it needs any, never its whole content (an activity's log can hold 100,000 lines).
 */
export interface LightRow {
  path: NodePath
  nodeType: string
  fields: Record<string, JsonValue | undefined>
}

/** The node API's light page, where it has one (NodeService.queryFields). */
export interface LightQuerySource {
  queryFields?(principal: typeof SYSTEM, query: NodeQuery, fields: readonly string[]): Promise<LightRow[]>
}

/**
 * A page of `query` (keyset by path, at most `limit`) as light rows. Uses the node API's
 * `queryFields` (storage projects the fields; no content is parsed in JS); an API without it is
 * asked for full nodes, still one page at a time.
 */
export function lightPage(nodes: Pick<NodeApi, 'query'> & LightQuerySource, query: NodeQuery, fields: readonly string[]): (after: string | undefined, limit: number) => Promise<LightRow[]> {
  return async (after, limit) => {
    const q: NodeQuery = { ...query, limit, ...(after !== undefined ? { after } : {}) }
    if (nodes.queryFields) return nodes.queryFields(SYSTEM, q, fields)
    const page = await nodes.query(SYSTEM, q)
    return page.map((n) => ({ path: n.path, nodeType: n.nodeType, fields: Object.fromEntries(fields.map((f) => [f, n.content[f]])) }))
  }
}
