import { describe, expect, it } from 'vitest'
import fc from 'fast-check'
import * as Y from 'yjs'
import {
  applyMergePatch,
  applyPatchToDoc,
  applyPatchToJson,
  applyTextDiff,
  CONTENT_MAP,
  contentFieldOrder,
  docToJson,
  isPermissiveContent,
  isTextField,
  knownNodeTypes,
  nodeTypeDef,
  textPolicyFor,
  TYPED_TEXT_FIELDS,
  isDeclaredTextField,
  type JsonObject,
} from '../../shared/index.js'

const SEED = 1005
const text = fc.string({ unit: 'grapheme', maxLength: 40 })

function textDoc(value: string, clientID?: number): Y.Doc {
  const doc = new Y.Doc()
  if (clientID !== undefined) doc.clientID = clientID
  applyPatchToDoc(doc, { Notes: value }, null, textPolicyFor('Document'))
  return doc
}

function sync(a: Y.Doc, b: Y.Doc): void {
  Y.applyUpdate(b, Y.encodeStateAsUpdate(a, Y.encodeStateVector(b)))
  Y.applyUpdate(a, Y.encodeStateAsUpdate(b, Y.encodeStateVector(a)))
}

describe('[WEB3] text diff on a Y.Text', () => {
  it('[WEB3] applying the diff of a → b to a Y.Text holding a yields b (property)', () => {
    fc.assert(
      fc.property(text, text, (a, b) => {
        const doc = new Y.Doc()
        const t = doc.getText('t')
        t.insert(0, a)
        applyTextDiff(t, b)
        expect(t.toString()).toBe(b)
      }),
      { seed: SEED, numRuns: 1000 },
    )
  })

  it('[WEB3] the diff keeps the common prefix and suffix: an edit in one place changes only that place', () => {
    const doc = new Y.Doc()
    const t = doc.getText('t')
    t.insert(0, 'The cat sat.')
    const deltas: unknown[] = []
    t.observe((e) => deltas.push(e.delta))
    applyTextDiff(t, 'The black cat sat.')
    expect(deltas).toEqual([[{ retain: 4 }, { insert: 'black ' }]])
  })

  it('[WEB3] two concurrent diffs on different sentences both keep their words (property)', () => {
    const sentence = fc.stringMatching(/^[a-z]{1,8}( [a-z]{1,8}){0,3}$/)
    fc.assert(
      fc.property(sentence, sentence, sentence, sentence, (s1, s2, add1, add2) => {
        const base = `${s1}. ${s2}.`
        const alice = textDoc(base, 1)
        const bob = new Y.Doc()
        bob.clientID = 2
        sync(alice, bob)
        // Alice extends the first sentence, Bob the second, without seeing each other.
        applyPatchToDoc(alice, { Notes: `${s1} ${add1}. ${s2}.` }, null, textPolicyFor('Document'))
        applyPatchToDoc(bob, { Notes: `${s1}. ${s2} ${add2}.` }, null, textPolicyFor('Document'))
        sync(alice, bob)
        const merged = docToJson(alice).Notes
        expect(docToJson(bob).Notes).toBe(merged)
        expect(merged).toBe(`${s1} ${add1}. ${s2} ${add2}.`)
      }),
      { seed: SEED, numRuns: 300 },
    )
  })

  it('[WEB3] a plain string written before text merged becomes a Y.Text on its first write', () => {
    const doc = new Y.Doc()
    applyPatchToDoc(doc, { Notes: 'old', Other: 'x' }) // no policy: plain values (a server write)
    expect(doc.getMap(CONTENT_MAP).get('Notes')).toBe('old')
    applyPatchToDoc(doc, { Notes: 'old and new' }, null, textPolicyFor('Document'))
    expect(doc.getMap(CONTENT_MAP).get('Notes')).toBeInstanceOf(Y.Text)
    expect(doc.getMap(CONTENT_MAP).get('Other')).toBe('x')
    // A writer without the policy still edits an existing Y.Text as text.
    applyPatchToDoc(doc, { Notes: 'old and newer' })
    expect(doc.getMap(CONTENT_MAP).get('Notes')).toBeInstanceOf(Y.Text)
    expect(docToJson(doc)).toEqual({ Notes: 'old and newer', Other: 'x' })
  })

  it('[WEB3] nested strings of a permissive node are text; a number or object replacing a text replaces it', () => {
    const doc = new Y.Doc()
    const isText = textPolicyFor('Document')
    applyPatchToDoc(doc, { Meeting: { Summary: 'short', Count: 2 } }, null, isText)
    const inner = doc.getMap(CONTENT_MAP).get('Meeting') as Y.Map<unknown>
    expect(inner.get('Summary')).toBeInstanceOf(Y.Text)
    expect(inner.get('Count')).toBe(2)
    applyPatchToDoc(doc, { Meeting: { Summary: 7 } }, null, isText)
    expect(docToJson(doc)).toEqual({ Meeting: { Summary: 7, Count: 2 } })
  })

  it('[WEB3] enum-like fields of typed nodes stay plain; declared text fields merge', () => {
    expect(isTextField('Code', 'Source')).toBe(true)
    expect(isTextField('Code', 'Description')).toBe(true)
    expect(isTextField('Code', 'Language')).toBe(false)
    expect(isTextField('ActivityLog', 'Status')).toBe(false)
    expect(isTextField('ActivityLog', 'RequestedStatus')).toBe(false)
    expect(isTextField('AccessAssignment', 'Role')).toBe(false)
    expect(isTextField('Document', 'Status')).toBe(true)
    expect(isTextField('SomeModuleType', 'Anything')).toBe(true)
    const doc = new Y.Doc()
    applyPatchToDoc(doc, { Source: 'return 1', Language: 'javascript', Inputs: { x: { Type: 'string' } } }, null, textPolicyFor('Code'))
    const m = doc.getMap(CONTENT_MAP)
    expect(m.get('Source')).toBeInstanceOf(Y.Text)
    expect(m.get('Language')).toBe('javascript')
    expect(((m.get('Inputs') as Y.Map<unknown>).get('x') as Y.Map<unknown>).get('Type')).toBe('string')
  })

  it('[WEB3] the typed list matches the schemas: exactly the builtins with a non-permissive schema', () => {
    const typed = knownNodeTypes().filter((t) => !isPermissiveContent(t)).sort()
    expect(Object.keys(TYPED_TEXT_FIELDS).sort()).toEqual(expect.arrayContaining(typed))
    for (const t of Object.keys(TYPED_TEXT_FIELDS)) expect([...(nodeTypeDef(t).textFields ?? [])]).toEqual(TYPED_TEXT_FIELDS[t])
    // [STO5] A declared text field is one of a typed node, never any field of a permissive one.
    for (const t of Object.keys(TYPED_TEXT_FIELDS)) expect(isPermissiveContent(t), t).toBe(false)
    expect([isDeclaredTextField('ThreadMessage', 'Text'), isDeclaredTextField('Code', 'Source'), isDeclaredTextField('Code', 'Language')]).toEqual([true, true, false])
    expect([isDeclaredTextField('Document', 'Text'), isDeclaredTextField('SomeModuleType', 'Text'), isDeclaredTextField('toString', 'length')]).toEqual([false, false, false])
  })

  it('[WEB3] the JSON read back does not depend on the policy, and applyPatchToJson is unchanged (property)', () => {
    const json = fc.dictionary(fc.constantFrom('a', 'b', 'c'), fc.oneof(fc.string({ maxLength: 6 }), fc.integer(), fc.dictionary(fc.constantFrom('x', 'y'), fc.string({ maxLength: 4 }), { noNullPrototype: true })), { noNullPrototype: true })
    fc.assert(
      fc.property(json, fc.array(json, { maxLength: 4 }), (initial, patches) => {
        const plain = new Y.Doc()
        const texty = new Y.Doc()
        applyPatchToDoc(plain, initial)
        applyPatchToDoc(texty, initial, null, textPolicyFor('Document'))
        let expected: JsonObject = initial
        for (const p of patches) {
          applyPatchToDoc(plain, p)
          applyPatchToDoc(texty, p, null, textPolicyFor('Document'))
          expected = applyPatchToJson(expected, p)
          expect(expected).toEqual(applyMergePatch(expected, {}))
        }
        expect(docToJson(texty)).toEqual(docToJson(plain))
        expect(docToJson(texty)).toEqual(expected)
      }),
      { seed: SEED, numRuns: 300 },
    )
  })
})

