import type { JsonValue } from '../../shared/json.js'
import { docToJson } from '../../shared/merge-patch.js'
import { ancestorsOf } from '../controllers/names-controller.js'
import { NetworkError, type SearchHit } from '../api/index.js'
import { app } from '../app-context.js'

/** Keystrokes closer together than this are one search (quick find, the link picker). */
export const FIND_DEBOUNCE_MS = 150
/**
 * [FIND7] Offline, the text of at most this many nodes held on this device is read (each a Y.Doc
 * decoded from IndexedDB), the most recently updated first: text where it is cheap, names always.
 */
export const OFFLINE_TEXT_NODES = 300
/** Characters of text around the first match an offline result shows. */
const SNIPPET_CHARS = 100

/**
 * The server's quick find (`GET /api/search`: only nodes the caller may read, anywhere in the
 * mesh); null when this device is offline or the server cannot be reached, so the caller falls
 * back to the nodes this device holds. Other errors are thrown.
 */
export async function searchOnline(q: string, limit: number): Promise<SearchHit[] | null> {
  if (!navigator.onLine) return null
  try {
    return await app().client.api.search(q, limit)
  } catch (e) {
    if (e instanceof NetworkError) return null
    throw e
  }
}

/** A node's string values in document order, as the server's index reads them ([FIND1]). */
function textOf(content: JsonValue): string {
  const parts: string[] = []
  const walk = (v: JsonValue): void => {
    if (typeof v === 'string') parts.push(v)
    else if (Array.isArray(v)) v.forEach(walk)
    else if (v !== null && typeof v === 'object') for (const child of Object.values(v)) walk(child as JsonValue)
  }
  walk(content)
  return parts.join(' ').replace(/\s+/gu, ' ')
}

/**
 * [FIND7] Quick find on this device (offline, or the server unreachable): the nodes it holds
 * (every one was readable when it synced), ranked as the server ranks ([FIND2]: the name equal to
 * the query, starting with it, holding it, holding every word; then text only; then the shorter
 * name, then the path). Every word must be in the name or, for the OFFLINE_TEXT_NODES most
 * recently updated nodes, in the text. Nodes under a reserved `_` segment are left out.
 */
export async function findOnDevice(q: string, limit: number): Promise<SearchHit[]> {
  const { store } = app().client
  const phrase = q.normalize('NFC').trim().split(/\s+/u).filter(Boolean).join(' ').toLowerCase()
  const terms = [...new Set(phrase.split(' '))]
  if (phrase === '') return []
  const all = await store.db.nodes.toArray()
  const rows = all.filter((r) => !r.path.startsWith('_') && !r.path.includes('/_'))
  const nameAt = new Map(all.map((r) => [r.path, r.name]))
  const ranked: { hit: SearchHit; tier: number; length: number }[] = []
  const rest: typeof rows = []
  for (const r of rows) {
    const name = r.name.toLowerCase()
    const at = name.indexOf(phrase)
    const tier = name === phrase ? 0 : at === 0 ? 1 : at > 0 ? 2 : terms.every((t) => name.includes(t)) ? 3 : -1
    if (tier >= 0) ranked.push({ hit: { path: r.path, name: r.name, nodeType: r.nodeType, snippet: '' }, tier, length: [...r.name].length })
    else rest.push(r)
  }
  if (ranked.length < limit && rest.length) {
    const recent = rest.sort((a, b) => (a.updatedAt < b.updatedAt ? 1 : a.updatedAt > b.updatedAt ? -1 : 0)).slice(0, OFFLINE_TEXT_NODES)
    const docs = await store.loadDocs(recent.map((r) => r.path))
    for (const r of recent) {
      const doc = docs.get(r.path)
      if (!doc) continue
      const text = textOf(docToJson(doc))
      doc.destroy()
      const lower = text.toLowerCase()
      const name = r.name.toLowerCase()
      if (!terms.every((t) => name.includes(t) || lower.includes(t))) continue
      const at = Math.max(0, Math.min(...terms.map((t) => lower.indexOf(t)).filter((i) => i >= 0)) - SNIPPET_CHARS / 4)
      const snippet = `${at > 0 ? '…' : ''}${text.slice(at, at + SNIPPET_CHARS)}${at + SNIPPET_CHARS < text.length ? '…' : ''}`
      ranked.push({ hit: { path: r.path, name: r.name, nodeType: r.nodeType, snippet }, tier: 4, length: [...r.name].length })
    }
  }
  ranked.sort((a, b) => a.tier - b.tier || a.length - b.length || (a.hit.path < b.hit.path ? -1 : a.hit.path > b.hit.path ? 1 : 0))
  // Where each is, from the names this device holds (an ancestor it does not hold is left out).
  const where = (path: string) => ancestorsOf(path).flatMap((p) => nameAt.get(p) ?? [])
  return ranked.slice(0, limit).map((r) => ({ ...r.hit, where: where(r.hit.path) }))
}
