import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import * as Y from 'yjs'
import { CONTENT_MAP, SYSTEM, userPrincipal, type JsonValue, type NodePath, type UserId } from '../../shared/index.js'
import { MuxClient, api, createDocument, createSpace, errorCode, grantRole, signup, startTestServer, type TestServer, type TestUser } from '../helpers/index.js'

let ts: TestServer
let owner: TestUser
let editor: TestUser
let viewer: TestUser
let space: string
const muxes: MuxClient[] = []
let n = 0

beforeAll(async () => {
  ts = await startTestServer()
  owner = await signup(ts.url)
  editor = await signup(ts.url)
  viewer = await signup(ts.url)
  space = await createSpace(ts.url, owner.token)
  await grantRole(ts.url, owner.token, space, editor.userId, 'Editor')
  await grantRole(ts.url, owner.token, space, viewer.userId, 'Viewer')
})
afterEach(async () => {
  await Promise.all(muxes.splice(0).map((m) => m.close()))
})
afterAll(() => ts.cleanup())

const mux = async (token: string) => {
  const m = await MuxClient.connect(ts.url, token)
  muxes.push(m)
  return m
}

/**
 * [ACC6] [ACC7] [MOVE5] Writes that change nothing, and writes that name a field at its current
 * value, answered only as the same write's change would be (found by an outside look, stop 42).
 */
