import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import {
  MuxClient,
  api,
  createDocument,
  createGroup,
  createSpace,
  errorCode,
  grantRole,
  rawHttp,
  signup,
  startTestServer,
  stockProvider,
  waitFor,
  type TestServer,
  type TestUser,
} from '../helpers/index.js'
import { SYSTEM, type NodePath } from '../../shared/index.js'

/** Move, trash and restore over a real server: rights on both ends, atomicity, clients told. */
describe('move and trash', () => {
  let ts: TestServer
  let admin: TestUser
  let viewer: TestUser
  let editor: TestUser
  let space: string
  let other: string

  beforeAll(async () => {
    ts = await startTestServer()
    admin = await signup(ts.url)
    viewer = await signup(ts.url)
    editor = await signup(ts.url)
    space = await createSpace(ts.url, admin.token)
    other = await createSpace(ts.url, admin.token)
    await grantRole(ts.url, admin.token, space, viewer.userId, 'Viewer')
    await grantRole(ts.url, admin.token, space, editor.userId, 'Editor')
  })
  afterAll(() => ts.cleanup())

  const move = (token: string, from: string, to: string) => api(ts.url, token).post<{ path: string; moved: number }>(`/api/nodes/${from}/move`, { to })

  it('[MOVE1] [MOVE2] moves a node with its children, access assignments and Yjs history to another space', async () => {
    const a = api(ts.url, admin.token)
    const root = await createDocument(ts.url, admin.token, `${space}/plans`, { Title: 'Plans' })
    await createDocument(ts.url, admin.token, `${root}/q3`, { Title: 'Q3' })
    await grantRole(ts.url, admin.token, root, editor.userId, 'Viewer')
    const res = await move(admin.token, root, `${other}/plans`)
    expect(res.status).toBe(200)
    expect(res.body).toEqual({ path: `${other}/plans`, moved: 3 })
    expect((await a.getNode(`${other}/plans/q3`)).body.content).toEqual({ Title: 'Q3' })
    expect((await a.getNode(`${other}/plans/_Access/${editor.userId}_Access`)).status).toBe(200)
    expect((await a.getNode(`${space}/plans/q3`)).status).toBe(404)
    // The moved assignment governs the new place: the editor reads it there as a Viewer.
    expect((await api(ts.url, editor.token).getNode(`${other}/plans/q3`)).status).toBe(200)
    expect(errorCode(await api(ts.url, editor.token).patchNode(`${other}/plans/q3`, { Title: 'x' }))).toBe('forbidden')
    // The Yjs log moved too: a stock client syncs the moved node's content.
    const c = stockProvider(ts.url, `${other}/plans`, admin.token)
    await c.synced()
    expect(c.json()).toEqual({ Title: 'Plans' })
    c.destroy()
  })

  it('[MOVE3] a read of the old path says where it went, to a reader of the new place only', async () => {
    const root = await createDocument(ts.url, admin.token, `${space}/memo`, { Title: 'Memo' })
    expect((await move(admin.token, root, `${other}/memo`)).status).toBe(200)
    const gone = await api(ts.url, admin.token).getNode(`${space}/memo`)
    expect(gone.status).toBe(404)
    expect(gone.body.error).toMatchObject({ code: 'moved', to: `${other}/memo` })
    // A child of a moved node resolves too.
    const viewerGone = await api(ts.url, viewer.token).getNode(`${space}/memo`)
    expect(viewerGone.status).toBe(404)
    expect(errorCode(viewerGone)).toBe('not_found')
  })

  it('[MOVE1] refuses: Viewer, a Denied destination, an existing target, into itself, top level, Admin, homes, reserved places', async () => {
    const doc = await createDocument(ts.url, admin.token, `${space}/refuse`, { Title: 'R' })
    await createDocument(ts.url, admin.token, `${space}/taken`, {})
    const locked = await createDocument(ts.url, admin.token, `${space}/locked`, {})
    await grantRole(ts.url, admin.token, locked, editor.userId, 'Viewer', true)
    const cases: [string, string, string, string][] = [
      [viewer.token, doc, `${space}/elsewhere`, 'forbidden'],
      [editor.token, doc, `${locked}/inside`, 'forbidden'],
      [admin.token, doc, `${space}/taken`, 'conflict'],
      [admin.token, doc, `${doc}/child`, 'invalid_move'],
      [admin.token, doc, `toplevel${Date.now()}`, 'invalid_move'],
      [admin.token, space, `${other}/s`, 'invalid_move'],
      [admin.token, 'Admin', `${other}/a`, 'forbidden'],
      [admin.token, admin.userId, `${other}/home`, 'invalid_move'],
      [admin.token, doc, `Admin/${doc.replace('/', '_x')}`, 'invalid_move'],
      [admin.token, doc, `${space}/_Access/x`, 'invalid_move'],
      [admin.token, `${space}/_Access/${viewer.userId}_Access`, `${other}/acc`, 'invalid_move'],
      [viewer.token, doc, `${admin.userId}/stolen`, 'forbidden'],
    ]
    for (const [token, from, to, code] of cases) {
      const res = await move(token, from, to)
      expect([from, to, errorCode(res)]).toEqual([from, to, code])
    }
    expect((await api(ts.url, admin.token).getNode(doc)).body.content).toEqual({ Title: 'R' })
  })

  it('[MOVE1] crafted paths: `..`, `%2F`, unicode and a non-string target are refused with a code', async () => {
    const doc = await createDocument(ts.url, admin.token, `${space}/crafted`, {})
    const bad = [`${space}/../${other}/x`, `${space}/a%2Fb`, `${space}/日本`, `${space}/ a`, '', `${space}//x`]
    for (const to of bad) expect(errorCode(await move(admin.token, doc, to))).toBe('invalid_path')
    expect(errorCode(await api(ts.url, admin.token).post(`/api/nodes/${doc}/move`, { to: 42 }))).toBe('invalid_request')
    const raw = await rawHttp(ts.url, 'POST', `/api/nodes/${space}/..%2F${other}/move`, { token: admin.token, body: JSON.stringify({ to: `${other}/y` }) })
    expect(raw.status).toBe(400)
    const dots = await rawHttp(ts.url, 'POST', `/api/nodes/${space}/../${other}/move`, { token: admin.token, body: JSON.stringify({ to: `${other}/y` }) })
    expect([400, 404]).toContain(dots.status)
    expect((await api(ts.url, admin.token).getNode(doc)).status).toBe(200)
  })

  it('[MOVE4] a group keeps its place, and so does a running run', async () => {
    const folder = await createDocument(ts.url, admin.token, `${space}/teamfolder`, {})
    await createGroup(ts.url, admin.token, `${folder}/Team`)
    expect(errorCode(await move(admin.token, folder, `${other}/teamfolder`))).toBe('invalid_move')
    const runs = await createDocument(ts.url, admin.token, `${space}/runs`, {})
    const a = api(ts.url, admin.token)
    expect((await a.putNode(`${runs}/_Activity/r1`, 'ActivityLog', { Category: 'x', Inputs: {}, RequestedStatus: 'Running' })).status).toBeLessThan(300)
    const refused = await move(admin.token, runs, `${other}/runs`)
    expect(errorCode(refused)).toBe('conflict')
  })

  it('[MOVE2] a client with the old path open over /sync and /mux is told it moved', async () => {
    const doc = await createDocument(ts.url, admin.token, `${space}/live`, { Title: 'Live' })
    const c = stockProvider(ts.url, doc, admin.token)
    await c.synced()
    const m = await MuxClient.connect(ts.url, admin.token)
    expect(await m.join(doc)).toMatchObject({ ok: true })
    expect((await move(admin.token, doc, `${other}/live`)).status).toBe(200)
    await waitFor(() => c.closes.length > 0)
    expect(c.closes[0]).toMatchObject({ code: 4404 })
    expect(c.closes[0]!.reason).toContain('moved')
    await waitFor(() => m.frames.some((f) => (f as { type?: number; code?: string }).code === 'moved'))
    c.destroy()
    await m.close()
  })

  it('[MOVE5] [MOVE6] trash hides the subtree from everyone but the Admins; restore puts it back; a taken place refuses', async () => {
    const a = api(ts.url, admin.token)
    const doc = await createDocument(ts.url, admin.token, `${space}/bin`, { Title: 'Bin' })
    await createDocument(ts.url, admin.token, `${doc}/child`, { Title: 'Child' })
    expect(errorCode(await api(ts.url, viewer.token).post(`/api/nodes/${doc}/trash`))).toBe('forbidden')
    const trashed = await a.post<{ trashPath: string; originalPath: string }>(`/api/nodes/${doc}/trash`)
    expect(trashed.status).toBe(200)
    const { trashPath } = trashed.body
    expect((await a.getNode(doc)).status).toBe(404)
    expect((await api(ts.url, viewer.token).getNode(`${trashPath}/child`)).status).toBe(403)
    expect((await api(ts.url, editor.token).getNode(trashPath)).status).toBe(403)
    const listed = await a.queryNodes({ parent: space })
    expect(listed.body.items.map((n) => n.path)).not.toContain(trashPath)
    expect((await a.queryNodes({ nodeType: 'Document', where: { Title: 'Child' } })).body.items).toEqual([])
    expect(errorCode(await api(ts.url, viewer.token).get(`/api/trash/${space}`))).toBe('forbidden')
    const list = await a.get<{ items: { path: string; originalPath: string; name: string; deletedBy: string }[] }>(`/api/trash/${space}`)
    expect(list.body.items).toContainEqual(expect.objectContaining({ path: trashPath, originalPath: doc, deletedBy: admin.userId }))
    // The place is taken meanwhile: restore refuses with the reason.
    await createDocument(ts.url, admin.token, doc, { Title: 'New' })
    const refused = await a.post(`/api/nodes/${trashPath}/restore`)
    expect(errorCode(refused)).toBe('conflict')
    expect(JSON.stringify(refused.body)).toContain('something else now stands')
    expect((await a.deleteNode(doc)).status).toBe(204)
    expect(errorCode(await api(ts.url, editor.token).post(`/api/nodes/${trashPath}/restore`))).toBe('forbidden')
    expect((await a.post(`/api/nodes/${trashPath}/restore`)).body).toEqual({ path: doc })
    expect((await a.getNode(`${doc}/child`)).body.content).toEqual({ Title: 'Child' })
    expect((await api(ts.url, viewer.token).getNode(`${doc}/child`)).status).toBe(200)
    expect((await a.get<{ items: unknown[] }>(`/api/trash/${space}`)).body.items).not.toContainEqual(expect.objectContaining({ path: trashPath }))
  })

  it('[MOVE6] an Admin purges a trash entry for good', async () => {
    const a = api(ts.url, admin.token)
    const doc = await createDocument(ts.url, admin.token, `${space}/purge`, {})
    const { trashPath } = (await a.post<{ trashPath: string }>(`/api/nodes/${doc}/trash`)).body
    expect((await a.deleteNode(trashPath)).status).toBe(204)
    expect((await a.get<{ items: { path: string }[] }>(`/api/trash/${space}`)).body.items.map((e) => e.path)).not.toContain(trashPath)
    expect(errorCode(await a.post(`/api/nodes/${trashPath}/restore`))).toBe('not_found')
  })

  it('[ACC14] a member moved to another group, or trashed, holds what the group they are in now holds, at once (found by read-oracle.property.test.ts, seed 4)', async () => {
    const member = await signup(ts.url)
    const a = api(ts.url, admin.token)
    const b = api(ts.url, member.token)
    const doc = await createDocument(ts.url, admin.token, `${space}/crew-only`, { Title: 'Crew' })
    const crew = await createGroup(ts.url, admin.token, `${space}/Crew`)
    const guests = await createGroup(ts.url, admin.token, `${space}/Guests`)
    await grantRole(ts.url, admin.token, doc, crew, 'Viewer')
    expect((await a.putNode(`${crew}/${member.userId}_Membership`, 'Membership', {})).status).toBe(201)
    expect((await b.getNode(doc)).status).toBe(200)
    // Moved to a group that holds nothing there: the Crew's role is gone.
    expect((await move(admin.token, `${crew}/${member.userId}_Membership`, `${guests}/${member.userId}_Membership`)).status).toBe(200)
    expect((await b.getNode(doc)).status).toBe(403)
    const mux = await MuxClient.connect(ts.url, member.token)
    expect(await mux.join(doc)).toMatchObject({ ok: false, code: 'forbidden' })
    await mux.close()
    // And the group they are in now counts.
    await grantRole(ts.url, admin.token, doc, guests, 'Viewer')
    expect((await b.getNode(doc)).status).toBe(200)
    // The app's Delete of the member: to the trash; a restore brings the membership back.
    const { trashPath } = (await a.post<{ trashPath: string }>(`/api/nodes/${guests}/${member.userId}_Membership/trash`)).body
    expect((await b.getNode(doc)).status).toBe(403)
    expect((await a.post(`/api/nodes/${trashPath}/restore`)).status).toBe(200)
    expect((await b.getNode(doc)).status).toBe(200)
    // What a restart rebuilds from storage agrees.
    await ts.restart()
    expect((await api(ts.url, member.token).getNode(doc)).status).toBe(200)
  })

  it('[ACC16] a moved subtree holding more access assignments than one query page takes every one of them along in the index: a Denied past the first page still holds', async () => {
    const reader = await signup(ts.url)
    const big = await createDocument(ts.url, admin.token, `${space}/big`, { Title: 'Big' })
    await grantRole(ts.url, admin.token, big, reader.userId, 'Viewer')
    // 1,000 assignments sort before the one that matters (written as the system: this is set-up).
    const { nodes } = ts.server
    for (let i = 0; i < 1000; i++) {
      const scope = `${big}/a${String(i).padStart(4, '0')}` as NodePath
      await nodes.create(SYSTEM, scope, { nodeType: 'Document', name: `a${i}`, content: {} })
      await nodes.create(SYSTEM, `${scope}/_Access/${reader.userId}_Access` as NodePath, { nodeType: 'AccessAssignment', name: 'grant', content: { Subject: reader.userId, Role: 'Viewer' } })
    }
    const secret = await createDocument(ts.url, admin.token, `${big}/zz-secret`, { Title: 'Not for the reader' })
    await grantRole(ts.url, admin.token, secret, reader.userId, 'Viewer', true)
    const r = api(ts.url, reader.token)
    expect((await r.getNode(secret)).status).toBe(403)
    expect((await move(admin.token, big, `${other}/big`)).status).toBe(200)
    // The Denied moved with its node: the reader reads the rest of the moved subtree, never the secret.
    expect((await r.getNode(`${other}/big/a0999`)).status).toBe(200)
    expect((await r.getNode(`${other}/big/zz-secret`)).status).toBe(403)
    expect((await r.getNode(`${other}/big`)).status).toBe(200)
    // And a restart, which rebuilds the index from storage, agrees.
    await ts.restart()
    expect((await api(ts.url, reader.token).getNode(`${other}/big/zz-secret`)).status).toBe(403)
  }, 120_000)

  it('[MOVE2] survives a restart: the moved subtree and the trash are durable', async () => {
    const doc = await createDocument(ts.url, admin.token, `${space}/durable`, { Title: 'D' })
    await move(admin.token, doc, `${other}/durable`)
    await ts.restart()
    expect((await api(ts.url, admin.token).getNode(`${other}/durable`)).body.content).toEqual({ Title: 'D' })
    expect(errorCode(await api(ts.url, admin.token).getNode(doc))).toBe('moved')
  })
})

