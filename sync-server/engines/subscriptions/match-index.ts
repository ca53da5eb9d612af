import type { JsonObject, MeshChangeKind } from '../../../shared/index.js'
import { matchKey } from './model.js'

/**
 * Routes a node change to its candidate NodeChange subscriptions by (node type, kind, field,
 * value) in O(fields indexed for that type and kind), never by scanning every pending
 * subscription: with 100,000 pending invites a sign-up must still cost one map lookup.
 *
 * A subscription without MatchField is stored under the empty field and matches any node of
 * its type and kind.
 */
const ANY_FIELD = ''

export interface IndexedTrigger {
  nodeType: string
  kind: MeshChangeKind
  field: string | null
  value: string | null
}

export class MatchIndex {
  /** `${type}\0${kind}\0${field}\0${value}` → subscription ids. */
  private readonly byKey = new Map<string, Set<string>>()
  /** `${type}\0${kind}` → lower-cased field → number of subscriptions indexed on it. */
  private readonly fieldsByTypeKind = new Map<string, Map<string, number>>()
  /** id → key, so removal is O(1) and re-adding under a new key moves the entry. */
  private readonly keyById = new Map<string, { key: string; typeKind: string; field: string }>()

  get size(): number {
    return this.keyById.size
  }

  add(id: string, t: IndexedTrigger): void {
    this.remove(id)
    const typeKind = `${t.nodeType}\0${t.kind}`
    const field = t.field === null ? ANY_FIELD : t.field.trim().toLowerCase()
    const value = t.field === null ? '' : (matchKey(t.value) ?? '')
    const key = `${typeKind}\0${field}\0${value}`
    let ids = this.byKey.get(key)
    if (!ids) this.byKey.set(key, (ids = new Set()))
    ids.add(id)
    let fields = this.fieldsByTypeKind.get(typeKind)
    if (!fields) this.fieldsByTypeKind.set(typeKind, (fields = new Map()))
    fields.set(field, (fields.get(field) ?? 0) + 1)
    this.keyById.set(id, { key, typeKind, field })
  }

  remove(id: string): boolean {
    const at = this.keyById.get(id)
    if (!at) return false
    this.keyById.delete(id)
    const ids = this.byKey.get(at.key)
    if (ids) {
      ids.delete(id)
      if (ids.size === 0) this.byKey.delete(at.key)
    }
    const fields = this.fieldsByTypeKind.get(at.typeKind)
    if (fields) {
      const n = (fields.get(at.field) ?? 1) - 1
      if (n <= 0) fields.delete(at.field)
      else fields.set(at.field, n)
      if (fields.size === 0) this.fieldsByTypeKind.delete(at.typeKind)
    }
    return true
  }

  has(id: string): boolean {
    return this.keyById.has(id)
  }

  /** Candidate ids for a change; `content` is null for a deletion (only field-less subscriptions match). */
  candidates(nodeType: string, kind: MeshChangeKind, content: JsonObject | null): string[] {
    const typeKind = `${nodeType}\0${kind}`
    const fields = this.fieldsByTypeKind.get(typeKind)
    if (!fields) return []
    const out: string[] = []
    const collect = (key: string) => {
      const ids = this.byKey.get(key)
      if (ids) for (const id of ids) out.push(id)
    }
    if (fields.has(ANY_FIELD)) collect(`${typeKind}\0${ANY_FIELD}\0`)
    if (content === null) return out
    // Lower-case the node's field names once; a node has few fields, an index may have many values.
    const lowered = new Map<string, unknown>()
    for (const [k, v] of Object.entries(content)) {
      const lk = k.toLowerCase()
      if (!lowered.has(lk) || k === lk) lowered.set(lk, v)
    }
    for (const field of fields.keys()) {
      if (field === ANY_FIELD) continue
      const key = matchKey(lowered.get(field))
      if (key !== null) collect(`${typeKind}\0${field}\0${key}`)
    }
    return out
  }

  /** Node types that have NodeChange subscriptions of this kind (for the reconcile scan). */
  nodeTypesFor(kind: MeshChangeKind): string[] {
    const out = new Set<string>()
    for (const typeKind of this.fieldsByTypeKind.keys()) {
      const [type, k] = typeKind.split('\0')
      if (k === kind && type !== undefined) out.add(type)
    }
    return [...out]
  }
}
