import { randomBytes } from 'node:crypto'
import pg from 'pg'
import pino from 'pino'
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import { SYSTEM, WeftError, userPrincipal, type JsonObject, type NodePath, type UserId } from '../../shared/index.js'
import { AccessService } from '../../sync-server/access/access-service.js'
import { NodeService } from '../../sync-server/nodes/node-service.js'
import { openPostgresStorage, openSqliteStorage, type StorageAdapter } from '../../sync-server/storage/index.js'
import {
  api,
  createSpace,
  expectStatus,
  makeTempDir,
  removeDir,
  signup,
  startTestServer,
  stockProvider,
  waitFor,
  type TestServer,
  type TestUser,
} from '../helpers/index.js'

/** A node service over a real store, without the HTTP and socket layers around it. */
async function serviceOver(storage: StorageAdapter, idleUnloadMs: number, maxLoadedDocs?: number): Promise<NodeService> {
  const nodes = new NodeService(storage, new AccessService(), { idleUnloadMs, maxLoadedDocs, log: pino({ level: 'silent' }) })
  await nodes.boot()
  return nodes
}

const untilUnloaded = (nodes: NodeService, path: NodePath) =>
  waitFor(() => !nodes.isLoaded(path), { timeoutMs: 3000, description: `${path} unloads` })

/**
 * Reads of nodes that are not loaded go through a small cache (an engine checking the same space
 * for 10,000 timers); `read` loads the node for a write that follows. Neither may ever return a
 * node older than the last acknowledged write, whatever path the write took.
 */
describe('node reads: the read cache and read()', () => {
  let ts: TestServer
  let user: TestUser
  let space: string
  const P = (p: string) => p as NodePath

  beforeAll(async () => {
    // Idle docs unload after 100 ms, so reads fall through to storage and the cache.
    ts = await startTestServer({ config: { idleUnloadMs: 100 } })
    user = await signup(ts.url)
    space = await createSpace(ts.url, user.token)
  })
  afterAll(async () => {
    await ts.cleanup()
  })

  const nodes = () => ts.server.nodes
  const unloaded = (path: string) => untilUnloaded(nodes(), P(path))

  it('[MEM2] a cached read never outlives a write: HTTP patch, then the doc unloads, then get', async () => {
    const http = api(ts.url, user.token)
    const path = `${space}/cached`
    expectStatus(await http.putNode(path, 'Document', { A: 1 }), 201)
    await unloaded(path)
    expect((await nodes().get(SYSTEM, P(path)))?.content.A).toBe(1)
    expect((await nodes().get(SYSTEM, P(path)))?.content.A).toBe(1) // served from the cache
    expectStatus(await http.patchNode(path, { A: 2 }), 200)
    await unloaded(path)
    expect((await nodes().get(SYSTEM, P(path)))?.content.A).toBe(2)
  })

  it('a cached read never outlives a stock y-websocket edit', async () => {
    const http = api(ts.url, user.token)
    const path = `${space}/synced`
    expectStatus(await http.putNode(path, 'Document', { Title: 'before' }), 201)
    await unloaded(path)
    expect((await nodes().get(SYSTEM, P(path)))?.content.Title).toBe('before')
    const client = stockProvider(ts.url, path, user.token)
    try {
      await client.synced()
      client.content.set('Title', 'after')
      await waitFor(async () => (await nodes().get(SYSTEM, P(path)))?.content.Title === 'after', { description: 'the edit is applied' })
    } finally {
      client.destroy()
    }
    await unloaded(path)
    expect((await nodes().get(SYSTEM, P(path)))?.content.Title).toBe('after')
  })

  it('a cached child is gone once its parent is deleted', async () => {
    const http = api(ts.url, user.token)
    const parent = `${space}/folder`
    const child = `${parent}/leaf`
    expectStatus(await http.putNode(parent, 'Document', {}), 201)
    expectStatus(await http.putNode(child, 'Document', { X: 1 }), 201)
    await unloaded(child)
    expect(await nodes().get(SYSTEM, P(child))).not.toBeNull()
    expectStatus(await http.deleteNode(parent), 204)
    expect(await nodes().get(SYSTEM, P(child))).toBeNull()
  })

  it('a cached absence ends when the node is created', async () => {
    const path = `${space}/later`
    expect(await nodes().get(SYSTEM, P(path))).toBeNull()
    expect(await nodes().get(SYSTEM, P(path))).toBeNull()
    expectStatus(await api(ts.url, user.token).putNode(path, 'Document', { Y: 1 }), 201)
    await unloaded(path)
    expect((await nodes().get(SYSTEM, P(path)))?.content.Y).toBe(1)
  })

  it('a create drops what JSON drops (an undefined member), as a replace does', async () => {
    const path = P(`${space}/undefined-member`)
    const created = await nodes().update(SYSTEM, path, () => ({ nodeType: 'Document', content: { A: undefined, B: 1 } as unknown as JsonObject }))
    expect(created?.content).toEqual({ B: 1 })
    const replaced = await nodes().update(SYSTEM, path, (c) => ({ nodeType: 'Document', content: { ...c!.content, C: undefined, D: 2 } as unknown as JsonObject }))
    expect(replaced?.content).toEqual({ B: 1, D: 2 })
  })

  it('read() loads the node and checks Read like get()', async () => {
    const path = `${space}/loaded`
    expectStatus(await api(ts.url, user.token).putNode(path, 'Document', { Z: 1 }), 201)
    await unloaded(path)
    const node = await nodes().read(SYSTEM, P(path))
    expect(node?.content.Z).toBe(1)
    expect(nodes().isLoaded(P(path))).toBe(true)
    const stranger = await signup(ts.url)
    const principal = userPrincipal(stranger.userId as UserId)
    await expect(nodes().read(principal, P(path))).rejects.toSatisfy((e: unknown) => e instanceof WeftError && e.code === 'forbidden')
    await expect(nodes().get(principal, P(path))).rejects.toSatisfy((e: unknown) => e instanceof WeftError && e.code === 'forbidden')
  })
})

