import { describe, expect, it, vi } from 'vitest'
import fc from 'fast-check'
import * as Y from 'yjs'
import { CONTENT_MAP, docToJson, jsonEqual, type JsonObject, type JsonValue } from '../../shared/index.js'
import { admitUpdate, type AdmissionPolicy } from './admit-update.js'
import { ClientBindings } from './client-bindings.js'
import { encodeCrafted, rootEntry, type CraftedSection as Section } from '../../test/helpers/crafted-updates.js'

/**
 * [ACC10] The adversarial property of the gate. Server docs come from random histories of
 * several clients (nested maps, arrays, text, deletes, replaced objects, so GC'd structs exist);
 * the update is an honest one or a crafted one (structs of honest updates with their client,
 * clocks, origins, parents, keys and contents rewritten, GC and Skip structs, delete sets over
 * any range, deep nesting, sections listed twice or out of order). Invariants on every case:
 *  - admission never throws and never changes the server doc;
 *  - an accepted update applies without throwing and without leaving anything pending, changes
 *    only fields it reported (so a principal allowed exactly those fields wrote nothing else),
 *    and nests no deeper than the limit;
 *  - GC/Skip structs from a principal without Update are never accepted.
 * `WEFT_ADMISSION_RUNS` sets the number of cases (the bench runs many more); a failure prints
 * its seed, and `WEFT_FC_SEED` replays it.
 */
const RUNS = Number(process.env.WEFT_ADMISSION_RUNS ?? 2500)
const SEED = process.env.WEFT_FC_SEED ? Number(process.env.WEFT_FC_SEED) : 20_261_202
const MAX_DEPTH = 8
const KEYS = ['a', 'b', 'c', 'Status']
const CLIENTS = [1, 2, 3]

type Op =
  | { kind: 'set'; client: number; path: number[]; value: JsonValue }
  | { kind: 'map'; client: number; path: number[] }
  | { kind: 'delete'; client: number; path: number[] }
  | { kind: 'list'; client: number; path: number[]; at: number; del: number }
  | { kind: 'text'; client: number; path: number[]; at: number; del: number; text: string }
  | { kind: 'sync'; client: number; back: boolean }

const client = fc.constantFrom(...CLIENTS)
const path = fc.array(fc.nat(3), { minLength: 1, maxLength: 3 })
const scalar = fc.oneof(fc.integer({ min: -2, max: 2 }), fc.constantFrom('x', 'yy', 'Running'), fc.boolean(), fc.constant(null))
const op: fc.Arbitrary<Op> = fc.oneof(
  fc.record({ kind: fc.constant('set' as const), client, path, value: fc.oneof(scalar, fc.array(scalar, { maxLength: 2 })) }),
  fc.record({ kind: fc.constant('map' as const), client, path }),
  fc.record({ kind: fc.constant('delete' as const), client, path }),
  fc.record({ kind: fc.constant('list' as const), client, path, at: fc.nat(3), del: fc.nat(2) }),
  fc.record({ kind: fc.constant('text' as const), client, path, at: fc.nat(5), del: fc.nat(2), text: fc.constantFrom('', 'ab', 'xyz') }),
  fc.record({ kind: fc.constant('sync' as const), client, back: fc.boolean() }),
)

/** The map a path leads to (creating nested maps on the way when `create`). */
function walk(doc: Y.Doc, steps: number[]): { map: Y.Map<unknown>; key: string } {
  let map = doc.getMap<unknown>(CONTENT_MAP)
  for (let i = 0; i < steps.length - 1; i++) {
    const key = KEYS[steps[i]!]!
    const next = map.get(key)
    if (next instanceof Y.Map) map = next
    else {
      const created = new Y.Map<unknown>()
      map.set(key, created)
      map = created
    }
  }
  return { map, key: KEYS[steps[steps.length - 1]!]! }
}

