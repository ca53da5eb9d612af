import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import * as encoding from 'lib0/encoding'
import { MuxType, YMessage } from '../../shared/index.js'
import {
  MuxClient,
  createDocument,
  createSpace,
  grantRole,
  openRawSocket,
  signup,
  startTestServer,
  stockProvider,
  uniqueEmail,
  waitFor,
  type StockClient,
  type TestServer,
  type TestUser,
} from '../helpers/index.js'

type PresenceState = { user?: { id?: string; name?: string; color?: string }; cursor?: unknown; [k: string]: unknown }

/** A y-websocket awareness message carrying one entry. */
function awarenessMessage(clientId: number, clock: number, state: string): Uint8Array {
  const inner = encoding.createEncoder()
  encoding.writeVarUint(inner, 1)
  encoding.writeVarUint(inner, clientId)
  encoding.writeVarUint(inner, clock)
  encoding.writeVarString(inner, state)
  const e = encoding.createEncoder()
  encoding.writeVarUint(e, YMessage.Awareness)
  encoding.writeVarUint8Array(e, encoding.toUint8Array(inner))
  return encoding.toUint8Array(e)
}

/** A caret at the start or end of the root map (a relative position in its JSON form, as editors send it). */
const at = (assoc: number) => ({ type: null, tname: 'content', item: null, assoc })
const CARET = { anchor: at(0), head: at(0) }

function stateOf(watcher: StockClient, clientId: number): PresenceState | undefined {
  return watcher.provider.awareness.getStates().get(clientId) as PresenceState | undefined
}

