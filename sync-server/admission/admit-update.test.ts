import { describe, expect, it } from 'vitest'
import fc from 'fast-check'
import * as Y from 'yjs'
import * as encoding from 'lib0/encoding'
import {
  applyPatchToDoc,
  CONTENT_MAP,
  docToJson,
  jsonEqual,
  type JsonObject,
  type JsonValue,
} from '../../shared/index.js'
import { admitUpdate, type AdmissionPolicy } from './admit-update.js'

/** Everything `to` lacks from `from`, as one update. */
function syncInto(from: Y.Doc, to: Y.Doc): void {
  Y.applyUpdate(to, Y.encodeStateAsUpdate(from, Y.encodeStateVector(to)))
}

/** The update(s) `fn` makes on `doc`, merged into one. */
function capture(doc: Y.Doc, fn: () => void): Uint8Array {
  const updates: Uint8Array[] = []
  const onUpdate = (u: Uint8Array): void => {
    updates.push(u)
  }
  doc.on('update', onUpdate)
  try {
    fn()
  } finally {
    doc.off('update', onUpdate)
  }
  return Y.mergeUpdates(updates)
}

/** A server doc holding `initial`, and a client doc synced with it. */
function setup(initial: JsonObject = {}): { server: Y.Doc; client: Y.Doc } {
  const server = new Y.Doc()
  applyPatchToDoc(server, initial)
  const client = new Y.Doc()
  syncInto(server, client)
  return { server, client }
}

const EDITOR: AdmissionPolicy = { maxDepth: 64, mayWriteStructure: true }

function inspect(server: Y.Doc, update: Uint8Array, policy: AdmissionPolicy = EDITOR) {
  const before = Y.encodeStateAsUpdate(server)
  const result = admitUpdate(server, update, policy)
  // Admission never applies anything.
  expect(Y.encodeStateAsUpdate(server)).toEqual(before)
  return result.ok ? { fields: [...result.fields].sort(), refused: null } : { fields: [], refused: result.code }
}

const OK = (...fields: string[]) => ({ fields, refused: null })
const REFUSED = { fields: [], refused: 'invalid_update' }

/** An update (v1) of hand-made items of one client, starting at clock 0 (for malformed input). */
function craftUpdate(client: number, items: Y.Item[]): Uint8Array {
  const enc = new Y.UpdateEncoderV1()
  encoding.writeVarUint(enc.restEncoder, 1)
  encoding.writeVarUint(enc.restEncoder, items.length)
  enc.writeClient(client)
  encoding.writeVarUint(enc.restEncoder, 0)
  for (const item of items) item.write(enc, 0)
  encoding.writeVarUint(enc.restEncoder, 0) // empty delete set
  return enc.toUint8Array()
}

function clientContent(client: Y.Doc): Y.Map<unknown> {
  return client.getMap(CONTENT_MAP)
}

