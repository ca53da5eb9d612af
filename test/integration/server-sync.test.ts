import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import { jsonEqual } from '../../shared/index.js'
import {
  api,
  createDocument,
  createSpace,
  signup,
  startTestServer,
  stockProvider,
  waitFor,
  type StockClient,
  type TestServer,
  type TestUser,
} from '../helpers/index.js'

/**
 * `/sync/{path}` is the stock y-websocket protocol: unmodified `WebsocketProvider`s sync a node
 * through the server, and what they wrote is on disk (it survives a restart).
 */
describe('server /sync with stock y-websocket providers', () => {
  let ts: TestServer
  let alice: TestUser
  let space: string
  const clients: StockClient[] = []
  const open = (path: string, token = alice.token): StockClient => {
    const client = stockProvider(ts.url, path, token)
    clients.push(client)
    return client
  }

  beforeAll(async () => {
    ts = await startTestServer()
    alice = await signup(ts.url)
    space = await createSpace(ts.url, alice.token)
  })
  afterEach(() => {
    for (const c of clients.splice(0)) c.destroy()
  })
  afterAll(async () => {
    await ts.cleanup()
  })

  it('[SYNC1][PATCH3] two providers converge in both directions, concurrent edits to different fields both survive', async () => {
    const path = await createDocument(ts.url, alice.token, `${space}/converge`, { Title: 'start' })
    const a = open(path)
    const b = open(path)
    await Promise.all([a.synced(), b.synced()])
    expect(a.json()).toEqual({ Title: 'start' })
    expect(b.json()).toEqual({ Title: 'start' })

    a.content.set('FromA', 1)
    await waitFor(() => b.content.get('FromA') === 1, { description: 'b sees FromA' })
    b.content.set('FromB', 'x')
    await waitFor(() => a.content.get('FromB') === 'x', { description: 'a sees FromB' })

    a.content.set('ConcurrentA', true)
    b.content.set('ConcurrentB', true)
    await waitFor(() => a.content.get('ConcurrentB') === true && b.content.get('ConcurrentA') === true, {
      description: 'both concurrent fields on both sides',
    })
    expect(a.json()).toEqual(b.json())

    // The server holds the merged state, not just a relay of it.
    const expected = { Title: 'start', FromA: 1, FromB: 'x', ConcurrentA: true, ConcurrentB: true }
    await waitFor(async () => jsonEqual((await api(ts.url, alice.token).getNode(path)).body.content, expected), {
      description: 'HTTP GET shows the merged content',
    })
  })

  it('[SYNC1] awareness states reach the other provider in both directions', async () => {
    const path = await createDocument(ts.url, alice.token, `${space}/awareness`, {})
    const a = open(path)
    const b = open(path)
    await Promise.all([a.synced(), b.synced()])
    // The server stamps user.id and user.name ([SYNC5]); a plain colour passes as it is.
    a.provider.awareness.setLocalStateField('user', { color: '#aa0000' })
    b.provider.awareness.setLocalStateField('user', { color: '#0000bb' })
    const sees = (c: StockClient, color: string) =>
      [...c.provider.awareness.getStates().values()].some((s) => (s.user as { color?: string } | undefined)?.color === color)
    await waitFor(() => sees(b, '#aa0000'), { description: "b sees a's awareness" })
    await waitFor(() => sees(a, '#0000bb'), { description: "a sees b's awareness" })
    expect(b.provider.awareness.getStates().get(a.doc.clientID)).toMatchObject({ user: { color: '#aa0000', id: alice.userId } })
  })

  it('[SYNC1] a late joiner gets the full state', async () => {
    const path = await createDocument(ts.url, alice.token, `${space}/late`, { Title: 'late' })
    const a = open(path)
    await a.synced()
    for (let i = 0; i < 20; i++) a.content.set(`F${i}`, i)
    await waitFor(async () => (await api(ts.url, alice.token).getNode(path)).body.content?.F19 === 19, {
      description: 'server has all 20 fields',
    })
    const late = open(path)
    await late.synced()
    expect(late.json()).toEqual(a.json())
    expect(late.content.get('F19')).toBe(19)
  })

  it('[STO1] after a restart on the same data directory the state is intact', async () => {
    const path = await createDocument(ts.url, alice.token, `${space}/restart`, { Title: 'before' })
    const a = open(path)
    await a.synced()
    a.content.set('Synced', 'yes')
    a.content.set('Title', 'after')
    await waitFor(async () => (await api(ts.url, alice.token).getNode(path)).body.content?.Synced === 'yes', {
      description: 'server has the synced edit',
    })
    const before = a.json()
    for (const c of clients.splice(0)) c.destroy()

    await ts.restart()

    const res = await api(ts.url, alice.token).getNode(path)
    expect(res.status).toBe(200)
    expect(res.body.content).toEqual(before)
    const fresh = open(path)
    await fresh.synced()
    expect(fresh.json()).toEqual(before)
  })
})
