import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import { CloseCode, permissionsFromMask } from '../../shared/index.js'
import {
  MuxClient,
  api,
  createSpace,
  errorCode,
  openRawSocket,
  startTestServer,
  stockProvider,
  waitFor,
  type StockClient,
  type TestServer,
} from '../helpers/index.js'
import { buildAccessWorld, type AccessWorld } from './fixtures/server-access-world.js'

/**
 * The access matrix, from every transport: HTTP, `/sync` (stock provider) and `/mux`. A refused
 * write changes nothing on the server; a refused read closes the room.
 */
describe('server access matrix', () => {
  let ts: TestServer
  let w: AccessWorld
  const stock: StockClient[] = []
  const muxes: MuxClient[] = []
  const openStock = (path: string, token: string): StockClient => {
    const c = stockProvider(ts.url, path, token)
    stock.push(c)
    return c
  }
  const openMux = async (token: string): Promise<MuxClient> => {
    const m = await MuxClient.connect(ts.url, token)
    muxes.push(m)
    return m
  }
  /** The node's content as its admin reads it over HTTP. */
  const serverContent = async (path: string) => {
    const res = await api(ts.url, w.admin.token).getNode(path)
    expect(res.status).toBe(200)
    return res.body.content
  }

  beforeAll(async () => {
    ts = await startTestServer()
    w = await buildAccessWorld(ts.url)
  })
  afterEach(async () => {
    for (const c of stock.splice(0)) c.destroy()
    await Promise.all(muxes.splice(0).map((m) => m.close()))
  })
  afterAll(async () => {
    await ts.cleanup()
  })

  describe('Viewer', () => {
    it('[ACC6] reads over HTTP, cannot PATCH (403 forbidden)', async () => {
      const http = api(ts.url, w.viewer.token)
      const before = await serverContent(w.doc)
      const got = await http.getNode(w.doc)
      expect(got.status).toBe(200)
      expect(got.body.content).toEqual(before)
      const patched = await http.patchNode(w.doc, { Title: 'viewer' })
      expect(patched.status).toBe(403)
      expect(errorCode(patched)).toBe('forbidden')
      expect(await serverContent(w.doc)).toEqual(before)
    })

    it('[ACC6] a write that would change nothing is refused as any write of hers (PUT as it stands, empty patch, same value); an Editor\'s is answered', async () => {
      const http = api(ts.url, w.viewer.token)
      const got = await api(ts.url, w.admin.token).getNode(w.doc)
      expect(got.status).toBe(200)
      const { nodeType, name, content } = got.body
      const same = Object.keys(content)[0]
      expect(same).toBeDefined()
      const attempts = [
        await http.putNode(w.doc, nodeType, content, name),
        await http.patchNode(w.doc, {}),
        await http.patchNode(w.doc, { [same!]: content[same!] }),
      ]
      for (const res of attempts) {
        expect(res.status).toBe(403)
        expect(errorCode(res)).toBe('forbidden')
      }
      const editor = api(ts.url, w.editor.token)
      expect((await editor.putNode(w.doc, nodeType, content, name)).status).toBe(200)
      expect((await editor.patchNode(w.doc, {})).status).toBe(200)
      expect(await serverContent(w.doc)).toEqual(content)
    })

    it('[ACC7] syncs on /sync; its Yjs update is refused with permission-denied, the socket stays open', async () => {
      const before = await serverContent(w.doc)
      const c = openStock(w.doc, w.viewer.token)
      await c.synced()
      expect(c.json()).toEqual(before)
      c.content.set('Title', 'viewer-sync')
      await waitFor(() => c.denied.length > 0, { description: 'permission-denied auth message' })
      expect(c.denied[0]).toMatch(/^forbidden(?!_)/)
      expect(c.closes).toEqual([])
      expect(c.provider.wsconnected).toBe(true)
      expect(await serverContent(w.doc)).toEqual(before)
      // The refused update never entered the server's doc: a fresh client syncs the original.
      const fresh = openStock(w.doc, w.admin.token)
      await fresh.synced()
      expect(fresh.json()).toEqual(before)
    })

    it('[ACC7][SYNC2] joins on /mux without Update permission; its Update is Refused (forbidden)', async () => {
      const before = await serverContent(w.doc)
      const m = await openMux(w.viewer.token)
      const joined = await m.join(w.doc)
      expect(joined).toMatchObject({ ok: true })
      if (joined.ok) {
        const perms = permissionsFromMask(joined.permissions)
        expect(perms.has('Read')).toBe(true)
        expect(perms.has('Update')).toBe(false)
      }
      expect(m.json(w.doc)).toEqual(before)
      const res = await m.edit(w.doc, (content) => content.set('Title', 'viewer-mux'))
      expect(res).toMatchObject({ ok: false, code: 'forbidden' })
      expect(m.isOpen).toBe(true)
      expect(await serverContent(w.doc)).toEqual(before)
      const fresh = await openMux(w.admin.token)
      expect(await fresh.join(w.doc)).toMatchObject({ ok: true })
      expect(fresh.json(w.doc)).toEqual(before)
    })
  })

  describe('Editor', () => {
    it('[ACC6] patches content over HTTP, /sync and /mux', async () => {
      const http = api(ts.url, w.editor.token)
      expect((await http.patchNode(w.doc, { ByHttp: 1 })).status).toBe(200)

      const c = openStock(w.doc, w.editor.token)
      await c.synced()
      c.content.set('BySync', 2)
      await waitFor(async () => (await serverContent(w.doc))?.BySync === 2, { description: 'editor /sync write on the server' })

      const m = await openMux(w.editor.token)
      expect(await m.join(w.doc)).toMatchObject({ ok: true })
      expect(await m.edit(w.doc, (content) => content.set('ByMux', 3))).toMatchObject({ ok: true })
      expect(await serverContent(w.doc)).toMatchObject({ ByHttp: 1, BySync: 2, ByMux: 3 })
      expect(c.denied).toEqual([])
    })

    it('[ACC7] cannot write ActivityLog.Status (forbidden_field) on any transport, but can write RequestedStatus', async () => {
      const http = api(ts.url, w.editor.token)
      const byHttp = await http.patchNode(w.act, { Status: 'Succeeded' })
      expect(byHttp.status).toBe(403)
      expect(errorCode(byHttp)).toBe('forbidden_field')

      const c = openStock(w.act, w.editor.token)
      await c.synced()
      c.content.set('Status', 'Failed')
      await waitFor(() => c.denied.length > 0, { description: 'permission-denied for Status on /sync' })
      expect(c.denied[0]).toMatch(/^forbidden_field/)
      expect(c.closes).toEqual([])
      const fresh = openStock(w.act, w.admin.token)
      await fresh.synced()
      expect(fresh.content.get('Status')).toBeUndefined()

      const m = await openMux(w.editor.token)
      expect(await m.join(w.act)).toMatchObject({ ok: true })
      expect(await m.edit(w.act, (content) => content.set('Status', 'Cancelled'))).toMatchObject({ ok: false, code: 'forbidden_field' })
      expect((await serverContent(w.act))?.Status).toBeUndefined()

      // A refused update poisons that client's doc (later updates depend on it): use fresh ones.
      expect((await http.patchNode(w.act, { RequestedStatus: 'Cancelled' })).status).toBe(200)
      const m2 = await openMux(w.editor.token)
      expect(await m2.join(w.act)).toMatchObject({ ok: true })
      expect(await m2.edit(w.act, (content) => content.set('RequestedStatus', 'Failed'))).toMatchObject({ ok: true })
      const c2 = openStock(w.act, w.editor.token)
      await c2.synced()
      expect(c2.content.get('RequestedStatus')).toBe('Failed')
      expect((await serverContent(w.act))?.Status).toBeUndefined()
    })
  })

  describe('stranger', () => {
    it('[ACC6] gets 403 over HTTP for reads and writes', async () => {
      const http = api(ts.url, w.stranger.token)
      const got = await http.getNode(w.doc)
      expect(got.status).toBe(403)
      expect(errorCode(got)).toBe('forbidden')
      const patched = await http.patchNode(w.doc, { Title: 'stranger' })
      expect(patched.status).toBe(403)
      expect(await serverContent(w.doc)).toMatchObject({ Title: 'original' })
    })

    it('[ACC6] gets permission-denied then close 4403 on /sync, and no state', async () => {
      const c = openStock(w.doc, w.stranger.token)
      await waitFor(() => c.closes.length > 0, { description: 'server closes the socket' })
      expect(c.closes[0]?.code).toBe(CloseCode.Forbidden)
      expect(c.denied.length).toBeGreaterThan(0)
      expect(c.json()).toEqual({})
    })

    it('[ACC6][SYNC2] gets Denied(4403) on /mux, and the socket stays usable for their own nodes', async () => {
      const m = await openMux(w.stranger.token)
      const denied = await m.join(w.doc)
      expect(denied).toMatchObject({ ok: false, closeCode: CloseCode.Forbidden })
      expect(m.json(w.doc)).toEqual({})
      expect(m.isOpen).toBe(true)

      const own = await createSpace(ts.url, w.stranger.token)
      expect((await api(ts.url, w.stranger.token).putNode(`${own}/mine`, 'Document', { A: 1 })).status).toBe(201)
      expect(await m.join(`${own}/mine`)).toMatchObject({ ok: true })
      expect(m.json(`${own}/mine`)).toEqual({ A: 1 })
      expect(await m.edit(`${own}/mine`, (content) => content.set('B', 2))).toMatchObject({ ok: true })
      expect((await api(ts.url, w.stranger.token).getNode(`${own}/mine`)).body.content).toEqual({ A: 1, B: 2 })
    })
  })

  describe('bad tokens', () => {
    it('closes /sync and /mux with 4401', async () => {
      const sync = await openRawSocket(ts.url, `/sync/${w.doc}?token=not-a-token`)
      expect((await sync.closed).code).toBe(CloseCode.Unauthorized)
      const mux = await openRawSocket(ts.url, '/mux?token=not-a-token')
      expect((await mux.closed).code).toBe(CloseCode.Unauthorized)
      const noToken = await openRawSocket(ts.url, '/mux')
      expect((await noToken.closed).code).toBe(CloseCode.Unauthorized)
    })

    it('answers 401 over HTTP', async () => {
      const res = await api(ts.url, 'not-a-token').getNode(w.doc)
      expect(res.status).toBe(401)
      expect(errorCode(res)).toBe('unauthorized')
      expect((await api(ts.url).getNode(w.doc)).status).toBe(401)
    })
  })

  describe('groups and Denied', () => {
    it("[ACC1][ACC2] a group member inherits the group's role (Editor) on HTTP, /sync and /mux", async () => {
      const http = api(ts.url, w.member.token)
      expect((await http.getNode(w.doc)).status).toBe(200)
      expect((await http.patchNode(w.doc, { ByMember: 'http' })).status).toBe(200)
      const m = await openMux(w.member.token)
      expect(await m.join(w.doc)).toMatchObject({ ok: true })
      expect(await m.edit(w.doc, (content) => content.set('ByMemberMux', true))).toMatchObject({ ok: true })
      const c = openStock(w.doc, w.member.token)
      await c.synced()
      expect(c.content.get('ByMemberMux')).toBe(true)
    })

    it('[ACC1] a Denied assignment blocks what its subject inherits (group or user)', async () => {
      for (const user of [w.member, w.blocked]) {
        const http = api(ts.url, user.token)
        expect((await http.getNode(w.doc)).status).toBe(200)
        const got = await http.getNode(w.privateDoc)
        expect(got.status).toBe(403)
        expect((await http.patchNode(w.privateDoc, { Secret: false })).status).toBe(403)
        const m = await openMux(user.token)
        expect(await m.join(w.privateDoc)).toMatchObject({ ok: false, closeCode: CloseCode.Forbidden })
      }
      expect(await serverContent(w.privateDoc)).toEqual({ Secret: true })
    })

    it("[ACC3] a user's own Denied blocks the roles their groups inherit from above", async () => {
      const http = api(ts.url, w.member.token)
      expect((await http.getNode(w.doc)).status).toBe(200)
      expect((await http.getNode(w.ownDenyDoc)).status).toBe(403)
      expect((await http.patchNode(w.ownDenyDoc, { Secret: false })).status).toBe(403)
      const m = await openMux(w.member.token)
      expect(await m.join(w.ownDenyDoc)).toMatchObject({ ok: false, closeCode: CloseCode.Forbidden })
      const c = openStock(w.ownDenyDoc, w.member.token)
      await waitFor(() => c.closes.length > 0, { description: 'server closes the socket' })
      expect(c.closes[0]?.code).toBe(CloseCode.Forbidden)
      expect(await serverContent(w.ownDenyDoc)).toEqual({ Secret: true })
    })

    it('[ACC2] a removed membership removes the inherited role', async () => {
      const http = api(ts.url, w.admin.token)
      const membership = `${w.team}/${w.member.userId}_Membership`
      expect((await http.deleteNode(membership)).status).toBe(204)
      const res = await api(ts.url, w.member.token).getNode(w.doc)
      expect(res.status).toBe(403)
      expect((await http.putNode(membership, 'Membership', {})).status).toBe(201)
      expect((await api(ts.url, w.member.token).getNode(w.doc)).status).toBe(200)
    })
  })

  describe('home', () => {
    it('[ACC4] a user is Admin of {userId} but cannot write their own Email', async () => {
      const me = w.stranger
      const http = api(ts.url, me.token)
      const user = await http.getNode(me.userId)
      expect(user.status).toBe(200)
      expect(user.body.nodeType).toBe('User')
      expect(user.body.content.Email).toBe(me.email)

      expect((await http.putNode(`${me.userId}/notes`, 'Document', { Text: 'mine' })).status).toBe(201)
      expect((await http.patchNode(me.userId, { FullName: 'Renamed' })).status).toBe(200)
      // Admin of the home: may grant access there.
      expect((await http.putNode(`${me.userId}/_Access/${w.viewer.userId}_Access`, 'AccessAssignment', { Subject: w.viewer.userId, Role: 'Viewer' })).status).toBe(201)
      expect((await api(ts.url, w.viewer.token).getNode(`${me.userId}/notes`)).status).toBe(200)

      const email = await http.patchNode(me.userId, { Email: 'hijack@test.weft.example' })
      expect(email.status).toBe(403)
      expect(errorCode(email)).toBe('forbidden_field')

      const m = await openMux(me.token)
      expect(await m.join(me.userId)).toMatchObject({ ok: true })
      expect(await m.edit(me.userId, (content) => content.set('Email', 'mux-hijack@test.weft.example'))).toMatchObject({ ok: false, code: 'forbidden_field' })
      const after = await http.getNode(me.userId)
      expect(after.body.content.Email).toBe(me.email)
      expect(after.body.content.FullName).toBe('Renamed')
    })
  })
})
