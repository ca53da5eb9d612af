import * as Y from 'yjs'
import { CONTENT_MAP, WeftError } from '../../shared/index.js'

/**
 * The update gatekeeper: which top-level fields of `content` a client's Yjs update touches,
 * decided from `Y.decodeUpdate` and the server doc's struct store WITHOUT applying the update,
 * so a refused update never enters the server doc (DESIGN.md, "Gatekeeping CRDT updates").
 *
 * How yjs encodes an item's place (yjs `lazyStructReaderGenerator`, `Item.getMissing`):
 *  - with neither `origin` nor `rightOrigin`, the item names its parent: a root name (string)
 *    or the id of the item whose content is the parent type; map entries also name `parentSub`;
 *  - otherwise parent and parentSub are omitted and yjs copies them from the left (origin) item,
 *    or the right one. So an overwrite of a map key, or text typed after other text, is only
 *    attributable through its neighbours.
 * A referenced id is looked up in the server store first (anything below the server's state for
 * that client), then among this update's own structs; anything else is missing, and the server
 * would keep the update pending: we refuse it instead.
 */
export interface UpdateInspection {
  /** top-level keys of the `content` map that the update inserts, overwrites, deletes, or changes anywhere below */
  fields: Set<string>
  /** true when the update touches a root type other than `content`, or structure we cannot attribute (refuse such updates) */
  unattributable: boolean
  /** true when the update contains no structs and no deletions (a no-op) */
  empty: boolean
}

type Struct = Y.Item | Y.GC

/**
 * A field name, or why there is none. `NO_EFFECT`: yjs would integrate the item as a GC (its
 * neighbour or parent was already garbage-collected on the server), so it changes nothing.
 */
const NO_EFFECT = Symbol('no-effect')
const UNATTRIBUTABLE = Symbol('unattributable')
/** Marks an update struct whose attribution is being computed: meeting it again is a cycle. */
const IN_PROGRESS = Symbol('in-progress')
type Attribution = string | typeof NO_EFFECT | typeof UNATTRIBUTABLE

type Located = { inServer: true; struct: Struct } | { inServer: false; struct: Struct }

/** Index of the struct in `structs` (sorted by clock, non-overlapping) that holds `clock`, or -1. */
function findStructIndex(structs: readonly Struct[], clock: number): number {
  let lo = 0
  let hi = structs.length - 1
  while (lo <= hi) {
    const mid = (lo + hi) >>> 1
    const s = structs[mid]!
    if (clock < s.id.clock) hi = mid - 1
    else if (clock >= s.id.clock + s.length) lo = mid + 1
    else return mid
  }
  return -1
}

/** First index whose struct ends after `clock` (the first that may overlap a range starting there). */
function firstEndingAfter(structs: readonly Struct[], clock: number): number {
  let lo = 0
  let hi = structs.length
  while (lo < hi) {
    const mid = (lo + hi) >>> 1
    const s = structs[mid]!
    if (s.id.clock + s.length <= clock) lo = mid + 1
    else hi = mid
  }
  return lo
}

const EMPTY: readonly Struct[] = []

class Inspector {
  readonly fields = new Set<string>()
  unattributable = false
  private readonly store: Y.Doc['store']
  // Compared by identity only.
  private readonly contentRoot: unknown
  /** Non-Skip structs of the update per client, sorted by clock. */
  private readonly updateStructs = new Map<number, Struct[]>()
  private readonly updateMemo = new Map<Struct, Attribution | typeof IN_PROGRESS>()
  /** Attribution of the items whose parent is a given (nested) server type. */
  private readonly serverTypeMemo = new Map<Y.AbstractType<unknown>, Attribution>()
  private readonly stateCache = new Map<number, number>()

  constructor(doc: Y.Doc) {
    this.store = doc.store
    this.contentRoot = doc.share.get(CONTENT_MAP)
  }

  add(attribution: Attribution): void {
    if (attribution === UNATTRIBUTABLE) this.unattributable = true
    else if (attribution !== NO_EFFECT) this.fields.add(attribution)
  }

