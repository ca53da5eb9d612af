// @vitest-environment node
import 'fake-indexeddb/auto'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import { WebSocket as WsWebSocket } from 'ws'
import { userPrincipal, type ChangeRecord, type MeshNode, type NodePath, type UserId } from '../../shared/index.js'
import { SyncClient } from '../../web/sync/index.js'
import { HttpApi } from '../../web/api/index.js'
import { api, createDocument, createSpace, expectStatus, grantRole, signup, startTestServer, waitFor, type TestServer, type TestUser } from '../helpers/index.js'

/**
 * [FEED1] [FEED2] [FEED3] The change feed and queries filter while paging and hand back a cursor
 * past everything examined, so writes a reader cannot see never hide what they can, however many
 * there are. Real server on port 0, real SQLite; the browser's SyncClient with fake-indexeddb.
 */
let ts: TestServer
const clients: SyncClient[] = []
let dbCounter = 0

beforeAll(async () => {
  ts = await startTestServer()
})
afterAll(() => ts.cleanup())
afterEach(() => {
  for (const c of clients.splice(0)) c.stop()
})

interface Page {
  items: ChangeRecord[]
  next: number
}

/** `n` writes by `user` that nobody else can read: patches of one node in the user's own space, all in flight at once. */
async function unreadableWrites(user: TestUser, n: number): Promise<string> {
  const space = await createSpace(ts.url, user.token)
  const path = await createDocument(ts.url, user.token, `${space}/private`, { N: 0 })
  const principal = userPrincipal(user.userId as UserId)
  const nodes = ts.server.nodes
  for (let done = 0; done < n; done += 500) {
    const batch = Math.min(500, n - done)
    await Promise.all(Array.from({ length: batch }, (_, i) => nodes.patch(principal, path as NodePath, { N: done + i + 1 }, 'http')))
  }
  return space
}

async function lastVersion(): Promise<number> {
  return ts.server.storage.lastVersion()
}

/** Alice's space with Carol as an Editor, and the feed position before anything else happens. */
async function world(): Promise<{ alice: TestUser; carol: TestUser; bob: TestUser; space: string; since: number }> {
  const [alice, bob, carol] = await Promise.all([signup(ts.url), signup(ts.url), signup(ts.url)])
  const space = await createSpace(ts.url, alice.token)
  await grantRole(ts.url, alice.token, space, carol.userId, 'Editor')
  return { alice, bob, carol, space, since: await lastVersion() }
}

