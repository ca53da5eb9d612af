import * as Y from 'yjs'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { CONTENT_MAP, type JsonObject, type NodePath, userPrincipal, type UserId } from '../../shared/index.js'
import { api, createSpace, errorCode, expectStatus, freshDatabase, signup, startTestServer, stockProvider, waitFor, type TestServer, type TestUser } from '../helpers/index.js'
import { createCode, run, terminal, texts, waitForStatus } from './activities-helpers.js'

/**
 * [STO10] Text no storage can hold, and values PostgreSQL refused, are refused with a clear error
 * before anything is applied, on every transport, and never take other commits down with them.
 * Found by an outside look: on PostgreSQL a lone surrogate, a NUL in a name, or a `Status` of a few
 * kilobytes failed the whole group-commit batch (every node in it: "internal", changes never saved),
 * a stale row of such content kept the server from starting, and the text `\u0000` (a backslash
 * and five characters) was refused as if it were a NUL.
 */
const storages = [
  { name: 'SQLite', pg: false },
  { name: 'PostgreSQL', pg: true },
] as const

describe.each(storages)('unstorable input ($name)', ({ pg }) => {
  let ts: TestServer
  let owner: TestUser
  let space = ''
  let db: Awaited<ReturnType<typeof freshDatabase>> | null = null
  beforeAll(async () => {
    db = pg ? await freshDatabase('weft_unstorable_') : null
    ts = await startTestServer({ config: db ? { databaseUrl: db.url } : {} })
    owner = await signup(ts.url)
    space = await createSpace(ts.url, owner.token)
  })
  afterAll(async () => {
    await ts.cleanup()
    await db?.drop()
  })

  it('a NUL or half a character in content, a field name or a patch: 4xx naming where, nothing written', async () => {
    const a = api(ts.url, owner.token)
    const cases: [JsonObject, string][] = [
      [{ x: 'emoji cut in two \ud83d' }, 'content.x'],
      [{ deep: { list: ['ok', 'nul \u0000 here'] } }, 'content.deep.list[1]'],
      [{ 'bad\u0000key': 1 }, 'content'],
    ]
    for (const [content, where] of cases) {
      // JSON.stringify writes a lone surrogate as `\ud800`, which the server's JSON.parse turns back into one.
      const r = await a.putNode(`${space}/bad`, 'Document', content)
      expect([r.status, errorCode(r)]).toEqual([422, 'invalid_content'])
      expect(JSON.stringify(r.body)).toContain(where)
      expect((await a.getNode(`${space}/bad`)).status).toBe(404)
    }
    expectStatus(await a.putNode(`${space}/good`, 'Document', { Title: 'kept' }), 201)
    for (const patch of [{ Title: 'x\u0000' }, { Title: '\udc00' }, { ['k\u0000']: 1 }]) {
      const r = await a.patchNode(`${space}/good`, patch)
      expect(r.status).toBeGreaterThanOrEqual(400)
      expect(r.status).toBeLessThan(500)
      expect(['invalid_patch', 'invalid_content']).toContain(errorCode(r))
    }
    expect((await a.getNode(`${space}/good`)).body.content).toEqual({ Title: 'kept' })
  })

  it('the text \\u0000, Japanese and emoji are stored as written', async () => {
    const content = { Code: 'const re = /[\\u0000-\\u001f]/', Title: '日本語のメモ 😀', Escaped: '\\\\u0000' }
    expectStatus(await api(ts.url, owner.token).putNode(`${space}/text`, 'Document', content), 201)
    expect((await api(ts.url, owner.token).getNode(`${space}/text`)).body.content).toEqual(content)
  })

  it('a name with a NUL, half a character or over 500 characters is refused, through the API scripts and agents use too', async () => {
    const nodes = ts.server.nodes
    const me = userPrincipal(owner.userId as UserId)
    for (const name of ['a\u0000b', 'cut \ud83d', 'n'.repeat(501)]) {
      await expect(nodes.put(me, `${space}/named` as NodePath, { nodeType: 'Document', name, content: {} })).rejects.toMatchObject({ code: 'invalid_request' })
    }
    expect((await api(ts.url, owner.token).getNode(`${space}/named`)).status).toBe(404)
    const ok = await nodes.put(me, `${space}/named` as NodePath, { nodeType: 'Document', name: '名前 😀', content: {} })
    expect(ok.node.name).toBe('名前 😀')
    await expect(nodes.rename(me, `${space}/named` as NodePath, 'x\u0000')).rejects.toMatchObject({ code: 'invalid_request' })
    expect((await api(ts.url, owner.token).getNode(`${space}/named`)).body.name).toBe('名前 😀')
  })

  it('a Status of 10,000 characters that does not compress is stored, beside other writes of the same moment, and engine scans still find nodes by their Status', async () => {
    const a = api(ts.url, owner.token)
    // Text that does not compress (PostgreSQL compresses an index entry before it measures it).
    const long = Array.from({ length: 1_500 }, (_, i) => ((i + 1) * 2_654_435_761 % 4_294_967_291).toString(36)).join(' ')
    const [big, small] = await Promise.all([
      a.putNode(`${space}/status-big`, 'Document', { Status: long, RequestedStatus: long, HasPending: long }),
      a.putNode(`${space}/status-small`, 'Document', { Status: 'Ready' }),
    ])
    expectStatus(big, 201)
    expectStatus(small, 201)
    expect((await a.getNode(`${space}/status-big`)).body.content.Status).toBe(long)
    const storage = ts.server.storage
    const found = async (status: string) => (await storage.queryFields({ nodeType: 'Document', where: { Status: status } }, ['Status'])).map((r) => r.path)
    expect(await found('Ready')).toEqual([`${space}/status-small`])
    expect(await found(long)).toEqual([`${space}/status-big`])
    // Same first 200 characters, another value: not a match.
    expect(await found(`${long}!`)).toEqual([])
  })

  it('what a script prints or returns holding a NUL or half an emoji is kept (as U+FFFD): the run succeeds with its whole log', async () => {
    const code = await createCode(ts.url, owner.token, `${space}/prints`, 'Log.info("cut \\ud83d here"); Log.info("nul \\u0000 here"); Log.info("after"); return { a: "x\\u0000y", ["k\\udc00"]: 1 }')
    const done = await waitForStatus(ts.url, owner.token, await run(ts.url, owner.token, code), terminal)
    expect(done.content.Status).toBe('Succeeded')
    // Each NUL and half character is one U+FFFD, the whole line kept (the runtime used to end a
    // logged string at a NUL). The return value is JSON, and keeps both.
    expect(texts(done).filter((t) => ['cut \ufffd here', 'nul \ufffd here', 'after'].includes(t))).toHaveLength(3)
    const returned = done.content.ReturnValue as Record<string, unknown>
    expect(returned.a).toBe('x\ufffdy')
    expect(Object.keys(returned).filter((k) => /^k\ufffd+$/.test(k))).toHaveLength(1)
  })

  it('a script that throws an error holding a NUL or half an emoji ends Failed with its message, never stuck Running', async () => {
    const code = await createCode(ts.url, owner.token, `${space}/throws`, 'throw new Error("bad \\u0000 and \\ud83d here")')
    const done = await waitForStatus(ts.url, owner.token, await run(ts.url, owner.token, code), terminal)
    expect(done.content.Status).toBe('Failed')
    expect(texts(done).some((t) => t.includes('bad \ufffd and \ufffd here'))).toBe(true)
  })

  it('a stock y-websocket client typing a NUL is refused; the node stays as saved and its next edit lands', async () => {
    const path = `${space}/typed`
    expectStatus(await api(ts.url, owner.token).putNode(path, 'Document', { Body: 'start' }), 201)
    const editor = stockProvider(ts.url, path, owner.token)
    try {
      await editor.synced()
      const content = editor.doc.getMap(CONTENT_MAP)
      editor.doc.transact(() => content.set('Note', 'nul \u0000 typed'))
      await waitFor(() => editor.denied.length > 0, { description: 'the NUL is refused' })
      expect(editor.denied[0]).toMatch(/^invalid_content: .*NUL/)
      expect((await api(ts.url, owner.token).getNode(path)).body.content).toEqual({ Body: 'start' })
    } finally {
      editor.destroy()
    }
    const again = stockProvider(ts.url, path, owner.token, new Y.Doc())
    try {
      await again.synced()
      again.doc.transact(() => again.doc.getMap(CONTENT_MAP).set('Note', 'fine'))
      await waitFor(async () => (await api(ts.url, owner.token).getNode(path)).body.content?.Note === 'fine', { description: 'the next edit is saved' })
      expect(again.denied).toEqual([])
    } finally {
      again.destroy()
    }
  })
})