describe('[WEB5] field order', () => {
  it('[WEB5] fields keep the order they were first set in, on every replica and after a reload', () => {
    const a = new Y.Doc()
    a.clientID = 900
    applyPatchToDoc(a, { summary: 's' })
    applyPatchToDoc(a, { zeta: 1 })
    applyPatchToDoc(a, { agenda: 'a' })
    applyPatchToDoc(a, { summary: 's2' }) // an overwrite keeps the place
    expect(contentFieldOrder(a)).toEqual(['summary', 'zeta', 'agenda'])
    const b = new Y.Doc()
    Y.applyUpdate(b, Y.encodeStateAsUpdate(a))
    expect(contentFieldOrder(b)).toEqual(['summary', 'zeta', 'agenda'])
    applyPatchToDoc(a, { zeta: null })
    expect(contentFieldOrder(a)).toEqual(['summary', 'agenda'])
  })
})

describe('[WEB3] carrying typing over a conversion race', () => {
  it('[WEB3] edits at different places both survive; overlapping ones keep both texts', async () => {
    const { mergeTextEdits } = await import('../../web/sync/text-rebase.js')
    expect(mergeTextEdits('Alpha. Beta.', 'Alpha one. Beta.', 'Alpha. Beta two.')).toBe('Alpha one. Beta two.')
    expect(mergeTextEdits('Alpha. Beta.', 'Alpha. Beta two.', 'Alpha one. Beta.')).toBe('Alpha one. Beta two.')
    expect(mergeTextEdits('t0', 't0', 'x')).toBe('x')
    expect(mergeTextEdits('t0', 't1', 't0')).toBe('t1')
    const both = mergeTextEdits('abc', 'abXc', 'abYc')
    expect(both).toContain('X')
    expect(both).toContain('Y')
  })
})

