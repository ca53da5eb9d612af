import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type * as Y from 'yjs'
import {
  MuxClient,
  api,
  createDocument,
  createSpace,
  expectStatus,
  signup,
  startTestServer,
  stockProvider,
  waitFor,
  type TestServer,
  type TestUser,
} from '../helpers/index.js'

const FIELDS_PER_WRITER = 50

/** Writers on every transport edit one node at once; nothing is lost. */
describe('server merges concurrent writers across transports', () => {
  let ts: TestServer
  let user: TestUser
  let space: string

  beforeAll(async () => {
    ts = await startTestServer()
    user = await signup(ts.url)
    space = await createSpace(ts.url, user.token)
  })
  afterAll(async () => {
    await ts.cleanup()
  })

  it('[PATCH3] HTTP PATCH, /sync and /mux writing different fields at once all survive, everywhere', async () => {
    const path = await createDocument(ts.url, user.token, `${space}/merge`, {})
    const http = api(ts.url, user.token)
    const stock = stockProvider(ts.url, path, user.token)
    const mux = await MuxClient.connect(ts.url, user.token)
    try {
      await stock.synced()
      expect(await mux.join(path)).toMatchObject({ ok: true })
      const expected: Record<string, number> = {}
      for (let i = 0; i < FIELDS_PER_WRITER; i++) {
        expected[`http${i}`] = i
        expected[`sync${i}`] = i
        expected[`mux${i}`] = i
      }
      await Promise.all([
        Promise.all(Array.from({ length: FIELDS_PER_WRITER }, async (_, i) => expectStatus(await http.patchNode(path, { [`http${i}`]: i }), 200))),
        (async () => {
          for (let i = 0; i < FIELDS_PER_WRITER; i++) {
            stock.content.set(`sync${i}`, i)
            await new Promise((resolve) => setImmediate(resolve))
          }
        })(),
        Promise.all(Array.from({ length: FIELDS_PER_WRITER }, async (_, i) => expect(await mux.edit(path, (c) => c.set(`mux${i}`, i))).toMatchObject({ ok: true }))),
      ])
      await waitFor(async () => Object.keys((await http.getNode(path)).body.content ?? {}).length === 3 * FIELDS_PER_WRITER, {
        timeoutMs: 10_000,
        description: 'server holds all fields',
      })
      expect((await http.getNode(path)).body.content).toEqual(expected)
      await waitFor(() => Object.keys(stock.json()).length === 3 * FIELDS_PER_WRITER, { timeoutMs: 10_000, description: 'stock client converged' })
      await waitFor(() => Object.keys(mux.json(path)).length === 3 * FIELDS_PER_WRITER, { timeoutMs: 10_000, description: 'mux client converged' })
      expect(stock.json()).toEqual(expected)
      expect(mux.json(path)).toEqual(expected)
    } finally {
      stock.destroy()
      await mux.close()
    }
  })

  it('[PATCH3] patches to different nested fields from different writers both survive', async () => {
    const path = await createDocument(ts.url, user.token, `${space}/nested`, { Details: { Keep: true } })
    const other = await signup(ts.url)
    // The second writer is another user with Editor rights, to make "different writers" literal.
    expectStatus(
      await api(ts.url, user.token).putNode(`${space}/_Access/${other.userId}_Access`, 'AccessAssignment', { Subject: other.userId, Role: 'Editor' }),
      201,
    )
    await Promise.all([
      expectStatus(await api(ts.url, user.token).patchNode(path, { Details: { A: 1 } }), 200),
      expectStatus(await api(ts.url, other.token).patchNode(path, { Details: { B: 2 } }), 200),
    ])
    const mux = await MuxClient.connect(ts.url, other.token)
    try {
      expect(await mux.join(path)).toMatchObject({ ok: true })
      // A nested edit over /mux goes into the existing nested Y.Map, not a replacement.
      expect(await mux.edit(path, (c) => (c.get('Details') as Y.Map<unknown>).set('C', 3))).toMatchObject({ ok: true })
    } finally {
      await mux.close()
    }
    expect((await api(ts.url, user.token).getNode(path)).body.content).toEqual({ Details: { Keep: true, A: 1, B: 2, C: 3 } })
  })
})
