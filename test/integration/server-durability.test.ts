import { afterEach, describe, expect, it } from 'vitest'
import {
  MuxClient,
  api,
  createDocument,
  createSpace,
  makeTempDir,
  removeDir,
  signup,
  spawnServer,
  stockProvider,
  waitFor,
  type SpawnedServer,
} from '../helpers/index.js'
import { missingAcks, streamHttpPatches, streamMuxUpdates } from './fixtures/server-write-stream.js'

/**
 * An acknowledged write is durable: it survives `kill -9` of the server process in the middle
 * of a stream of writes, and SIGTERM shuts down gracefully (exit 0) with everything flushed.
 * The server runs as a child process so it can really be killed.
 */
describe('server durability (child process)', () => {
  const servers: SpawnedServer[] = []
  const dirs: string[] = []
  const start = async (dataDir: string): Promise<SpawnedServer> => {
    const s = await spawnServer({ dataDir })
    servers.push(s)
    return s
  }
  const tempDir = async () => {
    const d = await makeTempDir('weft-durability-')
    dirs.push(d)
    return d
  }
  afterEach(async () => {
    await Promise.all(servers.splice(0).map((s) => s.kill('SIGKILL')))
    await Promise.all(dirs.splice(0).map(removeDir))
  })

  it('[STO1] every HTTP PATCH acknowledged before kill -9 is there after a restart', async () => {
    const dataDir = await tempDir()
    const first = await start(dataDir)
    const user = await signup(first.url)
    const space = await createSpace(first.url, user.token)
    const path = await createDocument(first.url, user.token, `${space}/stream`, {})

    const stream = streamHttpPatches(first.url, user.token, path, 8)
    await waitFor(() => stream.acked.size >= 300, { timeoutMs: 20_000, description: '300 acknowledged patches' })
    const { signal } = await first.kill('SIGKILL')
    expect(signal).toBe('SIGKILL')
    await stream.done
    const acked = new Map(stream.acked)
    expect(acked.size).toBeGreaterThanOrEqual(300)

    const second = await start(dataDir)
    const res = await api(second.url, user.token).getNode(path)
    expect(res.status).toBe(200)
    expect(missingAcks(acked, res.body.content)).toEqual([])
  }, 180_000)

  it('[STO1][SYNC2] every /mux Update acknowledged before kill -9 is there after a restart', async () => {
    const dataDir = await tempDir()
    const first = await start(dataDir)
    const user = await signup(first.url)
    const space = await createSpace(first.url, user.token)
    const path = await createDocument(first.url, user.token, `${space}/mux-stream`, {})

    const mux = await MuxClient.connect(first.url, user.token)
    expect(await mux.join(path)).toMatchObject({ ok: true })
    const stream = streamMuxUpdates(mux, path, 8)
    await waitFor(() => stream.acked.size >= 300, { timeoutMs: 20_000, description: '300 acknowledged updates' })
    await first.kill('SIGKILL')
    await stream.done
    await mux.closed
    const acked = new Map(stream.acked)

    const second = await start(dataDir)
    const res = await api(second.url, user.token).getNode(path)
    expect(res.status).toBe(200)
    expect(missingAcks(acked, res.body.content)).toEqual([])
    // The stored Yjs state is consistent too: a fresh client syncs the same content.
    const check = await MuxClient.connect(second.url, user.token)
    try {
      expect(await check.join(path)).toMatchObject({ ok: true })
      expect(missingAcks(acked, check.json(path))).toEqual([])
    } finally {
      await check.close()
    }
  }, 180_000)

  it('[STO1] SIGTERM with writes in flight and sockets open exits 0, and every acknowledged write is there', async () => {
    const dataDir = await tempDir()
    const first = await start(dataDir)
    const user = await signup(first.url)
    const space = await createSpace(first.url, user.token)
    const path = await createDocument(first.url, user.token, `${space}/graceful`, { Title: 'kept' })

    const provider = stockProvider(first.url, path, user.token)
    const mux = await MuxClient.connect(first.url, user.token)
    try {
      await provider.synced()
      provider.content.set('BySync', 'synced')
      await waitFor(async () => (await api(first.url, user.token).getNode(path)).body.content?.BySync === 'synced')
      expect(await mux.join(path)).toMatchObject({ ok: true })
      const httpStream = streamHttpPatches(first.url, user.token, path, 8)
      const muxStream = streamMuxUpdates(mux, path, 4)
      await waitFor(() => httpStream.acked.size >= 100 && muxStream.acked.size >= 50, { timeoutMs: 20_000 })

      const exit = await first.kill('SIGTERM')
      expect(exit, first.output().slice(-2_000)).toEqual({ code: 0, signal: null })
      await Promise.all([httpStream.done, muxStream.done])

      const second = await start(dataDir)
      const res = await api(second.url, user.token).getNode(path)
      expect(res.status).toBe(200)
      expect(res.body.content).toMatchObject({ Title: 'kept', BySync: 'synced' })
      expect(missingAcks(httpStream.acked, res.body.content)).toEqual([])
      expect(missingAcks(muxStream.acked, res.body.content)).toEqual([])
    } finally {
      provider.destroy()
      await mux.close()
    }
  }, 180_000)
})
