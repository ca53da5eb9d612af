import { isSystem, selfAndAncestors, type JsonValue, type MeshNode, type NodePath, type Principal } from '../../shared/index.js'
import type { NodeService } from '../nodes/index.js'
import { planSearch, SEARCH_BODY_CHARS, type SearchPlan, type StorageAdapter } from '../storage/index.js'

export const SEARCH_DEFAULT_LIMIT = 20
export const SEARCH_MAX_LIMIT = 50
/** Characters of text around the first match that a result shows. */
const SNIPPET_CHARS = 120

export interface SearchResult {
  path: NodePath
  name: string
  nodeType: string
  /** A short stretch of the node's text around the first matching word ('' when only the name matched and there is no text). */
  snippet: string
  /**
   * Where it is: the names of its ancestors, the top first, each one the caller may read (one
   * they may not is left out, never named). Two results of one name are told apart by it.
   */
  where: string[]
}

/**
 * [FIND2] Quick find: the nodes whose name or text holds every word of the query, among those
 * the caller may read, best first. The read check is the one every read makes
 * (`NodeService.permissions`), applied to each match in rank order before it takes a place; the
 * rank depends on each node alone, so a node the caller cannot read never moves, adds or removes
 * a readable one (no counts, no cursor: nothing else is answered).
 */
export class SearchService {
  constructor(
    private readonly nodes: NodeService,
    private readonly storage: StorageAdapter,
  ) {}

  async search(principal: Principal, q: string, limit = SEARCH_DEFAULT_LIMIT): Promise<SearchResult[]> {
    const plan = planSearch(q)
    const want = Math.min(Math.max(1, Math.floor(limit)), SEARCH_MAX_LIMIT)
    const canRead = isSystem(principal) ? () => true : (path: NodePath) => this.nodes.permissions(principal, path).has('Read')
    // [FIND4] Driven by the caller's readable regions: a row outside them is never examined.
    const hits = await this.storage.searchNodes(plan, canRead, want, this.nodes.readRegions(principal) ?? undefined)
    // Read as the caller: the same check again, and the snippet comes from what they may read.
    // All at once (the reads are independent): the answer waits for the slowest, not the sum.
    const read = await Promise.all(hits.map((hit) => this.nodes.get(principal, hit.path).catch(() => null)))
    // The ancestors' names, each read once as the caller (an unreadable one reads as null).
    const names = new Map<string, Promise<string | null>>()
    const nameOf = (path: NodePath) => {
      let name = names.get(path)
      if (!name) names.set(path, (name = this.nodes.get(principal, path).then((n) => n?.name ?? null, () => null)))
      return name
    }
    const where = await Promise.all(
      hits.map(async (hit, i) => (read[i] ? (await Promise.all(selfAndAncestors(hit.path).slice(1).reverse().map(nameOf))).filter((n): n is string => n !== null) : [])),
    )
    const out: SearchResult[] = []
    hits.forEach((hit, i) => {
      const node = read[i]
      if (node) out.push({ path: hit.path, name: hit.name, nodeType: hit.nodeType, snippet: snippetOf(node, plan), where: where[i]! })
    })
    return out
  }
}

/** The node's string values in document order, joined by new lines and cut like the index's text ([FIND1]). */
export function searchText(content: JsonValue): string {
  const parts: string[] = []
  const walk = (v: JsonValue): void => {
    if (typeof v === 'string') parts.push(v)
    else if (Array.isArray(v)) v.forEach(walk)
    else if (v !== null && typeof v === 'object') for (const child of Object.values(v)) walk(child as JsonValue)
  }
  walk(content)
  return [...parts.join('\n')].slice(0, SEARCH_BODY_CHARS).join('')
}

function snippetOf(node: MeshNode, plan: SearchPlan): string {
  const text = searchText(node.content).replace(/\s+/gu, ' ')
  const lower = text.toLowerCase()
  let at = -1
  for (const term of [...plan.long, ...plan.short]) {
    const i = lower.indexOf(term)
    if (i >= 0 && (at < 0 || i < at)) at = i
  }
  const chars = [...text]
  // Count in code points, so a cut never splits a surrogate pair (an emoji).
  const start = at < 0 ? 0 : Math.max(0, [...text.slice(0, at)].length - SNIPPET_CHARS / 4)
  const piece = chars.slice(start, start + SNIPPET_CHARS).join('')
  return `${start > 0 ? '…' : ''}${piece}${start + SNIPPET_CHARS < chars.length ? '…' : ''}`
}
