import { describe, expect, it } from 'vitest'
import fc from 'fast-check'
import * as Y from 'yjs'
import {
  applyMergePatch,
  applyPatchToDoc,
  assertMergePatch,
  CONTENT_MAP,
  diffToMergePatch,
  docToJson,
  isWeftError,
  replaceDocContent,
  replaceJsonContent,
  assertJsonContent,
  assertNewText,
  cutText,
  storableText,
  toStorableJson,
  toStorableText,
  type JsonObject,
  type JsonValue,
  type MergePatch,
} from '../../shared/index.js'
import { RFC_7396_EXAMPLES } from '../helpers/rfc7396.js'
import { jsonHoldsNul } from '../../sync-server/storage/postgres-adapter.js'

// ---- arbitraries ----------------------------------------------------------------------------
// Few keys, so patches hit existing fields often; plus arbitrary strings now and then.
const key = fc.oneof({ weight: 4, arbitrary: fc.constantFrom('a', 'b', 'c', 'Status') }, { weight: 1, arbitrary: fc.string({ maxLength: 4 }) })
const scalar = fc.oneof(
  fc.integer({ min: -1000, max: 1000 }),
  fc.double({ noNaN: true, noDefaultInfinity: true }).filter((d) => !Object.is(d, -0)),
  fc.string({ maxLength: 5 }),
  fc.boolean(),
)
/** Any JSON (nulls allowed, e.g. inside arrays). */
const { anyJson } = fc.letrec<{ anyJson: JsonValue; anyObject: JsonObject }>((tie) => ({
  anyJson: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    fc.constant(null),
    scalar,
    fc.array(tie('anyJson'), { maxLength: 3 }),
    tie('anyObject'),
  ),
  anyObject: fc.dictionary(key, tie('anyJson'), { maxKeys: 3, noNullPrototype: true }),
}))
/**
 * Content a merge patch can produce: no `null` as an object member (RFC 7396 reads it as
 * "delete"), anything inside arrays.
 */
const { content: contentValue, contentObject } = fc.letrec<{ content: JsonValue; contentObject: JsonObject }>((tie) => ({
  content: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    scalar,
    fc.array(anyJson, { maxLength: 3 }),
    tie('contentObject'),
  ),
  contentObject: fc.dictionary(key, tie('content'), { maxKeys: 4, noNullPrototype: true }),
}))
const { patch: patchArb } = fc.letrec<{ patchValue: JsonValue; patch: MergePatch }>((tie) => ({
  patchValue: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    fc.constant(null),
    scalar,
    fc.array(anyJson, { maxLength: 3 }),
    tie('patch'),
  ),
  patch: fc.dictionary(key, tie('patchValue'), { maxKeys: 4, noNullPrototype: true }),
}))

function docWith(content: JsonObject): Y.Doc {
  const doc = new Y.Doc()
  applyPatchToDoc(doc, content)
  return doc
}

function expectInvalidPatch(fn: () => unknown): void {
  try {
    fn()
  } catch (e) {
    expect(isWeftError(e) && e.code).toBe('invalid_patch')
    return
  }
  expect.fail('expected a WeftError invalid_patch')
}

// ---- RFC 7396 -------------------------------------------------------------------------------

describe('applyMergePatch (reference RFC 7396)', () => {
  it.each(RFC_7396_EXAMPLES)('[PATCH1] RFC 7396 appendix A: %j + %j = %j', (target, patch, result) => {
    expect(applyMergePatch(target, patch)).toEqual(result)
  })

  it('[PATCH1] RFC 7396 appendix A on a Y.Doc (rows whose target and patch are objects the doc can hold)', () => {
    for (const [target, patch, result] of RFC_7396_EXAMPLES) {
      const isObject = (v: JsonValue): v is JsonObject => typeof v === 'object' && v !== null && !Array.isArray(v)
      if (!isObject(target) || !isObject(patch) || Object.values(target).includes(null)) continue
      const doc = docWith(target)
      applyPatchToDoc(doc, patch)
      expect(docToJson(doc)).toEqual(result)
    }
  })

  it('does not mutate its inputs', () => {
    fc.assert(
      fc.property(contentObject, patchArb, (target, patch) => {
        const t = structuredClone(target)
        const p = structuredClone(patch)
        applyMergePatch(target, patch)
        expect(target).toEqual(t)
        expect(patch).toEqual(p)
      }),
    )
  })
})

