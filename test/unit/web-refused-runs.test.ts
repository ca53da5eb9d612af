// @vitest-environment node
import 'fake-indexeddb/auto'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import { api, createDocument, createSpace, grantRole, startTestServer, waitFor, type TestServer } from '../helpers/index.js'
import type { SyncClient } from '../../web/sync/index.js'
import { statusIs, webClients } from '../helpers/web-clients.js'
import { groupRefused } from '../../web/store/index.js'

/**
 * Refused edits kept for their author, against a real server (the web sync client in Node:
 * fake-indexeddb, `ws`): a second refused run of a field, a discard, a retry.
 */
let ts: TestServer
const web = webClients(() => ts.url, 'web-refused-runs')
const { client, user } = web

beforeAll(async () => {
  ts = await startTestServer()
})
afterAll(() => ts.cleanup())
afterEach(() => web.stopAll())

/** Types `typed` after what the field holds, one keystroke (one patch) per character. */
async function type(c: SyncClient, path: string, field: string, from: string, typed: string): Promise<string> {
  let value = from
  for (const ch of typed) await c.patch(path, { [field]: (value += ch) })
  return value
}

/** Ann's space with Bob as Editor, a Document with `Summary: 'base'`, Bob's client holding it. */
async function setUp() {
  const ann = await user('Ann')
  const bob = await user('Bob')
  const space = await createSpace(ts.url, ann.token)
  const grant = await grantRole(ts.url, ann.token, space, bob.userId, 'Editor')
  const path = await createDocument(ts.url, ann.token, `${space}/doc`, { Summary: 'base' })
  const b = await client(bob)
  const r = b.acquire(path)
  await r.synced
  await waitFor(() => r.textOf('Summary') !== null, 5000)
  return { ann, bob, space, grant, path, b, r }
}

