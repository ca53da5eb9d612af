import { connect } from 'node:net'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { MuxType, SYSTEM, YMessage, encodeMuxFrame, type NodePath } from '../../shared/index.js'
import * as encoding from 'lib0/encoding'
import {
  MuxClient,
  openRawSocket,
  stockProvider,
  api,
  createDocument,
  createGroup,
  createSpace,
  errorCode,
  grantRole,
  signup,
  startTestServer,
  waitFor,
  type TestServer,
} from '../helpers/index.js'

/** Findings of the server review, each as the scenario that used to break. */
describe('server hardening', () => {
  let ts: TestServer
  beforeAll(async () => {
    ts = await startTestServer()
  })
  afterAll(() => ts.cleanup())

  it('a malformed WebSocket upgrade URL costs that socket only, never the process', async () => {
    const { port, hostname } = new URL(ts.url)
    const answer = await new Promise<string>((resolve) => {
      const socket = connect(Number(port), hostname, () => {
        socket.write('GET //a:b HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n')
      })
      let data = ''
      socket.on('data', (d) => (data += d.toString()))
      socket.on('close', () => resolve(data))
      socket.on('error', () => resolve(data))
    })
    expect(answer).toMatch(/^HTTP\/1.1 400/)
    expect((await api(ts.url).get('/healthz')).status).toBe(200)
  })

  it('[ACC9] a "group" named like a user cannot pass that user\'s roles to someone else', async () => {
    const admin = await signup(ts.url)
    const mallory = await signup(ts.url)
    const bob = await signup(ts.url)
    const space = await createSpace(ts.url, admin.token)
    const doc = await createDocument(ts.url, admin.token, `${space}/doc`, { A: 1 })
    await grantRole(ts.url, admin.token, space, mallory.userId, 'Editor')
    const res = await api(ts.url, mallory.token).putNode(`${mallory.userId}/${bob.userId}_Membership`, 'Membership', {})
    expect(res.status).toBe(400)
    expect(errorCode(res)).toBe('invalid_path')
    expect((await api(ts.url, bob.token).getNode(doc)).status).toBe(403)
  })

  it('[ACC0] an assignment\'s Subject is the one its path names: no decoy can shadow an Admin', async () => {
    const admin = await signup(ts.url)
    const space = await createSpace(ts.url, admin.token)
    const decoy = await api(ts.url, admin.token).putNode(`${space}/_Access/zzz_Access`, 'AccessAssignment', { Subject: admin.userId, Role: 'Viewer' })
    expect(decoy.status).toBe(422)
    expect(errorCode(decoy)).toBe('invalid_content')
    const own = `${space}/_Access/${admin.userId}_Access`
    const moved = await api(ts.url, admin.token).patchNode(own, { Subject: 'someone-else' })
    expect(errorCode(moved)).toBe('invalid_content')
    expect((await api(ts.url, admin.token).patchNode(space, { Still: 'admin' })).status).toBe(200)
    // A group subject is written with dots in the label.
    const group = await createGroup(ts.url, admin.token, `${space}/Team`)
    await grantRole(ts.url, admin.token, space, group, 'Viewer')
  })

  it('/mux: joining "/S" and "S" is one room, and leaving it leaves nothing behind', async () => {
    const user = await signup(ts.url)
    const space = await createSpace(ts.url, user.token)
    const doc = await createDocument(ts.url, user.token, `${space}/doc`, {})
    const mux = await MuxClient.connect(ts.url, user.token)
    expect(await mux.join(doc)).toMatchObject({ ok: true })
    // Raw Join frames with the unnormalised path: the server keys rooms by the parsed path.
    for (let i = 0; i < 20; i++) mux.socket.send(encodeMuxFrame({ type: MuxType.Join, path: `/${doc}` }))
    const room = await ts.server.nodes.acquire(doc as NodePath)
    // A later frame on the same socket is handled after the joins: once it is answered, they were.
    expect(await mux.patch(doc, { After: true })).toMatchObject({ ok: true })
    expect(room.connections.size).toBe(1)
    await mux.close()
    await waitFor(() => room.connections.size === 0)
  })

  it('nobody can rewrite or remove another client\'s presence', async () => {
    const user = await signup(ts.url)
    const space = await createSpace(ts.url, user.token)
    const doc = await createDocument(ts.url, user.token, `${space}/doc`, {})
    const alice = stockProvider(ts.url, doc, user.token)
    alice.provider.awareness.setLocalState({ name: 'Alice' })
    const watcher = stockProvider(ts.url, doc, user.token)
    await Promise.all([alice.synced(), watcher.synced()])
    const victim = alice.doc.clientID
    await waitFor(() => (watcher.provider.awareness.getStates().get(victim) as { name?: string } | undefined)?.name === 'Alice')
    // Mallory's socket claims Alice's client id with a far higher clock.
    const mallory = await openRawSocket(ts.url, `/sync/${doc}?token=${user.token}`)
    const e = encoding.createEncoder()
    encoding.writeVarUint(e, YMessage.Awareness)
    const inner = encoding.createEncoder()
    encoding.writeVarUint(inner, 1)
    encoding.writeVarUint(inner, victim)
    encoding.writeVarUint(inner, 10_000)
    encoding.writeVarString(inner, JSON.stringify({ name: 'Mallory' }))
    encoding.writeVarUint8Array(e, encoding.toUint8Array(inner))
    mallory.send(encoding.toUint8Array(e))
    // Alice's next own change still reaches the watcher: her entry was never taken over.
    alice.provider.awareness.setLocalState({ name: 'Alice 2' })
    await waitFor(() => (watcher.provider.awareness.getStates().get(victim) as { name?: string } | undefined)?.name === 'Alice 2')
    alice.destroy()
    watcher.destroy()
    mallory.socket.close()
  })

  it('nothing can be created inside a subtree while it is being deleted; no orphans remain', async () => {
    const user = await signup(ts.url)
    const space = await createSpace(ts.url, user.token)
    await Promise.all(Array.from({ length: 30 }, (_, i) => createDocument(ts.url, user.token, `${space}/d${i}`, { I: i })))
    const http = api(ts.url, user.token)
    const deleting = http.deleteNode(space)
    const late = await http.putNode(`${space}/late`, 'Document', { secret: 'x' })
    expect((await deleting).status).toBe(204)
    // 403 once the space's own access assignment is gone (children are deleted first).
    expect([201, 403, 404, 409]).toContain(late.status)
    expect(await ts.server.storage.descendants(space as NodePath)).toEqual([])
    expect(await ts.server.nodes.get(SYSTEM, `${space}/late` as NodePath)).toBeNull()
  })
})
