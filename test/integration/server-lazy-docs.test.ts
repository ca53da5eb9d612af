import { randomBytes } from 'node:crypto'
import pg from 'pg'
import pino from 'pino'
import { afterEach, describe, expect, it } from 'vitest'
import * as Y from 'yjs'
import { rebuild } from './storage-contract.js'
import { SYSTEM, docToJson, type NodePath } from '../../shared/index.js'
import { AccessService } from '../../sync-server/access/access-service.js'
import { NodeService } from '../../sync-server/nodes/node-service.js'
import { openPostgresStorage, openSqliteStorage, type StorageAdapter } from '../../sync-server/storage/index.js'
import {
  api,
  createDocument,
  createSpace,
  expectStatus,
  makeTempDir,
  removeDir,
  signup,
  spawnServer,
  startTestServer,
  stockProvider,
  waitFor,
  type SpawnedServer,
  type StockClient,
  type TestServer,
} from '../helpers/index.js'

/**
 * [DOC1] A node's Y.Doc is built when a client opens it. Until then writes change its JSON only
 * (server engines writing thousands of nodes nobody has open), and the doc that is finally built
 * catches up with one system transaction, folded into the stored log before any client sees it.
 */
describe('[DOC1] docs built when a client opens the node', () => {
  let t: TestServer | null = null
  const clients: StockClient[] = []
  afterEach(async () => {
    for (const c of clients.splice(0)) c.destroy()
    await t?.cleanup()
    t = null
  })
  const open = (url: string, path: string, token: string, doc?: Y.Doc): StockClient => {
    const c = stockProvider(url, path, token, doc)
    clients.push(c)
    return c
  }

  it('writes without a client build no doc; a client then sees everything, and the catch-up is stored once', async () => {
    t = await startTestServer()
    const { server } = t
    const user = await signup(t.url)
    const space = await createSpace(t.url, user.token)
    // A node a user creates over HTTP gets its doc at once (nothing to read back for a new node).
    const created = await createDocument(t.url, user.token, `${space}/created`, { Title: 'Mine' })
    expect(server.nodes.hasDoc(created as NodePath)).toBe(true)
    expect((await server.storage.loadDoc(created as NodePath))?.updates).toHaveLength(1)

    // One an engine creates does not, nor do the writes that follow while nobody opens it.
    const path = `${space}/plain`
    await server.nodes.update(SYSTEM, path as NodePath, () => ({ nodeType: 'Document', content: { Title: 'Draft', Meta: { Tags: ['a'] } } }), 'engine')
    expectStatus(await api(t.url, user.token).patchNode(path, { Meta: { Owner: 'me' }, Count: 1 }), 200)
    await server.nodes.update(SYSTEM, path as NodePath, (c) => ({ nodeType: 'Document', content: { ...c!.content, Count: 2 } }), 'engine')
    expect(server.nodes.isLoaded(path as NodePath)).toBe(true)
    expect(server.nodes.hasDoc(path as NodePath)).toBe(false)
    // Nothing was logged in Yjs yet: the JSON is the whole story.
    expect((await server.storage.loadDoc(path as NodePath))?.updates).toEqual([])

    const a = open(t.url, path, user.token)
    await a.synced()
    const expected = { Title: 'Draft', Meta: { Tags: ['a'], Owner: 'me' }, Count: 2 }
    expect(a.json()).toEqual(expected)
    expect(server.nodes.hasDoc(path as NodePath)).toBe(true)
    const stored = (await server.storage.loadDoc(path as NodePath))!
    expect(stored.snapshot).not.toBeNull()
    const rebuilt = new Y.Doc()
    Y.applyUpdate(rebuilt, stored.snapshot!)
    expect(docToJson(rebuilt)).toEqual(expected)

    // From now on writes go through the doc: the open client sees a system write live.
    await server.nodes.update(SYSTEM, path as NodePath, (c) => ({ nodeType: 'Document', content: { ...c!.content, Count: 3 } }), 'engine')
    await waitFor(() => a.json().Count === 3, { description: 'the client sees the system write' })
    a.content.set('Title', 'Final')
    await waitFor(async () => (await api(t!.url, user.token).getNode(path)).body.content?.Title === 'Final', { description: 'the client edit is stored' })

    // After a restart the doc is built from the stored log with the same Yjs state: no second catch-up.
    const vector = Y.encodeStateVector(a.doc)
    await t.restart()
    const b = open(t.url, path, user.token)
    await b.synced()
    expect(b.json()).toEqual({ ...expected, Count: 3, Title: 'Final' })
    expect(Y.encodeStateVector(b.doc)).toEqual(vector)
  })

  it('an offline client edit merges with JSON-only writes made while its node was not built', async () => {
    t = await startTestServer({ config: { idleUnloadMs: 100 } })
    const { server } = t
    const user = await signup(t.url)
    const space = await createSpace(t.url, user.token)
    const path = (await createDocument(t.url, user.token, `${space}/offline`, { A: 1 })) as NodePath
    const a = open(t.url, path, user.token)
    await a.synced()
    // The client leaves, keeping its copy; the server unloads the node.
    a.provider.disconnect()
    await waitFor(() => !server.nodes.isLoaded(path), { timeoutMs: 5000, description: 'the node unloads' })
    // Written while nobody has it open: JSON only.
    expectStatus(await api(t.url, user.token).patchNode(path, { B: 2 }), 200)
    expect(server.nodes.hasDoc(path)).toBe(false)
    // Meanwhile, offline:
    a.content.set('C', 3)
    a.provider.connect()
    await waitFor(() => a.json().B === 2, { description: 'the client receives the JSON-only write' })
    await waitFor(async () => (await api(t!.url, user.token).getNode(path)).body.content?.C === 3, { description: 'the offline edit is stored' })
    expect(a.json()).toEqual({ A: 1, B: 2, C: 3 })
    expect((await api(t.url, user.token).getNode(path)).body.content).toEqual({ A: 1, B: 2, C: 3 })
    expect(a.denied).toEqual([])
  })
})

