import { expect, test, type Page } from '@playwright/test'
import { api, editField, field, getContent, openLoggedIn, putNode, syncStatus, twoEditorsOn, type E2eServer, type TestUser, startE2eServer } from './fixtures.js'

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

test('[SYNC23] two tabs with renames queued offline, one in each: back online, each is sent once and lands, and both tabs show both names', async ({ browser }) => {
  await putNode(server, ann, 'Tabs/Doc23', 'Document', { Body: 'x' }, 'Start23')
  await putNode(server, ann, 'Tabs/Other23', 'Document', { Body: 'y' }, 'Other23')
  const a = await openLoggedIn(browser, server, ann, 'Tabs/Doc23')
  const tab2 = await a.context.newPage()
  await tab2.goto('/#/n/Tabs/Other23')
  const sent: string[] = []
  a.context.on('request', (r) => {
    if (r.method() === 'POST' && r.url().endsWith('/rename')) sent.push(new URL(r.url()).pathname)
  })
  const title = (p: Page) => p.locator('weft-node-page weft-node-title')
  await expect(title(a.page).locator('h1')).toHaveText('Start23')
  await expect(title(tab2).locator('h1')).toHaveText('Other23')
  await a.context.setOffline(true)
  for (const p of [a.page, tab2]) await expect(syncStatus(p)).toHaveAttribute('data-status', 'offline')
  for (const [p, name] of [[a.page, 'Renamed in tab one'], [tab2, 'Renamed in tab two']] as const) {
    await title(p).getByRole('button', { name: /^Rename / }).click()
    await title(p).getByLabel('New name').fill(name)
    await title(p).getByLabel('New name').press('Enter')
    await expect(title(p).locator('h1')).toHaveText(name)
  }
  // One queue for the person: each tab counts both renames as waiting.
  for (const p of [a.page, tab2]) await expect(syncStatus(p)).toHaveAttribute('data-pending', '2')
  await a.context.setOffline(false)
  for (const p of [a.page, tab2]) await expect(syncStatus(p)).toHaveAttribute('data-status', 'saved', { timeout: 20_000 })
  await expect.poll(async () => (await api<{ name: string }>(server, bob, 'GET', '/api/nodes/Tabs/Doc23')).body.name).toBe('Renamed in tab one')
  await expect.poll(async () => (await api<{ name: string }>(server, bob, 'GET', '/api/nodes/Tabs/Other23')).body.name).toBe('Renamed in tab two')
  // Each rename went out once, from whichever tab held the queue's claim.
  expect(sent.sort()).toEqual(['/api/nodes/Tabs/Doc23/rename', '/api/nodes/Tabs/Other23/rename'])
  for (const p of [a.page, tab2]) {
    await p.goto('/#/n/Tabs')
    await expect(p.locator('weft-nav-tree')).toContainText('Renamed in tab one')
    await expect(p.locator('weft-nav-tree')).toContainText('Renamed in tab two')
  }
  await tab2.screenshot({ path: 'test-results/sync23-two-tabs-renames.png' })
  await a.context.close()
})