describe('applyPatchToDoc', () => {
  it('[PATCH1] docToJson(doc after the patch) equals the RFC 7396 reference (property)', () => {
    fc.assert(
      fc.property(contentObject, patchArb, (initial, patch) => {
        const doc = docWith(initial)
        expect(docToJson(doc)).toEqual(initial)
        applyPatchToDoc(doc, patch)
        expect(docToJson(doc)).toEqual(applyMergePatch(initial, patch))
      }),
      { numRuns: 500 },
    )
  })

  it('[PATCH1] a sequence of patches equals the reference applied in order (property)', () => {
    fc.assert(
      fc.property(contentObject, fc.array(patchArb, { maxLength: 5 }), (initial, patches) => {
        const doc = docWith(initial)
        let expected: JsonValue = initial
        for (const p of patches) {
          applyPatchToDoc(doc, p)
          expected = applyMergePatch(expected, p)
        }
        expect(docToJson(doc)).toEqual(expected)
      }),
    )
  })

  it('[PATCH2] one patch is exactly one Yjs transaction, and at most one update (property)', () => {
    fc.assert(
      fc.property(contentObject, patchArb, (initial, patch) => {
        const doc = docWith(initial)
        let transactions = 0
        let updates = 0
        doc.on('afterTransaction', () => transactions++)
        doc.on('update', () => updates++)
        applyPatchToDoc(doc, patch, 'test-origin')
        expect(transactions).toBe(1)
        expect(updates).toBeLessThanOrEqual(1)
        const changed = JSON.stringify(docToJson(docWith(initial))) !== JSON.stringify(docToJson(doc))
        if (changed) expect(updates).toBe(1)
      }),
    )
  })

  it('[PATCH2] the update carries the origin it was given', () => {
    const doc = docWith({ a: 1 })
    const origins: unknown[] = []
    doc.on('update', (_u: Uint8Array, origin: unknown) => origins.push(origin))
    applyPatchToDoc(doc, { a: 2, b: { c: [1] } }, 'system')
    expect(origins).toEqual(['system'])
  })

  it('a no-op patch writes nothing (unchanged scalars, arrays and nested objects keep their items)', () => {
    const doc = docWith({ a: 1, b: [1, { x: 2 }], c: { d: 'e' } })
    let updates = 0
    doc.on('update', () => updates++)
    applyPatchToDoc(doc, { a: 1, b: [1, { x: 2 }], c: { d: 'e' }, missing: null })
    expect(updates).toBe(0)
  })

  it('[PATCH2] a field held as a shared Y.Array (an appended log) named at its current value is not written, by a patch or a replace; a concurrent append survives (property)', () => {
    fc.assert(
      fc.property(fc.array(anyJson, { maxLength: 4 }), fc.array(anyJson, { minLength: 1, maxLength: 2 }), fc.boolean(), (items, appended, asReplace) => {
        const doc = new Y.Doc()
        const log = new Y.Array<unknown>()
        doc.transact(() => {
          doc.getMap(CONTENT_MAP).set('Messages', log)
          doc.getMap(CONTENT_MAP).set('Status', 'Running')
          log.push(items.map((i) => i))
        })
        const other = new Y.Doc()
        Y.applyUpdate(other, Y.encodeStateAsUpdate(doc))
        ;(other.getMap(CONTENT_MAP).get('Messages') as Y.Array<unknown>).push(appended)
        const concurrent = Y.encodeStateAsUpdate(other, Y.encodeStateVector(doc))
        let updates = 0
        doc.on('update', () => updates++)
        const current = docToJson(doc)
        if (asReplace) replaceDocContent(doc, current)
        else applyPatchToDoc(doc, { Messages: current.Messages ?? null })
        expect(updates).toBe(0)
        expect(doc.getMap(CONTENT_MAP).get('Messages')).toBe(log)
        Y.applyUpdate(doc, concurrent)
        expect(docToJson(doc).Messages).toEqual(docToJson(other).Messages)
      }),
      { seed: Number(process.env.MERGE_PATCH_SEED ?? 7396), numRuns: 200 },
    )
  })

  it('[PATCH3] two docs patching different top-level fields concurrently converge with both changes (property)', () => {
    fc.assert(
      fc.property(
        contentObject,
        fc.uniqueArray(fc.constantFrom('a', 'b', 'c', 'Status', 'x', 'y'), { minLength: 2, maxLength: 2 }),
        fc.constantFrom(null, 1, 'v', [1, 2]).chain((v) => fc.constant(v as JsonValue)),
        contentValue,
        (initial, [fieldA, fieldB], valueA, valueB) => {
          const a = docWith(initial)
          const b = new Y.Doc()
          Y.applyUpdate(b, Y.encodeStateAsUpdate(a))
          const patchA: MergePatch = { [fieldA!]: valueA }
          const patchB: MergePatch = { [fieldB!]: valueB }
          const ua = captureOne(a, () => applyPatchToDoc(a, patchA))
          const ub = captureOne(b, () => applyPatchToDoc(b, patchB))
          Y.applyUpdate(a, ub)
          Y.applyUpdate(b, ua)
          const expected = applyMergePatch(applyMergePatch(initial, patchA), patchB)
          expect(docToJson(a)).toEqual(expected)
          expect(docToJson(b)).toEqual(expected)
        },
      ),
    )
  })

  it('[PATCH3] two docs patching different nested fields of one object concurrently converge with both changes (property)', () => {
    fc.assert(
      fc.property(
        contentObject,
        fc.uniqueArray(fc.constantFrom('p', 'q', 'r', 's'), { minLength: 2, maxLength: 2 }),
        contentValue,
        contentValue,
        fc.boolean(),
        (siblings, [keyA, keyB], valueA, valueB, deleteA) => {
          // The shared parent object exists on both sides before the concurrent edits.
          const initial: JsonObject = { M: { Deep: siblings, p: 0, q: 0 }, Other: 1 }
          const a = docWith(initial)
          const b = new Y.Doc()
          Y.applyUpdate(b, Y.encodeStateAsUpdate(a))
          const patchA: MergePatch = { M: { Deep: { [keyA!]: deleteA ? null : valueA } } }
          const patchB: MergePatch = { M: { Deep: { [keyB!]: valueB } } }
          const ua = captureOne(a, () => applyPatchToDoc(a, patchA))
          const ub = captureOne(b, () => applyPatchToDoc(b, patchB))
          Y.applyUpdate(b, ua)
          Y.applyUpdate(a, ub)
          const expected = applyMergePatch(applyMergePatch(initial, patchA), patchB)
          expect(docToJson(a)).toEqual(expected)
          expect(docToJson(b)).toEqual(expected)
        },
      ),
    )
  })

  it('[PATCH3] the seed scenario: a writer of RequestedStatus and the owner writing Status both survive', () => {
    const owner = docWith({ Status: 'Running', RequestedStatus: null as unknown as JsonValue, Messages: [] })
    const caller = new Y.Doc()
    Y.applyUpdate(caller, Y.encodeStateAsUpdate(owner))
    const u1 = captureOne(owner, () => applyPatchToDoc(owner, { Status: 'Succeeded', Messages: ['done'] }))
    const u2 = captureOne(caller, () => applyPatchToDoc(caller, { RequestedStatus: 'Cancelled' }))
    Y.applyUpdate(owner, u2)
    Y.applyUpdate(caller, u1)
    const expected = { Status: 'Succeeded', Messages: ['done'], RequestedStatus: 'Cancelled' }
    expect(docToJson(owner)).toEqual(expected)
    expect(docToJson(caller)).toEqual(expected)
  })

  it('[IN1] invalid patches throw invalid_patch and leave the doc untouched', () => {
    const doc = docWith({ a: 1 })
    let transactions = 0
    doc.on('afterTransaction', () => transactions++)
    const invalid: unknown[] = [
      null,
      undefined,
      'string',
      42,
      true,
      [],
      [{ a: 1 }],
      { a: Number.NaN },
      { a: Number.POSITIVE_INFINITY },
      { a: { b: Number.NEGATIVE_INFINITY } },
      { a: undefined },
      { a: { b: [1, undefined] } },
      { a: [Number.NaN] },
      { a: () => 1 },
      { a: new Date(0) },
      { a: new Map() },
      { a: Symbol('s') },
      { a: 10n },
      { a: new (class Point { x = 1 })() },
    ]
    for (const patch of invalid) {
      expectInvalidPatch(() => applyPatchToDoc(doc, patch as MergePatch))
      expectInvalidPatch(() => assertMergePatch(patch))
    }
    expect(transactions).toBe(0)
    expect(docToJson(doc)).toEqual({ a: 1 })
  })

  it('[IN1] anything JSON.parse produces is accepted', () => {
    fc.assert(
      fc.property(fc.json(), (text) => {
        const value = JSON.parse(text) as unknown
        const isObject = typeof value === 'object' && value !== null && !Array.isArray(value)
        if (isObject) expect(() => assertMergePatch(value)).not.toThrow()
        else expectInvalidPatch(() => assertMergePatch(value))
      }),
    )
  })

  it('a `__proto__` member parsed from JSON is an ordinary field', () => {
    const patch = JSON.parse('{"__proto__": {"polluted": true}, "a": 1}') as MergePatch
    const doc = docWith({})
    applyPatchToDoc(doc, patch)
    expect((doc.getMap(CONTENT_MAP).get('__proto__') as Y.Map<unknown>).get('polluted')).toBe(true)
    const json = docToJson(doc)
    expect(Object.getPrototypeOf(json)).toBe(Object.prototype)
    expect(Object.keys(json).sort()).toEqual(['__proto__', 'a'])
    const reference = applyMergePatch({}, patch) as JsonObject
    expect(Object.getPrototypeOf(reference)).toBe(Object.prototype)
    expect(Object.keys(reference).sort()).toEqual(['__proto__', 'a'])
    expect(JSON.stringify(json)).toBe(JSON.stringify(reference))
    expect(({} as Record<string, unknown>).polluted).toBeUndefined()
    // diff sees it too (an absent `__proto__` is not Object.prototype).
    const to = JSON.parse('{"__proto__": {}}') as JsonObject
    expect(Object.keys(diffToMergePatch({}, to))).toEqual(['__proto__'])
    expect(Object.keys(diffToMergePatch(to, {}))).toEqual(['__proto__'])
  })
})