describe('[ACC10] admitUpdate: map fields', () => {
  it('a single new field', () => {
    const { server, client } = setup({ Title: 'a' })
    const u = capture(client, () => applyPatchToDoc(client, { Body: 'hello' }))
    expect(inspect(server, u)).toEqual(OK('Body'))
  })

  it('overwriting an existing field (encoded through its left origin, without parentSub)', () => {
    const { server, client } = setup({ Title: 'a', Body: 'b' })
    const u = capture(client, () => applyPatchToDoc(client, { Title: 'c' }))
    const item = Y.decodeUpdate(u).structs[0] as Y.Item
    expect(item.parentSub).toBeNull() // the case that needs the origin walk
    expect(inspect(server, u)).toEqual(OK('Title'))
  })

  it('a change deep inside a nested map is attributed to the top-level key', () => {
    const { server, client } = setup({ Meta: { Author: { Name: 'x' } }, Other: 1 })
    const overwrite = capture(client, () => applyPatchToDoc(client, { Meta: { Author: { Name: 'y' } } }))
    expect(inspect(server, overwrite)).toEqual(OK('Meta'))
    Y.applyUpdate(server, overwrite)
    const added = capture(client, () => applyPatchToDoc(client, { Meta: { Author: { Age: 3 } } }))
    // A new key: the item names its parent, the Author map the server already holds.
    expect(inspect(server, added)).toEqual(OK('Meta'))
  })

  it('deleting a field (delete set only)', () => {
    const { server, client } = setup({ Title: 'a', Meta: { x: 1 } })
    const u = capture(client, () => applyPatchToDoc(client, { Title: null }))
    expect(Y.decodeUpdate(u).structs).toHaveLength(0)
    expect(inspect(server, u)).toEqual(OK('Title'))
    const nested = capture(client, () => applyPatchToDoc(client, { Meta: { x: null } }))
    expect(inspect(server, nested)).toEqual(OK('Meta'))
  })

  it('a new nested map with children created in one update', () => {
    const { server, client } = setup({ Title: 'a' })
    const u = capture(client, () => applyPatchToDoc(client, { Meta: { Author: { Name: 'n', Tags: ['t'] }, Rev: 1 } }))
    expect(Y.decodeUpdate(u).structs.length).toBeGreaterThan(1)
    expect(inspect(server, u)).toEqual(OK('Meta'))
  })

  it('an edit 60 maps deep is attributed; 65 levels or 5,000 are refused (MAX_JSON_DEPTH)', () => {
    const nest = (levels: number) => {
      const { server, client } = setup({})
      let innermost = new Y.Map<unknown>()
      const create = capture(client, () =>
        client.transact(() => {
          clientContent(client).set('Deep', innermost)
          for (let i = 1; i < levels; i++) {
            const child = new Y.Map<unknown>()
            innermost.set('n', child)
            innermost = child
          }
        }),
      )
      return { server, client, create, innermost }
    }
    const ok = nest(60)
    expect(inspect(ok.server, ok.create)).toEqual(OK('Deep'))
    Y.applyUpdate(ok.server, ok.create)
    const edit = capture(ok.client, () => ok.innermost.set('leaf', 1))
    expect(inspect(ok.server, edit)).toEqual(OK('Deep'))
    const over = nest(65)
    expect(inspect(over.server, over.create)).toEqual(REFUSED)
    // 5,000 deep: refused without recursing (a recursive walk overflows the stack and throws);
    // a walk slower than linear would hold it past the test's timeout.
    const deep = nest(5000)
    expect(inspect(deep.server, deep.create)).toEqual(REFUSED)
  })

  it('replacing a nested map by a scalar touches only that field', () => {
    const { server, client } = setup({ Meta: { a: { b: 1 } }, Keep: { c: 2 } })
    const u = capture(client, () => applyPatchToDoc(client, { Meta: 5 }))
    expect(inspect(server, u)).toEqual(OK('Meta'))
  })
})