describe('refused edits kept for their author', () => {
  it('[WEB80] a second refused run of the same field is its own entry: the first refused text stays to be seen and copied', async () => {
    const { ann, space, bob, path, b, r } = await setUp()
    // Run 1, typed offline; the role is lowered meanwhile: refused on reconnect, the doc rebuilt.
    b.conn.stop()
    const first = await type(b, path, 'Summary', 'base', ' first paragraph')
    await grantRole(ts.url, ann.token, space, bob.userId, 'Viewer')
    b.conn.start()
    await waitFor(async () => (await b.store.outboxFor(path)).every((e) => e.status === 'refused'), 10_000)
    await waitFor(() => r.content.Summary === 'base' && !r.state$.value.rebuilding, 10_000)
    // Run 2 on the rebuilt doc: refused too (kept on the device, unsent: the role is Viewer).
    const second = await type(b, path, 'Summary', 'base', ' more')
    await waitFor(async () => (await b.store.outboxFor(path)).every((e) => e.status === 'refused'), 10_000)
    const groups = groupRefused(await b.store.refusedRows())
    expect(groups.map((g) => [g.field, g.value, g.ids.length])).toEqual([
      ['Summary', first, ' first paragraph'.length],
      ['Summary', second, ' more'.length],
    ])
    expect(new Set(groups.map((g) => g.key)).size).toBe(2)
    expect((await api(ts.url, ann.token).getNode(path)).body.content.Summary).toBe('base')
  })

  it('[WEB81] after a discard the device holds the server\'s text: a refused edit made while the room was denied is gone from the field, and the next edit sends nothing of it', async () => {
    const { ann, space, bob, grant, path, b, r } = await setUp()
    expect((await api(ts.url, ann.token).deleteNode(grant)).status).toBe(204)
    await waitFor(() => r.state$.value.denied !== null, 5000)
    await type(b, path, 'Summary', 'base', ' refused')
    await waitFor(async () => (await b.store.outboxFor(path)).every((e) => e.status === 'refused'), 10_000)
    // Access given back; the node opened again (a reload): the device shows the server's text.
    await grantRole(ts.url, ann.token, space, bob.userId, 'Editor')
    b.release(path)
    b.stop()
    const b2 = await client(bob, { dbName: b.opts.dbName })
    const r2 = b2.acquire(path)
    await r2.synced
    await waitFor(() => r2.content.Summary === 'base' && !r2.state$.value.rebuilding, 10_000)
    // Discarded: nothing refused, the field the server's, and what is typed next saved as typed.
    const groups = groupRefused(await b2.store.refusedRows())
    await b2.discardRefusedMany(groups.flatMap((g) => g.ids))
    expect(await b2.store.refusedRows()).toEqual([])
    await waitFor(() => !r2.state$.value.rebuilding, 10_000)
    expect(r2.content.Summary).toBe('base')
    await b2.patch(path, { Summary: 'base!' })
    await statusIs(b2, (s) => s.kind === 'saved' && s.pending === 0 && s.refused === 0)
    expect((await api(ts.url, ann.token).getNode(path)).body.content.Summary).toBe('base!')
    expect(r2.content.Summary).toBe('base!')
  })

  it('[WEB81] an edit refused while the room was denied, discarded before access came back: the node opened again shows the server\'s text', async () => {
    const { ann, space, bob, grant, path, b, r } = await setUp()
    expect((await api(ts.url, ann.token).deleteNode(grant)).status).toBe(204)
    await waitFor(() => r.state$.value.denied !== null, 5000)
    await type(b, path, 'Summary', 'base', ' x')
    await waitFor(async () => (await b.store.outboxFor(path)).every((e) => e.status === 'refused'), 10_000)
    expect(r.content.Summary).toBe('base x')
    await grantRole(ts.url, ann.token, space, bob.userId, 'Editor')
    await b.discardRefusedMany((await b.store.refusedRows()).map((e) => e.id!))
    // The stored copy is marked: opened again, it is the server's (the room was denied, so not yet).
    b.release(path)
    b.stop()
    const b2 = await client(bob, { dbName: b.opts.dbName })
    const r2 = b2.acquire(path)
    await r2.synced
    await waitFor(() => r2.content.Summary === 'base' && !r2.state$.value.rebuilding, 10_000)
  })

  it('[WEB82] Try again: a refused edit, sent again once the role may write, is saved whole', async () => {
    const { ann, space, bob, path, b, r } = await setUp()
    b.conn.stop()
    const typed = await type(b, path, 'Summary', 'base', ' kept')
    await grantRole(ts.url, ann.token, space, bob.userId, 'Viewer')
    b.conn.start()
    await waitFor(async () => (await b.store.outboxFor(path)).every((e) => e.status === 'refused'), 10_000)
    await waitFor(() => r.content.Summary === 'base' && !r.state$.value.rebuilding, 10_000)
    // Ann types meanwhile; Bob is an Editor again (told live), then tries again.
    expect((await api(ts.url, ann.token).patchNode(path, { Summary: 'Ann: base' })).status).toBe(200)
    await grantRole(ts.url, ann.token, space, bob.userId, 'Editor')
    await waitFor(() => r.state$.value.permissions?.has('Update') === true && r.content.Summary === 'Ann: base', 10_000)
    await b.retryRefused((await b.store.refusedRows()).map((e) => e.id!))
    await statusIs(b, (s) => s.kind === 'saved' && s.pending === 0 && s.refused === 0)
    expect(typed).toBe('base kept')
    expect((await api(ts.url, ann.token).getNode(path)).body.content.Summary).toBe('Ann: base kept')
    await waitFor(() => r.content.Summary === 'Ann: base kept', 5000)
  })

  it('[WEB82] Try again on a node whose room was denied (access removed, then given back): joined again and saved', async () => {
    const { ann, space, bob, grant, path, b, r } = await setUp()
    expect((await api(ts.url, ann.token).deleteNode(grant)).status).toBe(204)
    await waitFor(() => r.state$.value.denied !== null, 5000)
    await type(b, path, 'Summary', 'base', ' back')
    await waitFor(async () => (await b.store.outboxFor(path)).every((e) => e.status === 'refused'), 10_000)
    await grantRole(ts.url, ann.token, space, bob.userId, 'Editor')
    await b.retryRefused((await b.store.refusedRows()).map((e) => e.id!))
    await statusIs(b, (s) => s.kind === 'saved' && s.pending === 0 && s.refused === 0)
    expect((await api(ts.url, ann.token).getNode(path)).body.content.Summary).toBe('base back')
    await waitFor(() => r.state$.value.denied === null && r.content.Summary === 'base back', 5000)
  })
})
