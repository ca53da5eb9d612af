// @vitest-environment node
import 'fake-indexeddb/auto'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { WebSocket as WsWebSocket } from 'ws'
import { MuxType } from '../../shared/index.js'
import { MuxClient, api, createDocument, createSpace, encodeCrafted, grantRole, signup, startTestServer, waitFor, type TestServer, type TestUser } from '../helpers/index.js'
import { SyncClient } from '../../web/sync/index.js'
import { groupRefused } from '../../web/store/index.js'
import { rootEntry } from '../helpers/crafted-updates.js'

/**
 * [SYNC16][WEB42] A person whose role was lowered while they edited many nodes offline is not
 * closed for the refusals of their reconnect: the first pending edit of each node goes before its
 * `Joined` (which carries the permission mask), and the server does not charge a room's first
 * refused Update that came before its Joined. An attacker still cannot make the server refuse
 * without bound: refused updates after Joined, or a second one before a Joined of the same path,
 * are charged, and past the budget the socket is closed (4429).
 */
describe('[SYNC16] refusals a client could not foresee do not close its socket', () => {
  let ts: TestServer
  let ann: TestUser
  let space = ''
  beforeAll(async () => {
    ts = await startTestServer()
    ann = await signup(ts.url)
    space = await createSpace(ts.url, ann.token)
  })
  afterAll(() => ts.cleanup())

  const NODES = 40

  it('[SYNC16][WEB42] 40 nodes edited offline, role lowered to Viewer meanwhile, reconnect: no 4429, each edit refused once and listed, nothing left pending', async () => {
    const eve = await signup(ts.url, undefined, undefined, 'Eve')
    await grantRole(ts.url, ann.token, space, eve.userId, 'Editor')
    const paths: string[] = []
    for (let i = 0; i < NODES; i++) paths.push(await createDocument(ts.url, ann.token, `${space}/n${i}`, { Caption: 'c0' }))
    const client = new SyncClient({ session: { userId: eve.userId, token: eve.token, name: 'Eve' }, baseUrl: ts.url, dbName: `sync16-${eve.userId}`, WebSocketImpl: WsWebSocket as unknown as typeof WebSocket })
    const closes: number[] = []
    client.conn.trouble$.subscribe((t) => t && closes.push(t.code))
    await client.start()
    try {
      // Every node known here (its type from the listing) and synced, as after visiting it.
      await client.refreshChildren(space)
      await Promise.all(paths.map((p) => client.acquire(p, false).synced))
      // Offline: two keystrokes on each node.
      client.conn.stop()
      for (const p of paths) {
        await client.patch(p, { Caption: 'c0 e' })
        await client.patch(p, { Caption: 'c0 ev' })
      }
      expect((await client.store.db.outbox.where('status').equals('pending').count())).toBe(2 * NODES)
      await grantRole(ts.url, ann.token, space, eve.userId, 'Viewer')
      const opensBefore = client.conn.opens
      client.conn.start()
      try {
        await waitFor(async () => (await client.store.db.outbox.where('status').equals('pending').count()) === 0 && client.conn.isOpen, { description: 'every edit settled', timeoutMs: 60_000 })
      } catch (e) {
        const rows = await client.store.db.outbox.toArray()
        console.log(JSON.stringify(rows.map((r) => [r.path, r.status, r.code])), closes, client.conn.status$.value, client.conn.opens)
        throw e
      }
      const rows = await client.store.outboxFor(paths[0]!)
      expect(rows.map((r) => r.status)).toEqual(['refused', 'refused'])
      const all = await client.store.refusedRows()
      expect(all).toHaveLength(2 * NODES)
      expect(all.every((r) => r.code === 'forbidden')).toBe(true)
      // One entry per node, with the whole text typed.
      const groups = groupRefused(all)
      expect(groups).toHaveLength(NODES)
      expect(groups.every((g) => g.value === 'c0 ev')).toBe(true)
      // The same socket: never closed for its refusals, never reopened.
      expect(closes).not.toContain(4429)
      expect(client.conn.opens).toBe(opensBefore + 1)
      expect(client.conn.final$.value).toBeNull()
      for (const p of paths.slice(0, 3)) expect((await api(ts.url, ann.token).getNode(p)).body?.content?.Caption).toBe('c0')
    } finally {
      client.stop()
    }
  })

  it('[SYNC16] an attacker is still closed with 4429: refused updates sent after Joined, or again and again before a Joined of the same path', async () => {
    const vic = await signup(ts.url)
    await grantRole(ts.url, ann.token, space, vic.userId, 'Viewer')
    const path = await createDocument(ts.url, ann.token, `${space}/target`, { a: 1 })
    const refused = (i: number) => encodeCrafted([{ client: 5000 + i, clock: 0, structs: [rootEntry(5000 + i, 0, 'a', [i])] }])

    // Before each Joined: join, update (answered Refused), leave, over and over on one path.
    const early = await MuxClient.connect(ts.url, vic.token)
    for (let i = 0; i < 100 && early.isOpen; i++) {
      early.send({ type: MuxType.Join, path })
      const answer = early.sendUpdate(path, refused(i))
      await Promise.race([answer, early.closed])
      if (early.isOpen) early.leave(path)
    }
    expect((await early.closed).code).toBe(4429)

    // After Joined, as before [SYNC16].
    const late = await MuxClient.connect(ts.url, vic.token)
    expect(await late.join(path)).toMatchObject({ ok: true })
    for (let i = 0; i < 200 && late.isOpen; i++) late.send({ type: MuxType.Update, path, seq: i + 1, update: refused(1000 + i) })
    expect((await late.closed).code).toBe(4429)
    expect((await api(ts.url, ann.token).getNode(path)).body?.content).toEqual({ a: 1 })
  })
})
