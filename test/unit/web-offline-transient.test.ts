// @vitest-environment node
import 'fake-indexeddb/auto'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import { api, createDocument, createSpace, startTestServer, waitFor, type TestServer } from '../helpers/index.js'
import { failWrites } from '../helpers/storage-fault.js'
import { statusIs, webClients } from '../helpers/web-clients.js'

/**
 * Queued work replayed against a server that fails for a while (a real storage failure: a
 * trigger in its SQLite database aborts the write, and the server answers as it does to any
 * failed transaction). A failure for now is not a refusal: nothing is dropped or refused.
 */
let ts: TestServer
const web = webClients(() => ts.url, 'web-offline-transient')
const { client, user } = web
const DEAD = 'http://127.0.0.1:9' // nothing listens: offline

beforeAll(async () => {
  ts = await startTestServer()
})
afterAll(() => ts.cleanup())
afterEach(() => web.stopAll())

describe('queued work meets a server failure', () => {
  it('[SYNC19] a creation queued offline whose replay fails on the server (500) stays queued and listed, is retried by itself, and lands with what was typed', async () => {
    const ann = await user('Ann')
    const space = await createSpace(ts.url, ann.token)
    const path = `${space}/draft`
    const dbName = web.dbName()
    const offline = await client(ann, { baseUrl: DEAD, dbName })
    await offline.createNode(path, 'Document', 'Draft', { Title: 'typed offline' })
    offline.stop()
    const fault = failWrites(ts.dataDir, 'nodes', ['INSERT'], path)
    try {
      const online = await client(ann, { dbName })
      await waitFor(async () => online.opErrors$.value.length > 0 || (await online.store.pendingOps()).every((o) => (o.tries ?? 0) >= 1), 10_000)
      const [op] = await online.store.pendingOps()
      expect(op).toMatchObject({ kind: 'create', path, lastCode: 'internal' })
      expect(online.opErrors$.value).toEqual([])
      expect(await online.store.getIndexRow(path)).toMatchObject({ localOnly: 1 })
      expect(await online.store.refusedRows()).toEqual([])
      expect((await statusIs(online, (s) => s.online)).pending).toBeGreaterThan(0)
      // Tried again with nothing else happening (no reconnect): once more, still failing.
      await waitFor(async () => ((await online.store.pendingOps())[0]?.tries ?? 0) >= 2, 15_000)
      fault.heal()
      await statusIs(online, (s) => s.kind === 'saved' && s.pending === 0)
      const server = await api(ts.url, ann.token).getNode(path)
      expect(server.status).toBe(200)
      expect(server.body.content).toMatchObject({ Title: 'typed offline' })
      expect(online.opErrors$.value).toEqual([])
      expect(await online.store.refusedRows()).toEqual([])
    } finally {
      fault.heal()
    }
  })

  it('[SYNC19] a deletion queued offline whose replay fails on the server (500) stays queued, is retried, and the node goes', async () => {
    const ann = await user('Ann')
    const space = await createSpace(ts.url, ann.token)
    const path = await createDocument(ts.url, ann.token, `${space}/doomed`, { Title: 't' })
    const dbName = web.dbName()
    const offline = await client(ann, { baseUrl: DEAD, dbName })
    await offline.deleteNode(path)
    offline.stop()
    const fault = failWrites(ts.dataDir, 'nodes', ['UPDATE', 'DELETE'], path)
    try {
      const online = await client(ann, { dbName })
      await waitFor(async () => online.opErrors$.value.length > 0 || (await online.store.pendingOps()).every((o) => (o.tries ?? 0) >= 1), 10_000)
      expect(await online.store.pendingOps()).toMatchObject([{ kind: 'delete', path, lastCode: 'internal' }])
      expect(online.opErrors$.value).toEqual([])
      expect((await api(ts.url, ann.token).getNode(path)).status).toBe(200)
      fault.heal()
      await statusIs(online, (s) => s.kind === 'saved' && s.pending === 0)
      expect((await api(ts.url, ann.token).getNode(path)).status).toBe(404)
      expect(online.opErrors$.value).toEqual([])
    } finally {
      fault.heal()
    }
  })

  it('[SYNC20] an edit the server fails to save (its commit fails) stays pending, is sent again, and lands; nothing is refused', async () => {
    const ann = await user('Ann')
    const space = await createSpace(ts.url, ann.token)
    const path = await createDocument(ts.url, ann.token, `${space}/doc`, { Title: 't0' })
    const a = await client(ann)
    const ra = a.acquire(path)
    await ra.synced
    await statusIs(a, (s) => s.kind === 'saved' && s.pending === 0)
    const fault = failWrites(ts.dataDir, 'node_updates', ['INSERT'], path)
    try {
      await a.patch(path, { Title: 't1' })
      // The server met the failure (its copy of the node was dropped, the room closed).
      await waitFor(() => !ra.state$.value.joined, 10_000)
      expect(await a.store.refusedRows()).toEqual([])
      expect((await a.store.outboxFor(path)).map((r) => [r.patch, r.status])).toEqual([[{ Title: 't1' }, 'pending']])
      fault.heal()
      await statusIs(a, (s) => s.kind === 'saved' && s.pending === 0)
      expect((await api(ts.url, ann.token).getNode(path)).body.content).toMatchObject({ Title: 't1' })
      expect(await a.store.refusedRows()).toEqual([])
    } finally {
      fault.heal()
    }
  })
})
