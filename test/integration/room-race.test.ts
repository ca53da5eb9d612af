import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { SYSTEM, type NodePath } from '../../shared/index.js'
import { Rng } from '../sim/rng.js'
import { createThread, node, post, settled } from './threads-helpers.js'
import { MuxClient, createSpace, signup, startTestServer, stockProvider, waitFor, withTimeout, type StockClient, type TestServer } from '../helpers/index.js'

/** Lets the event loop (timers, sockets, storage) run a little. */
const tick = (ms = 0) => new Promise<void>((r) => setTimeout(r, ms))

async function hammer(ts: TestServer, seed: number, iterations: number): Promise<void> {
  const alice = await signup(ts.url)
  const space = await createSpace(ts.url, alice.token)
  const rng = new Rng(seed)
  const rand = () => rng.next()
  const nodes = ts.server.nodes
  const muxes = [await MuxClient.connect(ts.url, alice.token), await MuxClient.connect(ts.url, alice.token)]
  try {
    for (let i = 0; i < iterations; i++) {
      const path = `${space}/msg${i}` as NodePath
      const words = Array.from({ length: 5 + Math.floor(rand() * 20) }, (_, k) => `w${k} `)
      const stocks: StockClient[] = []
      const joins: Promise<unknown>[] = []
      /** Joins `path` on a mux socket; a join refused because the node is not there yet is retried. */
      const joining = new Map<MuxClient, Promise<void>>()
      const joinMux = (m: MuxClient): Promise<void> => {
        const had = joining.get(m)
        if (had) return had
        const p = joinUntilThere(m)
        joining.set(m, p)
        return p
      }
      const joinUntilThere = async (m: MuxClient) => {
        for (;;) {
          const r = await withTimeout(m.join(path), 20_000, `join of ${path} (seed ${seed}, iteration ${i})`)
          if (r.ok) return
          if (r.code !== 'not_found') throw new Error(`join ${path}: ${r.code} ${r.message}`)
          await tick(1)
        }
      }
      const at = (when: number) => rand() < when
      // Joins before the create (refused, retried), racing it, and mid-stream.
      if (at(0.3)) joins.push(joinMux(muxes[0]!))
      const created = nodes.update(SYSTEM, path, (cur) => (cur ? undefined : { nodeType: 'Document', content: { Role: 'assistant', Author: 'agent', Text: '' } }), 'engine')
      if (at(0.5)) joins.push(joinMux(muxes[1]!))
      await created
      if (at(0.3)) stocks.push(stockProvider(ts.url, path, alice.token))
      let text = ''
      for (const w of words) {
        text += w
        const write = nodes.patch(SYSTEM, path, { Text: text }, 'engine')
        if (at(0.1)) joins.push(joinMux(muxes[0]!))
        if (at(0.1)) stocks.push(stockProvider(ts.url, path, alice.token))
        if (at(0.05)) {
          // A reconnect: leave and join again mid-stream.
          // Chained behind this socket's join (or reconnect) under way: one Join in flight per socket and path.
          const m = muxes[1]!
          const had = joining.get(m)
          const again = (async () => {
            await had
            m.leave(path)
            m.docs.delete(path)
            await joinUntilThere(m)
          })()
          joining.set(m, again)
          joins.push(again)
        }
        await write
        if (at(0.3)) await tick(rand() < 0.5 ? 0 : 2)
      }
      if (joins.length === 0 && stocks.length === 0) joins.push(joinMux(muxes[0]!))
      await Promise.all(joins)
      const server = (await nodes.get(SYSTEM, path))!.content
      expect(server.Text).toBe(text)
      const describe = () => JSON.stringify({ seed, i, server, mux: muxes.map((m) => (m.docs.has(path) ? m.json(path) : null)), stock: stocks.map((s) => s.json()) })
      await waitFor(
        () => {
          const same = muxes.every((m) => !m.docs.has(path) || JSON.stringify(m.json(path)) === JSON.stringify(server)) && stocks.every((s) => JSON.stringify(s.json()) === JSON.stringify(server))
          if (!same) throw new Error(`a client of ${path} differs from the server: ${describe()}`)
          return true
        },
        { timeoutMs: 10_000, description: `every client of ${path} holds the server's content` },
      )
      for (const s of stocks) s.destroy()
      for (const m of muxes) m.leave(path)
    }
  } finally {
    for (const m of muxes) await m.close()
  }
}

for (const { id, title, seed, config } of [
  { id: 'SYNC10', title: 'every client ends with exactly the server content (seeded joins before, at and after the create)', seed: 1, config: {} },
  { id: 'SYNC11', title: 'every client ends with exactly the server content while idle copies are unloaded', seed: 2, config: { idleUnloadMs: 20, maxLoadedDocs: 2 } },
]) {
  describe(`[${id}] a room joined while the engine creates and streams a node`, () => {
    let ts: TestServer
    beforeAll(async () => {
      ts = await startTestServer({ config })
    })
    afterAll(() => ts.cleanup())

    it(`[${id}] ${title}`, async () => {
      await hammer(ts, seed, 60)
    }, 120_000)
  })
}

describe('[SYNC12] the thread engine\'s answer cell joined as it is created and streamed', () => {
  let ts: TestServer
  beforeAll(async () => {
    ts = await startTestServer()
  })
  afterAll(() => ts.cleanup())

  it('[SYNC12] a client joining the response cell the moment its create is published ends with its whole text', async () => {
    const alice = await signup(ts.url)
    const space = await createSpace(ts.url, alice.token)
    const thread = await createThread(ts.url, alice.token, `${space}/t`)
    const m = await MuxClient.connect(ts.url, alice.token)
    const late = await MuxClient.connect(ts.url, alice.token)
    const joined: Promise<unknown>[] = []
    const stocks: StockClient[] = []
    const sub = ts.server.nodes.changes$.subscribe((c) => {
      if (c.nodeType !== 'ThreadMessage' || c.by !== 'system' || c.kind !== 'Created' || c.node?.content.Role !== 'assistant') return
      // In the feed's callback: the cell is committed and the round streams into it right now.
      joined.push(m.join(c.path))
      stocks.push(stockProvider(ts.url, c.path, alice.token))
      setTimeout(() => joined.push(late.join(c.path)), 1)
    })
    try {
      for (let i = 0; i < 15; i++) {
        await post(ts.url, alice.token, thread, `message ${i} with a few words to stream`)
        await settled(ts.url, alice.token, thread)
      }
      const results = await Promise.all(joined)
      expect(results.every((r) => (r as { ok: boolean }).ok)).toBe(true)
      const t = await node(ts.url, alice.token, thread)
      const responses = (t.content.Messages as string[]).filter((p) => p.split('/').pop()!.startsWith('_r.'))
      expect(responses.length).toBe(15)
      for (const p of responses) {
        const server = (await node(ts.url, alice.token, p)).content
        expect(String(server.Text)).toContain('You said: message')
        await waitFor(() => {
          const got = [m.json(p), late.json(p), ...stocks.filter((s) => s.provider.roomname === p).map((s) => s.json())]
          if (!got.every((g) => JSON.stringify(g) === JSON.stringify(server))) throw new Error(`${p}: server ${JSON.stringify(server)}, clients ${JSON.stringify(got)}`)
          return true
        }, { timeoutMs: 10_000, description: `every client of ${p} holds its whole text` })
      }
    } finally {
      sub.unsubscribe()
      for (const s of stocks) s.destroy()
      await m.close()
      await late.close()
    }
  }, 120_000)
})
