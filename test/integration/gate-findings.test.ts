import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import * as Y from 'yjs'
import {
  MuxClient,
  api,
  createDocument,
  createSpace,
  encodeCrafted,
  errorCode,
  expectStatus,
  grantRole,
  itemAfter,
  openRawSocket,
  partlyKnownEntry,
  rootEntry,
  signup,
  startTestServer,
  stockProvider,
  syncUpdateMessage,
  waitFor,
  type TestServer,
  type TestUser,
} from '../helpers/index.js'
import { CONTENT_MAP, MuxType, type JsonObject, type MeshNode } from '../../shared/index.js'

/**
 * [ACC10] Each finding of the gate issue, over the real transports, with the server state read
 * back over HTTP and a positive control (the same user's honest edit still goes through).
 */
let ts: TestServer
let admin: TestUser
let editor: TestUser
let viewer: TestUser
let space: string

beforeAll(async () => {
  ts = await startTestServer()
  admin = await signup(ts.url)
  editor = await signup(ts.url)
  viewer = await signup(ts.url)
  space = await createSpace(ts.url, admin.token)
  await grantRole(ts.url, admin.token, space, editor.userId, 'Editor')
  await grantRole(ts.url, admin.token, space, viewer.userId, 'Viewer')
})
afterAll(() => ts.cleanup())

async function content(path: string, token = admin.token): Promise<Record<string, unknown>> {
  return expectStatus(await api(ts.url, token).getNode(path), 200).body.content as Record<string, unknown>
}

/** A stock /sync client with a fixed Yjs client id, synced. */
async function stockAs(path: string, token: string, clientID: number) {
  const doc = new Y.Doc()
  doc.clientID = clientID
  const p = stockProvider(ts.url, path, token, doc)
  await p.synced()
  return p
}

describe('[ACC10] finding 1: a partly-known struct cannot write another field', () => {
  it('an Editor cannot set ActivityLog.Status over /sync through a struct whose start the server holds', async () => {
    const path = `${space}/_Activity/run1`
    expectStatus(await api(ts.url, editor.token).putNode(path, 'ActivityLog', { Category: 'x' }), 201)
    const honest = await stockAs(path, editor.token, 4242)
    honest.doc.transact(() => {
      const text = new Y.Text()
      honest.content.set('Notes', text)
      text.insert(0, 'hello')
    })
    await waitFor(async () => (await content(path)).Notes === 'hello')
    honest.destroy()

    const raw = await openRawSocket(ts.url, `/sync/${path}?token=${editor.token}`)
    // Values and text: neither may land in Status, whatever Yjs does with the known part.
    raw.send(syncUpdateMessage(partlyKnownEntry(4242, 3, 'Status', ['a', 'b', 'c', 'Succeeded'])))
    raw.send(syncUpdateMessage(encodeCrafted([{ client: 4242, clock: 2, structs: [new Y.Item(Y.createID(4242, 2), null, null, null, null, CONTENT_MAP as unknown as Y.ID, 'Status', new Y.ContentString('elRunning'))] }])))
    const control = await stockAs(path, editor.token, 4343)
    control.content.set('Inputs', { n: 1 })
    await waitFor(async () => (await content(path)).Inputs !== undefined)
    const after = await content(path)
    expect(after.Status).toBeUndefined()
    await raw.close()
    control.destroy()
    await ts.restart()
    expect((await content(path)).Status).toBeUndefined()
  })

  it('a user cannot set their own User.Email over /mux; FullName still works', async () => {
    const me = await signup(ts.url)
    const m = await MuxClient.connect(ts.url, me.token)
    m.doc(me.userId).clientID = 5151
    expect(await m.join(me.userId)).toMatchObject({ ok: true })
    expect(await m.edit(me.userId, (c) => {
      const bio = new Y.Text()
      c.set('Bio', bio)
      bio.insert(0, 'hello')
    })).toMatchObject({ ok: true })
    const forged = await m.sendUpdate(me.userId, partlyKnownEntry(5151, 2, 'Email', ['x', 'y', 'z', 'w', 'v', 'evil@example.com']))
    expect(forged.ok).toBe(false)
    const fresh = await MuxClient.connect(ts.url, me.token)
    expect(await fresh.join(me.userId)).toMatchObject({ ok: true })
    expect(await fresh.patch(me.userId, { FullName: 'Still Me' })).toMatchObject({ ok: true })
    const profile = (await api(ts.url, me.token).request('GET', '/api/me')).body as { email: string; name: string }
    expect(profile.email).toBe(me.email)
    expect(profile.name).toBe('Still Me')
    await m.close()
    await fresh.close()
  })

  it('a Viewer cannot write a Document field through a struct whose first part was garbage-collected', async () => {
    const path = await createDocument(ts.url, admin.token, `${space}/gcdoc`, { title: 'original' })
    const a = await stockAs(path, admin.token, 6161)
    a.content.set('Meta', new Y.Map(Object.entries({ a: 'x', b: 'y' })))
    await waitFor(async () => typeof (await content(path)).Meta === 'object')
    a.destroy()
    // Another client replaces Meta: client 6161's last structs (Meta's entries) are now GC'd.
    await api(ts.url, admin.token).patchNode(path, { Meta: 5 })
    const raw = await openRawSocket(ts.url, `/sync/${path}?token=${viewer.token}`)
    raw.send(syncUpdateMessage(partlyKnownEntry(6161, 1, 'title', ['x', 'y', 'forged'])))
    // The Viewer's own GC-only update (finding 5's shape over /sync) is refused as well.
    raw.send(syncUpdateMessage(encodeCrafted([{ client: 9090, clock: 0, structs: [new Y.GC(Y.createID(9090, 0), 2)] }])))
    await waitFor(() => raw.messages.filter((m) => m[0] === 2).length >= 2)
    await raw.close()
    expect(await content(path)).toEqual({ title: 'original', Meta: 5 })
    // Positive control: the Admin's honest edit of the same field.
    expectStatus(await api(ts.url, admin.token).patchNode(path, { title: 'edited' }), 200)
    expect((await content(path)).title).toBe('edited')
  })
})

