import { expect, test } from '@playwright/test'
import { api, editField, field, getContent, openLoggedIn, syncStatus, twoEditorsOn, type E2eServer, type TestUser, startE2eServer } from './fixtures.js'

let server: E2eServer
let ann: TestUser
let bob: TestUser

test.beforeAll(async () => {
  server = await startE2eServer()
  ;({ ann, bob } = await twoEditorsOn(server, 'Tabs', { Note: { Summary: 'base', Other: 'o' } }))
})

test.afterAll(async () => {
  await server?.dispose()
})

test('[SYNC21] two tabs back online with an edit typed offline into a field someone removed meanwhile: it is replayed once, the text lands, and neither tab shows a refusal', async ({ browser }) => {
  const a = await openLoggedIn(browser, server, ann, 'Tabs/Note')
  const tab2 = await a.context.newPage()
  await tab2.goto('/#/n/Tabs/Note')
  for (const p of [a.page, tab2]) await expect(field(p, 'Summary')).toHaveValue('base')
  await a.context.setOffline(true)
  for (const p of [a.page, tab2]) await expect(syncStatus(p)).toHaveAttribute('data-status', 'offline')
  await editField(a.page, 'Summary', 'base typed offline')
  await expect(field(tab2, 'Summary')).toHaveValue('base typed offline')
  // Meanwhile Bob removes the field.
  expect((await api(server, bob, 'PATCH', '/api/nodes/Tabs/Note', { Summary: null })).status).toBe(200)
  await a.context.setOffline(false)
  for (const p of [a.page, tab2]) await expect(syncStatus(p)).toHaveAttribute('data-status', 'saved', { timeout: 20_000 })
  await expect.poll(async () => (await getContent(server, ann, 'Tabs/Note')).Summary, { timeout: 15_000 }).toBe('base typed offline')
  for (const p of [a.page, tab2]) {
    await expect(field(p, 'Summary')).toHaveValue('base typed offline')
    await expect(p.locator('weft-node-page .refused')).toHaveCount(0)
    await expect(syncStatus(p)).not.toContainText(/refused/i)
  }
  await tab2.screenshot({ path: 'test-results/sync21-two-tabs-one-replay.png' })
  await a.context.close()
})