describe('[WEB53] carrying an edit onto a text others changed since', () => {
  /** `steps` applied to `text`, as the replica applies them to a Y.Text. */
  const applySteps = (text: string, steps: { index: number; remove: number; insert: string }[]) => {
    const doc = new Y.Doc()
    const t = doc.getText('t')
    t.insert(0, text)
    for (const st of steps) {
      if (st.remove > 0) t.delete(st.index, st.remove)
      if (st.insert.length > 0) t.insert(st.index, st.insert)
    }
    return t.toString()
  }

  it('[WEB53] what the edit changed lands among what others changed: theirs kept, ours inserted, nothing doubled', async () => {
    const { rebaseTextEdit } = await import('../../web/sync/text-rebase.js')
    const carry = (base: string, ours: string, current: string) => applySteps(current, rebaseTextEdit(base, ours, current)!)
    expect(carry('s0', 's0a', 'ZYs0')).toBe('ZYs0a')
    expect(carry('Alpha. Beta.', 'Alpha one. Beta.', 'Alpha. Beta two.')).toBe('Alpha one. Beta two.')
    // Two places at once (a multi-cursor edit), theirs between them.
    expect(carry('abcdef', 'aXbcdeYf', 'abcQdef')).toBe('aXbcQdeYf')
    // Ours takes out a span they typed into: only the characters ours saw go.
    expect(carry('abcdef', 'af', 'abcQdef')).toBe('aQf')
    // They took out what ours typed beside: nothing comes back.
    expect(carry('abc', 'abXc', 'ac')).toBe('aXc')
    // A pair of UTF-16 units is one character: never split.
    expect(carry('a😀b', 'a😀Xb', 'a😁b')).toBe('a😁Xb')
    expect(carry('a😀b', 'ab', 'a😀😁b')).toBe('a😁b')
    // Nothing changed by ours: no step.
    expect(rebaseTextEdit('abc', 'abc', 'xabcx')).toEqual([])
  })

  it('[WEB53] property: every character others inserted is there once, every one ours inserted once, and a character either took out is gone', async () => {
    const { rebaseTextEdit } = await import('../../web/sync/text-rebase.js')
    // One edit of a base: per base character kept or taken out, per gap what is inserted (unique characters).
    const edit = (n: number, from: number) =>
      fc.tuple(fc.array(fc.boolean(), { minLength: n, maxLength: n }), fc.array(fc.nat(3), { minLength: n + 1, maxLength: n + 1 })).map(([keep, ins]) => {
        let next = from
        const inserted: string[] = []
        let s = ''
        for (let g = 0; g <= n; g++) {
          for (let i = 0; i < ins[g]!; i++) {
            const ch = String.fromCodePoint(next++)
            inserted.push(ch)
            s += ch
          }
          if (g < n && keep[g]) s += String.fromCodePoint(0x4e00 + g)
        }
        return { s, keep, inserted }
      })
    fc.assert(
      fc.property(
        fc.nat(12).chain((n) => fc.tuple(fc.constant(n), edit(n, 0xac00), edit(n, 0x1f600))),
        ([n, ours, theirs]) => {
          const base = Array.from({ length: n }, (_, i) => String.fromCodePoint(0x4e00 + i)).join('')
          const out = applySteps(theirs.s, rebaseTextEdit(base, ours.s, theirs.s)!)
          const count = (ch: string) => out.split(ch).length - 1
          for (const ch of [...ours.inserted, ...theirs.inserted]) expect(count(ch)).toBe(1)
          for (let i = 0; i < n; i++) expect(count(String.fromCodePoint(0x4e00 + i))).toBe(ours.keep[i] && theirs.keep[i] ? 1 : 0)
          expect(Array.from(out).length).toBe(ours.inserted.length + theirs.inserted.length + ours.keep.filter((k, i) => k && theirs.keep[i]).length)
        },
      ),
      { numRuns: 500 },
    )
  })

  it('[WEB53] the text an edit found is kept as a change of the text it left, and read back exactly', async () => {
    const { textBaseOf, baseText } = await import('../../web/sync/text-rebase.js')
    fc.assert(
      fc.property(fc.string({ unit: 'grapheme' }), fc.string({ unit: 'grapheme' }), (before, after) => {
        expect(baseText(after, textBaseOf(after, before))).toBe(before)
      }),
      { numRuns: 500 },
    )
    expect(baseText('ab', { index: 1, remove: 5, insert: '' })).toBeNull()
  })

  it('[WEB53] texts that differ in too many places are not diffed character by character (the caller falls back)', async () => {
    const { rebaseTextEdit } = await import('../../web/sync/text-rebase.js')
    const a = Array.from({ length: 3000 }, (_, i) => String.fromCodePoint(0x4e00 + i)).join('')
    const b = Array.from({ length: 3000 }, (_, i) => String.fromCodePoint(0x8000 + i)).join('')
    expect(rebaseTextEdit(a, a + 'x', b)).toBeNull()
  })
})

