import { join } from 'node:path'
import Database from 'better-sqlite3'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import {
  api,
  createSpace,
  errorCode,
  expectStatus,
  grantRole,
  signup,
  startTestServer,
  stockProvider,
  waitFor,
  type TestServer,
  type TestUser,
} from '../helpers/index.js'

import { userPrincipal, type UserId } from '../../shared/index.js'
import { planSearch } from '../../sync-server/storage/index.js'
import { isCaseless, searchWithinLimits } from '../../sync-server/storage/sqlite-search-within.js'

interface Hit {
  path: string
  name: string
  nodeType: string
  snippet: string
  where: string[]
}

/** Quick find over HTTP: the items of `GET /api/search`. */
async function find(url: string, token: string, q: string, limit?: number): Promise<Hit[]> {
  const params = new URLSearchParams({ q })
  if (limit !== undefined) params.set('limit', String(limit))
  return expectStatus(await api(url, token).get<{ items: Hit[] }>(`/api/search?${params.toString()}`), 200).body.items
}

describe('[FIND1] [FIND2] [FIND3] [FIND4] quick find over the server index', () => {
  let ts: TestServer
  let alice: TestUser
  let bob: TestUser
  let space: string

  beforeAll(async () => {
    ts = await startTestServer()
    alice = await signup(ts.url)
    bob = await signup(ts.url)
    space = await createSpace(ts.url, alice.token)
  })
  afterAll(() => ts.cleanup())

  it('[FIND1] names in any language are found by a part of them: 日本語 finds 日本語のメモ, 메모, Über, 🚀', async () => {
    const http = api(ts.url, alice.token)
    expectStatus(await http.putNode(`${space}/jp`, 'Document', { Body: '会議の議事録です' }, '日本語のメモ'), 201)
    expectStatus(await http.putNode(`${space}/ko`, 'Document', {}, '한국어 메모'), 201)
    expectStatus(await http.putNode(`${space}/de`, 'Document', {}, 'Über uns'), 201)
    expectStatus(await http.putNode(`${space}/rocket`, 'Document', {}, '🚀'), 201)
    expect((await find(ts.url, alice.token, '日本語')).map((h) => h.name)).toEqual(['日本語のメモ'])
    expect((await find(ts.url, alice.token, 'メモ')).map((h) => h.name)).toEqual(['日本語のメモ'])
    expect((await find(ts.url, alice.token, '議事録')).map((h) => h.path)).toEqual([`${space}/jp`])
    expect((await find(ts.url, alice.token, '메모')).map((h) => h.name)).toEqual(['한국어 메모'])
    expect((await find(ts.url, alice.token, 'über')).map((h) => h.name)).toEqual(['Über uns'])
    expect((await find(ts.url, alice.token, '🚀')).map((h) => h.name)).toEqual(['🚀'])
    const [hit] = await find(ts.url, alice.token, '議事録')
    expect(hit).toMatchObject({ name: '日本語のメモ', nodeType: 'Document' })
    expect(hit!.snippet).toContain('議事録')
  })

  it('[FIND1] every write path keeps the index: create, replace, patch, a Yjs update, delete', async () => {
    const http = api(ts.url, alice.token)
    const path = `${space}/paths`
    expectStatus(await http.putNode(path, 'Document', { Text: 'alpha created' }), 201)
    expect((await find(ts.url, alice.token, 'alpha')).map((h) => h.path)).toEqual([path])
    expectStatus(await http.putNode(path, 'Document', { Text: 'bravo replaced' }), 200)
    expect(await find(ts.url, alice.token, 'alpha')).toEqual([])
    expect((await find(ts.url, alice.token, 'bravo')).map((h) => h.path)).toEqual([path])
    expectStatus(await http.patchNode(path, { Text: 'charlie patched', Deep: { List: ['delta in a list'] } }), 200)
    expect(await find(ts.url, alice.token, 'bravo')).toEqual([])
    expect((await find(ts.url, alice.token, 'charlie')).map((h) => h.path)).toEqual([path])
    expect((await find(ts.url, alice.token, 'delta list')).map((h) => h.path)).toEqual([path])
    // A stock y-websocket client's edit: the row's content follows within a flush ([STO5]).
    const client = stockProvider(ts.url, path, alice.token)
    try {
      await client.synced()
      client.content.set('Text', 'echo from yjs')
      await waitFor(async () => (await find(ts.url, alice.token, 'echo')).length === 1, { timeoutMs: 10_000, description: 'the Yjs edit is found' })
      expect(await find(ts.url, alice.token, 'charlie')).toEqual([])
    } finally {
      client.destroy()
    }
    expectStatus(await http.deleteNode(path), 204)
    expect(await find(ts.url, alice.token, 'echo')).toEqual([])
    expect(await find(ts.url, alice.token, 'delta')).toEqual([])
  })

  it('[FIND1] system children (access assignments, runs) are not indexed', async () => {
    await grantRole(ts.url, alice.token, space, bob.userId, 'Viewer')
    // The assignment's content names bob; only the nodes people write are found.
    expect((await find(ts.url, alice.token, bob.userId)).filter((h) => h.path.includes('/_'))).toEqual([])
  })

  it('[FIND2] a node the caller cannot read is never found, and does not push a readable one out', async () => {
    const http = api(ts.url, alice.token)
    const secret = await createSpace(ts.url, alice.token)
    for (let i = 0; i < 30; i++) expectStatus(await http.putNode(`${secret}/s${i}`, 'Document', {}, 'zulu'), 201)
    const bobSpace = await createSpace(ts.url, bob.token)
    expectStatus(await api(ts.url, bob.token).putNode(`${bobSpace}/mine`, 'Document', { Note: 'zulu in my text' }), 201)
    // Thirty better-ranked matches bob cannot read: his one match still comes first, alone.
    expect((await find(ts.url, bob.token, 'zulu', 1)).map((h) => h.path)).toEqual([`${bobSpace}/mine`])
    expect((await find(ts.url, bob.token, 'zulu')).map((h) => h.path)).toEqual([`${bobSpace}/mine`])
    // Alice reads hers, names first (equal names, then path order), her text-only match absent.
    const hers = await find(ts.url, alice.token, 'zulu', 50)
    expect(hers).toHaveLength(30)
    expect(hers.every((h) => h.path.startsWith(`${secret}/`))).toBe(true)
    // Granted: found at once; revoked (Denied): gone at once.
    await grantRole(ts.url, alice.token, secret, bob.userId, 'Viewer')
    expect(await find(ts.url, bob.token, 'zulu', 50)).toHaveLength(31)
    await grantRole(ts.url, alice.token, secret, bob.userId, 'Viewer', true)
    expect((await find(ts.url, bob.token, 'zulu', 50)).map((h) => h.path)).toEqual([`${bobSpace}/mine`])
  })

  it('[FIND2] each result says where it is: its readable ancestors\' names, the top first; an ancestor the caller cannot read is never named', async () => {
    const http = api(ts.url, alice.token)
    const north = await createSpace(ts.url, alice.token)
    const south = await createSpace(ts.url, alice.token)
    expectStatus(await http.putNode(north, 'Space', {}, 'North office'), 200)
    expectStatus(await http.putNode(south, 'Space', {}, '南の事務所'), 200)
    expectStatus(await http.putNode(`${north}/minutes`, 'Document', {}, 'Minutes'), 201)
    expectStatus(await http.putNode(`${north}/minutes/plan`, 'Document', {}, 'Gazebo budget'), 201)
    expectStatus(await http.putNode(`${south}/plan`, 'Document', {}, 'Gazebo budget'), 201)
    const hits = await find(ts.url, alice.token, 'gazebo budget')
    // Equal names rank by path: the two spaces' ids decide the order, so it is compared as a set.
    expect(new Map(hits.map((h) => [h.path, h.where]))).toEqual(
      new Map([
        [`${south}/plan`, ['南の事務所']],
        [`${north}/minutes/plan`, ['North office', 'Minutes']],
      ]),
    )
    expect(hits).toHaveLength(2)
    // Bob is given the Minutes subtree only: he finds the plan there, its space's name is not his to read.
    await grantRole(ts.url, alice.token, `${north}/minutes`, bob.userId, 'Viewer')
    expect((await find(ts.url, bob.token, 'gazebo budget')).map((h) => [h.path, h.where])).toEqual([[`${north}/minutes/plan`, ['Minutes']]])
  })

  it('[FIND4] driven by the readable regions: rows outside them never reach the access check, by every way', async () => {
    const http = api(ts.url, alice.token)
    const hidden = await createSpace(ts.url, alice.token)
    for (let i = 0; i < 20; i++) expectStatus(await http.putNode(`${hidden}/h${i}`, 'Document', { Note: 'xray text' }, i % 2 ? 'xray' : `xr ${i}`), 201)
    const bobSpace = await createSpace(ts.url, bob.token)
    const bobHttp = api(ts.url, bob.token)
    expectStatus(await bobHttp.putNode(`${bobSpace}/name`, 'Document', {}, 'xray notes'), 201)
    expectStatus(await bobHttp.putNode(`${bobSpace}/text`, 'Document', { Note: 'a xray in the text' }), 201)
    const reader = userPrincipal(bob.userId as UserId)
    const regions = ts.server.nodes.readRegions(reader)!
    const saved = { ...searchWithinLimits }
    try {
      // Few matches, the regions walked, the walk narrowed by the index after one candidate, and
      // the same as a large caller (the whole index's kept names, each checked against the regions).
      for (const walk of [{}, { walkAtMost: 0 }])
      for (const limits of [{}, { fewMatches: 0 }, { fewMatches: 0, batch: 1 }, { fewMatches: 0, batch: 1, narrowPerCandidate: 0 }].map((l) => ({ ...l, ...walk }))) {
        Object.assign(searchWithinLimits, saved, limits)
        for (const q of ['xray', 'xr', 'xray te']) {
          const offered: string[] = []
          const hits = await ts.server.storage.searchNodes(planSearch(q), (p) => (offered.push(p), true), 50, regions)
          expect(offered.filter((p) => p.startsWith(`${hidden}/`)), `${q} ${JSON.stringify(limits)}`).toEqual([])
          expect(hits.map((h) => h.path), `${q} ${JSON.stringify(limits)}`).toEqual(q === 'xray' ? [`${bobSpace}/name`, `${bobSpace}/text`] : q === 'xr' ? [`${bobSpace}/name`] : [`${bobSpace}/text`, `${bobSpace}/name`])
        }
      }
    } finally {
      Object.assign(searchWithinLimits, saved)
    }
  })

  it('[FIND4] the readable names kept between searches follow every create, rename, move, trash and grant at once', async () => {
    const saved = { ...searchWithinLimits }
    // Every search walks the regions (or reuses the kept walk); few matches never decide.
    Object.assign(searchWithinLimits, { fewMatches: 0 })
    try {
      const mine = await createSpace(ts.url, bob.token)
      const bobHttp = api(ts.url, bob.token)
      const names = async (q: string) => (await find(ts.url, bob.token, q, 50)).map((h) => `${h.path}=${h.name}`)
      expectStatus(await bobHttp.putNode(`${mine}/k1`, 'Document', {}, 'kilo one'), 201)
      expect(await names('kilo')).toEqual([`${mine}/k1=kilo one`])
      expect(await names('ki')).toEqual([`${mine}/k1=kilo one`])
      // Created: found by the next search.
      expectStatus(await bobHttp.putNode(`${mine}/k2`, 'Document', {}, 'kilo'), 201)
      expect(await names('kilo')).toEqual([`${mine}/k2=kilo`, `${mine}/k1=kilo one`])
      // Renamed: the new name ranks, the old one is gone.
      expectStatus(await bobHttp.post(`/api/nodes/${mine}/k2/rename`, { name: 'lima' }), 200)
      expect(await names('kilo')).toEqual([`${mine}/k1=kilo one`])
      expect(await names('li')).toEqual([`${mine}/k2=lima`])
      // A text edit leaves the names as they are, and the text is read as it is now.
      expectStatus(await bobHttp.patchNode(`${mine}/k2`, { Note: 'kilo in the text' }), 200)
      expect(await names('kilo')).toEqual([`${mine}/k1=kilo one`, `${mine}/k2=lima`])
      // Moved under another parent: found at its new path.
      expectStatus(await bobHttp.putNode(`${mine}/folder`, 'Document', {}, 'folder'), 201)
      expectStatus(await bobHttp.post(`/api/nodes/${mine}/k1/move`, { to: `${mine}/folder/k1` }), 200)
      expect(await names('kilo one')).toEqual([`${mine}/folder/k1=kilo one`])
      // Trashed: gone.
      expectStatus(await bobHttp.post(`/api/nodes/${mine}/folder/k1/trash`, {}), 200)
      expect(await names('kilo one')).toEqual([])
      // Another user's space granted: its names join (the regions changed), revoked: they leave.
      const hers = await createSpace(ts.url, alice.token)
      expectStatus(await api(ts.url, alice.token).putNode(`${hers}/k3`, 'Document', {}, 'kilo three'), 201)
      expect(await names('kilo three')).toEqual([])
      await grantRole(ts.url, alice.token, hers, bob.userId, 'Viewer')
      expect(await names('kilo three')).toEqual([`${hers}/k3=kilo three`])
      await grantRole(ts.url, alice.token, hers, bob.userId, 'Viewer', true)
      expect(await names('kilo three')).toEqual([])
    } finally {
      Object.assign(searchWithinLimits, saved)
    }
  })

  it('[FIND4] a large caller (past walkAtMost): the whole index\'s kept names follow a create, rename and trash at once, and hold nothing unreadable', async () => {
    const saved = { ...searchWithinLimits }
    Object.assign(searchWithinLimits, { fewMatches: 0, walkAtMost: 0 })
    try {
      const mine = await createSpace(ts.url, bob.token)
      const hers = await createSpace(ts.url, alice.token)
      const bobHttp = api(ts.url, bob.token)
      const names = async (q: string) => (await find(ts.url, bob.token, q, 50)).map((h) => `${h.path}=${h.name}`)
      expectStatus(await api(ts.url, alice.token).putNode(`${hers}/q0`, 'Document', { Note: 'quokka' }, 'quokka'), 201)
      expectStatus(await bobHttp.putNode(`${mine}/q1`, 'Document', {}, 'quokka one'), 201)
      expect(await names('quokka')).toEqual([`${mine}/q1=quokka one`])
      expect(await names('qu')).toEqual([`${mine}/q1=quokka one`])
      expectStatus(await bobHttp.putNode(`${mine}/q2`, 'Document', { Note: 'a quokka' }, 'wombat'), 201)
      expect(await names('quokka')).toEqual([`${mine}/q1=quokka one`, `${mine}/q2=wombat`])
      expectStatus(await bobHttp.post(`/api/nodes/${mine}/q1/rename`, { name: 'wallaby' }), 200)
      expect(await names('quokka')).toEqual([`${mine}/q2=wombat`])
      expect(await names('wa')).toEqual([`${mine}/q1=wallaby`])
      expectStatus(await bobHttp.post(`/api/nodes/${mine}/q2/trash`, {}), 200)
      expect(await names('quokka')).toEqual([])
      await grantRole(ts.url, alice.token, hers, bob.userId, 'Viewer')
      expect(await names('quokka')).toEqual([`${hers}/q0=quokka`])
    } finally {
      Object.assign(searchWithinLimits, saved)
    }
  })

  it('[FIND4] a 1–2 character word checked on the raw text only where no case folding reaches it', () => {
    for (const t of ['91', '7', '-', '会議', '메모', 'の', '日']) expect(isCaseless(t), t).toBe(true)
    // Letters, accented or not, Cyrillic, Cherokee small letters (the lower case of U+13A0…), fullwidth Latin.
    for (const t of ['a', 'B', '9a', 'ü', 'Ü', 'я', '\uab70', 'Ａ', '\u0307', 'İ']) expect(isCaseless(t), t).toBe(false)
  })

  it('[FIND3] bad input: a stable 400 or safe results, never a 500', async () => {
    const http = api(ts.url, alice.token)
    const status = async (q: string, extra = '') => {
      const res = await http.get(`/api/search?q=${encodeURIComponent(q)}${extra}`)
      expect(res.status, q.slice(0, 30)).not.toBe(500)
      return res
    }
    for (const q of ['', '   ', 'x'.repeat(201), Array.from({ length: 9 }, (_, i) => `w${i}`).join(' '), 'a\u0000b']) {
      const res = await status(q)
      expect(res.status, JSON.stringify(q.slice(0, 20))).toBe(400)
      expect(errorCode(res)).toBe('invalid_request')
    }
    expect(errorCode(await http.get('/api/search'))).toBe('invalid_request')
    for (const extra of ['&limit=0', '&limit=51', '&limit=abc', '&limit=1.5']) expect(errorCode(await status('memo', extra))).toBe('invalid_request')
    // FTS syntax is plain text: quotes, stars, NEAR(, parentheses, column filters, operators.
    expectStatus(await http.putNode(`${space}/syntax`, 'Document', { Text: 'say "hi" (now) a*b NEAR(x y) name:q' }), 201)
    for (const q of ['"', '""', '"hi"', '*', 'a*b', 'NEAR(', 'NEAR(x y)', ')', '(now)', 'name:q', 'AND', 'OR NOT', '^', '-', '{name}', "'", '\\']) {
      const res = await status(q)
      expect(res.status, q).toBe(200)
    }
    expect((await find(ts.url, alice.token, '"hi"')).map((h) => h.path)).toEqual([`${space}/syntax`])
    expect((await find(ts.url, alice.token, 'NEAR(x')).map((h) => h.path)).toEqual([`${space}/syntax`])
    expect((await find(ts.url, alice.token, 'a*b')).map((h) => h.path)).toEqual([`${space}/syntax`])
    // No token: 401, as every API route.
    expect((await api(ts.url).get('/api/search?q=memo')).status).toBe(401)
  })

  it('[FIND1] an existing data dir without the index gains it at boot, and a damaged one is rebuilt', async () => {
    const http = api(ts.url, alice.token)
    expectStatus(await http.putNode(`${space}/old`, 'Document', { Text: 'yankee before the index' }), 201)
    await ts.server.close()
    // What a data dir from before the index looks like: no table, no triggers, no marker.
    const db = new Database(join(ts.dataDir, 'weft.db'))
    db.exec('DROP TRIGGER node_search_insert; DROP TRIGGER node_search_delete; DROP TRIGGER node_search_update; DROP TABLE node_search; DROP TABLE search_meta;')
    db.close()
    await ts.restart()
    expect((await find(ts.url, alice.token, 'yankee')).map((h) => h.path)).toEqual([`${space}/old`])
    // Rows lost from the index (a file restored from elsewhere): rebuilt at the next boot.
    await ts.server.close()
    const db2 = new Database(join(ts.dataDir, 'weft.db'))
    db2.exec('DELETE FROM node_search')
    db2.close()
    await ts.restart()
    expect((await find(ts.url, alice.token, 'yankee')).map((h) => h.path)).toEqual([`${space}/old`])
    expect((await find(ts.url, alice.token, '日本語')).map((h) => h.name)).toEqual(['日本語のメモ'])
  })
})