describe('[ACC10] finding 2: a /mux Update queued behind a Join cannot take the server down', () => {
  it('a same-client forward reference behind a pending Join is refused; the server and other sockets live', async () => {
    const path = await createDocument(ts.url, editor.token, `${space}/crash`, { a: 1 })
    const m = await MuxClient.connect(ts.url, editor.token)
    const other = await MuxClient.connect(ts.url, admin.token)
    expect(await other.join(path)).toMatchObject({ ok: true })
    const bomb = encodeCrafted([{ client: 777, clock: 0, structs: [itemAfter(777, 0, Y.createID(777, 5), new Y.ContentAny([1])), rootEntry(777, 1, 'b', [1, 2, 3, 4, 5])] }])
    const answer = new Promise<unknown>((resolve) => m.onFrame((f) => f.type === MuxType.Refused && resolve(f)))
    m.send({ type: MuxType.Join, path })
    m.send({ type: MuxType.Update, path, seq: 1, update: bomb })
    expect(await answer).toMatchObject({ code: 'invalid_update' })
    expect(m.isOpen).toBe(true)
    expectStatus(await api(ts.url).request('GET', '/healthz'), 200)
    expect(await other.patch(path, { c: 3 })).toMatchObject({ ok: true })
    expect(await content(path)).toEqual({ a: 1, c: 3 })
    await m.close()
    await other.close()
  })
})

