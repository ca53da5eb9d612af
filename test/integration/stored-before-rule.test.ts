import * as Y from 'yjs'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { CONTENT_MAP, SYSTEM, type JsonObject, type NodePath } from '../../shared/index.js'
import { api, createSpace, errorCode, expectStatus, signup, startTestServer, stockProvider, waitFor, type TestServer, type TestUser } from '../helpers/index.js'

/**
 * [STO10] Text stored before the rule: SQLite held a NUL or half an emoji as written until the
 * rule came, so an upgraded server has nodes holding them. A write is checked for the text it
 * brings, not for what it keeps: a node holding such text is not locked against every later
 * engine update, patch, append or edit of its other fields (found: every replace of such a node
 * was refused, and an activity whose log held a NUL could not be run again).
 */
describe('text stored before the rule (SQLite)', () => {
  let ts: TestServer
  let owner: TestUser
  let space = ''
  beforeAll(async () => {
    ts = await startTestServer()
    owner = await signup(ts.url)
    space = await createSpace(ts.url, owner.token)
  })
  afterAll(async () => {
    await ts.cleanup()
  })

  /**
   * A node as a server before the rule stored it (storage takes it as given), and its content as
   * read back.
   */
  async function storedBefore(name: string, content: JsonObject): Promise<{ path: NodePath; held: JsonObject }> {
    const path = `${space}/${name}` as NodePath
    await ts.server.storage.commit({ path, kind: 'Created', nodeType: 'Document', name, content, createdBy: owner.userId, at: new Date().toISOString(), update: null })
    const held = (await ts.server.storage.getNode(path))!.content
    expect((held.Log as string[])[1]).toContain('\u0000')
    return { path, held }
  }

  // A lone surrogate did not survive SQLite's UTF-8 (read back as U+FFFD); a NUL did.
  const OLD = { Log: ['start', 'nul \u0000 here', 'last'], Meta: { 'k\u0000': 'v', Note: 'x\u0000' }, Title: 'T' }

  it('an engine replace, a patch and an append that keep the old text are saved', async () => {
    const { path, held } = await storedBefore('engine', OLD)
    const nodes = ts.server.nodes
    await nodes.update(SYSTEM, path, (c) => ({ nodeType: 'Document', content: { ...c!.content, Count: 1 } }), 'engine')
    await nodes.update(SYSTEM, path, (c) => ({ nodeType: 'Document', content: { ...c!.content, Log: [...(c!.content.Log as string[]), 'next'] } }), 'engine')
    await nodes.patch(SYSTEM, path, { Count: 2, Meta: { Other: 'y' } }, 'engine')
    await nodes.append(SYSTEM, path, 'Log', ['appended'], 'engine')
    const node = (await ts.server.storage.getNode(path))!
    expect(node.content.Count).toBe(2)
    expect(node.content.Log).toEqual([...(held.Log as string[]), 'next', 'appended'])
    expect(node.content.Meta).toEqual({ ...(held.Meta as JsonObject), Other: 'y' })
  })

  it('a write that brings such text is still refused, naming where', async () => {
    const { path, held } = await storedBefore('brings', OLD)
    const nodes = ts.server.nodes
    await expect(nodes.update(SYSTEM, path, (c) => ({ nodeType: 'Document', content: { ...c!.content, Log: [...(c!.content.Log as string[]), 'new \u0000'] } }), 'engine')).rejects.toMatchObject({
      code: 'invalid_content',
      message: expect.stringContaining('content.Log[3]'),
    })
    await expect(nodes.update(SYSTEM, path, (c) => ({ nodeType: 'Document', content: { ...c!.content, Meta: { ...(c!.content.Meta as JsonObject), 'n\ud800': 1 } } }), 'engine')).rejects.toMatchObject({ code: 'invalid_content' })
    await expect(nodes.patch(SYSTEM, path, { Title: 'T \ud800' }, 'engine')).rejects.toMatchObject({ code: 'invalid_patch' })
    // The old text moved elsewhere is text this write brings there.
    await expect(nodes.update(SYSTEM, path, (c) => ({ nodeType: 'Document', content: { ...c!.content, Title: 'nul \u0000 here' } }), 'engine')).rejects.toMatchObject({ code: 'invalid_content' })
    expect((await ts.server.storage.getNode(path))!.content).toEqual(held)
  })

  it('a person edits another field over HTTP and through a stock y-websocket client', async () => {
    const { path, held } = await storedBefore('person', OLD)
    const a = api(ts.url, owner.token)
    expectStatus(await a.patchNode(path, { Title: 'Edited' }), 200)
    const put = await a.putNode(path, 'Document', { ...held, Title: 'Replaced' })
    expectStatus(put, 200)
    expect(errorCode(await a.patchNode(path, { Title: '\u0000' }))).toBe('invalid_patch')

    const doc = new Y.Doc()
    const provider = stockProvider(ts.url, path, owner.token, doc)
    try {
      await waitFor(() => doc.getMap(CONTENT_MAP).get('Title') !== undefined)
      const title = doc.getMap(CONTENT_MAP).get('Title')
      if (title instanceof Y.Text) title.insert(title.length, '!')
      else doc.getMap(CONTENT_MAP).set('Title', 'Replaced!')
      await waitFor(async () => {
        const n = await ts.server.storage.getNode(path)
        return n?.content.Title === 'Replaced!'
      })
    } finally {
      provider.destroy()
    }
    const node = (await ts.server.storage.getNode(path))!
    expect(node.content.Log).toEqual(held.Log)
  })

  it('such a node goes to the trash and comes back, twice, holding what it held', async () => {
    const { path, held } = await storedBefore('trashed', OLD)
    // A Yjs history, as any node edited since has.
    await ts.server.nodes.append(SYSTEM, path, 'Log', ['edited'], 'engine')
    const a = api(ts.url, owner.token)
    for (let i = 0; i < 2; i++) {
      const trashed = await a.post<{ trashPath: string }>(`/api/nodes/${path}/trash`)
      expectStatus(trashed, 200)
      expectStatus(await a.post(`/api/nodes/${trashed.body.trashPath}/restore`), 200)
    }
    expect((await ts.server.storage.getNode(path))!.content).toEqual({ ...held, Log: [...(held.Log as string[]), 'edited'] })
  })
})
