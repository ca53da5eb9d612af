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
  /**
   * `${type}\0${kind}\0${field}\0${value}` → one id, or a set when several subscriptions share
   * the key. Invites have unique values, so most keys hold a bare string: no Set per entry.
   */
  private readonly byKey = new Map<string, string | Set<string>>()
  /** `${type}\0${kind}` → lower-cased field → number of subscriptions indexed on it. */
  private readonly fieldsByTypeKind = new Map<string, Map<string, number>>()
  /** id → key, so removal is O(1) and re-adding under a new key moves the entry. */
  private readonly keyById = new Map<string, string>()

  get size(): number {
    return this.keyById.size
  }

  add(id: string, t: IndexedTrigger): void {
    if (this.keyById.has(id)) this.remove(id)
    const typeKind = `${t.nodeType}\0${t.kind}`
    const field = t.field === null ? ANY_FIELD : t.field.trim().toLowerCase()
    const value = t.field === null ? '' : (matchKey(t.value) ?? '')
    const key = `${typeKind}\0${field}\0${value}`
    const held = this.byKey.get(key)
    if (held === undefined) this.byKey.set(key, id)
    else if (typeof held === 'string') this.byKey.set(key, new Set([held, id]))
    else held.add(id)
    let fields = this.fieldsByTypeKind.get(typeKind)
    if (!fields) this.fieldsByTypeKind.set(typeKind, (fields = new Map()))
    fields.set(field, (fields.get(field) ?? 0) + 1)
    this.keyById.set(id, key)
  }

  remove(id: string): boolean {
    const key = this.keyById.get(id)
    if (key === undefined) return false
    this.keyById.delete(id)
    const held = this.byKey.get(key)
    if (typeof held === 'string') {
      if (held === id) this.byKey.delete(key)
    } else if (held) {
      held.delete(id)
      if (held.size === 1) this.byKey.set(key, held.values().next().value as string)
      else if (held.size === 0) this.byKey.delete(key)
    }
    const [type, kind, field] = key.split('\0')
    const typeKind = `${type}\0${kind}`
    const fields = this.fieldsByTypeKind.get(typeKind)
    if (fields && field !== undefined) {
      const n = (fields.get(field) ?? 1) - 1
      if (n <= 0) fields.delete(field)
      else fields.set(field, n)
      if (fields.size === 0) this.fieldsByTypeKind.delete(typeKind)
    }
    return true
  }

  /** Does any subscription listen to this node type and kind? */
  watches(nodeType: string, kind: MeshChangeKind): boolean {
    return this.fieldsByTypeKind.has(`${nodeType}\0${kind}`)
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
      const held = this.byKey.get(key)
      if (typeof held === 'string') out.push(held)
      else if (held) for (const id of held) out.push(id)
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
