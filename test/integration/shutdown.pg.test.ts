import pg from 'pg'
import { afterAll, describe, expect, it } from 'vitest'
import { MuxClient, api, createDocument, createSpace, engineOwner, signup, startInstances, stockProvider, waitFor, type Instances } from '../helpers/index.js'
import { missingAcks, streamHttpPatches, streamMuxUpdates } from './fixtures/server-write-stream.js'

interface LeaseRow {
  holder: string | null
  fence: string
  expires_ms: string
}

async function leaseRow(databaseUrl: string): Promise<LeaseRow> {
  const client = new pg.Client({ connectionString: databaseUrl })
  await client.connect()
  try {
    const r = await client.query<LeaseRow>(`SELECT holder, fence, (extract(epoch FROM expires_at) * 1000)::bigint AS expires_ms FROM engine_leases WHERE name = 'engines'`)
    return r.rows[0]!
  } finally {
    await client.end()
  }
}

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
    const owner = await engineOwner(set.servers)
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
      const before = await leaseRow(set.databaseUrl)
      expect(before.holder).toBe(`i${set.servers.indexOf(owner) + 1}`)

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

      // The lease was given up and taken over, not left to expire: the new lease was acquired
      // (its expiry minus the TTL) before the old lease's expiry, and the other was told at once.
      await engineOwner([other], 60_000)
      const after = await leaseRow(set.databaseUrl)
      expect(after.holder).not.toBe(before.holder)
      expect(Number(after.fence)).toBe(Number(before.fence) + 1)
      expect(Number(after.expires_ms) - TTL).toBeLessThan(Number(before.expires_ms))
      expect(other.logs().some((l) => l.msg === 'engine lease given up by its holder; trying to take it')).toBe(true)
      expect(owner.logs().some((l) => l.msg === 'closed')).toBe(true)
    } finally {
      provider.destroy()
      await mux.close()
    }
  })
})
