import { afterAll, describe, expect, it } from 'vitest'
import { api, createSpace, signup, startInstances, stockProvider, type Instances, type StockClient } from '../helpers/index.js'

/**
 * [SCALE14] A refusal is decided on current access rules on every instance. With Redis frozen
 * (SIGSTOP: no message arrives, no reconnect tells anyone to catch up), a space created through
 * instance 1 is opened through instance 2 at once, before its poll would notice: the read and the
 * socket are let in, a write, and the space's list shows the node, because instance 2 catches up
 * before it refuses. A path nobody
 * granted is still refused, on both instances alike.
 */
describe('[SCALE14] a grant committed through another instance a moment ago', () => {
  let set: Instances | undefined
  const clients: StockClient[] = []
  afterAll(async () => {
    for (const c of clients) c.destroy()
    await set?.cleanup()
  })

  it('[SCALE14] is honoured at once by every instance; a refusal stays a refusal', { timeout: 120_000 }, async () => {
    set = await startInstances(2)
    const [one, two] = set.servers.map((s) => s.url) as [string, string]
    const stranger = await signup(one)
    set.redis.pause()
    try {
      for (let i = 0; i < 4; i++) {
        const owner = await signup(one)
        const space = await createSpace(one, owner.token)
        const path = `${space}/doc`
        expect((await api(one, owner.token).putNode(path, 'Document', { N: i })).status).toBe(201)
        // Through the other instance, at once: a stock client's socket, or an HTTP read (each
        // first in turn: the first one is the one that meets the lagging rules).
        const viaSocket = async () => {
          const c = stockProvider(two, path, owner.token)
          clients.push(c)
          await c.synced()
          expect(c.json()).toEqual({ N: i })
        }
        const viaHttp = async () => {
          const got = await api(two, owner.token).getNode(path)
          expect(got.status, JSON.stringify(got.body)).toBe(200)
          expect(got.body.content).toEqual({ N: i })
        }
        const viaPatch = async () => {
          const patched = await api(two, owner.token).patchNode(path, { By: 'two' })
          expect(patched.status, JSON.stringify(patched.body)).toBe(200)
          expect(patched.body.content).toEqual({ N: i, By: 'two' })
        }
        const viaList = async () => {
          const listed = await api(two, owner.token).queryNodes({ parent: space })
          expect(listed.status).toBe(200)
          expect(listed.body.items.map((n) => n.path)).toContain(path)
        }
        if (i === 0) await viaSocket().then(viaHttp)
        else if (i === 1) await viaHttp().then(viaSocket)
        else if (i === 2) await viaPatch()
        else await viaList()
        // Someone without a grant is refused by both, the same way.
        for (const url of [one, two]) expect((await api(url, stranger.token).getNode(path)).status).toBe(403)
      }
    } finally {
      set.redis.resume()
    }
  })
})
