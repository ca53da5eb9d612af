import * as Y from 'yjs'
import * as encoding from 'lib0/encoding'
import * as syncProtocol from 'y-protocols/sync'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import { CONTENT_MAP, CloseCode, MuxType, YMessage, encodeMuxFrame } from '../../shared/index.js'
import {
  MuxClient,
  api,
  createDocument,
  createSpace,
  errorCode,
  openRawSocket,
  rawHttp,
  signup,
  startTestServer,
  stockProvider,
  waitFor,
  type StockClient,
  type TestServer,
  type TestUser,
} from '../helpers/index.js'

const MAX_PAYLOAD = 64 * 1024

/** A y-websocket sync-update message carrying `bytes` of fresh content. */
function bigSyncMessage(bytes: number): Uint8Array {
  const doc = new Y.Doc()
  doc.getMap(CONTENT_MAP).set('Big', 'x'.repeat(bytes))
  const e = encoding.createEncoder()
  encoding.writeVarUint(e, YMessage.Sync)
  syncProtocol.writeUpdate(e, Y.encodeStateAsUpdate(doc))
  return encoding.toUint8Array(e)
}

/**
 * Every kind of bad input is answered with its named error code, and the server keeps serving:
 * after each test, `/healthz` and a normal request still work.
 */
describe('server bad input', () => {
  let ts: TestServer
  let user: TestUser
  let space: string
  let doc: string
  const stock: StockClient[] = []

  beforeAll(async () => {
    ts = await startTestServer({ config: { maxPayloadBytes: MAX_PAYLOAD } })
    user = await signup(ts.url)
    space = await createSpace(ts.url, user.token)
    doc = await createDocument(ts.url, user.token, `${space}/doc`, { Title: 'ok' })
  })
  afterEach(async () => {
    for (const c of stock.splice(0)) c.destroy()
    // The server still serves: health, and a normal authenticated request.
    const health = await api(ts.url).get('/healthz')
    expect(health.status).toBe(200)
    expect(health.body).toEqual({ ok: true })
    const normal = await api(ts.url, user.token).getNode(doc)
    expect(normal.status).toBe(200)
    expect(normal.body.content).toMatchObject({ Title: 'ok' })
  })
  afterAll(async () => {
    await ts.cleanup()
  })

  it('[IN1] malformed JSON → 400 invalid_json', async () => {
    const http = api(ts.url, user.token)
    const put = await http.request('PUT', `/api/nodes/${space}/broken`, { rawBody: '{"nodeType": "Document", "content": {' })
    expect(put.status).toBe(400)
    expect(errorCode(put)).toBe('invalid_json')
    const patch = await http.request('PATCH', `/api/nodes/${doc}`, { rawBody: '{not json', contentType: 'application/merge-patch+json' })
    expect(patch.status).toBe(400)
    expect(errorCode(patch)).toBe('invalid_json')
    const signupRes = await api(ts.url).request('POST', '/api/auth/signup', { rawBody: 'nope' })
    expect(signupRes.status).toBe(400)
    expect(errorCode(signupRes)).toBe('invalid_json')
    expect((await http.getNode(`${space}/broken`)).status).toBe(404)
  })

  it('[IN1] a patch that is not a JSON object → 400 invalid_patch, content unchanged', async () => {
    const http = api(ts.url, user.token)
    for (const body of [[1, 2], 'string', 42, null]) {
      const res = await http.patchNode(doc, body)
      expect(res.status, JSON.stringify(body)).toBe(400)
      expect(errorCode(res), JSON.stringify(body)).toBe('invalid_patch')
    }
    expect((await http.getNode(doc)).body.content).toEqual({ Title: 'ok' })
  })

  it('[IN1] content failing its node type schema → 422 invalid_content', async () => {
    const http = api(ts.url, user.token)
    const noSubject = await http.putNode(`${space}/_Access/nobody_Access`, 'AccessAssignment', { Role: 'Viewer' })
    expect(noSubject.status).toBe(422)
    expect(errorCode(noSubject)).toBe('invalid_content')
    const badRole = await http.putNode(`${space}/_Access/nobody_Access`, 'AccessAssignment', { Subject: 'nobody', Role: 'Overlord' })
    expect(errorCode(badRole)).toBe('invalid_content')
    expect((await http.getNode(`${space}/_Access/nobody_Access`)).status).toBe(404)

    expect((await http.putNode(`${space}/act`, 'ActivityLog', {})).status).toBe(201)
    const bogus = await http.patchNode(`${space}/act`, { RequestedStatus: 'Bogus' })
    expect(bogus.status).toBe(422)
    expect(errorCode(bogus)).toBe('invalid_content')
    expect((await http.getNode(`${space}/act`)).body.content).toEqual({})
  })

  it('[IN1] an invalid node type name → invalid_node_type', async () => {
    const res = await api(ts.url, user.token).putNode(`${space}/typed`, '9 bad type!', {})
    expect(res.status).toBe(422)
    expect(errorCode(res)).toBe('invalid_node_type')
  })

  it('[IN1] bad paths → 400 invalid_path (space, reserved characters, empty segment)', async () => {
    const http = api(ts.url, user.token)
    const spaced = await http.get('/api/nodes/a%20b')
    expect(spaced.status).toBe(400)
    expect(errorCode(spaced)).toBe('invalid_path')
    for (const rawPath of ['/api/nodes/a$b', `/api/nodes/${space}//x`, `/api/nodes/${space}/a%2Fb`]) {
      const res = await rawHttp(ts.url, 'PUT', rawPath, { token: user.token, body: JSON.stringify({ nodeType: 'Document', content: {} }) })
      expect(res.status, rawPath).toBe(400)
      expect(errorCode(res), rawPath).toBe('invalid_path')
    }
  })

  it('[IN1] ".." segments are refused with 400 invalid_path, never resolved to another node', async () => {
    const target = await createDocument(ts.url, user.token, `${space}/target`, { Kept: true })
    for (const rawPath of [`/api/nodes/${space}/x/../target`, `/api/nodes/${space}/x/%2e%2e/target`, `/api/nodes/${space}/..`]) {
      const res = await rawHttp(ts.url, 'PATCH', rawPath, { token: user.token, body: JSON.stringify({ Hacked: true }), contentType: 'application/merge-patch+json' })
      expect(res.status, rawPath).toBe(400)
      expect(errorCode(res), rawPath).toBe('invalid_path')
    }
    expect((await api(ts.url, user.token).getNode(target)).body.content).toEqual({ Kept: true })
  })

  it('[IN1] a body over maxPayloadBytes → 413 payload_too_large', async () => {
    const http = api(ts.url, user.token)
    const big = 'x'.repeat(MAX_PAYLOAD + 1024)
    const put = await http.putNode(`${space}/big`, 'Document', { Big: big })
    expect(put.status).toBe(413)
    expect(errorCode(put)).toBe('payload_too_large')
    const patch = await http.patchNode(doc, { Big: big })
    expect(patch.status).toBe(413)
    expect(errorCode(patch)).toBe('payload_too_large')
    expect((await http.getNode(`${space}/big`)).status).toBe(404)
  })

  it('[IN1] a WebSocket frame over the limit closes that socket (1009 or 4413); the others keep syncing', async () => {
    const a = stockProvider(ts.url, doc, user.token)
    const b = stockProvider(ts.url, doc, user.token)
    stock.push(a, b)
    await Promise.all([a.synced(), b.synced()])

    const sync = await openRawSocket(ts.url, `/sync/${doc}?token=${user.token}`)
    sync.send(bigSyncMessage(MAX_PAYLOAD * 2))
    expect([CloseCode.MessageTooBig, CloseCode.PayloadTooLarge]).toContain((await sync.closed).code)

    const mux = await MuxClient.connect(ts.url, user.token)
    expect(await mux.join(doc)).toMatchObject({ ok: true })
    mux.send({ type: MuxType.Sync, path: doc, message: bigSyncMessage(MAX_PAYLOAD * 2) })
    expect([CloseCode.MessageTooBig, CloseCode.PayloadTooLarge]).toContain((await mux.closed).code)

    a.content.set('AfterBig', 1)
    await waitFor(() => b.content.get('AfterBig') === 1, { description: 'b still syncs' })
    expect((await api(ts.url, user.token).getNode(doc)).body.content?.Big).toBeUndefined()
    a.content.delete('AfterBig')
    await waitFor(async () => (await api(ts.url, user.token).getNode(doc)).body.content?.AfterBig === undefined)
  })

  it('[IN2] garbage on /sync closes that socket with 1002; another socket on the node keeps syncing', async () => {
    const a = stockProvider(ts.url, doc, user.token)
    const b = stockProvider(ts.url, doc, user.token)
    stock.push(a, b)
    await Promise.all([a.synced(), b.synced()])
    const garbage = [
      new Uint8Array([YMessage.Sync, 9, 1, 2, 3]), // unknown sync step
      new Uint8Array([YMessage.Sync, 2, 0xff, 0xff, 0xff, 0xff, 0x0f]), // an update longer than the frame
      new Uint8Array([0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]), // not a varUint
    ]
    for (const bytes of garbage) {
      const raw = await openRawSocket(ts.url, `/sync/${doc}?token=${user.token}`)
      raw.send(bytes)
      expect((await raw.closed).code, `garbage ${Array.from(bytes).join(',')}`).toBe(CloseCode.ProtocolError)
    }
    expect(a.closes).toEqual([])
    a.content.set('AfterGarbage', 'sync')
    await waitFor(() => b.content.get('AfterGarbage') === 'sync', { description: 'b still syncs' })
    a.content.delete('AfterGarbage')
    await waitFor(async () => (await api(ts.url, user.token).getNode(doc)).body.content?.AfterGarbage === undefined)
  })

  it('[IN2] garbage on /mux closes that socket with 1002; another mux socket keeps working', async () => {
    const good = await MuxClient.connect(ts.url, user.token)
    const watcher = await MuxClient.connect(ts.url, user.token)
    try {
      expect(await good.join(doc)).toMatchObject({ ok: true })
      expect(await watcher.join(doc)).toMatchObject({ ok: true })
      const garbage = [
        new Uint8Array([0xff, 0xff, 0xff]),
        new Uint8Array([99, 0]), // unknown frame type
        encodeMuxFrame({ type: MuxType.Join, path: doc }).slice(0, 3), // truncated
      ]
      for (const bytes of garbage) {
        const bad = await MuxClient.connect(ts.url, user.token)
        bad.sendRaw(bytes)
        expect((await bad.closed).code, `garbage ${Array.from(bytes).join(',')}`).toBe(CloseCode.ProtocolError)
      }
      expect(good.isOpen).toBe(true)
      expect(await good.edit(doc, (c) => c.set('AfterMuxGarbage', true))).toMatchObject({ ok: true })
      await waitFor(() => watcher.content(doc).get('AfterMuxGarbage') === true, { description: 'watcher still receives' })
      expect(await good.edit(doc, (c) => c.delete('AfterMuxGarbage'))).toMatchObject({ ok: true })
    } finally {
      await Promise.all([good.close(), watcher.close()])
    }
  })

  it('signup with a taken email → 409; login with a bad password → 401', async () => {
    const anon = api(ts.url)
    const taken = await anon.post('/api/auth/signup', { email: user.email, password: 'another password', name: 'Dup' })
    expect(taken.status).toBe(409)
    expect(errorCode(taken)).toMatch(/^(email_taken|already_exists)$/)
    const bad = await anon.post('/api/auth/login', { email: user.email, password: 'wrong password' })
    expect(bad.status).toBe(401)
    expect(errorCode(bad)).toMatch(/^(invalid_credentials|unauthorized)$/)
    const unknown = await anon.post('/api/auth/login', { email: 'nobody@test.weft.example', password: 'wrong password' })
    expect(unknown.status).toBe(401)
    const good = await anon.post<{ userId: string }>('/api/auth/login', { email: user.email, password: user.password })
    expect(good.status).toBe(200)
    expect(good.body.userId).toBe(user.userId)
  })
})