describe('[ACC10] finding 3: a deep PATCH is a clear 400 and leaves the node syncable', () => {
  it('1,500 levels → invalid_patch, nothing changes, the node syncs after a restart', async () => {
    const path = await createDocument(ts.url, editor.token, `${space}/deep`, { keep: 1 })
    let deep: unknown = 1
    for (let i = 0; i < 1500; i++) deep = { d: deep }
    const res = await api(ts.url, editor.token).patchNode(path, { deep } as never)
    expect(res.status).toBe(400)
    expect(errorCode(res)).toBe('invalid_patch')
    // 100,000 levels as raw text (the test itself could not stringify it).
    const arr = await api(ts.url, editor.token).request('PATCH', `/api/nodes/${path}`, {
      rawBody: `{"deepArray":${'['.repeat(100_000)}1${']'.repeat(100_000)}}`,
      contentType: 'application/merge-patch+json',
    })
    expect(arr.status).toBe(400)
    expect(errorCode(arr)).toBe('invalid_patch')
    const put = await api(ts.url, editor.token).putNode(`${space}/deep2`, 'Document', { deep } as never)
    expect(errorCode(put)).toBe('invalid_content')
    expect(await content(path)).toEqual({ keep: 1 })
    await ts.restart()
    const p = stockProvider(ts.url, path, editor.token)
    await p.synced()
    expect(p.json()).toEqual({ keep: 1 })
    p.destroy()
  })
})

describe('[ACC7] finding 4: create goes through the field rules', () => {
  it('an Editor cannot create an ActivityLog with Status, Messages or End, nor a Thread with ExecutionStatus', async () => {
    const http = api(ts.url, editor.token)
    const forged: JsonObject[] = [{ Status: 'Succeeded' }, { Messages: [{ Level: 'Info', Text: 'x', At: 'now' }] }, { End: '2026-01-01T00:00:00Z' }]
    for (const [i, fields] of forged.entries()) {
      const res = await http.putNode(`${space}/_Activity/forged${i}`, 'ActivityLog', { Category: 'x', ...fields })
      expect(res.status).toBe(403)
      expect(errorCode(res)).toBe('forbidden_field')
      expect((await api(ts.url, admin.token).getNode(`${space}/_Activity/forged${i}`)).status).toBe(404)
    }
    const thread = await http.putNode(`${space}/t1`, 'Thread', { ExecutionStatus: 'Executing', Title: 'x' })
    expect(errorCode(thread)).toBe('forbidden_field')
    // Positive control: the allowed fields create fine.
    expectStatus(await http.putNode(`${space}/_Activity/ok`, 'ActivityLog', { Category: 'x', Inputs: { a: 1 }, RequestedStatus: 'Running' }), 201)
    expectStatus(await http.putNode(`${space}/t2`, 'Thread', { Title: 'x' }), 201)
  })
})

describe('[ACC10] finding 5: a Viewer makes no commits', () => {
  it('GC-only updates from a Viewer are refused: no change record, no hint', async () => {
    const path = await createDocument(ts.url, admin.token, `${space}/quiet`, { a: 1 })
    const reader = await MuxClient.connect(ts.url, editor.token)
    expect(await reader.join(path)).toMatchObject({ ok: true })
    const v = await MuxClient.connect(ts.url, viewer.token)
    expect(await v.join(path)).toMatchObject({ ok: true })
    const since = expectStatus(await api(ts.url, admin.token).changesSince(0), 200).body.items.at(-1)!.version
    const hints: number[] = []
    reader.onFrame((f) => f.type === MuxType.Changed && hints.push(f.version))
    for (let i = 0; i < 3; i++) {
      const r = await v.sendUpdate(path, encodeCrafted([{ client: 8080 + i, clock: 0, structs: [new Y.GC(Y.createID(8080 + i, 0), 5)] }]))
      expect(r).toMatchObject({ ok: false, code: 'forbidden' })
    }
    // The next real change is the only one the feed and the hints show.
    const edit = expectStatus(await api(ts.url, admin.token).patchNode(path, { a: 2 }), 200).body as MeshNode
    await waitFor(() => hints.includes(edit.version))
    const items = expectStatus(await api(ts.url, admin.token).changesSince(since), 200).body.items
    expect(items.filter((c) => c.path === path).map((c) => c.version)).toEqual([edit.version])
    expect(hints.every((h) => h >= edit.version)).toBe(true)
    await reader.close()
    await v.close()
  })
})