describe('[DOC1] building a doc while storage is slow', () => {
  async function serviceOver(storage: StorageAdapter): Promise<NodeService> {
    const nodes = new NodeService(storage, new AccessService(), { idleUnloadMs: 60_000, log: pino({ level: 'silent' }) })
    await nodes.boot()
    return nodes
  }

  /** A node service over real SQLite whose loadDoc and foldDoc wait for the test's gates. */
  async function gatedService() {
    const dir = await makeTempDir('weft-lazy-gate-')
    const storage = openSqliteStorage({ file: `${dir}/weft.db` })
    const nodes = await serviceOver(storage)
    const gates = { loadDoc: Promise.resolve(), foldDoc: Promise.resolve() }
    /** Reads of a log held at the gate now. */
    const held = { loadDoc: 0 }
    const realLoadDoc = storage.loadDoc.bind(storage)
    const realFoldDoc = storage.foldDoc.bind(storage)
    storage.loadDoc = async (p) => {
      const stored = await realLoadDoc(p)
      held.loadDoc++
      await gates.loadDoc
      held.loadDoc--
      return stored
    }
    storage.foldDoc = async (p, state) => {
      await gates.foldDoc
      return realFoldDoc(p, state)
    }
    const gate = (name: keyof typeof gates) => {
      let open!: () => void
      gates[name] = new Promise<void>((r) => (open = r))
      return open
    }
    const close = async () => {
      await nodes.close()
      await storage.close()
      await removeDir(dir)
    }
    /** Later calls pass; those held at the gate stay held until it opens. */
    const passLater = (name: keyof typeof gates) => {
      gates[name] = Promise.resolve()
    }
    return { nodes, storage, gate, passLater, held, close }
  }

  it('a second opener waits until the first opener\'s catch-up is stored', async () => {
    const { nodes, storage, gate, close } = await gatedService()
    try {
      const path = 'Lazy' as NodePath
      await nodes.update(SYSTEM, path, () => ({ nodeType: 'Space', content: { A: 1 } }), 'engine')
      const openFold = gate('foldDoc')
      const first = nodes.acquireDoc(path)
      await waitFor(() => nodes.hasDoc(path), { description: 'the doc is built' })
      // Built, but the catch-up is not stored yet: a second client must not get it either.
      let secondJoined = false
      const second = nodes.acquireDoc(path).then(() => (secondJoined = true))
      await new Promise((r) => setTimeout(r, 50))
      expect(secondJoined).toBe(false)
      expect((await storage.loadDoc(path))?.snapshot).toBeNull()
      openFold()
      await Promise.all([first, second])
      expect(secondJoined).toBe(true)
      expect((await storage.loadDoc(path))?.snapshot).not.toBeNull()
    } finally {
      await close()
    }
  })

  it('[TOMB1] a create right behind a delete whose commit is not durable yet still starts from its tombstone, which the storage then drops', async () => {
    const { nodes, storage, close } = await gatedService()
    try {
      const path = 'Quick' as NodePath
      await nodes.update(SYSTEM, path, () => ({ nodeType: 'Space', content: { Old: true } }), 'http')
      const old = (await storage.loadDoc(path))!.updates[0]!
      // Commits reach storage only once released (in the order they were made).
      const realCommit = storage.commit.bind(storage)
      let release!: () => void
      const released = new Promise<void>((r) => (release = r))
      storage.commit = (input) => released.then(() => realCommit(input))
      const deleting = nodes.delete(SYSTEM, path, 'engine')
      // The delete is applied in memory (the node is gone); its commit is not in storage.
      await waitFor(async () => (await nodes.get(SYSTEM, path)) === null, { description: 'the delete is applied in memory' })
      expect(await storage.getNode(path)).not.toBeNull()
      const creating = nodes.update(SYSTEM, path, () => ({ nodeType: 'Space', content: { New: true } }), 'engine')
      release()
      await Promise.all([deleting, creating])
      const rebuilt = rebuild((await storage.loadDoc(path))!)
      Y.applyUpdate(rebuilt, old)
      expect(docToJson(rebuilt)).toEqual({ New: true })
      expect(await storage.loadTombstone(path)).toBeNull()
    } finally {
      await close()
    }
  })

  it('[TOMB1] a create that waited on storage for the tombstone while another create and delete ran on the same copy takes that delete\'s tombstone, not the older one it read', async () => {
    const dir = await makeTempDir('weft-lazy-tomb-')
    const storage = openSqliteStorage({ file: `${dir}/weft.db` })
    try {
      const path = 'Raced' as NodePath
      let nodes = await serviceOver(storage)
      await nodes.update(SYSTEM, path, () => ({ nodeType: 'Space', content: { Zero: true } }), 'http')
      await nodes.delete(SYSTEM, path, 'engine')
      await nodes.close()
      // A fresh copy that knows of no tombstone (its row came from a read's cache): creates ask storage.
      nodes = await serviceOver(storage)
      expect(await nodes.get(SYSTEM, path)).toBeNull()
      const realLoad = storage.loadTombstone.bind(storage)
      let open!: () => void
      const gate = new Promise<void>((r) => (open = r))
      let calls = 0
      storage.loadTombstone = async (p) => {
        const read = await realLoad(p)
        if (calls++ === 0) await gate
        return read
      }
      const first = nodes.update(SYSTEM, path, () => ({ nodeType: 'Space', content: { A: true } }), 'http')
      await waitFor(() => calls === 1, { description: 'the first create reads the tombstone' })
      await nodes.update(SYSTEM, path, () => ({ nodeType: 'Space', content: { B: 'secret of B' } }), 'http')
      const ofB = (await storage.loadDoc(path))!.updates[0]!
      await nodes.delete(SYSTEM, path, 'engine')
      open()
      await first
      const rebuilt = rebuild((await storage.loadDoc(path))!)
      // A stale copy of B brings nothing of it into the node made after it.
      Y.applyUpdate(rebuilt, ofB)
      expect(docToJson(rebuilt)).toEqual({ A: true })
      expect(await storage.loadTombstone(path)).toBeNull()
      await nodes.close()
    } finally {
      await storage.close()
      await removeDir(dir)
    }
  })

  it('[TOMB1] a node deleted and created again while its log is read is built from the new node alone, over the tombstone of the old one', async () => {
    const { nodes, storage, gate, passLater, held, close } = await gatedService()
    try {
      const path = 'Reborn' as NodePath
      // A first life with a Yjs log (a client-origin create builds the doc).
      await nodes.update(SYSTEM, path, () => ({ nodeType: 'Space', content: { Old: true } }), 'http')
      const firstLife = (await storage.loadDoc(path))!.updates
      expect(firstLife).toHaveLength(1)
      const oldClients = [...Y.decodeStateVector(Y.encodeStateVectorFromUpdate(firstLife[0]!)).keys()]
      await nodes.close()
      const fresh = await serviceOver(storage)
      const openLoad = gate('loadDoc')
      const building = fresh.acquireDoc(path)
      // While the old log is being read (held at the gate): delete, and create again without a
      // doc (an engine). The delete reads the log too, for its tombstone: that read passes.
      await waitFor(() => held.loadDoc === 1, { description: 'the build reads the old log' })
      passLater('loadDoc')
      await fresh.delete(SYSTEM, path, 'engine')
      await fresh.update(SYSTEM, path, () => ({ nodeType: 'Space', content: { New: true } }), 'engine')
      openLoad()
      const ln = await building
      expect(docToJson(ln.doc)).toEqual({ New: true })
      // Rebuilt from storage alone, the same: the old life's items are gone for good.
      const rebuilt = rebuild((await storage.loadDoc(path))!)
      expect(docToJson(rebuilt)).toEqual({ New: true })
      // The first life's items are in the new one's history only as deleted ids (its tombstone):
      // an offline copy of the old node adds nothing to the new one.
      const clocks = Y.decodeStateVector(Y.encodeStateVector(rebuilt))
      for (const [client, clock] of Y.decodeStateVector(Y.encodeStateVectorFromUpdate(firstLife[0]!))) expect(clocks.get(client) ?? 0).toBeGreaterThanOrEqual(clock)
      expect(oldClients.length).toBeGreaterThan(0)
      Y.applyUpdate(rebuilt, firstLife[0]!)
      expect(docToJson(rebuilt)).toEqual({ New: true })
      await fresh.close()
    } finally {
      await close()
    }
  })
})

