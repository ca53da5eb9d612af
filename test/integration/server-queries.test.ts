import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import {
  api,
  createDocument,
  createSpace,
  expectStatus,
  grantRole,
  signup,
  startTestServer,
  type TestServer,
  type TestUser,
} from '../helpers/index.js'

/** `GET /api/changes?since=` (the change feed) and `GET /api/nodes?...` (queries). */
describe('server change feed and queries', () => {
  let ts: TestServer
  let user: TestUser
  let space: string

  beforeAll(async () => {
    ts = await startTestServer()
    user = await signup(ts.url)
    space = await createSpace(ts.url, user.token)
  })
  afterAll(async () => {
    await ts.cleanup()
  })

  it('[STO3] lists Created, Updated, Deleted in version order after `since`', async () => {
    const http = api(ts.url, user.token)
    const path = `${space}/feed`
    const created = expectStatus(await http.putNode(path, 'Document', { A: 1 }), 201).body
    const since = created.version - 1
    const updated = expectStatus(await http.patchNode(path, { A: 2 }), 200).body
    expect(updated.version).toBeGreaterThan(created.version)
    expectStatus(await http.deleteNode(path), 204)

    const res = expectStatus(await http.changesSince(since), 200)
    const mine = res.body.items.filter((c) => c.path === path)
    expect(mine.map((c) => c.kind)).toEqual(['Created', 'Updated', 'Deleted'])
    expect(mine.every((c) => c.nodeType === 'Document')).toBe(true)
    expect(mine[0]?.version).toBe(created.version)
    expect(mine[1]?.version).toBe(updated.version)
    const versions = res.body.items.map((c) => c.version)
    expect(versions).toEqual([...versions].sort((a, b) => a - b))
    expect(versions.every((v) => v > since)).toBe(true)

    // `since` is exclusive: asking from the last version returns nothing older.
    const last = versions[versions.length - 1] as number
    const after = expectStatus(await http.changesSince(last), 200)
    expect(after.body.items.filter((c) => c.version <= last)).toEqual([])
    expect((await http.getNode(path)).status).toBe(404)
  })

  it('does not show changes of nodes the caller cannot read', async () => {
    const other = await signup(ts.url)
    const secret = await createDocument(ts.url, user.token, `${space}/secret-feed`, {})
    const res = expectStatus(await api(ts.url, other.token).changesSince(0), 200)
    expect(res.body.items.some((c) => c.path === secret)).toBe(false)
  })

  it('filters by parent, nodeType and where.<field>, and honours limit', async () => {
    const http = api(ts.url, user.token)
    const parent = await createDocument(ts.url, user.token, `${space}/q`, {})
    await createDocument(ts.url, user.token, `${parent}/red1`, { Color: 'red', Size: 1 })
    await createDocument(ts.url, user.token, `${parent}/red2`, { Color: 'red', Size: 2 })
    await createDocument(ts.url, user.token, `${parent}/blue`, { Color: 'blue', Size: 1 })
    expectStatus(await http.putNode(`${parent}/code`, 'Code', { Color: 'red', Source: '' }), 201)
    await createDocument(ts.url, user.token, `${parent}/red1/deeper`, { Color: 'red' })
    await createDocument(ts.url, user.token, `${space}/elsewhere`, { Color: 'red' })

    const paths = async (q: Parameters<typeof http.queryNodes>[0]) => {
      const res = expectStatus(await http.queryNodes(q), 200)
      return res.body.items.map((n) => n.path).sort()
    }
    expect(await paths({ parent })).toEqual([`${parent}/blue`, `${parent}/code`, `${parent}/red1`, `${parent}/red2`])
    expect(await paths({ parent, nodeType: 'Document' })).toEqual([`${parent}/blue`, `${parent}/red1`, `${parent}/red2`])
    expect(await paths({ parent, nodeType: 'Document', where: { Color: 'red' } })).toEqual([`${parent}/red1`, `${parent}/red2`])
    expect(await paths({ parent, where: { Color: 'red', Size: '1' } })).toEqual([`${parent}/red1`])
    expect(await paths({ parent, nodeType: 'Code' })).toEqual([`${parent}/code`])
    expect(await paths({ parent, where: { Color: 'green' } })).toEqual([])
    expect((await paths({ parent, limit: 2 })).length).toBe(2)
  })

  it('only returns nodes the caller may read', async () => {
    const viewer = await signup(ts.url)
    const parent = await createDocument(ts.url, user.token, `${space}/visible`, {})
    await createDocument(ts.url, user.token, `${parent}/one`, { Tag: 'x' })
    const stranger = expectStatus(await api(ts.url, viewer.token).queryNodes({ parent, where: { Tag: 'x' } }), 200, 403)
    if (stranger.status === 200) expect(stranger.body.items).toEqual([])
    await grantRole(ts.url, user.token, space, viewer.userId, 'Viewer')
    const res = expectStatus(await api(ts.url, viewer.token).queryNodes({ parent, where: { Tag: 'x' } }), 200)
    expect(res.body.items.map((n) => n.path)).toEqual([`${parent}/one`])
  })
})