describe('[ACC10] admitUpdate: typed content inserted by client libraries', () => {
  it('Y.Text edits inside a field: append (origin), prepend (right origin), delete, format', () => {
    const { server, client } = setup({ Title: 'a' })
    const create = capture(client, () => {
      const text = new Y.Text()
      clientContent(client).set('Notes', text)
      text.insert(0, 'hello world')
    })
    expect(inspect(server, create)).toEqual(OK('Notes'))
    Y.applyUpdate(server, create)

    const text = clientContent(client).get('Notes') as Y.Text
    // A second server that only got the creation, to receive everything at once afterwards.
    const offline = new Y.Doc()
    Y.applyUpdate(offline, Y.encodeStateAsUpdate(server))
    const edits: Uint8Array[] = []
    for (const edit of [
      () => text.insert(text.length, '!'), // origin only
      () => text.insert(0, '>'), // right origin only
      () => text.insert(5, ','), // both
      () => text.delete(0, 3), // delete set only
    ]) {
      const u = capture(client, edit)
      expect(inspect(server, u)).toEqual(OK('Notes'))
      Y.applyUpdate(server, u)
      edits.push(u)
    }
    // All of it at once, as a client that was offline would send it.
    const all = Y.mergeUpdates(edits)
    expect(inspect(offline, all)).toEqual(OK('Notes'))
    Y.applyUpdate(offline, all)
    expect((offline.getMap(CONTENT_MAP).get('Notes') as Y.Text).toString()).toBe(text.toString())
    // Formatting is rich text, not JSON: refused.
    expect(inspect(server, capture(client, () => text.format(2, 3, { bold: true })))).toEqual(REFUSED)
  })

  it('Y.Array edits inside a nested map', () => {
    const { server, client } = setup({ Meta: { Title: 'x' }, Other: 1 })
    const create = capture(client, () => {
      const list = new Y.Array<unknown>()
      ;(clientContent(client).get('Meta') as Y.Map<unknown>).set('List', list)
      list.push([1, 2, 3])
    })
    expect(inspect(server, create).fields).toEqual(['Meta'])
    Y.applyUpdate(server, create)
    const list = (clientContent(client).get('Meta') as Y.Map<unknown>).get('List') as Y.Array<unknown>
    for (const edit of [
      () => list.push([4]),
      () => list.insert(0, [0]),
      () => list.delete(1, 2),
      () => list.insert(1, [new Y.Map()]),
    ]) {
      const u = capture(client, edit)
      expect(inspect(server, u)).toEqual(OK('Meta'))
      Y.applyUpdate(server, u)
    }
  })

  it('a long chain of right origins in one update', () => {
    const { server, client } = setup({})
    const text = new Y.Text()
    Y.applyUpdate(server, capture(client, () => clientContent(client).set('Log', text)))
    // Typed backwards, one character per transaction, sent after reconnecting: yjs cannot merge
    // the items and each one's right origin is the previous one, so attribution follows a
    // 20,000-long chain (it must not recurse).
    for (let i = 0; i < 20_000; i++) text.insert(0, 'x')
    const resend = Y.encodeStateAsUpdate(client, Y.encodeStateVector(server))
    expect(inspect(server, resend)).toEqual(OK('Log'))
    expect(Y.decodeUpdate(resend).structs.length).toBeGreaterThan(10_000)
  })
})

