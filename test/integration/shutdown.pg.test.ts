import { afterAll, describe, expect, it } from 'vitest'
import { MuxClient, api, createDocument, createSpace, instanceOf, partitionLeases, partitionOwners, signup, startInstances, stockProvider, waitFor, type Instances } from '../helpers/index.js'
import { missingAcks, streamHttpPatches, streamMuxUpdates } from './fixtures/server-write-stream.js'

/**
 * [PROD2] Graceful shutdown of one instance of several (PostgreSQL + Redis, child processes):
 * SIGTERM with writes in flight over HTTP and /mux and a stock y-websocket client open.
 */
describe('[PROD2] graceful shutdown in a cluster', () => {
  let set: Instances | undefined
  afterAll(async () => {
    await set?.cleanup()
  })

  it('[PROD2] SIGTERM: exit 0, sockets closed with a reconnectable code, every acked write kept, and the other instance takes the engine lease before the old one would have expired', { timeout: 180_000 }, async () => {
    // A long lease: waiting for it to expire would take a minute; a handover must not.
    const TTL = 60_000
    set = await startInstances(2, { ENGINE_LEASE_MS: String(TTL) })
    // The instance running the most engine partitions ([SCALE17]: the first up takes them all, and
    // with a lease this long they are not balanced before the test ends).
    const owners = [...(await partitionOwners(set.servers, set.databaseUrl)).values()]
    const owner = set.servers.reduce((a, b) => (owners.filter((s) => s === b).length > owners.filter((s) => s === a).length ? b : a))
    const other = set.servers.find((s) => s !== owner)!
    const user = await signup(other.url)
    const space = await createSpace(other.url, user.token)
    const path = await createDocument(other.url, user.token, `${space}/draining`, { Title: 'kept' })

    const provider = stockProvider(owner.url, path, user.token)
    const mux = await MuxClient.connect(owner.url, user.token)
    try {
      await provider.synced()
      expect(await mux.join(path)).toMatchObject({ ok: true })
      const httpStream = streamHttpPatches(owner.url, user.token, path, 6)
      const muxStream = streamMuxUpdates(mux, path, 4)
      await waitFor(() => httpStream.acked.size >= 50 && muxStream.acked.size >= 30, { timeoutMs: 30_000, description: 'writes acknowledged on the owner' })
      const before = (await partitionLeases(set.databaseUrl)).filter((l) => instanceOf(set!.servers, l.holder) === owner)
      expect(before.length).toBeGreaterThan(0)

      const exit = await owner.kill('SIGTERM')
      expect(exit, owner.output().slice(-2_000)).toEqual({ code: 0, signal: null })
      await Promise.all([httpStream.done, muxStream.done])

      // Sockets were closed with a code outside 4400–4499: a stock client would reconnect.
      await waitFor(() => provider.closes.length > 0, { description: 'the stock client saw the close' })
      for (const c of provider.closes) expect(c.code < 4400 || c.code > 4499, JSON.stringify(c)).toBe(true)

      // Every write acknowledged by the instance that stopped is in the database, read through the other.
      const res = await api(other.url, user.token).getNode(path)
      expect(res.body.content).toMatchObject({ Title: 'kept' })
      expect(missingAcks(httpStream.acked, res.body.content)).toEqual([])
      expect(missingAcks(muxStream.acked, res.body.content)).toEqual([])

      // Each lease it held was given up and taken over, not left to expire: the new lease was
      // acquired (its expiry minus the TTL) before the old lease's expiry, and the other was told at once.
      const next = await partitionOwners(set.servers, set.databaseUrl, { timeoutMs: 60_000 })
      expect(new Set(next.values())).toEqual(new Set([other]))
      const after = await partitionLeases(set.databaseUrl)
      for (const b of before) {
        const a = after.find((l) => l.partition === b.partition)!
        expect(a.holder).toBe(`i${set.servers.indexOf(other) + 1}`)
        expect(a.fence).toBe(b.fence + 1)
        expect(a.expiresMs - TTL).toBeLessThan(b.expiresMs)
      }
      expect(other.logs().some((l) => l.msg === 'engine lease given up by its holder; trying to take it')).toBe(true)
      expect(owner.logs().some((l) => l.msg === 'closed')).toBe(true)
    } finally {
      provider.destroy()
      await mux.close()
    }
  })
})