describe('writes that change nothing', () => {
  it('[ACC7] over Yjs a Viewer\'s empty update, and one deleting only what is deleted, are acknowledged (a stock client\'s sync step 2 is one); over HTTP an empty patch of hers is refused', async () => {
    const path = await createDocument(ts.url, owner.token, `${space}/r1-${++n}`, { Title: 'x', Gone: 'y' })
    expect((await api(ts.url, owner.token).patchNode(path, { Gone: null })).status).toBe(200)
    expect(errorCode(await api(ts.url, viewer.token).patchNode(path, {}))).toBe('forbidden')
    const m = await mux(viewer.token)
    expect((await m.join(path)).ok).toBe(true)
    const empty = Y.encodeStateAsUpdate(new Y.Doc())
    const r1 = await m.sendUpdate(path, empty)
    // The full delete set of the doc as the client holds it (what a stock provider's step 2 carries).
    const ds = Y.encodeStateAsUpdate(m.doc(path), Y.encodeStateVector(m.doc(path)))
    const r2 = await m.sendUpdate(path, ds)
    expect([r1.ok, r2.ok]).toEqual([true, true])
  })

  it('[ACC6] an append of nothing is refused to a Viewer as a patch of nothing is, and answered to an Editor', async () => {
    const path = (await createDocument(ts.url, owner.token, `${space}/r2-${++n}`, { Items: ['a'] })) as NodePath
    const v = userPrincipal(viewer.userId as UserId)
    await expect(ts.server.nodes.patch(v, path, {})).rejects.toMatchObject({ code: 'forbidden' })
    await expect(ts.server.nodes.append(v, path, 'Items', [])).rejects.toMatchObject({ code: 'forbidden' })
    await expect(ts.server.nodes.append(v, path, 'Items', [], 'engine', { patch: () => ({}) })).rejects.toMatchObject({ code: 'forbidden' })
    await expect(ts.server.nodes.append(v, path, 'Items', [], 'engine', { patch: () => undefined })).rejects.toMatchObject({ code: 'forbidden' })
    const e = userPrincipal(editor.userId as UserId)
    await expect(ts.server.nodes.append(e, path, 'Items', [])).resolves.toMatchObject({ path })
    await expect(ts.server.nodes.append(SYSTEM, path, 'Items', [])).resolves.toMatchObject({ path })
  })

  it('[ACC6] an Editor\'s patch naming only a system field at its value is forbidden_field, over HTTP as over Yjs; a PUT as it stands is answered', async () => {
    const path = `${space}/r3-${++n}`
    await ts.server.nodes.create(SYSTEM, path as NodePath, { nodeType: 'Code', content: { Source: '', LastActivityPath: 'x' } })
    const http = api(ts.url, editor.token)
    expect(errorCode(await http.patchNode(path, { LastActivityPath: 'y' }))).toBe('forbidden_field')
    expect(errorCode(await http.patchNode(path, { LastActivityPath: 'x' }))).toBe('forbidden_field')
    const cur = (await http.getNode(path)).body
    expect((await http.putNode(path, 'Code', cur.content, cur.name)).status).toBe(200)
    const m = await mux(editor.token)
    expect((await m.join(path)).ok).toBe(true)
    const r = await m.edit(path, (c) => c.set('LastActivityPath', 'x'))
    expect(r.ok ? 'ok' : r.code).toBe('forbidden_field')
  })

  it('[PATCH2] a write naming an appended log (a Y.Array) at its current value leaves it alone: a concurrent append survives', async () => {
    const path = `${space}/_Activity/r4-${++n}` as NodePath
    // A draft run the Viewer made (CreatedBy: she steers RequestedStatus through the owner rule).
    await ts.server.nodes.create(SYSTEM, path, { nodeType: 'ActivityLog', content: { Category: 'Script', Inputs: {}, Messages: [], CreatedBy: viewer.userId } })
    await ts.server.nodes.append(SYSTEM, path, 'Messages', [{ Text: 'line 1' }] as unknown as JsonValue[])
    const ln = await ts.server.nodes.acquireDoc(path)
    expect(ln.doc.getMap(CONTENT_MAP).get('Messages')).toBeInstanceOf(Y.Array)
    // Another copy of the doc (another instance, or a relay not yet arrived) appends meanwhile.
    const other = new Y.Doc()
    Y.applyUpdate(other, Y.encodeStateAsUpdate(ln.doc))
    ;(other.getMap(CONTENT_MAP).get('Messages') as Y.Array<unknown>).push([{ Text: 'line 2 (concurrent)' }])
    const concurrent = Y.encodeStateAsUpdate(other, Y.encodeStateVector(ln.doc))
    // The Viewer-owner asks for a cancel and names Messages as she read it: answered (her RequestedStatus).
    const current = (await api(ts.url, viewer.token).getNode(path)).body.content.Messages
    const res = await api(ts.url, viewer.token).patchNode(path, { RequestedStatus: 'Cancelled', Messages: current })
    expect(res.status).toBe(200)
    // Messages, a system field, is not written: still the shared array, so the concurrent line merges in.
    expect(ln.doc.getMap(CONTENT_MAP).get('Messages')).toBeInstanceOf(Y.Array)
    Y.applyUpdate(ln.doc, concurrent)
    expect((ln.doc.getMap(CONTENT_MAP).toJSON() as { Messages: unknown[] }).Messages).toHaveLength(2)
  })

  it('[MOVE5] a DELETE of a subtree holding a node the deleter is Denied on is refused, as its trash is, and deletes nothing', async () => {
    const admin2 = await signup(ts.url)
    await grantRole(ts.url, owner.token, space, admin2.userId, 'Admin')
    const folder = await createDocument(ts.url, owner.token, `${space}/r5-${++n}`, {})
    const secret = await createDocument(ts.url, owner.token, `${folder}/secret`, { Note: 'private' })
    await grantRole(ts.url, owner.token, secret, admin2.userId, 'Viewer', true)
    const http = api(ts.url, admin2.token)
    expect((await http.getNode(secret)).status).toBe(403)
    const trash = await http.post(`/api/nodes/${folder}/trash`, {})
    expect(trash.status).toBe(403)
    const del = await http.deleteNode(folder)
    expect(del.status).toBe(403)
    expect(errorCode(del)).toBe('forbidden')
    expect((await api(ts.url, owner.token).getNode(secret)).status).toBe(200)
    expect((await api(ts.url, owner.token).getNode(folder)).status).toBe(200)
    // Readable again, the same delete goes through.
    await grantRole(ts.url, owner.token, secret, admin2.userId, 'Viewer')
    expect((await http.deleteNode(folder)).status).toBe(204)
    expect((await api(ts.url, owner.token).getNode(secret)).status).toBe(404)
  })
})