describe('[AUTH2] finding 7: a session ends with its token', () => {
  it('logout closes that token\'s open /mux and /sync sockets with 4401 at once; other tokens stay', async () => {
    const path = await createDocument(ts.url, editor.token, `${space}/session`, { a: 1 })
    const second = await api(ts.url).request('POST', '/api/auth/login', { body: { email: editor.email, password: editor.password } })
    const otherToken = (second.body as { token: string }).token
    const m = await MuxClient.connect(ts.url, editor.token)
    expect(await m.join(path)).toMatchObject({ ok: true })
    const s = stockProvider(ts.url, path, editor.token, new Y.Doc(), { reconnect: false })
    await s.synced()
    const survivor = await MuxClient.connect(ts.url, otherToken)
    expect(await survivor.join(path)).toMatchObject({ ok: true })
    expectStatus(await api(ts.url, editor.token).request('POST', '/api/auth/logout'), 204)
    expect((await m.closed).code).toBe(4401)
    await waitFor(() => s.closes.some((c) => c.code === 4401))
    const again = await MuxClient.connect(ts.url, editor.token)
    expect((await again.closed).code).toBe(4401)
    expect(await survivor.patch(path, { b: 2 })).toMatchObject({ ok: true })
    s.destroy()
    await survivor.close()
    // The test's other users keep their tokens; the editor signs in again for later tests.
    editor = { ...editor, token: otherToken }
  })
})

describe('[ACC11] finding 8: errors never tell whether a node you cannot read exists', () => {
  it('PUT under an existing unreadable parent answers as under a missing one', async () => {
    const outsider = await signup(ts.url)
    const hidden = await createDocument(ts.url, admin.token, `${space}/hidden`, {})
    const http = api(ts.url, outsider.token)
    const existing = await http.putNode(`${hidden}/x`, 'Document', {})
    const missing = await http.putNode(`${space}/nothing-here/x`, 'Document', {})
    expect(existing.status).toBe(missing.status)
    expect(errorCode(existing)).toBe(errorCode(missing))
    const msg = (r: typeof existing) => (r.body as { error: { message: string } }).error.message.replaceAll(hidden, 'P').replaceAll(`${space}/nothing-here`, 'P')
    expect(msg(existing)).toBe(msg(missing))
    // The same for the node itself: PUT on an unreadable existing node and on a free path.
    const onNode = await http.putNode(hidden, 'Document', {})
    const onFree = await http.putNode(`${space}/free`, 'Document', {})
    expect([onNode.status, errorCode(onNode)]).toEqual([onFree.status, errorCode(onFree)])
  })
})

describe('[ACC10] limits and abuse over /mux', () => {
  it('an Update over the payload limit is Refused payload_too_large; the socket stays and the next edit acks', async () => {
    const small = await startTestServer({ config: { maxPayloadBytes: 64 * 1024 } })
    try {
      const u = await signup(small.url)
      const s = await createSpace(small.url, u.token)
      const path = await createDocument(small.url, u.token, `${s}/big`, { a: 1 })
      const m = await MuxClient.connect(small.url, u.token)
      expect(await m.join(path)).toMatchObject({ ok: true })
      const r = await m.edit(path, (c) => c.set('blob', 'x'.repeat(100 * 1024)))
      expect(r).toMatchObject({ ok: false, code: 'payload_too_large' })
      expect((r as { message: string }).message).toMatch(/65536/)
      expect(m.isOpen).toBe(true)
      const fresh = await MuxClient.connect(small.url, u.token)
      expect(await fresh.join(path)).toMatchObject({ ok: true })
      expect(await fresh.patch(path, { b: 2 })).toMatchObject({ ok: true })
      await m.close()
      await fresh.close()
    } finally {
      await small.cleanup()
    }
  })

  it('a socket that keeps sending refused updates is closed with 4429', async () => {
    const path = await createDocument(ts.url, admin.token, `${space}/flood`, { a: 1 })
    const v = await MuxClient.connect(ts.url, viewer.token)
    expect(await v.join(path)).toMatchObject({ ok: true })
    for (let i = 0; i < 200 && v.isOpen; i++) {
      v.send({ type: MuxType.Update, path, seq: i + 1, update: encodeCrafted([{ client: 3000 + i, clock: 0, structs: [rootEntry(3000 + i, 0, 'a', [i])] }]) })
    }
    expect((await v.closed).code).toBe(4429)
    expect(await content(path)).toEqual({ a: 1 })
  })
})
