import { expect, test } from '@playwright/test'
import * as Y from 'yjs'
import { MuxClient } from '../helpers/mux-client.js'
import { encodeCrafted, rootEntry } from '../helpers/crafted-updates.js'
import { CONTENT_MAP } from '../../shared/index.js'
import {
  editField,
  field,
  getContent,
  openLoggedIn,
  startE2eServer,
  syncStatus,
  twoEditorsOn,
  type E2eServer,
  type TestUser,
} from './fixtures.js'

/**
 * [ACC12] Finding 10 in the app, two browsers: Ann edits a field, Bob's script writes another
 * field under Ann's Yjs client id and next clock while Ann is offline, Ann edits again and comes
 * back. Her edit is kept on the server and in Bob's browser; Bob's squat was refused.
 */
let server: E2eServer
let ann: TestUser
let bob: TestUser

test.beforeAll(async () => {
  server = await startE2eServer()
  ;({ ann, bob } = await twoEditorsOn(server, 'Squat', { Doc: { Title: 'first' } }))
})

test.afterAll(async () => {
  await server?.dispose()
})

test('[ACC12] an edit acknowledged to Ann is never turned into a deletion by a struct written under her client id', async ({ browser }) => {
  const a = await openLoggedIn(browser, server, ann, 'Squat/Doc')
  const b = await openLoggedIn(browser, server, bob, 'Squat/Doc')
  await expect(field(a.page, 'Title')).toHaveValue('first')
  await editField(a.page, 'Title', 'second')
  await expect(syncStatus(a.page)).toHaveAttribute('data-status', 'saved', { timeout: 15_000 })
  await expect(field(b.page, 'Title')).toHaveValue('second')

  // Bob's script syncs the node and reads the id and next clock of whoever wrote Title last.
  const script = await MuxClient.connect(server.url, bob.token)
  expect(await script.join('Squat/Doc')).toMatchObject({ ok: true })
  await expect.poll(() => script.json('Squat/Doc').Title).toBe('second')
  const doc = script.doc('Squat/Doc')
  const annId = [...doc.store.clients.keys()].find((c) => {
    const last = doc.store.clients.get(c)!.at(-1)
    return last instanceof Y.Item && !last.deleted && last.content instanceof Y.ContentString && (last.content as Y.ContentString).str.length > 0
  })
  expect(annId).toBeDefined()
  const next = Y.getState(doc.store, annId!)

  await a.context.setOffline(true)
  await expect(syncStatus(a.page)).toHaveAttribute('data-status', 'offline')
  const squat = encodeCrafted([{ client: annId!, clock: next, structs: [rootEntry(annId!, next, 'BobField', ['squat'])] }])
  expect(await script.sendUpdate('Squat/Doc', squat)).toMatchObject({ ok: false, code: 'client_id_conflict' })
  await editField(a.page, 'Title', 'third')
  await a.context.setOffline(false)
  await expect(syncStatus(a.page)).toHaveAttribute('data-status', 'saved', { timeout: 15_000 })
  await expect(syncStatus(a.page)).toHaveAttribute('data-pending', '0')

  expect(await getContent(server, bob, 'Squat/Doc')).toEqual({ Title: 'third' })
  await expect(field(b.page, 'Title')).toHaveValue('third')
  expect(doc.getMap(CONTENT_MAP).has('BobField')).toBe(false)
  await script.close()
  await a.context.close()
  await b.context.close()
})