describe('[THR26] a thread\'s created-with Posted', () => {
  it('cannot be removed or forged over Yjs; a PUT leaving it out keeps it; rename keeps it', async () => {
    const path = `${space}/c1-${++n}`
    expect((await api(ts.url, editor.token).putNode(path, 'Thread', { Agent: { Kind: 'builtin' } } as never)).status).toBe(201)
    const m = await mux(editor.token)
    expect((await m.join(path)).ok).toBe(true)
    const forged = await m.edit(path, (c) => (c.get('Posted') as Y.Map<unknown>).set('x', 0))
    expect(forged.ok ? 'ok' : forged.code).toBe('forbidden_field')
    const m2 = await mux(editor.token)
    expect((await m2.join(path)).ok).toBe(true)
    const del = await m2.edit(path, (c) => c.delete('Posted'))
    expect(del.ok ? 'ok' : del.code).toBe('forbidden_field')
    const nulled = await api(ts.url, editor.token).patchNode(path, { Posted: null })
    expect(errorCode(nulled)).toBe('forbidden_field')
    expect((await api(ts.url, editor.token).putNode(path, 'Thread', { Agent: { Kind: 'script', CodePath: `${space}/c` } } as never)).status).toBe(200)
    expect((await api(ts.url, editor.token).post(`/api/nodes/${path}/rename`, { name: 'renamed' })).status).toBeLessThan(300)
    expect((await api(ts.url, owner.token).getNode(path)).body.content.Posted).toEqual({})
  })
})

describe('no-op writes that stay answered', () => {
  it('a run\'s owner without Update (her own fields, a PUT as it stands), an Editor on a node with system fields, renames to the same name', async () => {
    const run = `${space}/_Activity/h1-${++n}` as NodePath
    await ts.server.nodes.create(SYSTEM, run, { nodeType: 'ActivityLog', content: { Category: 'Script', Inputs: { a: 1 }, Messages: [], CreatedBy: viewer.userId, RequestedStatus: 'Cancelled' } })
    const v = api(ts.url, viewer.token)
    expect((await v.patchNode(run, { RequestedStatus: 'Cancelled' })).status).toBe(200)
    expect((await v.patchNode(run, { Inputs: { a: 1 } })).status).toBe(200)
    const cur = (await v.getNode(run)).body
    expect((await v.putNode(run, 'ActivityLog', cur.content, cur.name)).status).toBe(200)
    expect(errorCode(await v.patchNode(run, {}))).toBe('forbidden')
    expect(errorCode(await v.post(`/api/nodes/${run}/rename`, { name: cur.name }))).toBe('forbidden')
    const code = `${space}/h1code-${n}`
    await ts.server.nodes.create(SYSTEM, code as NodePath, { nodeType: 'Code', content: { Source: 'x', LastActivityPath: 'p' } })
    const e = api(ts.url, editor.token)
    const c = (await e.getNode(code)).body
    expect((await e.putNode(code, 'Code', c.content, c.name)).status).toBe(200)
    expect((await e.post(`/api/nodes/${code}/rename`, { name: c.name })).status).toBe(200)
    // A PUT leaving out a field she cannot write keeps it (it was forbidden_field): she edits what she may.
    expect((await e.putNode(code, 'Code', { Source: 'y' }, c.name)).status).toBe(200)
    expect((await e.getNode(code)).body.content).toEqual({ Source: 'y', LastActivityPath: 'p' })
  })
})

describe('[PATCH4] a member named __proto__', () => {
  it('is kept by a PUT that creates or replaces, as a PATCH keeps it', async () => {
    const path = `${space}/proto-${++n}`
    const http = api(ts.url, owner.token)
    const content = JSON.parse('{"__proto__":"x","A":1}')
    expect((await http.putNode(path, 'Document', content)).status).toBe(201)
    expect((await http.getNode(path)).body.content).toEqual(content)
    expect((await http.patchNode(path, JSON.parse('{"__proto__":"y"}'))).status).toBe(200)
    const got = (await http.getNode(path)).body
    expect(Object.getOwnPropertyDescriptor(got.content, '__proto__')?.value).toBe('y')
    expect((await http.putNode(path, 'Document', got.content, got.name)).status).toBe(200)
    expect((await http.getNode(path)).body.content).toEqual(got.content)
    const replaced = JSON.parse('{"__proto__":"z"}')
    expect((await http.putNode(path, 'Document', replaced, got.name)).status).toBe(200)
    expect((await http.getNode(path)).body.content).toEqual(replaced)
  })
})