describe('change feed paging', () => {
  it('[FEED1] 600 unreadable writes ahead: a page with limit=500 is empty but its `next` advances, and following it reaches the readable changes', async () => {
    const { alice, bob, carol, space, since } = await world()
    const bobs = await unreadableWrites(bob, 600)
    const own = await createDocument(ts.url, alice.token, `${space}/own`, { By: 'Alice' })
    const theirs = await createDocument(ts.url, carol.token, `${space}/theirs`, { By: 'Carol' })

    // A bound of 600 examined rows would hide nothing here; limit=500 is what used to stall.
    const http = api(ts.url, alice.token)
    const first = expectStatus(await http.get<Page>(`/api/changes?since=${since}&limit=500`), 200).body
    expect(typeof first.next).toBe('number')
    expect(first.next).toBeGreaterThan(since)
    const seen: ChangeRecord[] = [...first.items]
    let cursor = first.next
    for (let i = 0; i < 10; i++) {
      const page = expectStatus(await http.get<Page>(`/api/changes?since=${cursor}&limit=500`), 200).body
      expect(page.next).toBeGreaterThanOrEqual(cursor)
      seen.push(...page.items)
      if (page.next === cursor) break
      cursor = page.next
    }
    expect(cursor).toBe(await lastVersion())
    const paths = seen.map((c) => c.path)
    expect(paths).toContain(own)
    expect(paths).toContain(theirs)
    // Nothing of Bob's space leaks (what else shows is readable to Alice: her space, her user
    // node, the seeded templates a fresh server checks), and the feed stays in version order.
    expect(paths.filter((p) => p === bobs || p.startsWith(`${bobs}/`))).toEqual([])
    for (const p of paths) expect(ts.server.nodes.permissions(userPrincipal(alice.userId as UserId), p as NodePath).has('Read')).toBe(true)
    const versions = seen.map((c) => c.version)
    expect(versions).toEqual([...versions].sort((a, b) => a - b))
  })

  it('[FEED1] a page that fills up stops at its last item: `next` is that item, and the rest follows from it', async () => {
    const { alice, space, since } = await world()
    const paths: string[] = []
    for (let i = 0; i < 5; i++) paths.push(await createDocument(ts.url, alice.token, `${space}/d${i}`, {}))
    const http = api(ts.url, alice.token)
    const first = expectStatus(await http.get<Page>(`/api/changes?since=${since}&limit=2`), 200).body
    expect(first.items).toHaveLength(2)
    expect(first.next).toBe(first.items[1]!.version)
    const rest = expectStatus(await http.get<Page>(`/api/changes?since=${first.next}&limit=100`), 200).body
    expect([...first.items, ...rest.items].map((c) => c.path).filter((p) => paths.includes(p))).toEqual(paths)
    // Caught up: `next` stays where it is.
    const end = expectStatus(await http.get<Page>(`/api/changes?since=${rest.next}`), 200).body
    expect(end).toEqual({ items: [], next: rest.next })
  })

  it('[FEED1] a bad `limit` or `since` is invalid_request, never a 500', async () => {
    const { alice } = await world()
    const http = api(ts.url, alice.token)
    for (const q of ['since=-1', 'since=abc', 'limit=0', 'limit=-5', 'limit=1.5', 'limit=x']) {
      const res = await http.get(`/api/changes?${q}`)
      expect(res.status, q).toBe(400)
      expect((res.body as { error: { code: string } }).error.code, q).toBe('invalid_request')
    }
  })

  it('[FEED2] the web SyncClient catches up past 600 and then 5,000 unreadable writes and lists its own and a collaborator\'s new nodes', async () => {
    const { alice, bob, carol, space } = await world()
    const c = new SyncClient({
      session: { userId: alice.userId, token: alice.token, name: 'Alice' },
      baseUrl: ts.url,
      dbName: `feed-paging-${++dbCounter}`,
      WebSocketImpl: WsWebSocket as unknown as typeof WebSocket,
    })
    clients.push(c)
    await c.start()
    c.watchParent(space)
    await waitFor(() => c.conn.isOpen, { description: 'socket open' })

    for (const [round, n] of [[1, 600], [2, 5_000]] as const) {
      await unreadableWrites(bob, n)
      const own = await createDocument(ts.url, alice.token, `${space}/own-${round}`, { By: 'Alice' })
      const theirs = await createDocument(ts.url, carol.token, `${space}/theirs-${round}`, { By: 'Carol' })
      // The server's Changed hint starts the catch-up; the listing shows both once it is done.
      await waitFor(async () => (await c.store.getIndexRow(own)) && (await c.store.getIndexRow(theirs)), {
        timeoutMs: 15_000,
        description: `round ${round}: Alice's listing has ${own} and ${theirs}`,
      })
    }
  })
})

describe('query paging', () => {
  it('[FEED3] children Alice cannot read do not make her listing short: `next` leads past them and `after` continues', async () => {
    const { alice, bob } = await world()
    // Bob's space holds 30 children; Alice may read 3 of them, which sort after the others.
    const shared = await createSpace(ts.url, bob.token)
    const principal = userPrincipal(bob.userId as UserId)
    await Promise.all(
      Array.from({ length: 30 }, (_, i) =>
        ts.server.nodes.put(principal, `${shared}/a${String(i).padStart(2, '0')}` as NodePath, { nodeType: 'Document', content: {} }, 'http'),
      ),
    )
    const readable = ['z1', 'z2', 'z3'].map((s) => `${shared}/${s}`)
    for (const p of readable) {
      await createDocument(ts.url, bob.token, p, {})
      await grantRole(ts.url, bob.token, p, alice.userId, 'Viewer')
    }
    const http = api(ts.url, alice.token)
    const first = expectStatus(await http.get<{ items: MeshNode[]; next?: string }>(`/api/nodes?parent=${shared}&limit=2`), 200).body
    expect(first.items.map((n) => n.path)).toEqual(readable.slice(0, 2))
    expect(first.next).toBe(readable[1])
    const second = expectStatus(await http.get<{ items: MeshNode[]; next?: string }>(`/api/nodes?parent=${shared}&limit=2&after=${first.next}`), 200).body
    expect(second.items.map((n) => n.path)).toEqual(readable.slice(2))
    expect(second.next).toBeUndefined()

    // The web client follows the cursor: a short first page is never taken as the full list.
    const client = new HttpApi(ts.url, () => alice.token)
    expect((await client.listChildren(shared, 3)).map((n) => n.path)).toEqual(readable)
    expect((await client.listChildren(shared, 2)).map((n) => n.path)).toEqual(readable.slice(0, 2))
  })

  it('[FEED3] a bad `after` is invalid_path, never a 500', async () => {
    const { alice } = await world()
    const res = await api(ts.url, alice.token).get(`/api/nodes?parent=&after=${encodeURIComponent('a//../b')}`)
    expect(res.status).toBe(400)
  })
})
