import * as Y from 'yjs'
import * as decoding from 'lib0/decoding'
import { CONTENT_MAP, jsonEqual, storableText, type JsonValue } from '../../shared/index.js'

/**
 * Admission of a client's Yjs update into a server doc ([ACC10], DESIGN.md "Gatekeeping CRDT
 * updates"). The decision is made on what Yjs itself will integrate, not on a reading of the
 * bytes as sent:
 *
 *  1. The update is NORMALISED against the server's state vector (`Y.diffUpdate`): clocks the
 *     server holds are dropped and a partly-known struct is cut and re-anchored after the
 *     server's last struct of that client. The normalised bytes are the ones the server applies,
 *     so the decision and the apply see the same structs.
 *  2. Every struct must have the canonical shape an honest Yjs client produces: one contiguous
 *     run per client starting at the server's clock (no gaps, no Skip), references that resolve to
 *     an integrable struct (never a GC'd one, never a same-client forward reference), parents
 *     that are live types under the `content` root (Y.Map, Y.Array or Y.Text only), a map entry
 *     under a map and nothing else, JSON values only, nothing nested past `maxDepth`. The
 *     dependencies between clients must be acyclic and satisfied: Yjs would otherwise keep part
 *     of the update pending (applied later, behind the gate's back) or throw half-way.
 *  3. What is left is attributed to top-level fields of `content` by the parent Yjs will use
 *     (the encoded parent, or the left neighbour's, as `Item.getMissing` does), and so is every
 *     live item the delete set removes. One refusal refuses the whole update.
 *
 * The cost is proportional to the update (and to the server structs its delete set covers),
 * never to the doc: nothing is re-encoded and nothing is applied here.
 */
export interface AdmissionPolicy {
  /** Deepest nesting of types and values below `content` (a top-level scalar is depth 1). */
  maxDepth: number
  /** Whether the principal may change structure without a visible value (GC structs). */
  mayWriteStructure: boolean
}

export type AdmissionRefusalCode = 'invalid_update' | 'invalid_content' | 'forbidden' | 'protocol_error' | 'client_id_conflict'

export type Admission =
  | {
      ok: true
      /** The normalised update to apply; null when the server already holds all of it. */
      update: Uint8Array | null
      /** Top-level `content` fields the update inserts into, overwrites or deletes from. */
      fields: ReadonlySet<string>
      /** [ACC12] Yjs client ids the normalised update writes new structs under (not its deletions). */
      clients: ReadonlySet<number>
    }
  | { ok: false; code: AdmissionRefusalCode; message: string }

/**
 * Thrown inside admission only, and caught at its edge. Not an Error: a refusal needs no stack
 * trace, and capturing one would make each refused update of a flood cost several times more.
 */
class Refusal {
  constructor(
    readonly code: AdmissionRefusalCode,
    readonly message: string,
  ) {}
}

const UNSTORABLE_TEXT = 'The update holds a NUL character (U+0000) or half of a character, which cannot be stored; remove it.'

/** [STO10] Text no storage holds: `invalid_content`, the edit's content refused (not its bytes: replaying it cannot help). */
const unstorable = (): never => {
  throw new Refusal('invalid_content', UNSTORABLE_TEXT)
}

const refuse = (message: string): never => {
  throw new Refusal('invalid_update', message)
}

type Struct = Y.Item | Y.GC

/** Where an integrated item sits: its parent type and (for a map entry) its key. */
interface Placement {
  /** The parent type (a server type, or the type an item of this update creates). */
  parent: Y.AbstractType<unknown>
  parentSub: string | null
  /** Top-level field of `content` the item belongs to. */
  field: string
  /** Depth of the item itself (a child of `content` is 1). */
  depth: number
}

type TypeKind = 'map' | 'array' | 'text'

function typeKind(type: unknown): TypeKind | null {
  // Exact constructors: Y.XmlText extends Y.Text, and XML types have no place in a JSON node.
  const ctor = (type as { constructor?: unknown } | null)?.constructor
  if (ctor === Y.Map) return 'map'
  if (ctor === Y.Array) return 'array'
  if (ctor === Y.Text) return 'text'
  return null
}