describe('unstorable input, PostgreSQL only', () => {
  let ts: TestServer
  let owner: TestUser
  let space = ''
  let db: Awaited<ReturnType<typeof freshDatabase>>
  beforeAll(async () => {
    db = await freshDatabase('weft_unstorable_')
    ts = await startTestServer({ config: { databaseUrl: db.url } })
    owner = await signup(ts.url)
    space = await createSpace(ts.url, owner.token)
  })
  afterAll(async () => {
    await ts.cleanup()
    await db.drop()
  })

  it('a NUL in a request field no edge check covers is a 400, not a 500, and the server keeps serving', async () => {
    const a = api(ts.url, owner.token)
    const bodies: [string, unknown][] = [
      ['/api/contextual/ack', { consumerId: 'c\u0000', eventId: '1', leaseToken: 't', attempt: 1 }],
      ['/api/contextual/status', { consumerId: 'c\u0000' }],
      ['/api/auth/login', { email: 'a\u0000@example.com', password: 'whatever-long' }],
    ]
    for (const [path, body] of bodies) {
      const r = await a.post(path, body)
      expect(r.status, `${path}: ${JSON.stringify(r.body)}`).toBeGreaterThanOrEqual(400)
      expect(r.status, `${path}: ${JSON.stringify(r.body)}`).toBeLessThan(500)
    }
    expect((await a.getNode(space)).status).toBe(200)
  })

  it('a version or a page size past every integer (1e20, 2^63) is a 400 or a capped page, never a 500', async () => {
    const a = api(ts.url, owner.token)
    for (const since of ['1e20', '9223372036854775808']) {
      const r = await a.request('GET', `/api/changes?since=${since}`)
      expect({ since, status: r.status, code: errorCode(r) }).toEqual({ since, status: 400, code: 'invalid_request' })
    }
    for (const q of [`/api/changes?since=0&limit=1e20`, `/api/nodes?parent=${space}&limit=9223372036854775808`]) {
      expect((await a.request('GET', q)).status, q).toBe(200)
    }
  })

  it('a value PostgreSQL refuses fails its own commit only, not the others of its batch', async () => {
    const storage = ts.server.storage
    const at = new Date().toISOString()
    const commit = (path: string, content: JsonObject) =>
      storage.commit({ path: path as NodePath, kind: 'Created', nodeType: 'Document', name: path.split('/').pop()!, content, createdBy: owner.userId, at, update: null }).then(
        (r) => ({ ok: true as const, version: r.version }),
        (e: { code?: string }) => ({ ok: false as const, code: e.code }),
      )
    // Submitted in one tick: one batch. The lone surrogate reaches storage only past the write path's checks.
    const [before, bad, after] = await Promise.all([
      commit(`${space}/batch-a`, { N: 1 }),
      commit(`${space}/batch-bad`, { N: '\ud800' }),
      commit(`${space}/batch-b`, { N: 2 }),
    ])
    expect(before.ok).toBe(true)
    expect(after.ok).toBe(true)
    expect(bad).toEqual({ ok: false, code: 'invalid_content' })
    expect((await storage.getNode(`${space}/batch-a` as NodePath))?.content).toEqual({ N: 1 })
    expect((await storage.getNode(`${space}/batch-b` as NodePath))?.content).toEqual({ N: 2 })
    expect(await storage.getNode(`${space}/batch-bad` as NodePath)).toBeNull()
  })
})