describe('diffToMergePatch', () => {
  it('applying diff(a, b) to a gives b (property, plain JSON and Y.Doc)', () => {
    fc.assert(
      fc.property(contentObject, contentObject, (a, b) => {
        const patch = diffToMergePatch(a, b)
        expect(applyMergePatch(a, patch)).toEqual(b)
        const doc = docWith(a)
        applyPatchToDoc(doc, patch)
        expect(docToJson(doc)).toEqual(b)
      }),
      { numRuns: 500 },
    )
  })

  it('diff(a, a) is empty, and equal fields are left out (property)', () => {
    fc.assert(
      fc.property(contentObject, contentObject, (a, b) => {
        expect(diffToMergePatch(a, structuredClone(a))).toEqual({})
        const patch = diffToMergePatch(a, b)
        for (const k of Object.keys(patch)) {
          expect(JSON.stringify(a[k]) === JSON.stringify(b[k]) && k in a && k in b).toBe(false)
        }
      }),
    )
  })

  it('replaceDocContent makes the doc equal the new content (property)', () => {
    fc.assert(
      fc.property(contentObject, contentObject, (a, b) => {
        const doc = docWith(a)
        replaceDocContent(doc, b)
        expect(docToJson(doc)).toEqual(b)
      }),
    )
  })

  it('an emptied object becomes a patch deleting each of its keys', () => {
    expect(diffToMergePatch({ m: { x: 1, y: 2 } }, { m: {} })).toEqual({ m: { x: null, y: null } })
    expect(diffToMergePatch({ m: 1 }, { m: {} })).toEqual({ m: {} })
  })
})

