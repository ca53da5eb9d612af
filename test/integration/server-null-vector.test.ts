import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import fc from 'fast-check'
import { SYSTEM, type JsonObject, type JsonValue, type NodePath } from '../../shared/index.js'
import { api, createSpace, errorCode, expectStatus, signup, startTestServer, stockProvider, waitFor, type TestServer, type TestUser } from '../helpers/index.js'
import { RFC_7396_EXAMPLES } from '../helpers/rfc7396.js'

const isObject = (v: JsonValue): v is JsonObject => typeof v === 'object' && v !== null && !Array.isArray(v)

const key = fc.oneof({ weight: 4, arbitrary: fc.constantFrom('a', 'b', 'e', 'Title') }, { weight: 1, arbitrary: fc.stringMatching(/^[A-Za-z0-9 _-]{1,6}$/) })
const scalar = fc.oneof(fc.integer({ min: -1000, max: 1000 }), fc.string({ maxLength: 5 }), fc.boolean(), fc.constant(null))
const { anyObject } = fc.letrec<{ anyJson: JsonValue; anyObject: JsonObject }>((tie) => ({
  anyJson: fc.oneof({ depthSize: 'small', withCrossShrink: true }, scalar, fc.array(tie('anyJson'), { maxLength: 3 }), tie('anyObject')),
  anyObject: fc.dictionary(key, tie('anyJson'), { maxKeys: 4, noNullPrototype: true }),
}))

/** [PATCH4] RFC 7396's null vector over HTTP: a PUT sets the content (nulls kept), a PATCH merges. */
describe('null members over HTTP', () => {
  let ts: TestServer
  let user: TestUser
  let space: string
  let n = 0
  const next = () => `${space}/n${n++}`

  beforeAll(async () => {
    ts = await startTestServer()
    user = await signup(ts.url)
    space = await createSpace(ts.url, user.token)
  })
  afterAll(async () => {
    await ts.cleanup()
  })

  it('[PATCH4] PUT {"e":null,"a":1} then GET gives {"e":null,"a":1}; a PATCH {"a":2} keeps e', async () => {
    const http = api(ts.url, user.token)
    const path = next()
    const put = expectStatus(await http.putNode(path, 'Document', { e: null, a: 1 }), 201)
    expect(put.body.content).toEqual({ e: null, a: 1 })
    expect((await http.getNode(path)).body.content).toEqual({ e: null, a: 1 })
    expect(expectStatus(await http.patchNode(path, { a: 2 }), 200).body.content).toEqual({ e: null, a: 2 })
    // A replace sets a member to null from a value (a merge patch cannot say that).
    expect(expectStatus(await http.putNode(path, 'Document', { e: null, a: null, n: { x: null } }), 200).body.content).toEqual({ e: null, a: null, n: { x: null } })
    expect((await http.getNode(path)).body.content).toEqual({ e: null, a: null, n: { x: null } })
    // The synced doc holds the nulls too.
    const stock = stockProvider(ts.url, path, user.token)
    try {
      await stock.synced()
      expect(stock.json()).toEqual({ e: null, a: null, n: { x: null } })
    } finally {
      stock.destroy()
    }
  })

  it('[PATCH1] [PATCH4] every RFC 7396 Appendix A case through PATCH over HTTP, on a node with and without its doc built', async () => {
    const http = api(ts.url, user.token)
    for (const withDoc of [true, false]) {
      for (const [target, patch, result] of RFC_7396_EXAMPLES) {
        // The document is the content when target and patch are objects; else a member of it
        // (RFC 7396 patches a member as it patches a document), beside a null that must stay.
        const top = isObject(target) && isObject(patch)
        const initial: JsonObject = top ? (target as JsonObject) : { x: target, keep: null }
        const body: JsonValue = top ? patch : { x: patch }
        const expected: JsonObject = top ? (result as JsonObject) : patch === null ? { keep: null } : { x: result, keep: null }
        const path = next() as NodePath
        // Over HTTP the doc is built at once; an engine's create leaves it to the first client ([DOC1]).
        if (withDoc) expectStatus(await http.putNode(path, 'Document', initial), 201)
        else await ts.server.nodes.put(SYSTEM, path, { nodeType: 'Document', content: initial }, 'engine')
        expect(ts.server.nodes.hasDoc(path)).toBe(withDoc)
        expect((await http.getNode(path)).body.content, `${JSON.stringify(initial)} as created`).toEqual(initial)
        const patched = expectStatus(await http.patchNode(path, body), 200)
        expect(patched.body.content, `${JSON.stringify(target)} + ${JSON.stringify(patch)}`).toEqual(expected)
        expect((await http.getNode(path)).body.content).toEqual(expected)
        // The doc, built now or earlier, reads the same.
        const stock = stockProvider(ts.url, path, user.token)
        try {
          await stock.synced()
          expect(stock.json()).toEqual(expected)
        } finally {
          stock.destroy()
        }
      }
    }
    // A patch that is not an object cannot patch content (it must stay an object): refused, unchanged.
    const path = next()
    expectStatus(await http.putNode(path, 'Document', { a: 'foo' }), 201)
    for (const patch of [null, 'bar', ['c']]) {
      const res = await http.patchNode(path, patch)
      expect(res.status).toBe(400)
      expect(errorCode(res)).toBe('invalid_patch')
    }
    expect((await http.getNode(path)).body.content).toEqual({ a: 'foo' })
  })

  it('[PATCH4] PUT then GET round-trips any JSON object exactly, nulls included, on create and on replace (property)', async () => {
    const http = api(ts.url, user.token)
    await fc.assert(
      fc.asyncProperty(anyObject, anyObject, async (a, b) => {
        const path = next()
        expect(expectStatus(await http.putNode(path, 'Document', a), 201).body.content).toEqual(a)
        expect((await http.getNode(path)).body.content).toEqual(a)
        expect(expectStatus(await http.putNode(path, 'Document', b), 200).body.content).toEqual(b)
        expect((await http.getNode(path)).body.content).toEqual(b)
      }),
      { numRuns: 40, seed: 1507 },
    )
  })

  it('[PATCH4] a node an engine created with nulls, without a doc, builds its doc holding them', async () => {
    const path = next() as NodePath
    await ts.server.nodes.put(SYSTEM, path, { nodeType: 'Document', content: { e: null, m: { z: null } } }, 'engine')
    expect(ts.server.nodes.hasDoc(path)).toBe(false)
    const stock = stockProvider(ts.url, path, user.token)
    try {
      await stock.synced()
      await waitFor(() => stock.json().e === null, { description: 'the doc catches up' })
      expect(stock.json()).toEqual({ e: null, m: { z: null } })
      expect((await api(ts.url, user.token).getNode(path)).body.content).toEqual({ e: null, m: { z: null } })
    } finally {
      stock.destroy()
    }
  })
})