function play(server: Y.Doc, docs: Map<number, Y.Doc>, o: Op): void {
  const doc = docs.get(o.client)!
  switch (o.kind) {
    case 'sync':
      if (o.back) Y.applyUpdate(doc, Y.encodeStateAsUpdate(server, Y.encodeStateVector(doc)))
      else Y.applyUpdate(server, Y.encodeStateAsUpdate(doc, Y.encodeStateVector(server)))
      return
    case 'set': {
      const { map, key } = walk(doc, o.path)
      map.set(key, o.value)
      return
    }
    case 'map': {
      const { map, key } = walk(doc, o.path)
      map.set(key, new Y.Map())
      return
    }
    case 'delete': {
      const { map, key } = walk(doc, o.path)
      map.delete(key)
      return
    }
    case 'list': {
      const { map, key } = walk(doc, o.path)
      let list = map.get(key)
      if (!(list instanceof Y.Array)) map.set(key, (list = new Y.Array()))
      const l = list as Y.Array<unknown>
      l.insert(Math.min(o.at, l.length), [o.at, new Y.Map()].slice(0, 1 + (o.at % 2)))
      if (o.del > 0 && l.length > 0) l.delete(0, Math.min(o.del, l.length))
      return
    }
    case 'text': {
      const { map, key } = walk(doc, o.path)
      let text = map.get(key)
      if (!(text instanceof Y.Text)) map.set(key, (text = new Y.Text()))
      const t = text as Y.Text
      t.insert(Math.min(o.at, t.length), o.text)
      if (o.del > 0 && t.length > 0) t.delete(0, Math.min(o.del, t.length))
      return
    }
    default:
      o satisfies never
  }
}

/** How a crafted update bends the structs of an honest one. */
interface Mutation {
  struct: number
  what: 'client' | 'clock' | 'origin' | 'right' | 'parent' | 'key' | 'content' | 'gc' | 'skip' | 'drop' | 'twice' | 'deepen'
  pick: number
  n: number
}
const mutation: fc.Arbitrary<Mutation> = fc.record({
  struct: fc.nat(20),
  what: fc.constantFrom('client', 'clock', 'origin', 'right', 'parent', 'key', 'content', 'gc', 'skip', 'drop', 'twice', 'deepen'),
  pick: fc.nat(1000),
  n: fc.integer({ min: -3, max: 12 }),
})
const dsRange = fc.record({ client: fc.constantFrom(...CLIENTS, 99), clock: fc.nat(40), len: fc.nat(8) })

function deepValue(levels: number): JsonValue {
  let v: JsonValue = 1
  for (let i = 0; i < levels; i++) v = [v]
  return v
}

/** Every id worth pointing at: the server's structs, the update's, and some that exist nowhere. */
function idPool(server: Y.Doc, structs: readonly { id: Y.ID; length: number }[]): Y.ID[] {
  const ids: Y.ID[] = []
  for (const [c, list] of server.store.clients) for (const s of list) ids.push(Y.createID(c, s.id.clock), Y.createID(c, s.id.clock + s.length - 1))
  for (const s of structs) ids.push(s.id, Y.createID(s.id.client, s.id.clock + s.length))
  ids.push(Y.createID(99, 0), Y.createID(1, 10_000))
  return ids
}