/** Needs PostgreSQL: `WEFT_TEST_DATABASE_URL`, else the local test database. */
const connectionString = process.env.WEFT_TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test'

describe('node reads on PostgreSQL, where a read really waits', () => {
  it('a read that overlaps a write is not cached: after unloading, get returns the last write', async () => {
    const schema = `weft_test_${randomBytes(6).toString('hex')}`
    const storage = await openPostgresStorage({ connectionString, schema })
    const nodes = await serviceOver(storage, 0)
    try {
      const path = 'Race' as NodePath
      await nodes.update(SYSTEM, path, () => ({ nodeType: 'Space', content: { N: 0 } }))
      for (let i = 1; i <= 20; i++) {
        await untilUnloaded(nodes, path)
        // The read starts against storage while the write loads, changes and commits the node.
        const [read] = await Promise.all([nodes.get(SYSTEM, path), nodes.update(SYSTEM, path, (c) => ({ nodeType: 'Space', content: { ...c!.content, N: i } }))])
        expect([i - 1, i]).toContain(read?.content.N)
        await untilUnloaded(nodes, path)
        expect((await nodes.get(SYSTEM, path))?.content.N).toBe(i)
      }
      // The worst order, forced: a read answered before a write, delivered after the write is
      // durable and the node unloaded again. Its answer is stale and must not be remembered.
      await nodes.update(SYSTEM, path, (c) => ({ nodeType: 'Space', content: { ...c!.content, N: 50 } }))
      await untilUnloaded(nodes, path)
      let release!: () => void
      const gate = new Promise<void>((r) => (release = r))
      const realGetNode = storage.getNode.bind(storage)
      // Only the first read waits (the write's own load reads the row too, and must not).
      let held = true
      storage.getNode = async (p) => {
        const waits = held
        held = false
        const node = await realGetNode(p)
        if (waits) await gate
        return node
      }
      const slow = nodes.get(SYSTEM, path)
      await nodes.update(SYSTEM, path, (c) => ({ nodeType: 'Space', content: { ...c!.content, N: 100 } }))
      await untilUnloaded(nodes, path)
      release()
      expect((await slow)?.content.N).toBe(50)
      storage.getNode = realGetNode
      expect((await nodes.get(SYSTEM, path))?.content.N).toBe(100)
    } finally {
      await nodes.close()
      await storage.close()
      const client = new pg.Client({ connectionString })
      await client.connect()
      await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`)
      await client.end()
    }
  })
})

describe('node reads after a failed commit', () => {
  it('a read cached while a dropped copy still has a commit in flight is forgotten when that commit lands', async () => {
    const dir = await makeTempDir('weft-reads-')
    const storage = openSqliteStorage({ file: `${dir}/weft.db` })
    const nodes = await serviceOver(storage, 60_000)
    try {
      const path = 'Failing' as NodePath
      await nodes.update(SYSTEM, path, () => ({ nodeType: 'Space', content: { N: 0 } }))
      // The next commit to the path fails (a full disk, say); the one after it waits for a gate.
      let release!: () => void
      const gate = new Promise<void>((r) => (release = r))
      const realCommit = storage.commit.bind(storage)
      let calls = 0
      storage.commit = (input) => {
        if (input.path !== path) return realCommit(input)
        calls++
        if (calls === 1) return Promise.reject(new WeftError('unavailable', 'The disk is full.'))
        return gate.then(() => realCommit(input))
      }
      const first = nodes.update(SYSTEM, path, () => ({ nodeType: 'Space', content: { N: 1 } }))
      const second = nodes.update(SYSTEM, path, () => ({ nodeType: 'Space', content: { N: 2 } }))
      await expect(first).rejects.toThrow()
      // The copy is dropped (memory was ahead of storage) while the second commit is in flight.
      expect(nodes.isLoaded(path)).toBe(false)
      expect((await nodes.get(SYSTEM, path))?.content.N).toBe(0)
      release()
      expect((await second)?.content.N).toBe(2)
      storage.commit = realCommit
      expect((await nodes.get(SYSTEM, path))?.content.N).toBe(2)
    } finally {
      await nodes.close()
      await storage.close()
      await removeDir(dir)
    }
  })
})

describe('loaded docs are capped', () => {
  /**
   * The cache's residency clock (Date.now) jumps `ms` ahead, still running, until the returned
   * function is called: what a sleep past MIN_RESIDENCY_MS showed, without the sleep (which a
   * loaded machine stretches, and which let a delayed steady reader fall out of the window).
   */
  const jumpClock = (ms: number) => {
    const real = Date.now.bind(Date)
    const spy = vi.spyOn(Date, 'now').mockImplementation(() => real() + ms)
    return () => spy.mockRestore()
  }

  it('[MEM2] a node in steady use does not hold the cap back', async () => {
    const dir = await makeTempDir('weft-reads-cap-')
    const storage = openSqliteStorage({ file: `${dir}/weft.db` })
    const nodes = await serviceOver(storage, 60_000, 5)
    try {
      const P = (s: string) => s as NodePath
      const busy = P('Busy')
      await nodes.update(SYSTEM, busy, () => ({ nodeType: 'Space', content: {} }), 'engine')
      for (let i = 0; i < 20; i++) await nodes.update(SYSTEM, P(`Other${i}`), () => ({ nodeType: 'Space', content: { I: i } }), 'engine')
      const restore = jumpClock(1300)
      try {
        // 1.3 s later the busy node is read again (an engine checking the same space); the
        // others were last used 1.3 s ago. The next load trims: the others, not the busy one.
        await nodes.read(SYSTEM, busy)
        await nodes.read(SYSTEM, P('Absent'))
        expect(nodes.stats().loadedDocs).toBeLessThanOrEqual(5)
        expect(nodes.isLoaded(busy)).toBe(true)
      } finally {
        restore()
      }
    } finally {
      await nodes.close()
      await storage.close()
      await removeDir(dir)
    }
  })

  it('[MEM2] beyond maxLoadedDocs, docs without clients unload least recently used first; an open one stays live', async () => {
    const ts = await startTestServer({ config: { maxLoadedDocs: 5, idleUnloadMs: 60_000 } })
    try {
      const user = await signup(ts.url)
      const space = await createSpace(ts.url, user.token)
      const http = api(ts.url, user.token)
      const open = `${space}/open`
      expectStatus(await http.putNode(open, 'Document', { Title: 'live' }), 201)
      const client = stockProvider(ts.url, open, user.token)
      try {
        await client.synced()
        for (let i = 0; i < 20; i++) expectStatus(await http.putNode(`${space}/doc${i}`, 'Document', { I: i }), 201)
        expect(ts.server.nodes.stats().loadedDocs).toBeGreaterThan(5)
        // Docs used in the last second are never unloaded for the cap; a second later the next
        // load trims (the cache's clock jumps instead of a sleep).
        const restore = jumpClock(1100)
        try {
          expect(await ts.server.nodes.read(SYSTEM, `${space}/not-there` as NodePath)).toBeNull()
        } finally {
          restore()
        }
        expect(ts.server.nodes.stats().loadedDocs).toBeLessThanOrEqual(5)
        expect(ts.server.nodes.isLoaded(open as NodePath)).toBe(true)
        expect(ts.server.nodes.isLoaded(`${space}/doc0` as NodePath)).toBe(false)
        // Unloaded docs read back whole; the open one still takes its client's edits.
        for (let i = 0; i < 20; i++) expect(expectStatus(await http.getNode(`${space}/doc${i}`), 200).body.content.I).toBe(i)
        client.content.set('Title', 'still live')
        await waitFor(async () => (await ts.server.nodes.get(SYSTEM, open as NodePath))?.content.Title === 'still live', { description: 'the edit reaches the server' })
      } finally {
        client.destroy()
      }
    } finally {
      await ts.cleanup()
    }
  })
})