describe('[DOC1] on PostgreSQL', () => {
  it('a JSON-only node is built once: the fold is stored, and a second server builds the same Yjs state', async () => {
    const connectionString = process.env.WEFT_TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test'
    const schema = `weft_test_${randomBytes(6).toString('hex')}`
    const open = async () => {
      const storage = await openPostgresStorage({ connectionString, schema })
      const nodes = new NodeService(storage, new AccessService(), { idleUnloadMs: 60_000, log: pino({ level: 'silent' }) })
      await nodes.boot()
      return { storage, nodes }
    }
    const first = await open()
    try {
      const path = 'PgLazy' as NodePath
      await first.nodes.update(SYSTEM, path, () => ({ nodeType: 'Space', content: { A: 1, Nested: { B: 2 } } }), 'engine')
      await first.nodes.update(SYSTEM, path, (c) => ({ nodeType: 'Space', content: { ...c!.content, C: 3 } }), 'engine')
      expect((await first.storage.loadDoc(path))?.updates).toEqual([])
      const built = await first.nodes.acquireDoc(path)
      expect(docToJson(built.doc)).toEqual({ A: 1, Nested: { B: 2 }, C: 3 })
      const vector = Y.encodeStateVector(built.doc)
      const stored = (await first.storage.loadDoc(path))!
      expect(stored.snapshot).not.toBeNull()
      expect(stored.updates).toEqual([])
      await first.nodes.close()
      await first.storage.close()

      const second = await open()
      try {
        const again = await second.nodes.acquireDoc(path)
        expect(docToJson(again.doc)).toEqual({ A: 1, Nested: { B: 2 }, C: 3 })
        expect(Y.encodeStateVector(again.doc)).toEqual(vector)
        // Nothing lagged, so nothing was folded again.
        expect((await second.storage.loadDoc(path))?.snapshot).toEqual(stored.snapshot)
      } finally {
        await second.nodes.close()
        await second.storage.close()
      }
    } finally {
      const client = new pg.Client({ connectionString })
      await client.connect()
      await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`)
      await client.end()
    }
  })
})

describe('[DOC1] the catch-up a client saw survives kill -9 (child process)', () => {
  let server: SpawnedServer | null = null
  let dir: string | null = null
  afterEach(async () => {
    await server?.kill('SIGKILL')
    if (dir) await removeDir(dir)
    server = null
    dir = null
  })

  it('a client holding the caught-up User node keeps syncing after the server is killed and restarted', async () => {
    dir = await makeTempDir('weft-lazy-kill-')
    server = await spawnServer({ dataDir: dir })
    // Sign-up writes the User node as system, JSON only (Email is a system field).
    const user = await signup(server.url)
    const doc = new Y.Doc()
    const first = stockProvider(server.url, user.userId, user.token, doc)
    await first.synced()
    expect(first.json().Email).toBe(user.email)
    await server.kill('SIGKILL')
    first.provider.destroy()

    // The same local copy (think IndexedDB) reconnects to the restarted server. Had the catch-up
    // not been stored before the client saw it, the server would rebuild it with other Yjs ids
    // and refuse the client's copy of the system field as an edit of it.
    server = await spawnServer({ dataDir: dir })
    const second = stockProvider(server.url, user.userId, user.token, doc)
    await second.synced()
    second.content.set('DisplayName', 'Dee')
    await waitFor(async () => (await api(server!.url, user.token).getNode(user.userId)).body.content?.DisplayName === 'Dee', {
      description: 'the edit after the restart is stored',
    })
    expect(second.denied).toEqual([])
    expect(second.closes).toEqual([])
    expect(second.json().Email).toBe(user.email)
    second.destroy()
  }, 180_000)
})