function craft(server: Y.Doc, honest: Uint8Array, mutations: Mutation[], ds: { client: number; clock: number; len: number }[]): Uint8Array {
  const { structs } = Y.decodeUpdate(honest)
  const pool = idPool(server, structs)
  const sections: Section[] = []
  for (const s of structs) {
    const last = sections[sections.length - 1]
    if (last && last.client === s.id.client) last.structs.push(s)
    else sections.push({ client: s.id.client, clock: s.id.clock, structs: [s] })
  }
  if (sections.length === 0) sections.push({ client: 1, clock: Y.getState(server.store, 1), structs: [] })
  for (const m of mutations) {
    const sec = sections[m.struct % sections.length]!
    const i = sec.structs.length === 0 ? 0 : m.struct % sec.structs.length
    const s = sec.structs[i]
    const id = pool[m.pick % pool.length]!
    switch (m.what) {
      case 'client':
        sec.client = [...CLIENTS, 99][m.pick % 4]!
        break
      case 'clock':
        sec.clock = Math.max(0, sec.clock + m.n)
        break
      case 'origin':
        if (s instanceof Y.Item) s.origin = m.n < 0 ? null : id
        break
      case 'right':
        if (s instanceof Y.Item) s.rightOrigin = m.n < 0 ? null : id
        break
      case 'parent':
        if (s instanceof Y.Item) {
          s.origin = null
          s.rightOrigin = null
          s.parent = (m.n % 3 === 0 ? CONTENT_MAP : m.n % 3 === 1 ? 'other' : id) as unknown as Y.ID
          s.parentSub = m.n > 6 ? null : KEYS[m.pick % KEYS.length]!
        }
        break
      case 'key':
        if (s instanceof Y.Item && s.origin === null && s.rightOrigin === null) s.parentSub = m.n < 0 ? null : KEYS[m.pick % KEYS.length]!
        break
      case 'content':
        if (s instanceof Y.Item) {
          const contents = [
            () => new Y.ContentAny([m.n]),
            () => new Y.ContentAny([1, 2]),
            () => new Y.ContentString('zz'),
            () => new Y.ContentType(new Y.Map()),
            () => new Y.ContentType(new Y.Array()),
            () => new Y.ContentType(new Y.Text()),
            () => new Y.ContentType(new Y.XmlElement('p')),
            () => new Y.ContentDeleted(1),
            () => new Y.ContentBinary(new Uint8Array([1])),
            () => new Y.ContentAny([undefined as unknown as number]),
          ]
          s.content = contents[m.pick % contents.length]!()
          s.length = s.content.getLength()
        }
        break
      case 'gc':
        sec.structs.splice(i, 0, new Y.GC(Y.createID(sec.client, 0), 1 + (m.pick % 3)))
        break
      case 'skip':
        sec.structs.splice(i, 0, new Y.Skip(Y.createID(sec.client, 0), 1 + (m.pick % 3)))
        break
      case 'drop':
        sec.structs.splice(i, 1)
        break
      case 'twice':
        sections.push({ client: sec.client, clock: sec.clock + 1, structs: sec.structs.slice(i, i + 1) })
        break
      case 'deepen':
        if (s instanceof Y.Item) {
          s.content = new Y.ContentAny([deepValue(Math.max(0, m.n + MAX_DEPTH - 4))])
          s.length = 1
        }
        break
      default:
        m.what satisfies never
    }
  }
  return encodeCrafted(sections.filter((sec) => sec.structs.length > 0), ds)
}

function cloneDoc(doc: Y.Doc): Y.Doc {
  const copy = new Y.Doc()
  Y.applyUpdate(copy, Y.encodeStateAsUpdate(doc))
  return copy
}

function depthOf(v: JsonValue): number {
  if (Array.isArray(v)) return 1 + Math.max(0, ...v.map(depthOf))
  if (v !== null && typeof v === 'object') return 1 + Math.max(0, ...Object.values(v).map(depthOf))
  return 0
}

function changedFields(before: JsonObject, after: JsonObject): string[] {
  return [...new Set([...Object.keys(before), ...Object.keys(after)])].filter((k) => !jsonEqual(before[k], after[k]))
}

describe('[ACC10] admission: adversarial property', () => {
  it(`never throws; an accepted update changes only the fields it names and leaves nothing pending; a refused one changes nothing (${RUNS} cases)`, () => {
    let accepted = 0
    let refused = 0
    fc.assert(
      fc.property(
        fc.array(op, { minLength: 1, maxLength: 25 }),
        fc.array(op, { maxLength: 6 }),
        fc.constantFrom(...CLIENTS),
        fc.boolean(),
        fc.array(mutation, { maxLength: 4 }),
        fc.array(dsRange, { maxLength: 2 }),
        fc.boolean(),
        (history, offline, sender, crafted, mutations, ds, mayWriteStructure) => {
          const server = new Y.Doc()
          const docs = new Map(CLIENTS.map((c) => {
            const d = new Y.Doc()
            d.clientID = c
            return [c, d] as const
          }))
          for (const o of history) play(server, docs, o)
          // The sender goes on offline, then sends what the server lacks.
          for (const o of offline) play(server, docs, { ...o, client: sender } as Op)
          const honest = Y.encodeStateAsUpdate(docs.get(sender)!, Y.encodeStateVector(server))
          const update = crafted ? craft(server, honest, mutations, ds) : honest

          const before = Y.encodeStateAsUpdate(server)
          const json = docToJson(server)
          const policy: AdmissionPolicy = { maxDepth: MAX_DEPTH, mayWriteStructure }
          const r = admitUpdate(server, update, policy)
          // Admission itself never changes the server doc.
          expect(Y.encodeStateAsUpdate(server)).toEqual(before)
          if (!r.ok) {
            refused++
            expect(['invalid_update', 'forbidden', 'protocol_error', 'client_id_conflict']).toContain(r.code)
            // [ACC12] An honest client's update never collides with what the server holds.
            if (!crafted) expect(r.code).not.toBe('client_id_conflict')
            return
          }
          accepted++
          if (!r.update) return
          const copy = cloneDoc(server)
          Y.applyUpdate(copy, r.update)
          expect(copy.store.pendingStructs).toBeNull()
          expect(copy.store.pendingDs).toBeNull()
          const after = docToJson(copy)
          for (const f of changedFields(json, after)) expect(r.fields.has(f), `field ${f} changed but was not reported`).toBe(true)
          for (const v of Object.values(after)) expect(depthOf(v)).toBeLessThanOrEqual(MAX_DEPTH)
          if (!mayWriteStructure) expect(Y.decodeUpdate(r.update).structs.some((s) => s instanceof Y.GC || s instanceof Y.Skip)).toBe(false)
          // The same bytes applied to the server give the same state (decided = applied).
          Y.applyUpdate(server, r.update)
          expect(docToJson(server)).toEqual(after)
        },
      ),
      { numRuns: RUNS, seed: SEED },
    )
    // The generator must exercise both sides of the gate.
    expect(accepted).toBeGreaterThan(RUNS / 10)
    expect(refused).toBeGreaterThan(RUNS / 10)
  })
})