describe('[ACC10] admitUpdate: what must be refused', () => {
  it('an update that depends on state the server lacks is unattributable', () => {
    const { server, client } = setup({ Title: 'a' })
    const first = capture(client, () => applyPatchToDoc(client, { Meta: { x: 1 } }))
    // Both depend on `first` (a nested map and an overwrite the server never saw).
    const nested = capture(client, () => applyPatchToDoc(client, { Meta: { y: 2 } }))
    const overwrite = capture(client, () => applyPatchToDoc(client, { Meta: { x: 3 } }))
    expect(inspect(server, nested).refused).toBe('invalid_update')
    expect(inspect(server, overwrite).refused).toBe('invalid_update')
    // A deletion of something the server never saw.
    const del = capture(client, () => applyPatchToDoc(client, { Meta: null }))
    expect(inspect(server, del).refused).toBe('invalid_update')
    // Once `first` is there, they are fine.
    Y.applyUpdate(server, first)
    expect(inspect(server, nested)).toEqual(OK('Meta'))
  })

  it('a gap in a client\'s own clock (the server would keep the rest pending)', () => {
    const { server, client } = setup({})
    capture(client, () => applyPatchToDoc(client, { A: 1 }))
    const second = capture(client, () => applyPatchToDoc(client, { B: 2 }))
    const r = inspect(server, second)
    expect(r.refused).toBe('invalid_update')
  })

  it('a merged update with a hole (Skip) is refused', () => {
    const { server, client } = setup({})
    const u1 = capture(client, () => applyPatchToDoc(client, { A: 1 }))
    capture(client, () => applyPatchToDoc(client, { B: 2 }))
    const u3 = capture(client, () => applyPatchToDoc(client, { C: 3 }))
    const merged = Y.mergeUpdates([u1, u3])
    expect(Y.decodeUpdate(merged).structs.some((s) => s instanceof Y.Skip)).toBe(true)
    expect(inspect(server, merged).refused).toBe('invalid_update')
  })

  it('updates to another root type are unattributable', () => {
    const { server, client } = setup({ Title: 'a' })
    const other = capture(client, () => client.getMap('other').set('x', 1))
    expect(inspect(server, other)).toEqual(REFUSED)
    const text = capture(client, () => client.getText('notes').insert(0, 'hi'))
    expect(inspect(server, text).refused).toBe('invalid_update')
    // Deleting from another root the server holds.
    Y.applyUpdate(server, other)
    const del = capture(client, () => client.getMap('other').delete('x'))
    expect(inspect(server, del).refused).toBe('invalid_update')
    // Mixed with a content change: still refused, the content field is still reported.
    const mixed = capture(client, () =>
      client.transact(() => {
        client.getMap('other').set('y', 1)
        applyPatchToDoc(client, { Title: 'b' })
      }),
    )
    expect(inspect(server, mixed)).toEqual(REFUSED)
  })

  it('an unknown GC struct (offline create-then-replace of a nested map) needs Update', () => {
    const { server, client } = setup({})
    applyPatchToDoc(client, { Meta: { a: 1 } })
    applyPatchToDoc(client, { Meta: 5 })
    const full = Y.encodeStateAsUpdate(client, Y.encodeStateVector(server))
    expect(Y.decodeUpdate(full).structs.some((s) => s instanceof Y.GC)).toBe(true)
    expect(inspect(server, full)).toEqual(OK('Meta'))
    expect(inspect(server, full, { maxDepth: 64, mayWriteStructure: false })).toEqual({ fields: [], refused: 'forbidden' })
    Y.applyUpdate(server, full)
    expect(docToJson(server)).toEqual(docToJson(client))
  })

  it('crafted updates: an origin cycle and forward references are refused, a 100,000-long chain does not recurse', () => {
    const any = (v: number) => new Y.ContentAny([v])
    const cycle = craftUpdate(7, [
      new Y.Item(Y.createID(7, 0), null, Y.createID(7, 1), null, null, null, null, any(0)),
      new Y.Item(Y.createID(7, 1), null, Y.createID(7, 0), null, null, null, null, any(1)),
    ])
    expect(inspect(new Y.Doc(), cycle)).toEqual(REFUSED)

    const n = 100_000
    const forward = Array.from({ length: n }, (_, i) =>
      i === n - 1
        ? new Y.Item(Y.createID(7, i), null, null, null, null, null, null, any(i))
        : new Y.Item(Y.createID(7, i), null, Y.createID(7, i + 1), null, null, null, null, any(i)),
    )
    // The last item names its place: content.F (the constructor takes a root name as parent).
    forward[n - 1]!.parent = CONTENT_MAP as unknown as Y.ID
    forward[n - 1]!.parentSub = 'F'
    // Each item's origin is a LATER struct of its own client: Yjs would throw on it.
    expect(inspect(new Y.Doc(), craftUpdate(7, forward))).toEqual(REFUSED)
    const backward = Array.from({ length: n }, (_, i) =>
      i === 0
        ? new Y.Item(Y.createID(7, i), null, null, null, null, null, null, any(i))
        : new Y.Item(Y.createID(7, i), null, Y.createID(7, i - 1), null, null, null, null, any(i)),
    )
    backward[0]!.parent = CONTENT_MAP as unknown as Y.ID
    backward[0]!.parentSub = 'F'
    expect(inspect(new Y.Doc(), craftUpdate(7, backward))).toEqual(OK('F'))
  })

  it('regression (property seeds 5 and 6): one client in two sections back to back is not taken as one run', () => {
    // Yjs keeps only the last section of a client; the lazy reader sees both as one contiguous run.
    const enc = new Y.UpdateEncoderV1()
    encoding.writeVarUint(enc.restEncoder, 2)
    for (const clock of [0, 1]) {
      encoding.writeVarUint(enc.restEncoder, 1)
      enc.writeClient(7)
      encoding.writeVarUint(enc.restEncoder, clock)
      const item = new Y.Item(Y.createID(7, clock), null, clock === 0 ? null : Y.createID(7, 0), null, null, clock === 0 ? (CONTENT_MAP as unknown as Y.ID) : null, clock === 0 ? 'a' : null, new Y.ContentAny([clock]))
      item.write(enc, 0)
    }
    encoding.writeVarUint(enc.restEncoder, 0)
    const server = new Y.Doc()
    const r = admitUpdate(server, enc.toUint8Array(), EDITOR)
    if (r.ok && r.update) {
      const copy = new Y.Doc()
      Y.applyUpdate(copy, r.update)
      expect(copy.store.pendingStructs).toBeNull()
    }
  })

  it('[IN2] bytes yjs cannot decode throw protocol_error, never another error (property)', () => {
    expect(admitUpdate(new Y.Doc(), new Uint8Array([200, 1, 2, 3, 4]), EDITOR)).toMatchObject({ ok: false, code: 'protocol_error' })
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 30 }), (bytes) => {
        // Random bytes rarely decode; when they do, the answer is still well formed. Never a throw.
        const r = admitUpdate(new Y.Doc(), bytes, EDITOR)
        if (r.ok) expect(r.fields).toBeInstanceOf(Set)
        else expect(['protocol_error', 'invalid_update', 'forbidden']).toContain(r.code)
      }),
      { numRuns: 2000, seed: 42 },
    )
  })
})

