import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { permissionsFromMask } from '../../shared/index.js'
import {
  MuxClient,
  api,
  createSpace,
  expectStatus,
  signup,
  startTestServer,
  stockProvider,
  waitFor,
  type TestServer,
  type TestUser,
} from '../helpers/index.js'

const NODE_COUNT = 1_000

/** Runs `fn` over `items` with at most `limit` calls in flight. */
async function inPool<T>(items: T[], limit: number, fn: (item: T, index: number) => Promise<void>): Promise<void> {
  let next = 0
  await Promise.all(
    Array.from({ length: limit }, async () => {
      while (next < items.length) {
        const i = next++
        await fn(items[i] as T, i)
      }
    }),
  )
}

/** `/mux`: one socket carries many nodes, each joined and authorised on its own. */
describe('server /mux with many nodes on one socket', () => {
  let ts: TestServer
  let owner: TestUser
  let paths: string[]

  beforeAll(async () => {
    ts = await startTestServer()
    owner = await signup(ts.url)
    const space = await createSpace(ts.url, owner.token)
    paths = Array.from({ length: NODE_COUNT }, (_, i) => `${space}/n${i}`)
    const http = api(ts.url, owner.token)
    await inPool(paths, 16, async (path, i) => {
      expectStatus(await http.putNode(path, 'Document', { Index: i }), 201)
    })
  }, 120_000)
  afterAll(async () => {
    await ts.cleanup()
  })

  it(`[SYNC2] one socket joins ${NODE_COUNT} nodes; an edit on each reaches a second mux client and stock providers`, async () => {
    const writer = await MuxClient.connect(ts.url, owner.token)
    const reader = await MuxClient.connect(ts.url, owner.token)
    try {
      const [joinedW, joinedR] = await Promise.all([
        Promise.all(paths.map((p) => writer.join(p))),
        Promise.all(paths.map((p) => reader.join(p))),
      ])
      for (const r of [...joinedW, ...joinedR]) {
        expect(r, JSON.stringify(r)).toMatchObject({ ok: true })
        if (r.ok) expect(permissionsFromMask(r.permissions).has('Update')).toBe(true)
      }
      // The initial sync delivered each node's state.
      paths.forEach((p, i) => expect(reader.json(p)).toEqual({ Index: i }))

      const sample = [0, 1, 499, 998, 999].map((i) => paths[i] as string)
      const stock = sample.map((p) => stockProvider(ts.url, p, owner.token))
      try {
        await Promise.all(stock.map((s) => s.synced()))

        const results = await Promise.all(paths.map((p, i) => writer.edit(p, (content) => content.set('Edited', i))))
        for (const r of results) expect(r, JSON.stringify(r)).toMatchObject({ ok: true })
        // Versions are the server's global commit sequence: all distinct.
        const versions = results.map((r) => (r.ok ? r.version : -1))
        expect(new Set(versions).size).toBe(NODE_COUNT)

        await waitFor(() => paths.every((p, i) => reader.content(p).get('Edited') === i), {
          timeoutMs: 20_000,
          description: 'the reader socket sees every edit',
        })
        await waitFor(() => stock.every((s, k) => s.content.get('Edited') === Number(sample[k]?.split('/n')[1])), {
          timeoutMs: 10_000,
          description: 'stock providers on a sample see the edits',
        })
        const http = api(ts.url, owner.token)
        for (const p of sample) expect((await http.getNode(p)).body.content).toMatchObject({ Edited: Number(p.split('/n')[1]) })
      } finally {
        for (const s of stock) s.destroy()
      }
    } finally {
      await Promise.all([writer.close(), reader.close()])
    }
  }, 180_000)

  it('[SYNC2] a left room no longer receives updates; rejoining resyncs', async () => {
    const path = paths[5] as string
    const a = await MuxClient.connect(ts.url, owner.token)
    const b = await MuxClient.connect(ts.url, owner.token)
    try {
      expect(await a.join(path)).toMatchObject({ ok: true })
      expect(await b.join(path)).toMatchObject({ ok: true })
      b.leave(path)
      // Leave is fire-and-forget; a round trip on another room proves the server processed it.
      expect(await b.join(paths[6] as string)).toMatchObject({ ok: true })
      expect(await a.edit(path, (c) => c.set('AfterLeave', 1))).toMatchObject({ ok: true })
      const other = await MuxClient.connect(ts.url, owner.token)
      try {
        expect(await other.join(path)).toMatchObject({ ok: true })
        expect(other.content(path).get('AfterLeave')).toBe(1)
      } finally {
        await other.close()
      }
      // The edit reached the server yet not b, which left.
      expect(b.content(path).get('AfterLeave')).toBeUndefined()
      expect(await b.join(path)).toMatchObject({ ok: true })
      expect(b.content(path).get('AfterLeave')).toBe(1)
    } finally {
      await Promise.all([a.close(), b.close()])
    }
  })
})