/**
 * [ACC12] Acks mean kept, against squatting. Clients edit offline and send what the server
 * lacks, or resend everything they hold (a reconnect's resync: known structs, which must be
 * accepted); an attacker sends structs under another client's id, at its next clock (before
 * that client's own edit of the same clock arrives) or over clocks the server holds, with other
 * content. A refused client starts over from the server's state with a new client id (what the
 * web client does). Invariants: admission never throws; every accepted update is kept (each of
 * its structs is on the server with its place and content, unless deleted since), the server's
 * JSON is what applying every accepted update in order gives, nothing is pending; an honest
 * resend of a client nobody squatted is accepted. Half the cases add the client-id bindings NodeService
 * keeps (each client's history is its own principal's; the attacker is another): the same
 * invariants hold with squats refused up front.
 */
const SQUAT_RUNS = Number(process.env.WEFT_ADMISSION_SQUAT_RUNS ?? Math.max(200, Math.round(RUNS / 5)))

type Step =
  | { kind: 'edit'; client: number; ops: Op[]; resend: boolean }
  | { kind: 'squat'; victim: number; known: boolean; key: number; value: number; at: number }
  | { kind: 'pull'; client: number }

const step: fc.Arbitrary<Step> = fc.oneof(
  fc.record({ kind: fc.constant('edit' as const), client, ops: fc.array(op.filter((o) => o.kind !== 'sync'), { minLength: 1, maxLength: 3 }), resend: fc.boolean() }),
  fc.record({ kind: fc.constant('squat' as const), victim: client, known: fc.boolean(), key: fc.nat(KEYS.length - 1), value: fc.integer({ min: 100, max: 110 }), at: fc.nat(30) }),
  fc.record({ kind: fc.constant('pull' as const), client }),
)

/** Each struct of `update` is on `server` with the same place and content (unless since deleted). */
function expectKept(server: Y.Doc, update: Uint8Array): void {
  for (const s of Y.decodeUpdate(update).structs) {
    if (!(s instanceof Y.Item) || s.content instanceof Y.ContentDeleted) continue
    const list = server.store.clients.get(s.id.client)
    expect(list, `client ${s.id.client} of an accepted update is missing`).toBeDefined()
    const values = s.content.getContent()
    for (let k = 0; k < s.length; k++) {
      const clock = s.id.clock + k
      const t = list![Y.findIndexSS(list!, clock)]!
      if (!(t instanceof Y.Item)) continue
      const at = clock - t.id.clock
      const left = at === 0 ? t.origin : Y.createID(t.id.client, clock - 1)
      if (k === 0) expect(Y.compareIDs(left, s.origin), `origin of ${s.id.client}:${clock}`).toBe(true)
      expect(Y.compareIDs(t.rightOrigin, s.rightOrigin), `right origin of ${s.id.client}:${clock}`).toBe(true)
      if (k === 0 && s.parentSub !== null) expect(t.parentSub).toBe(s.parentSub)
      if (t.content instanceof Y.ContentDeleted) continue
      const mine = values[k]
      const theirs = t.content.getContent()[at]
      if (mine instanceof Y.AbstractType) expect((theirs as object).constructor).toBe(mine.constructor)
      else if (typeof mine === 'string' && s.content instanceof Y.ContentString) expect([mine, '\ufffd']).toContain(theirs)
      else expect(theirs).toEqual(mine)
    }
  }
}