describe('rename', () => {
  let ts: TestServer
  beforeAll(async () => {
    ts = await startTestServer()
  })
  afterAll(() => ts.cleanup())

  it('[MOVE8] renames to any Unicode name and keeps the path; a Viewer and bad names are refused', async () => {
    const admin = await signup(ts.url)
    const viewer = await signup(ts.url)
    const space = await createSpace(ts.url, admin.token)
    await grantRole(ts.url, admin.token, space, viewer.userId, 'Viewer')
    const doc = await createDocument(ts.url, admin.token, `${space}/notes`, { Title: 'x' })
    const a = api(ts.url, admin.token)
    const res = await a.post<{ path: string; name: string; content: unknown }>(`/api/nodes/${doc}/rename`, { name: '  日本語のメモ 🚀 ' })
    expect(res.status).toBe(200)
    expect(res.body).toMatchObject({ path: doc, name: '日本語のメモ 🚀', content: { Title: 'x' } })
    expect((await a.getNode(doc)).body.name).toBe('日本語のメモ 🚀')
    expect(errorCode(await api(ts.url, viewer.token).post(`/api/nodes/${doc}/rename`, { name: 'Mine' }))).toBe('forbidden')
    for (const name of ['', '   ', 'a\u0000b', 'x'.repeat(501), 42]) expect(errorCode(await a.post(`/api/nodes/${doc}/rename`, { name }))).toBe('invalid_request')
    expect((await a.getNode(doc)).body.name).toBe('日本語のメモ 🚀')
  })

  it('[WEB62] renaming a profile renames the person: its FullName, which the members list shows, follows', async () => {
    const ann = await signup(ts.url)
    const space = await createSpace(ts.url, ann.token)
    const a = api(ts.url, ann.token)
    expect((await a.post(`/api/nodes/${ann.userId}/rename`, { name: 'Ann Lee' })).status).toBe(200)
    const profile = (await a.getNode(ann.userId)).body
    expect(profile).toMatchObject({ name: 'Ann Lee', content: { FullName: 'Ann Lee' } })
    const members = await a.get<{ members: { subject: string; name: string }[] }>(`/api/spaces/${space}/members`)
    expect(members.body.members.find((m) => m.subject === ann.userId)?.name).toBe('Ann Lee')
  })
})

describe('trash retention', () => {
  it('[MOVE6] past TRASH_RETENTION_MS an entry is purged for good (at boot, then hourly)', async () => {
    const first = await startTestServer()
    const admin = await signup(first.url)
    const space = await createSpace(first.url, admin.token)
    const doc = await createDocument(first.url, admin.token, `${space}/old`, {})
    const a = api(first.url, admin.token)
    const { trashPath } = (await a.post<{ trashPath: string }>(`/api/nodes/${doc}/trash`)).body
    await first.server.close()
    // The same data, a server that keeps trash for 1 ms: the entry goes at boot.
    const second = await startTestServer({ dataDir: first.dataDir, config: { trashRetentionMs: 1, logLevel: 'warn' } })
    const b = api(second.url, admin.token)
    await waitFor(async () => (await b.get<{ items: unknown[] }>(`/api/trash/${space}`)).body.items.length === 0, { timeoutMs: 30_000, description: 'the expired entry is purged' })
    expect((await b.getNode(trashPath)).status).toBe(404)
    await second.cleanup()
    await first.cleanup()
  })
})