describe('[WEB3] the caret under remote edits', () => {
  it('[WEB3] a remote edit before the caret moves it by its length, one after it leaves it; text inserted at the caret stays after it (property)', async () => {
    const { transformIndex } = await import('../../web/components/caret.js')
    expect(transformIndex(10, [{ retain: 2 }, { insert: 'abc' }])).toBe(13)
    expect(transformIndex(10, [{ retain: 12 }, { insert: 'abc' }])).toBe(10)
    expect(transformIndex(10, [{ retain: 10 }, { insert: 'abc' }])).toBe(10)
    expect(transformIndex(10, [{ retain: 2 }, { delete: 3 }])).toBe(7)
    expect(transformIndex(10, [{ retain: 8 }, { delete: 5 }])).toBe(8)
    // Property: the character after the caret is still after it once a remote diff is applied elsewhere.
    fc.assert(
      fc.property(fc.string({ minLength: 1, maxLength: 30 }), fc.nat(), text, (s, at, ins) => {
        const caret = at % (s.length + 1)
        const doc = new Y.Doc()
        const t = doc.getText('t')
        t.insert(0, s)
        let moved = caret
        t.observe((e) => (moved = transformIndex(caret, e.delta as never)))
        const where = (at * 7) % (s.length + 1)
        t.insert(where, ins)
        expect(t.toString().slice(0, moved)).toBe(where < caret ? s.slice(0, where) + ins + s.slice(where, caret) : s.slice(0, caret))
      }),
      { seed: SEED, numRuns: 300 },
    )
  })
})
