import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { CloseCode, MuxType, type NodePath } from '../../shared/index.js'
import { MuxClient, api, createDocument, createSpace, expectStatus, grantRole, signup, startTestServer, stockProvider, waitFor, type TestServer, type TestUser } from '../helpers/index.js'

/**
 * [ACC8] A room is joined only by who may read it when it is joined. A join checks Read, then
 * waits (the doc built from storage, the caller's presence), then joins the room; the recheck an
 * access change makes walks the rooms joined already. A Denied committed during that wait let the
 * socket join after it and receive every later edit (an outside look, stop 43: 3 of 3 tries on
 * /mux, 2 of 3 on /sync). Here the Denied is committed inside that wait, every time.
 */
describe('[ACC8] a room joined while the caller loses Read', () => {
  let ts: TestServer
  let alice: TestUser
  let space = ''
  beforeAll(async () => {
    ts = await startTestServer()
    alice = await signup(ts.url)
    space = await createSpace(ts.url, alice.token)
  })
  afterAll(() => ts.cleanup())

  /** Bob, a Viewer of the space, and a node whose doc the next join builds; `deny` commits Bob's Denied on it. */
  async function viewerAndDoc(name: string): Promise<{ bob: TestUser; doc: string; deny: () => Promise<void> }> {
    const bob = await signup(ts.url)
    await grantRole(ts.url, alice.token, space, bob.userId, 'Viewer')
    const doc = await createDocument(ts.url, alice.token, `${space}/${name}`, { Title: 'before' })
    const deny = async () => {
      expectStatus(await api(ts.url, alice.token).putNode(`${doc}/_Access/${bob.userId}_Access`, 'AccessAssignment', { Subject: bob.userId, Role: 'Viewer', Denied: true }), 201)
    }
    return { bob, doc, deny }
  }

  /** Runs `during` inside the server's wait for the doc of `doc` (after the join's access check). */
  function duringDocWait(doc: string, during: () => Promise<void>): () => void {
    const nodes = ts.server.nodes
    const acquireDoc = nodes.acquireDoc.bind(nodes)
    let done = false
    nodes.acquireDoc = async (path: NodePath) => {
      if (path === doc && !done) {
        done = true
        await during()
      }
      return acquireDoc(path)
    }
    return () => {
      nodes.acquireDoc = acquireDoc
    }
  }

  it('/mux: the join is refused (forbidden), and an edit after it never reaches Bob', async () => {
    const { bob, doc, deny } = await viewerAndDoc('mux')
    const restore = duringDocWait(doc, deny)
    const mux = await MuxClient.connect(ts.url, bob.token)
    try {
      expect(await mux.join(doc, { waitSynced: false })).toMatchObject({ ok: false, code: 'forbidden' })
      expectStatus(await api(ts.url, alice.token).patchNode(doc, { Title: 'after the Denied' }), 200)
      // Alice's own socket sees the edit; Bob's holds nothing of it.
      const watcher = await MuxClient.connect(ts.url, alice.token)
      expect(await watcher.join(doc)).toMatchObject({ ok: true })
      await waitFor(() => watcher.json(doc).Title === 'after the Denied')
      await watcher.close()
      expect(mux.json(doc).Title).toBeUndefined()
      expect(mux.frames.some((f) => f.type === MuxType.Joined && f.path === doc)).toBe(false)
    } finally {
      restore()
      await mux.close()
    }
  })

  it('/sync: the socket is closed 4403 and holds nothing of the node', async () => {
    const { bob, doc, deny } = await viewerAndDoc('sync')
    const restore = duringDocWait(doc, deny)
    const stock = stockProvider(ts.url, doc, bob.token)
    try {
      await waitFor(() => stock.closes.length > 0, { description: 'the socket refused' })
      expect(stock.closes[0]!.code).toBe(CloseCode.Forbidden)
      expect(stock.json().Title).toBeUndefined()
    } finally {
      restore()
      stock.destroy()
    }
  })

  it('a join with Read kept all along still joins (the same interleaving, an unrelated write)', async () => {
    const { bob, doc } = await viewerAndDoc('kept')
    const restore = duringDocWait(doc, async () => {
      expectStatus(await api(ts.url, alice.token).patchNode(doc, { Title: 'during' }), 200)
    })
    const mux = await MuxClient.connect(ts.url, bob.token)
    try {
      expect(await mux.join(doc)).toMatchObject({ ok: true })
      await waitFor(() => mux.json(doc).Title === 'during')
    } finally {
      restore()
      await mux.close()
    }
  })
})