/** [SYNC5] Presence says who a socket is as the server knows it, never what the client claims. */
describe('presence identity', () => {
  let ts: TestServer
  let alice: TestUser
  let viewer: TestUser
  let doc: string

  beforeAll(async () => {
    ts = await startTestServer()
    alice = await signup(ts.url, uniqueEmail('alice'), undefined, 'Alice Admin')
    viewer = await signup(ts.url, uniqueEmail('vera'), undefined, 'Vera Viewer')
    const space = await createSpace(ts.url, alice.token)
    await grantRole(ts.url, alice.token, space, viewer.userId, 'Viewer')
    doc = await createDocument(ts.url, alice.token, `${space}/doc`, { Title: 'x' })
  })
  afterAll(() => ts.cleanup())

  it('[SYNC5] a Viewer claiming to be Alice on /sync (stock provider) reaches others as herself; color and cursor are kept', async () => {
    const watcher = stockProvider(ts.url, doc, alice.token)
    const spoof = stockProvider(ts.url, doc, viewer.token)
    try {
      await Promise.all([watcher.synced(), spoof.synced()])
      spoof.provider.awareness.setLocalState({ user: { id: alice.userId, name: 'Alice (Admin)', color: '#ff0000' }, cursor: CARET })
      const id = spoof.doc.clientID
      await waitFor(() => stateOf(watcher, id)?.user !== undefined, { description: "the watcher sees the viewer's presence" })
      expect(stateOf(watcher, id)).toEqual({ user: { id: viewer.userId, name: 'Vera Viewer', color: '#ff0000' }, cursor: CARET })
      // A later change is stamped too (and a missing user object is added).
      spoof.provider.awareness.setLocalState({ cursor: { anchor: at(-1), head: at(-1) } })
      await waitFor(() => (stateOf(watcher, id)?.cursor as { anchor?: { assoc?: number } } | undefined)?.anchor?.assoc === -1, { description: 'the second state arrives' })
      expect(stateOf(watcher, id)).toEqual({ user: { id: viewer.userId, name: 'Vera Viewer' }, cursor: { anchor: at(-1), head: at(-1) } })
    } finally {
      spoof.destroy()
      watcher.destroy()
    }
  })

  it('[SYNC5] the same on /mux: a spoofed user reaches a stock provider stamped with the socket\'s principal', async () => {
    const watcher = stockProvider(ts.url, doc, alice.token)
    const mux = await MuxClient.connect(ts.url, viewer.token)
    try {
      await watcher.synced()
      expect(await mux.join(doc)).toMatchObject({ ok: true })
      const clientId = 424242
      const claim = JSON.stringify({ user: { id: alice.userId, name: 'Alice (Admin)', color: 'teal' } })
      mux.send({ type: MuxType.Sync, path: doc, message: awarenessMessage(clientId, 1, claim) })
      await waitFor(() => stateOf(watcher, clientId) !== undefined, { description: 'the watcher sees the mux presence' })
      expect(stateOf(watcher, clientId)).toEqual({ user: { id: viewer.userId, name: 'Vera Viewer', color: 'teal' } })
    } finally {
      await mux.close()
      watcher.destroy()
    }
  })

  it('[SYNC5] a colour that is not a plain colour is dropped before anyone sees it (it goes into their style attributes), on /sync and /mux', async () => {
    const watcher = stockProvider(ts.url, doc, alice.token)
    const spoof = stockProvider(ts.url, doc, viewer.token)
    const mux = await MuxClient.connect(ts.url, viewer.token)
    try {
      await Promise.all([watcher.synced(), spoof.synced()])
      const overlay = 'red; position: fixed; inset: 0; z-index: 9999; background: url(https://evil.example/pixel)'
      spoof.provider.awareness.setLocalState({ user: { color: overlay, colorLight: '#ff000033' }, cursor: CARET })
      const id = spoof.doc.clientID
      await waitFor(() => stateOf(watcher, id)?.cursor !== undefined, { description: "the viewer's presence" })
      expect(stateOf(watcher, id)).toEqual({ user: { id: viewer.userId, name: 'Vera Viewer', colorLight: '#ff000033' }, cursor: CARET })

      expect(await mux.join(doc)).toMatchObject({ ok: true })
      const claim = JSON.stringify({ user: { color: 'rgb(1,2,3)', colorLight: 'x" onmouseover="alert(1)' } })
      mux.send({ type: MuxType.Sync, path: doc, message: awarenessMessage(515151, 1, claim) })
      await waitFor(() => stateOf(watcher, 515151) !== undefined, { description: 'the mux presence' })
      expect(stateOf(watcher, 515151)).toEqual({ user: { id: viewer.userId, name: 'Vera Viewer', color: 'rgb(1,2,3)' } })
    } finally {
      await mux.close()
      spoof.destroy()
      watcher.destroy()
    }
  })

  it('[SYNC5] a caret that does not resolve in the node (it would break every editor\'s remote carets) is dropped; the rest of the state passes', async () => {
    const watcher = stockProvider(ts.url, doc, alice.token)
    const raw = await openRawSocket(ts.url, `/sync/${doc}?token=${viewer.token}`)
    try {
      await watcher.synced()
      const crafted = [
        { anchor: 1, head: 2 },
        { anchor: { item: { client: 1, clock: 'x' } }, head: at(0) },
        { anchor: { tname: 'content', assoc: 0 }, head: at(0) },
        { anchor: at(0), head: { ...at(0), assoc: 0.5 } },
        'here',
      ]
      crafted.forEach((cursor, i) => raw.send(awarenessMessage(900 + i, 1, JSON.stringify({ cursor, n: i }))))
      raw.send(awarenessMessage(999, 1, JSON.stringify({ cursor: CARET, n: 'ok' })))
      await waitFor(() => stateOf(watcher, 999) !== undefined && crafted.every((_, i) => stateOf(watcher, 900 + i) !== undefined), { description: 'every state' })
      crafted.forEach((_, i) => expect(stateOf(watcher, 900 + i)).toEqual({ n: i, user: { id: viewer.userId, name: 'Vera Viewer' } }))
      expect(stateOf(watcher, 999)).toEqual({ cursor: CARET, n: 'ok', user: { id: viewer.userId, name: 'Vera Viewer' } })
      expect(raw.socket.readyState).toBe(raw.socket.OPEN)
    } finally {
      raw.socket.close()
      watcher.destroy()
    }
  })

  it('[SYNC5] a presence state over the size bound is dropped, and the socket stays', async () => {
    const watcher = stockProvider(ts.url, doc, alice.token)
    const raw = await openRawSocket(ts.url, `/sync/${doc}?token=${viewer.token}`)
    try {
      await watcher.synced()
      raw.send(awarenessMessage(777, 1, JSON.stringify({ blob: 'x'.repeat(20_000) })))
      raw.send(awarenessMessage(778, 1, JSON.stringify({ small: true })))
      await waitFor(() => stateOf(watcher, 778) !== undefined, { description: 'the small state arrives' })
      expect(stateOf(watcher, 778)).toEqual({ small: true, user: { id: viewer.userId, name: 'Vera Viewer' } })
      expect(stateOf(watcher, 777)).toBeUndefined()
      expect(raw.socket.readyState).toBe(raw.socket.OPEN)
    } finally {
      raw.socket.close()
      watcher.destroy()
    }
  })
})