describe('[PATCH4] content is set, not patched: nulls are kept', () => {
  /** A doc whose content is exactly `content`, nulls included (the create path). */
  function docHolding(content: JsonObject): Y.Doc {
    const doc = new Y.Doc()
    replaceDocContent(doc, content)
    return doc
  }
  const isObject = (v: JsonValue): v is JsonObject => typeof v === 'object' && v !== null && !Array.isArray(v)

  it('[PATCH4] the RFC 7396 null vector: {"e":null} created, then {"a":1} patched, reads {"e":null,"a":1}', () => {
    const doc = docHolding({ e: null })
    expect(docToJson(doc)).toEqual({ e: null })
    applyPatchToDoc(doc, { a: 1 })
    expect(docToJson(doc)).toEqual({ e: null, a: 1 })
    expect(replaceJsonContent({ e: null, a: 1 })).toEqual({ e: null, a: 1 })
  })

  it('[PATCH1] [PATCH4] every RFC 7396 Appendix A case on a Y.Doc (objects at the top, the rest one level down)', () => {
    for (const [target, patch, result] of RFC_7396_EXAMPLES) {
      if (isObject(target) && isObject(patch)) {
        const doc = docHolding(target)
        applyPatchToDoc(doc, patch)
        expect(docToJson(doc)).toEqual(result)
      }
      // One level down every case applies (a member is patched as RFC 7396 patches a document);
      // a null patch of the member deletes it, as RFC 7396 says of a member set to null.
      const doc = docHolding({ x: target, keep: null })
      applyPatchToDoc(doc, { x: patch })
      expect(docToJson(doc)).toEqual(patch === null ? { keep: null } : { x: result, keep: null })
    }
  })

  it('[PATCH4] replaceDocContent makes the doc hold exactly any JSON object, nulls included (property)', () => {
    const anyObject = fc.dictionary(key, anyJson, { maxKeys: 4, noNullPrototype: true })
    fc.assert(
      fc.property(anyObject, anyObject, (a, b) => {
        const doc = docHolding(a)
        expect(docToJson(doc)).toEqual(a)
        expect(replaceJsonContent(a)).toEqual(a)
        replaceDocContent(doc, b)
        expect(docToJson(doc)).toEqual(b)
        // Replacing with the same content writes nothing.
        let updates = 0
        doc.on('update', () => updates++)
        replaceDocContent(doc, structuredClone(b))
        expect(updates).toBe(0)
      }),
      { numRuns: 500 },
    )
  })

  it('[PATCH1] [PATCH4] on content holding nulls, the doc after a patch equals the JSON reference (property)', () => {
    const anyObject = fc.dictionary(key, anyJson, { maxKeys: 4, noNullPrototype: true })
    fc.assert(
      fc.property(anyObject, fc.array(patchArb, { maxLength: 4 }), (initial, patches) => {
        const doc = docHolding(initial)
        let expected: JsonValue = initial
        for (const p of patches) {
          applyPatchToDoc(doc, p)
          expected = applyMergePatch(expected, p)
          expect(docToJson(doc)).toEqual(expected)
        }
      }),
      { numRuns: 500 },
    )
  })

  it('[PATCH4] a member set to null from a value, and a Y.Text set to null, read back null', () => {
    const doc = docHolding({ a: 1, t: 'text', m: { x: 1 } })
    replaceDocContent(doc, { a: null, t: 'text', m: { x: null } }, null, (at) => at[0] === 't')
    expect(docToJson(doc)).toEqual({ a: null, t: 'text', m: { x: null } })
    replaceDocContent(doc, { a: null, t: null, m: null }, null, (at) => at[0] === 't')
    expect(docToJson(doc)).toEqual({ a: null, t: null, m: null })
  })
})