/** Index of the struct holding `clock` in a clock-sorted, contiguous list, or -1. */
function findIndex(structs: readonly { id: Y.ID; length: number }[], clock: number): number {
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

/** Depth of a JSON value (a scalar is 0); throws past `limit` without recursing further. */
function jsonDepth(value: unknown, limit: number, depth = 0): number {
  if (typeof value === 'string') return storableText(value) ? depth : unstorable()
  if (value === null || typeof value === 'boolean') return depth
  if (typeof value === 'number') return Number.isFinite(value) ? depth : refuse('A value in the update is not a finite number.')
  if (depth >= limit) refuse(`The update nests values deeper than ${limit} levels.`)
  let deepest = depth + 1
  if (Array.isArray(value)) {
    for (const v of value) deepest = Math.max(deepest, jsonDepth(v, limit, depth + 1))
    return deepest
  }
  if (typeof value === 'object' && Object.getPrototypeOf(value) === Object.prototype) {
    for (const k of Object.keys(value)) {
      if (!storableText(k)) unstorable()
      deepest = Math.max(deepest, jsonDepth((value as Record<string, unknown>)[k], limit, depth + 1))
    }
    return deepest
  }
  return refuse('A value in the update is not JSON.')
}

class Admitter {
  readonly fields = new Set<string>()
  private readonly store: Y.Doc['store']
  private readonly root: Y.AbstractType<unknown>
  /** The update's structs per client, contiguous from the server's clock. */
  private readonly sections = new Map<number, Struct[]>()
  /** Next struct to integrate per client (the simulation of Yjs's integration order). */
  private readonly next = new Map<number, number>()
  /** Clock up to which each client is integrated (server state, then the update's structs). */
  private readonly integrated = new Map<number, number>()
  private readonly placements = new Map<Y.Item, Placement>()
  /** Clock after the last struct of each client's run in the update. */
  private readonly ends = new Map<number, number>()
  /** Field and depth of server types already walked. */
  private readonly serverTypes = new Map<Y.AbstractType<unknown>, { field: string; depth: number }>()

  constructor(
    doc: Y.Doc,
    private readonly policy: AdmissionPolicy,
  ) {
    this.store = doc.store
    this.root = doc.getMap(CONTENT_MAP) as unknown as Y.AbstractType<unknown>
  }

  private serverState(client: number): number {
    return Y.getState(this.store, client)
  }

  private done(client: number): number {
    return this.integrated.get(client) ?? this.serverState(client)
  }

  /** Step 2a: one contiguous run per client, starting exactly at the server's clock. */
  index(structs: readonly (Struct | Y.Skip)[]): void {
    let previous: Struct | null = null
    for (const s of structs) {
      if (s instanceof Y.Skip) refuse('The update has a gap (a Skip struct): it depends on changes the server does not have.')
      const struct = s as Struct
      const client = struct.id.client
      let list = this.sections.get(client)
      if (!list) {
        if (struct.id.clock !== this.serverState(client)) refuse('The update depends on changes the server does not have (a gap in a client\'s clocks).')
        this.sections.set(client, (list = []))
        this.next.set(client, 0)
      } else {
        if (previous?.id.client !== client) refuse('The update lists a client twice.')
        if (struct.id.clock !== previous!.id.clock + previous!.length) refuse('The update\'s structs of one client are not contiguous.')
      }
      if (struct.length <= 0) refuse('The update has an empty struct.')
      if (struct instanceof Y.GC && !this.policy.mayWriteStructure) {
        throw new Refusal('forbidden', 'You may not change this node (no Update permission).')
      }
      list.push(struct)
      this.ends.set(client, struct.id.clock + struct.length)
      previous = struct
    }
  }

  /** A struct of the update at `id`, or null. */
  private updateStruct(id: Y.ID): Struct | null {
    const list = this.sections.get(id.client)
    if (!list) return null
    const i = findIndex(list, id.clock)
    return i < 0 ? null : list[i]!
  }

  /** The first reference of `s` that is not integrated yet, if any (same-client ones refused). */
  private pendingDependency(s: Y.Item): Y.ID | null {
    for (const ref of [s.origin, s.rightOrigin, s.parent instanceof Y.ID ? s.parent : null]) {
      if (!ref) continue
      if (ref.client === s.id.client) {
        if (ref.clock >= s.id.clock) refuse('A struct refers to a later struct of its own client.')
        continue
      }
      if (ref.clock >= this.done(ref.client)) return ref
    }
    return null
  }

  /**
   * Step 2b: integrates in an order Yjs can follow (its own algorithm: a depth-first walk that
   * takes one struct of the missing client at a time). A reference nothing provides, or a cycle,
   * would leave part of the update pending: refused.
   */
  integrateAll(): void {
    const waiting = new Set<number>()
    for (const [client, list] of this.sections) {
      while (this.next.get(client)! < list.length) {
        const stack: Struct[] = [list[this.next.get(client)!]!]
        waiting.clear()
        waiting.add(client)
        while (stack.length > 0) {
          const s = stack[stack.length - 1]!
          const dep = s instanceof Y.Item ? this.pendingDependency(s) : null
          if (!dep) {
            this.integrate(s)
            stack.pop()
            waiting.delete(s.id.client)
            continue
          }
          const missing = this.sections.get(dep.client)
          const at = this.next.get(dep.client) ?? 0
          if (!missing || at >= missing.length || dep.clock >= this.ends.get(dep.client)!) {
            refuse('The update depends on changes the server does not have.')
          }
          if (waiting.has(dep.client)) refuse('The update\'s structs depend on each other in a cycle.')
          waiting.add(dep.client)
          stack.push(missing![at]!)
        }
      }
    }
  }

  private integrate(s: Struct): void {
    if (s instanceof Y.Item) this.place(s)
    this.integrated.set(s.id.client, s.id.clock + s.length)
    this.next.set(s.id.client, (this.next.get(s.id.client) ?? 0) + 1)
  }

  /** A struct Yjs can integrate against: a server Item, or an Item of this update placed already. */
  private neighbour(id: Y.ID): { item: Y.Item; placement: Placement } {
    if (id.clock < this.serverState(id.client)) {
      const structs = this.store.clients.get(id.client) ?? []
      const i = findIndex(structs, id.clock)
      const s = i < 0 ? null : structs[i]!
      if (!(s instanceof Y.Item)) return refuse('The update refers to content the server has garbage-collected; reload the node.')
      return { item: s, placement: this.serverPlacement(s) }
    }
    const s = this.updateStruct(id)
    if (!(s instanceof Y.Item)) return refuse('The update refers to a struct that is not an item.')
    const placement = this.placements.get(s)
    if (!placement) return refuse('The update refers to a struct that is not integrated yet.')
    return { item: s, placement }
  }

  /** Where a server item sits, walking up to `content` (memoised per type). */
  private serverPlacement(item: Y.Item): Placement {
    const parent = item.parent
    if (!(parent instanceof Y.AbstractType)) return refuse('The update refers to content outside any type.')
    if (parent === this.root) {
      if (item.parentSub === null) refuse('The node\'s content is a map; the update uses it as a list.')
      return { parent, parentSub: item.parentSub, field: item.parentSub!, depth: 1 }
    }
    const owner = this.serverTypeInfo(parent as Y.AbstractType<unknown>)
    return { parent: parent as Y.AbstractType<unknown>, parentSub: item.parentSub, field: owner.field, depth: owner.depth + 1 }
  }

  /** Field and depth of a nested server type (a child of `content` is depth 1). Iterative. */
  private serverTypeInfo(type: Y.AbstractType<unknown>): { field: string; depth: number } {
    const chain: Y.AbstractType<unknown>[] = []
    let t = type
    let info: { field: string; depth: number }
    for (;;) {
      const hit = this.serverTypes.get(t)
      if (hit) {
        info = hit
        break
      }
      const item = t._item
      if (item === null) return refuse('The update touches a root type other than the node\'s content.')
      const parent = item.parent
      if (!(parent instanceof Y.AbstractType)) return refuse('The update refers to a detached type.')
      if (parent === this.root) {
        if (item.parentSub === null) refuse('The node\'s content is a map; the update uses it as a list.')
        info = { field: item.parentSub!, depth: 1 }
        this.serverTypes.set(t, info)
        break
      }
      chain.push(t)
      t = parent as Y.AbstractType<unknown>
    }
    // chain[i + 1] is the parent of chain[i]; the last one is a child of `t`.
    for (let i = chain.length - 1; i >= 0; i--) {
      info = { field: info.field, depth: info.depth + 1 }
      this.serverTypes.set(chain[i]!, info)
    }
    return this.serverTypes.get(type)!
  }

  /** Step 2c + 3: the parent Yjs will use, its kind, the content allowed there, the field. */
  private place(item: Y.Item): void {
    const left = item.origin ? this.neighbour(item.origin) : null
    const right = item.rightOrigin ? this.neighbour(item.rightOrigin) : null
    let placement: Placement
    if (left || right) {
      const from = (left ?? right)!.placement
      if (left && right && (left.placement.parent !== right.placement.parent || left.placement.parentSub !== right.placement.parentSub)) {
        refuse('A struct\'s neighbours belong to different places.')
      }
      placement = { parent: from.parent, parentSub: from.parentSub, field: from.field, depth: from.depth }
    } else if (typeof item.parent === 'string') {
      if (item.parent !== CONTENT_MAP) refuse('The update touches a root type other than the node\'s content.')
      if (item.parentSub === null) refuse('The node\'s content is a map; the update uses it as a list.')
      placement = { parent: this.root, parentSub: item.parentSub, field: item.parentSub!, depth: 1 }
    } else if (item.parent instanceof Y.ID) {
      const { item: parentItem, placement: of } = this.neighbour(item.parent)
      if (parentItem.deleted && parentItem.id.clock < this.serverState(parentItem.id.client)) refuse('The update writes into a deleted type; reload the node.')
      if (!(parentItem.content instanceof Y.ContentType)) refuse('The update\'s parent is not a type.')
      const parent = (parentItem.content as Y.ContentType).type as Y.AbstractType<unknown>
      placement = { parent, parentSub: item.parentSub, field: of.field, depth: of.depth + 1 }
    } else {
      return refuse('A struct has neither a parent nor neighbours.')
    }
    if (placement.depth > this.policy.maxDepth) refuse(`The update nests deeper than ${this.policy.maxDepth} levels.`)
    const kind = typeKind(placement.parent)
    if (kind === null) refuse('The update writes into a type a node cannot hold.')
    if ((kind === 'map') !== (placement.parentSub !== null)) refuse('A struct\'s key does not match its parent\'s kind.')
    this.checkContent(item, kind!, placement.depth)
    this.placements.set(item, placement)
    this.fields.add(placement.field)
  }

  private checkContent(item: Y.Item, kind: TypeKind, depth: number): void {
    const content = item.content
    if (content instanceof Y.ContentDeleted) return
    // Field names and text as every storage holds them (no NUL; PostgreSQL refuses it).
    if (item.parentSub !== null && !storableText(item.parentSub)) unstorable()
    if (content instanceof Y.ContentString) {
      if (kind !== 'text') refuse('Text content outside a text type.')
      if (!storableText(content.str)) unstorable()
      return
    }
    if (kind === 'text') return refuse('A text type holds text only.')
    if (content instanceof Y.ContentAny) {
      if (kind === 'map' && content.getLength() !== 1) refuse('A map entry holds one value.')
      for (const v of content.getContent()) {
        if (v === undefined) refuse('A value in the update is undefined.')
        if (depth + jsonDepth(v, this.policy.maxDepth - depth) > this.policy.maxDepth) refuse(`The update nests deeper than ${this.policy.maxDepth} levels.`)
      }
      return
    }
    if (content instanceof Y.ContentType) {
      if (typeKind(content.type) === null) refuse('The update creates a type a node cannot hold.')
      return
    }
    refuse('The update holds content a node cannot hold (binary, embeds, formatting, subdocuments).')
  }

  /** Clients the update writes new structs under. */
  clients(): ReadonlySet<number> {
    return new Set(this.sections.keys())
  }

  /** Every live item a delete-set range removes is attributed; a range past what exists is refused. */
  deletions(ds: ReturnType<typeof Y.decodeUpdate>['ds']): void {
    for (const [client, ranges] of ds.clients) {
      const known = this.serverState(client)
      const end = this.done(client)
      const structs = this.store.clients.get(client) ?? []
      for (const { clock, len } of ranges) {
        // Yjs never encodes an empty range, and one it cannot apply would throw when re-encoded.
        if (len <= 0) refuse('The update deletes an empty range.')
        if (clock + len > end) refuse('The update deletes content the server does not have.')
        const stop = Math.min(clock + len, known)
        if (clock >= stop) continue
        // First server struct ending after `clock`.
        let lo = 0
        let hi = structs.length
        while (lo < hi) {
          const mid = (lo + hi) >>> 1
          if (structs[mid]!.id.clock + structs[mid]!.length <= clock) lo = mid + 1
          else hi = mid
        }
        for (let i = lo; i < structs.length && structs[i]!.id.clock < stop; i++) {
          const s = structs[i]!
          if (s instanceof Y.Item && !s.deleted) this.fields.add(this.serverPlacement(s).field)
        }
      }
    }
  }
}

/**
 * [ACC12] The part of an update below the server's state vector is dropped by normalisation as
 * "known": an Ack must never stand for structs that were dropped because somebody else's structs
 * hold their ids. Each known struct of the update is compared, clock by clock, with what the
 * server stores under the same ids (`findIndexSS` order): its left origin at each point, its right
 * origin, its parent and key where the struct names them, and its content. Equal is a harmless
 * resend (a client's resync after a reconnect, an outbox sent twice); different is a collision,
 * refused with `client_id_conflict`. What the server no longer holds cannot be compared and is
 * taken as equal: a garbage-collected struct, and the content (not the place) of a deleted item
 * (a struct of the update that is itself deleted content is not compared at all).
 * Costs what the known part of the update costs.
 */
function refuseCollisions(doc: Y.Doc, structs: readonly (Struct | Y.Skip)[]): void {
  for (const s of structs) {
    // Nothing to compare in a GC or a deleted item's content; skipped whole, so a tiny struct
    // claiming a long deleted run cannot make admission walk the server's structs (the loop
    // below is bounded by the update's own bytes: every other content's length is its size).
    if (!(s instanceof Y.Item) || s.content instanceof Y.ContentDeleted) continue
    const client = s.id.client
    const end = Math.min(s.id.clock + s.length, Y.getState(doc.store, client))
    if (s.id.clock >= end) continue
    const stored = doc.store.clients.get(client)!
    let i = findIndex(stored, s.id.clock)
    for (let from = s.id.clock; from < end; i++) {
      const t = stored[i]
      if (!t) break
      const to = Math.min(end, t.id.clock + t.length)
      if (t instanceof Y.Item && !sameStructs(doc, s, t, from, to)) {
        throw new Refusal(
          'client_id_conflict',
          `The update reuses Yjs ids (client ${client}, clock ${from}) that hold other content on the server; reconnect with a new client id.`,
        )
      }
      from = to
    }
  }
}

/** Whether `s` (of an update) and `t` (stored) agree on the clocks [from, to) they share. */
function sameStructs(doc: Y.Doc, s: Y.Item, t: Y.Item, from: number, to: number): boolean {
  // Inside a struct, a clock's left origin is the clock before it (how Yjs splits and merges).
  const leftOf = (x: Y.Item) => (from === x.id.clock ? x.origin : Y.createID(x.id.client, from - 1))
  if (!Y.compareIDs(leftOf(s), leftOf(t)) || !Y.compareIDs(s.rightOrigin, t.rightOrigin)) return false
  if (from === s.id.clock && s.origin === null && s.rightOrigin === null && !sameParent(doc, s, t)) return false
  return sameContent(s.content, from - s.id.clock, t.content, from - t.id.clock, to - from)
}

/** An update's struct names its parent (a root name or a type's id) and key; the stored one holds the type. */
function sameParent(doc: Y.Doc, s: Y.Item, t: Y.Item): boolean {
  const parent = t.parent
  if (!(parent instanceof Y.AbstractType)) return true
  if (s.parentSub !== t.parentSub) return false
  const named = s.parent as unknown
  if (typeof named === 'string') return parent._item === null && doc.share.get(named) === parent
  if (named instanceof Y.ID) return parent._item !== null && Y.compareIDs(parent._item.id, named)
  return false
}

function sameContent(a: Y.Item['content'], ao: number, b: Y.Item['content'], bo: number, n: number): boolean {
  // A deleted item's content is gone on the side that deleted it: nothing left to compare.
  if (a instanceof Y.ContentDeleted || b instanceof Y.ContentDeleted) return true
  if (a.constructor !== b.constructor) return false
  if (a instanceof Y.ContentAny || a instanceof Y.ContentJSON) {
    const x = (a as Y.ContentAny).arr
    const y = (b as Y.ContentAny).arr
    for (let k = 0; k < n; k++) if (!sameValue(x[ao + k], y[bo + k])) return false
    return true
  }
  if (a instanceof Y.ContentString) {
    const x = a.str
    const y = (b as Y.ContentString).str
    if (x.slice(ao, ao + n) === y.slice(bo, bo + n)) return true
    for (let k = 0; k < n; k++) {
      const cx = x.charCodeAt(ao + k)
      const cy = y.charCodeAt(bo + k)
      // Yjs replaces half of a surrogate pair it splits with U+FFFD on its side only.
      if (cx !== cy && cx !== 0xfffd && cy !== 0xfffd) return false
    }
    return true
  }
  if (a instanceof Y.ContentType) return a.type.constructor === (b as Y.ContentType).type.constructor
  if (a instanceof Y.ContentBinary) return sameValue(a.content, (b as Y.ContentBinary).content)
  if (a instanceof Y.ContentEmbed) return sameValue(a.embed, (b as Y.ContentEmbed).embed)
  if (a instanceof Y.ContentFormat) return a.key === (b as Y.ContentFormat).key && sameValue(a.value, (b as Y.ContentFormat).value)
  return false
}

function sameValue(x: unknown, y: unknown): boolean {
  if (x instanceof Uint8Array || y instanceof Uint8Array) {
    return x instanceof Uint8Array && y instanceof Uint8Array && x.length === y.length && x.every((v, k) => v === y[k])
  }
  return x === y || jsonEqual(x as JsonValue, y as JsonValue)
}

/** True when no struct holds a clock the server already has (and none is a Skip). */
function isAllNew(doc: Y.Doc, structs: readonly (Struct | Y.Skip)[]): boolean {
  for (const s of structs) {
    if (s instanceof Y.Skip || s.id.clock < Y.getState(doc.store, s.id.client)) return false
  }
  return true
}

/**
 * True when every section of the update is one run of structs of a client no other section
 * names. Yjs keeps only the last section of a client (an earlier one is dropped, and what
 * depends on it stays pending); the lazy reader behind `Y.decodeUpdate` sees them all. Only an
 * update whose sections cannot disagree skips normalisation (which merges sections).
 */
function isOneRunPerSection(update: Uint8Array, structs: readonly (Struct | Y.Skip)[]): boolean {
  const sections = decoding.readVarUint(decoding.createDecoder(update))
  const clients = new Set<number>()
  let runs = 0
  let last = -1
  for (const s of structs) {
    if (runs > 0 && s.id.client === last) continue
    if (clients.has(s.id.client)) return false
    clients.add(s.id.client)
    last = s.id.client
    runs++
  }
  return runs === sections
}

function hasDeletions(ds: ReturnType<typeof Y.decodeUpdate>['ds']): boolean {
  for (const ranges of ds.clients.values()) if (ranges.some((r) => r.len > 0)) return true
  return false
}

/**
 * Decides whether `update` (Yjs v1) may enter `doc` and which top-level fields it touches.
 * Never throws: bytes Yjs cannot decode are `protocol_error`, structs that reuse ids the server
 * holds with other content are `client_id_conflict`, anything else refused is `invalid_update`
 * (or `forbidden` for structure from a principal without Update).
 */
export function admitUpdate(doc: Y.Doc, update: Uint8Array, policy: AdmissionPolicy): Admission {
  let normalised: Uint8Array
  let decoded: ReturnType<typeof Y.decodeUpdate>
  let known: readonly (Struct | Y.Skip)[] = []
  try {
    decoded = Y.decodeUpdate(update)
    normalised = update
    // The common case, a fresh edit: nothing in it is known to the server, so normalising would
    // give back the same structs. Otherwise the normalised bytes are decided on and applied.
    if (!isAllNew(doc, decoded.structs) || !isOneRunPerSection(update, decoded.structs)) {
      // What normalisation drops as known must be what the server holds under those ids.
      known = decoded.structs
      normalised = Y.diffUpdate(update, Y.encodeStateVector(doc))
      decoded = Y.decodeUpdate(normalised)
    }
  } catch {
    return { ok: false, code: 'protocol_error', message: 'The Yjs update could not be decoded.' }
  }
  const admitter = new Admitter(doc, policy)
  try {
    refuseCollisions(doc, known)
    admitter.index(decoded.structs)
    admitter.integrateAll()
    admitter.deletions(decoded.ds)
  } catch (e) {
    if (e instanceof Refusal) return { ok: false, code: e.code, message: e.message }
    // A shape this gate did not foresee is refused, never let through and never a crash.
    return { ok: false, code: 'invalid_update', message: 'The update has a shape the server does not accept.' }
  }
  const nothingNew = decoded.structs.length === 0 && !hasDeletions(decoded.ds)
  return { ok: true, update: nothingNew ? null : normalised, fields: admitter.fields, clients: admitter.clients() }
}