  state(client: number): number {
    let s = this.stateCache.get(client)
    if (s === undefined) {
      s = Y.getState(this.store, client)
      this.stateCache.set(client, s)
    }
    return s
  }

  indexUpdate(structs: readonly (Struct | Y.Skip)[]): void {
    for (const s of structs) {
      if (s instanceof Y.Skip) continue
      let list = this.updateStructs.get(s.id.client)
      if (!list) this.updateStructs.set(s.id.client, (list = []))
      list.push(s as Struct)
    }
    // A well-formed update lists each client once, in clock order; a crafted one may not.
    for (const list of this.updateStructs.values()) {
      for (let i = 1; i < list.length; i++) {
        if (list[i]!.id.clock < list[i - 1]!.id.clock + list[i - 1]!.length) {
          list.sort((a, b) => a.id.clock - b.id.clock)
          break
        }
      }
    }
  }

  /** Every struct the server does not hold yet must be attributable and must not wait on a gap. */
  inspectStructs(): void {
    for (const [client, list] of this.updateStructs) {
      const known = this.state(client)
      let expected = known
      for (const s of list) {
        const end = s.id.clock + s.length
        if (end <= known) continue // the server already holds it: applying it again is a no-op
        if (s.id.clock > expected) {
          // A gap (a Skip, or structs the server never got): yjs would keep the rest pending.
          this.unattributable = true
        }
        if (end > expected) expected = end
        // A GC struct is content the client created and deleted before the server saw it
        // (offline create-then-replace): it is invisible, so it touches no field.
        if (!(s instanceof Y.GC)) this.add(this.attributeUpdateStruct(s))
      }
    }
  }

  inspectDeleteSet(ds: ReturnType<typeof Y.decodeUpdate>['ds']): void {
    for (const [client, ranges] of ds.clients) {
      const known = this.state(client)
      const serverStructs = this.store.clients.get(client) ?? EMPTY
      const updateStructs = this.updateStructs.get(client) ?? EMPTY
      for (const { clock, len } of ranges) {
        if (len <= 0) continue
        const end = clock + len
        // Part the server holds: only deletions of live items change anything (a full-state
        // update repeats the whole history of deletions; those must not count as touches).
        const serverEnd = Math.min(end, known)
        for (let i = firstEndingAfter(serverStructs, clock); i < serverStructs.length; i++) {
          const s = serverStructs[i]!
          if (s.id.clock >= serverEnd) break
          if (s instanceof Y.Item && !s.deleted) this.add(this.attributeServerItem(s))
        }
        // Part beyond the server's state: it must be covered by this update's own structs.
        let pos = Math.max(clock, known)
        if (pos >= end) continue
        for (let i = firstEndingAfter(updateStructs, pos); i < updateStructs.length && pos < end; i++) {
          const s = updateStructs[i]!
          if (s.id.clock > pos) break
          this.add(s instanceof Y.GC ? NO_EFFECT : this.attributeUpdateStruct(s))
          pos = s.id.clock + s.length
        }
        if (pos < end) this.unattributable = true
      }
    }
  }

  private locate(id: Y.ID): Located | null {
    if (id.clock < this.state(id.client)) {
      const structs = this.store.clients.get(id.client) ?? EMPTY
      const i = findStructIndex(structs, id.clock)
      return i < 0 ? null : { inServer: true, struct: structs[i]! }
    }
    const structs = this.updateStructs.get(id.client)
    if (!structs) return null
    const i = findStructIndex(structs, id.clock)
    return i < 0 ? null : { inServer: false, struct: structs[i]! }
  }

  /**
   * Walks up an integrated item's parents to the child of the root `content` map. Iterative:
   * nesting depth is whatever clients built.
   */
  private attributeServerItem(start: Y.Item): Attribution {
    const visited: Y.AbstractType<unknown>[] = []
    let item = start
    let result: Attribution
    for (;;) {
      const parent = item.parent
      if (!(parent instanceof Y.AbstractType)) {
        result = UNATTRIBUTABLE
        break
      }
      if (parent._item === null) {
        // Another root type, or `content` used as a list: not ours.
        result = parent === this.contentRoot && item.parentSub !== null ? item.parentSub : UNATTRIBUTABLE
        break
      }
      const cached = this.serverTypeMemo.get(parent)
      if (cached !== undefined) {
        result = cached
        break
      }
      visited.push(parent)
      item = parent._item
    }
    for (const type of visited) this.serverTypeMemo.set(type, result)
    return result
  }