describe('[ACC10] admitUpdate: what the server already knows', () => {
  it('an empty update', () => {
    const { server } = setup({ Title: 'a' })
    expect(inspect(server, Y.encodeStateAsUpdate(new Y.Doc()))).toEqual(OK())
    expect(inspect(server, Y.mergeUpdates([]))).toEqual(OK())
  })

  it('a full-state resend (sync step 2) repeats history without touching anything', () => {
    const { server, client } = setup({ Email: 'a@x.io', Name: 'a' })
    // system overwrote Email twice on the server: the client's full state repeats those deletions.
    applyPatchToDoc(server, { Email: 'b@x.io' })
    applyPatchToDoc(server, { Email: 'c@x.io' })
    syncInto(server, client)
    const full = Y.encodeStateAsUpdate(client)
    expect(inspect(server, full)).toEqual(OK())
    // With one new edit on top, only that edit counts.
    applyPatchToDoc(client, { Name: 'b' })
    expect(inspect(server, Y.encodeStateAsUpdate(client))).toEqual(OK('Name'))
  })

  it('merged multi-field updates', () => {
    const { server, client } = setup({ A: 1, B: { x: 1 }, C: 'c' })
    const u1 = capture(client, () => applyPatchToDoc(client, { A: 2 }))
    const u2 = capture(client, () => applyPatchToDoc(client, { B: { y: 2 } }))
    const u3 = capture(client, () => applyPatchToDoc(client, { C: null, D: [1] }))
    const merged = Y.mergeUpdates([u3, u1, u2])
    expect(inspect(server, merged)).toEqual(OK('A', 'B', 'C', 'D'))
    // A partly known merged update: only the unknown part counts.
    Y.applyUpdate(server, u1)
    expect(inspect(server, merged).fields).toEqual(['B', 'C', 'D'])
  })

  it('a concurrent edit inside a field another writer deleted (and the server garbage-collected) is refused', () => {
    const { server, client } = setup({ Meta: { y: 1 }, Keep: 1 })
    applyPatchToDoc(server, { Meta: null })
    const before = docToJson(server)
    // The client still sees Meta: overwriting Meta.y has the GC'd old y as its left origin. Yjs
    // would integrate it nowhere; the gate refuses it and the client rebuilds from the server.
    const overwrite = capture(client, () => applyPatchToDoc(client, { Meta: { y: 2 } }))
    expect(inspect(server, overwrite)).toEqual(REFUSED)
    const added = capture(client, () => applyPatchToDoc(client, { Meta: { z: 3 } }))
    expect(inspect(server, added)).toEqual(REFUSED)
    expect(docToJson(server)).toEqual(before)
  })
})

// ---- property test ------------------------------------------------------------------------

const key = fc.constantFrom('a', 'b', 'c', 'd')
const scalar = fc.oneof(fc.integer({ min: -3, max: 3 }), fc.constantFrom('', 'x', 'y'), fc.boolean())
const { json } = fc.letrec<{ json: JsonValue; object: JsonObject }>((tie) => ({
  json: fc.oneof({ depthSize: 'small', withCrossShrink: true }, scalar, fc.array(tie('json'), { maxLength: 2 }), tie('object')),
  object: fc.dictionary(key, tie('json'), { maxKeys: 3, noNullPrototype: true }),
}))
const { patch: patchArb } = fc.letrec<{ patchValue: JsonValue; patch: JsonObject }>((tie) => ({
  patchValue: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    fc.constant(null),
    scalar,
    fc.array(json, { maxLength: 2 }),
    tie('patch'),
  ),
  patch: fc.dictionary(key, tie('patchValue'), { maxKeys: 4, noNullPrototype: true }),
}))
const contentArb = fc.dictionary(key, json, { maxKeys: 4, noNullPrototype: true })

