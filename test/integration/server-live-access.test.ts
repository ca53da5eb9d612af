import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { firstValueFrom, filter, take, toArray } from 'rxjs'
import { CloseCode, MuxType, SYSTEM, permissionsFromMask, type NodePath } from '../../shared/index.js'
import {
  MuxClient,
  api,
  createDocument,
  createSpace,
  errorCode,
  grantRole,
  signup,
  startTestServer,
  stockProvider,
  waitFor,
  type TestServer,
} from '../helpers/index.js'

describe('live access and memory', () => {
  let ts: TestServer
  beforeAll(async () => {
    ts = await startTestServer({ config: { idleUnloadMs: 200 } })
  })
  afterAll(() => ts.cleanup())

  it('[ACC8] revoking a role ends the /sync socket (4403) and the /mux room (Denied) at once', async () => {
    const admin = await signup(ts.url)
    const viewer = await signup(ts.url)
    const space = await createSpace(ts.url, admin.token)
    const doc = await createDocument(ts.url, admin.token, `${space}/doc`, { A: 1 })
    const grant = await grantRole(ts.url, admin.token, space, viewer.userId, 'Viewer')

    const stock = stockProvider(ts.url, doc, viewer.token)
    await stock.synced()
    expect(stock.json()).toEqual({ A: 1 })
    const mux = await MuxClient.connect(ts.url, viewer.token)
    expect(await mux.join(doc)).toMatchObject({ ok: true })

    expect((await api(ts.url, admin.token).deleteNode(grant)).status).toBe(204)
    await waitFor(() => stock.closes.some((c) => c.code === CloseCode.Forbidden))
    await waitFor(() => mux.frames.some((f) => f.type === MuxType.Denied && f.path === doc && f.closeCode === CloseCode.Forbidden))
    // The room is gone: later edits by the admin no longer reach the viewer.
    expect((await api(ts.url, admin.token).patchNode(doc, { A: 2 })).status).toBe(200)
    expect(stock.json()).toEqual({ A: 1 })
    stock.destroy()
    await mux.close()
  })

  it('[SYNC15] a role changed with Read kept reaches an open /mux room (Joined again with the new mask); an unchanged one sends nothing; a stock /sync provider keeps syncing', async () => {
    const admin = await signup(ts.url)
    const editor = await signup(ts.url)
    const space = await createSpace(ts.url, admin.token)
    const doc = await createDocument(ts.url, admin.token, `${space}/doc`, { A: 1 })
    await grantRole(ts.url, admin.token, space, editor.userId, 'Editor')
    const stock = stockProvider(ts.url, doc, editor.token)
    await stock.synced()
    const mux = await MuxClient.connect(ts.url, editor.token)
    expect(await mux.join(doc)).toMatchObject({ ok: true })
    const masks = () => mux.frames.flatMap((f) => (f.type === MuxType.Joined && f.path === doc ? [permissionsFromMask(f.permissions)] : []))
    expect(masks()).toHaveLength(1)
    expect(masks()[0]!.has('Update')).toBe(true)

    await grantRole(ts.url, admin.token, space, editor.userId, 'Viewer')
    await waitFor(() => masks().length === 2)
    expect(masks()[1]!.has('Read')).toBe(true)
    expect(masks()[1]!.has('Update')).toBe(false)
    // Another change of access that leaves this room's mask as it was: no frame.
    const other = await signup(ts.url)
    await grantRole(ts.url, admin.token, space, other.userId, 'Viewer')
    await grantRole(ts.url, admin.token, space, editor.userId, 'Editor')
    await waitFor(() => masks().length === 3)
    expect(masks()[2]!.has('Update')).toBe(true)
    expect(mux.frames.filter((f) => f.type === MuxType.Denied)).toHaveLength(0)
    // The stock provider was sent nothing it does not know, and still syncs.
    expect((await api(ts.url, admin.token).patchNode(doc, { A: 2 })).status).toBe(200)
    await waitFor(() => stock.json().A === 2)
    expect(stock.closes).toHaveLength(0)
    stock.destroy()
    await mux.close()
  })

  it('[ACC5] a Space keeps at least one Admin', async () => {
    const admin = await signup(ts.url)
    const space = await createSpace(ts.url, admin.token)
    const own = `${space}/_Access/${admin.userId}_Access`
    const res = await api(ts.url, admin.token).deleteNode(own)
    expect(res.status).toBe(409)
    expect(errorCode(res)).toBe('last_admin')
    const demote = await api(ts.url, admin.token).putNode(own, 'AccessAssignment', { Subject: admin.userId, Role: 'Viewer' })
    expect(errorCode(demote)).toBe('last_admin')
    // With a second Admin, the first may step down.
    const other = await signup(ts.url)
    await grantRole(ts.url, admin.token, space, other.userId, 'Admin')
    expect((await api(ts.url, admin.token).deleteNode(own)).status).toBe(204)
  })

  it('[MEM1] idle documents leave server memory and come back intact', async () => {
    const user = await signup(ts.url)
    const space = await createSpace(ts.url, user.token)
    const paths: string[] = []
    for (let i = 0; i < 20; i++) paths.push(await createDocument(ts.url, user.token, `${space}/d${i}`, { I: i }))
    const mux = await MuxClient.connect(ts.url, user.token)
    for (const p of paths) expect(await mux.join(p)).toMatchObject({ ok: true })
    expect(ts.server.stats().loadedDocs).toBeGreaterThanOrEqual(20)
    await mux.close()
    await waitFor(() => ts.server.stats().loadedDocs < 5, 5_000)
    const again = stockProvider(ts.url, paths[7]!, user.token)
    await again.synced()
    expect(again.json()).toEqual({ I: 7 })
    again.destroy()
  })

  it('node$ emits the current node, then every committed change, then null on delete', async () => {
    const user = await signup(ts.url)
    const space = await createSpace(ts.url, user.token)
    const path = `${space}/watched` as NodePath
    const seen = firstValueFrom(
      ts.server.nodes.node$(path).pipe(
        filter((n, i) => i === 0 || n === null || n.content.Step !== undefined),
        take(4),
        toArray(),
      ),
    )
    await ts.server.nodes.put(SYSTEM, path, { nodeType: 'Document', content: { Step: 1 } })
    await ts.server.nodes.patch(SYSTEM, path, { Step: 2 })
    await ts.server.nodes.delete(SYSTEM, path)
    const emitted = await seen
    expect(emitted.map((n) => (n ? n.content.Step : null))).toEqual([null, 1, 2, null])
  })
})