  private attributeServerStruct(struct: Struct): Attribution {
    // Yjs turns an item whose neighbour or parent was garbage-collected into a GC itself.
    return struct instanceof Y.Item ? this.attributeServerItem(struct) : NO_EFFECT
  }

  /**
   * Follows origin / rightOrigin / parent links through the update until a root name or a
   * struct the server holds. Iterative: a merged update of many keystrokes is a long chain.
   */
  private attributeUpdateStruct(start: Y.Item): Attribution {
    const chain: Struct[] = []
    let current: Struct = start
    let result: Attribution
    for (;;) {
      const memo = this.updateMemo.get(current)
      if (memo !== undefined) {
        result = memo === IN_PROGRESS ? UNATTRIBUTABLE : memo
        break
      }
      if (current instanceof Y.GC) {
        // Yjs turns an item whose neighbour or parent is a GC into a GC itself: invisible.
        result = NO_EFFECT
        break
      }
      this.updateMemo.set(current, IN_PROGRESS)
      chain.push(current)
      const item: Y.Item = current
      if (item.id.clock < this.state(item.id.client)) {
        // Partly known: the server's copy of its first part has the same parent.
        const own = this.locate(item.id)
        result = own ? this.attributeServerStruct(own.struct) : UNATTRIBUTABLE
        break
      }
      // Before integration, `parent` is a root name, the id of the parent item, or null.
      const parent = item.parent as Y.AbstractType<unknown> | Y.ID | string | null
      if (typeof parent === 'string') {
        result = parent === CONTENT_MAP && item.parentSub !== null ? item.parentSub : UNATTRIBUTABLE
        break
      }
      if (item.origin && item.rightOrigin) {
        // Yjs needs both neighbours: a missing one leaves the update pending, a GC'd one kills the item.
        const right = this.locate(item.rightOrigin)
        if (right === null) {
          result = UNATTRIBUTABLE
          break
        }
        if (right.inServer && right.struct instanceof Y.GC) {
          result = NO_EFFECT
          break
        }
      }
      const next = item.origin ?? item.rightOrigin ?? (parent instanceof Y.ID ? parent : null)
      if (next === null) {
        result = UNATTRIBUTABLE // no parent and no neighbours: malformed
        break
      }
      const found = this.locate(next)
      if (found === null) {
        result = UNATTRIBUTABLE // depends on structs nobody has sent
        break
      }
      if (found.inServer) {
        result = this.attributeServerStruct(found.struct)
        break
      }
      current = found.struct
    }
    for (const s of chain) this.updateMemo.set(s, result)
    return result
  }
}

/**
 * Which top-level `content` fields `update` (Yjs update format v1) touches against `serverDoc`,
 * without applying it. Bytes yjs cannot decode throw `protocol_error`. When `unattributable` is
 * true, `fields` lists what could be attributed and is not the whole story.
 */
export function inspectUpdate(serverDoc: Y.Doc, update: Uint8Array): UpdateInspection {
  let decoded: ReturnType<typeof Y.decodeUpdate>
  try {
    decoded = Y.decodeUpdate(update)
  } catch (e) {
    throw new WeftError('protocol_error', `The Yjs update could not be decoded: ${(e as Error).message}`)
  }
  const { structs, ds } = decoded
  const hasStructs = structs.some((s) => !(s instanceof Y.Skip))
  let hasDeletions = false
  for (const ranges of ds.clients.values()) {
    if (ranges.some((r) => r.len > 0)) hasDeletions = true
  }
  if (!hasStructs && !hasDeletions) return { fields: new Set(), unattributable: false, empty: true }

  const inspector = new Inspector(serverDoc)
  inspector.indexUpdate(structs)
  inspector.inspectStructs()
  inspector.inspectDeleteSet(ds)
  return { fields: inspector.fields, unattributable: inspector.unattributable, empty: false }
}