describe('[ACC12] admission: acks mean kept (squatting)', () => {
  it(`an accepted update is kept whole; a colliding one is refused; an honest resend is accepted (${SQUAT_RUNS} cases)`, () => {
    let collisions = 0
    let resends = 0
    let boundRefusals = 0
    // Yjs logs when a pull hands a client structs under its own id (it then takes a new one).
    const quiet = vi.spyOn(console, 'log').mockImplementation(() => undefined)
    try {
      fc.assert(
        fc.property(fc.array(op, { minLength: 1, maxLength: 12 }), fc.array(step, { minLength: 1, maxLength: 12 }), fc.boolean(), (history, steps, withBindings) => {
          const server = new Y.Doc()
          const docs = new Map(CLIENTS.map((c) => {
            const d = new Y.Doc()
            d.clientID = c
            return [c, d] as const
          }))
          for (const o of history) play(server, docs, o)
          const accepted: Uint8Array[] = [Y.encodeStateAsUpdate(server)]
          let nextId = 1000
          const policy: AdmissionPolicy = { maxDepth: MAX_DEPTH, mayWriteStructure: true }
          // With bindings (what NodeService adds): each client's history was written by its own
          // principal; the attacker is `eve`.
          const bindings = withBindings ? new ClientBindings(CLIENTS.map((c) => ({ client: c, principal: `u${c}` }))) : null
          const send = (update: Uint8Array, principal: string): boolean => {
            const r = admitUpdate(server, update, policy)
            if (!r.ok) {
              expect(['invalid_update', 'client_id_conflict']).toContain(r.code)
              if (r.code === 'client_id_conflict') collisions++
              return false
            }
            if (r.update && bindings) {
              let claimed
              try {
                claimed = bindings.claim(principal, r.clients, 'p')
              } catch (e) {
                expect((e as { code?: string }).code).toBe('client_id_conflict')
                boundRefusals++
                return false
              }
              bindings.record(claimed)
            }
            if (r.update) Y.applyUpdate(server, r.update)
            expect(server.store.pendingStructs).toBeNull()
            expect(server.store.pendingDs).toBeNull()
            accepted.push(update)
            return true
          }
          for (const st of steps) {
            switch (st.kind) {
              case 'pull': {
                const d = docs.get(st.client)!
                Y.applyUpdate(d, Y.encodeStateAsUpdate(server, Y.encodeStateVector(d)))
                break
              }
              case 'edit': {
                const d = docs.get(st.client)!
                for (const o of st.ops) play(server, docs, { ...o, client: st.client } as Op)
                const update = st.resend ? Y.encodeStateAsUpdate(d) : Y.encodeStateAsUpdate(d, Y.encodeStateVector(server))
                const r = admitUpdate(server, update, policy)
                // An honest resend of what the server holds, when nobody squatted this client.
                if (st.resend && r.ok) resends++
                if (!send(update, `u${st.client}`)) {
                  // The honest client starts over from the server's state with a new client id.
                  const fresh = new Y.Doc()
                  fresh.clientID = nextId++
                  Y.applyUpdate(fresh, Y.encodeStateAsUpdate(server))
                  docs.set(st.client, fresh)
                }
                break
              }
              case 'squat': {
                const victim = docs.get(st.victim)!.clientID
                const state = Y.getState(server.store, victim)
                const clock = st.known && state > 0 ? st.at % state : state
                send(encodeCrafted([{ client: victim, clock, structs: [rootEntry(victim, clock, KEYS[st.key]!, [st.value])] }]), 'eve')
                break
              }
              default:
                st satisfies never
            }
          }
          for (const u of accepted) expectKept(server, u)
          const replay = new Y.Doc()
          for (const u of accepted) Y.applyUpdate(replay, u)
          expect(docToJson(server)).toEqual(docToJson(replay))
        }),
        { numRuns: SQUAT_RUNS, seed: SEED },
      )
    } finally {
      quiet.mockRestore()
    }
    // The generator must exercise collisions and harmless resends.
    expect(collisions).toBeGreaterThan(SQUAT_RUNS / 20)
    expect(resends).toBeGreaterThan(SQUAT_RUNS / 20)
    expect(boundRefusals).toBeGreaterThan(SQUAT_RUNS / 20)
  })
})