describe('[ACC10] admitUpdate: property', () => {
  it('fields are exactly the top-level keys whose value a merge patch changed', () => {
    fc.assert(
      fc.property(contentArb, fc.array(patchArb, { minLength: 1, maxLength: 3 }), (initial, patches) => {
        const { server, client } = setup(initial)
        const before = docToJson(client)
        const updates = patches.map((p) => capture(client, () => applyPatchToDoc(client, p)))
        const after = docToJson(client)
        const changed = new Set<string>()
        for (const k of new Set([...Object.keys(before), ...Object.keys(after)])) {
          if (!jsonEqual(before[k], after[k])) changed.add(k)
        }
        // Keys that changed and changed back still count: their items were written.
        const mentioned = new Set(patches.flatMap((p) => Object.keys(p)))
        const merged = Y.mergeUpdates(updates)
        const r = admitUpdate(server, merged, EDITOR)
        if (!r.ok) throw new Error(`refused: ${r.message}`)
        for (const f of r.fields) expect(mentioned.has(f)).toBe(true)
        for (const f of changed) expect(r.fields.has(f)).toBe(true)
        if (patches.length === 1) expect([...r.fields].sort()).toEqual([...changed].sort())
        // And applying it really makes the server equal to the client.
        if (r.update) Y.applyUpdate(server, r.update)
        expect(docToJson(server)).toEqual(after)
      }),
      { numRuns: 500 },
    )
  })
})

describe('[ACC12] admission: structs under ids the server holds with other content', () => {
  const policy: AdmissionPolicy = { maxDepth: 64, mayWriteStructure: true }

  it('finding 10: a squat at a client\'s next clock, then that client\'s own edit of the clock: the edit is refused (client_id_conflict), never dropped as known', () => {
    const { server, client: alice } = setup({ title: 'a' })
    alice.clientID = 4711
    const first = capture(alice, () => alice.getMap(CONTENT_MAP).set('title', 'b'))
    expect(admitUpdate(server, first, policy)).toMatchObject({ ok: true })
    Y.applyUpdate(server, first)
    // Bob, who read Alice's id and next clock, writes another field under them.
    const squat = new Y.Doc()
    Y.applyUpdate(squat, Y.encodeStateAsUpdate(server))
    // Set after the sync: Yjs itself moves a doc off an id it sees another writer use.
    squat.clientID = 4711
    const squatted = capture(squat, () => squat.getMap(CONTENT_MAP).set('bobfield', 'squat'))
    const r = admitUpdate(server, squatted, policy)
    expect(r).toMatchObject({ ok: true, clients: new Set([4711]) })
    Y.applyUpdate(server, squatted)
    // Alice's next honest edit (made before she saw Bob's structs) holds the same ids.
    const second = capture(alice, () => alice.getMap(CONTENT_MAP).set('title', 'c'))
    expect(admitUpdate(server, second, policy)).toMatchObject({ ok: false, code: 'client_id_conflict' })
  })

  it('an honest resend of structs the server holds (a reconnect\'s resync, an outbox sent twice) is accepted, text and nested types included', () => {
    const { server, client } = setup({ n: 1 })
    client.clientID = 99
    const edit = capture(client, () => {
      const text = new Y.Text()
      client.getMap(CONTENT_MAP).set('notes', text)
      text.insert(0, 'hello 👋 world')
      client.getMap(CONTENT_MAP).set('list', Y.Array.from([1, new Y.Map()]))
    })
    Y.applyUpdate(server, edit)
    // The server splits the text (another writer types in the middle) and deletes a part.
    const other = new Y.Doc()
    syncInto(server, other)
    const typed = capture(other, () => {
      const t = other.getMap(CONTENT_MAP).get('notes') as Y.Text
      t.insert(7, 'X')
      t.delete(0, 2)
    })
    Y.applyUpdate(server, typed)
    expect(admitUpdate(server, edit, policy)).toMatchObject({ ok: true, update: null })
    expect(admitUpdate(server, Y.encodeStateAsUpdate(client), policy)).toMatchObject({ ok: true, update: null })
  })
})