function captureOne(doc: Y.Doc, fn: () => void): Uint8Array {
  const updates: Uint8Array[] = []
  const on = (u: Uint8Array): void => {
    updates.push(u)
  }
  doc.on('update', on)
  fn()
  doc.off('update', on)
  return Y.mergeUpdates(updates)
}

describe('[STO10] text every storage holds', () => {
  it('refuses a NUL or a lone surrogate in a value or a field name, naming where; keeps every other character', () => {
    expect(storableText('日本語 😀 \\u0000 tab\t')).toBe(true)
    for (const s of ['a\u0000', '\ud83d', 'x\udc00y']) expect(storableText(s)).toBe(false)
    expect(() => assertJsonContent({ a: { b: ['ok', 'cut \ud83d'] } })).toThrow(/content\.a\.b\[1\] holds half of a character/)
    expect(() => assertJsonContent({ a: { ['k\u0000']: 1 } })).toThrow(/field name in content\.a holds a NUL character/)
    expect(() => assertMergePatch({ t: 'x\u0000' })).toThrow(expect.objectContaining({ code: 'invalid_patch' }))
    expect(() => assertJsonContent({ emoji: '😀', ja: '日本語', text: '\\u0000' })).not.toThrow()
  })

  it('the server\'s own text: a cut never splits an emoji; NUL and halves become U+FFFD', () => {
    expect(cutText(`${'x'.repeat(59)}😀`, 60)).toBe('x'.repeat(59))
    expect(cutText(`${'x'.repeat(58)}😀`, 60)).toBe(`${'x'.repeat(58)}😀`)
    expect(cutText('short', 60)).toBe('short')
    expect(toStorableText('a\u0000b\ud83dc😀')).toBe('a\ufffdb\ufffdc😀')
    expect(toStorableJson({ ['k\u0000']: ['\udc00', 1, null, { x: 'ok' }] })).toEqual({ ['k\ufffd']: ['\ufffd', 1, null, { x: 'ok' }] })
  })

  it('PostgreSQL: a NUL in JSON text is `\\u0000` after an even run of backslashes, not the text `\\u0000`', () => {
    expect(jsonHoldsNul(JSON.stringify({ a: 'x\u0000' }))).toBe(true)
    expect(jsonHoldsNul(JSON.stringify({ a: '\\\u0000' }))).toBe(true)
    expect(jsonHoldsNul(JSON.stringify({ a: '\\u0000' }))).toBe(false)
    expect(jsonHoldsNul(JSON.stringify({ a: '\\\\u0000' }))).toBe(false)
  })

  it('seeded: content is refused exactly when a string in it holds a NUL or is not well-formed UTF-16, and PostgreSQL\'s NUL test agrees with the text', () => {
    // An oracle of its own: encodeURIComponent throws on a lone surrogate.
    const wellFormed = (t: string) => {
      try {
        encodeURIComponent(t)
        return true
      } catch {
        return false
      }
    }
    const text = fc.oneof(fc.string({ unit: 'binary', maxLength: 12 }), fc.constantFrom('\u0000', '\\u0000', '\\\u0000', '\ud800', '\udfff😀', '日本'))
    fc.assert(
      fc.property(text, text, (key, value) => {
        const ok = !key.includes('\u0000') && !value.includes('\u0000') && wellFormed(key) && wellFormed(value)
        expect(storableText(key) && storableText(value)).toBe(ok)
        let threw = false
        try {
          assertJsonContent({ [key]: [value] })
        } catch {
          threw = true
        }
        expect(threw).toBe(!ok)
        expect(jsonHoldsNul(JSON.stringify({ [key]: value }))).toBe(key.includes('\u0000') || value.includes('\u0000'))
      }),
      { seed: 1_010, numRuns: 2_000 },
    )
  })

  it('seeded: a write is refused exactly when it brings such text, at a place where it differs from what was stored; what it keeps never refuses it', () => {
    const text = fc.constantFrom('a', 'b', '\u0000', 'x\u0000', '\ud800', '日本', '\\u0000')
    const { value } = fc.letrec<{ value: JsonValue }>((tie) => ({
      value: fc.oneof(
        { depthSize: 'small', withCrossShrink: true },
        text,
        fc.integer({ min: 0, max: 2 }),
        fc.array(tie('value'), { maxLength: 3 }),
        fc.dictionary(text, tie('value'), { maxKeys: 3 }),
      ),
    }))
    const root = fc.dictionary(text, value, { maxKeys: 4 })
    // An oracle of its own: every leaf string and every field name of a value, by its typed place.
    const places = (v: unknown, at: string, out: Map<string, string>): Map<string, string> => {
      if (typeof v === 'string') out.set(`${at}=`, v)
      else if (Array.isArray(v)) v.forEach((x, i) => places(x, `${at}[${i}]`, out))
      else if (v !== null && typeof v === 'object') {
        for (const [k, x] of Object.entries(v)) {
          out.set(`${at}{${JSON.stringify(k)}}`, k)
          places(x, `${at}.${JSON.stringify(k)}`, out)
        }
      }
      return out
    }
    // A copy (no shared references) with one item appended to every array and one member added to every object.
    const grown = (v: JsonValue, extra: string): JsonValue =>
      Array.isArray(v) ? [...v.map((x) => grown(x, extra)), extra]
      : v !== null && typeof v === 'object' ? { ...Object.fromEntries(Object.entries(v).map(([k, x]) => [k, grown(x, extra)])), [`+${extra}`]: extra }
      : v
    // The next content: the stored one, grown, with some places changed, or one drawn afresh.
    const pair = root.chain((before) =>
      fc.oneof(
        fc.constant(before),
        text.map((extra) => grown(before, extra) as JsonObject),
        root,
        fc.tuple(root, fc.boolean()).map(([more, keep]) => (keep ? { ...before, ...more } : { ...more, ...before })),
      ).map((next) => ({ before, next })),
    )
    fc.assert(
      fc.property(pair, ({ before, next }) => {
        const had = places(before, '', new Map())
        const brings = [...places(next, '', new Map())].some(([at, t]) => !storableText(t) && had.get(at) !== t)
        let threw = false
        try {
          assertNewText(before, next, 'invalid_content')
        } catch (e) {
          threw = true
          expect(e).toMatchObject({ code: 'invalid_content' })
        }
        expect(threw).toBe(brings)
        expect(() => assertNewText(next, next, 'invalid_content')).not.toThrow()
      }),
      { seed: 1_011, numRuns: 3_000 },
    )
  })
})
