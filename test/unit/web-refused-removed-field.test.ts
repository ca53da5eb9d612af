// @vitest-environment node
import 'fake-indexeddb/auto'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import { api, createDocument, createSpace, grantRole, startTestServer, waitFor, type TestServer } from '../helpers/index.js'
import { statusIs, webClients } from '../helpers/web-clients.js'
import type { Session } from '../../web/sync/index.js'
import { groupRefused, markRemovedFields } from '../../web/store/index.js'

/**
 * [WEB83] An offline edit of a field someone removed meanwhile, against a real server (the web
 * sync client in Node: fake-indexeddb, `ws`).
 */
let ts: TestServer
const web = webClients(() => ts.url, 'web-refused-removed')
const { client, user } = web

beforeAll(async () => {
  ts = await startTestServer()
})
afterAll(() => ts.cleanup())
afterEach(() => web.stopAll())

describe('an offline edit of a field someone removed meanwhile', () => {
  /** Ann's space with `doc` ({ Summary: 'base', Other: 'o' }), Bob an Editor in it. */
  async function annAndBob() {
    const ann = await user('Ann')
    const bob = await user('Bob')
    const space = await createSpace(ts.url, ann.token)
    await grantRole(ts.url, ann.token, space, bob.userId, 'Editor')
    const path = await createDocument(ts.url, ann.token, `${space}/doc`, { Summary: 'base', Other: 'o' })
    return { ann, bob, path }
  }

  /** Bob removes `field` of `path` (online, saved). */
  async function bobRemoves(bob: Session, path: string, field: string): Promise<void> {
    const b = await client(bob)
    const rb = b.acquire(path)
    await rb.synced
    await b.patch(path, { [field]: null })
    await statusIs(b, (s) => s.kind === 'saved' && s.pending === 0)
  }

  it('[SYNC21] two tabs typed offline into a field Bob removed meanwhile: each edit is replayed once across the tabs, as one tab does, so the text lands (the field made again) and nothing is refused twice', async () => {
    const { ann, bob, path } = await annAndBob()
    // Two tabs of Ann (one store), both offline, each typing into Summary (the tester's case).
    const dbName = web.dbName()
    const tab = () => client(ann, { dbName })
    const a = await tab()
    const a2 = await tab()
    const ra = a.acquire(path)
    const ra2 = a2.acquire(path)
    await Promise.all([ra.synced, ra2.synced])
    await waitFor(() => ra.textOf('Summary') !== null && ra2.textOf('Summary') !== null, 5000)
    a.conn.stop()
    a2.conn.stop()
    let value = 'base'
    for (const ch of ' ann') await a.patch(path, { Summary: (value += ch) })
    await waitFor(() => ra2.content.Summary === value, 5000)
    for (const ch of ' tab2') await a2.patch(path, { Summary: (value += ch) })
    await waitFor(() => ra.content.Summary === value, 5000)
    await bobRemoves(bob, path, 'Summary')
    // Both tabs come back and send the shared outbox.
    a.conn.start()
    a2.conn.start()
    await statusIs(a, (s) => s.kind === 'saved' && s.pending === 0)
    await statusIs(a2, (s) => s.kind === 'saved' && s.pending === 0)
    await waitFor(() => !ra.state$.value.rebuilding && !ra2.state$.value.rebuilding, 10_000)
    expect(await a.store.refusedRows()).toEqual([])
    expect((await api(ts.url, ann.token).getNode(path)).body.content).toEqual({ Other: 'o', Summary: 'base ann tab2' })
    await waitFor(() => ra.content.Summary === 'base ann tab2' && ra2.content.Summary === 'base ann tab2', 10_000)
  })

  it('[WEB83] a refused edit (invalid_update) of a field the node no longer has is read as the field removed, one the node has is not, and Try again adds the field back with the text', async () => {
    const { ann, bob, path } = await annAndBob()
    await bobRemoves(bob, path, 'Summary')
    const a = await client(ann)
    const ra = a.acquire(path)
    await ra.synced
    // The entry as a replay the server could not apply leaves it (a Yjs update that writes into
    // the removed field's type; the server's words are for developers).
    await a.store.db.outbox.add({ path, patch: { Summary: 'base ann tab2' }, update: new Uint8Array(), status: 'refused', code: 'invalid_update', message: 'The update writes into a deleted type; reload the node.', at: new Date().toISOString() })
    const groups = await markRemovedFields(groupRefused(await a.store.refusedRows()), (p) => a.store.loadDoc(p))
    expect(groups.map((g) => [g.field, g.value, g.code, g.fieldRemoved])).toEqual([['Summary', 'base ann tab2', 'invalid_update', true]])
    // A field the node still has is not said to be removed.
    const other = await markRemovedFields([{ ...groups[0]!, field: 'Other', fieldRemoved: undefined }], (p) => a.store.loadDoc(p))
    expect(other[0]!.fieldRemoved).toBeUndefined()
    // What the words offer works: Try again adds the field back with Ann's text.
    await a.retryRefused(groups[0]!.ids)
    await statusIs(a, (s) => s.kind === 'saved' && s.pending === 0 && s.refused === 0)
    expect((await api(ts.url, ann.token).getNode(path)).body.content).toEqual({ Other: 'o', Summary: 'base ann tab2' })
  })
})
