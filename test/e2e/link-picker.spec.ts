import { expect, test, type Page } from '@playwright/test'
import { getContent, openLoggedIn, putNode, startE2eServer, twoEditorsOn, type E2eServer, type TestUser } from './fixtures.js'

/**
 * Issue 16 "link to a node (a picker over readable nodes)": the link field's picker asks the
 * server's quick find (access-filtered) when online, so it offers a node the device has never
 * listed or opened, and never one the person cannot read; offline it falls back to the nodes on
 * this device, saying so.
 */
let server: E2eServer
let ann: TestUser
let bob: TestUser

test.beforeAll(async () => {
  server = await startE2eServer()
  ;({ ann, bob } = await twoEditorsOn(server, 'Pick', { Card: { See: { $ref: 'Pick/Card' } } }))
  // Deep in the space Bob edits: his device never lists it (the picker warms the top level,
  // the space, the page's parent and its children), and he never opens it.
  await putNode(server, ann, 'Pick/Deep', 'Document', {}, 'Deep')
  await putNode(server, ann, 'Pick/Deep/Archive', 'Document', {}, 'Archive')
  await putNode(server, ann, 'Pick/Deep/Archive/Roadmap', 'Document', { Body: 'quarterly' }, 'Roadmap kept deep')
  // Ann's own space: Bob cannot read it, and its node matches the same word.
  await putNode(server, ann, 'AnnOnly', 'Space', {}, 'Ann only')
  await putNode(server, ann, 'AnnOnly/Roadmap', 'Document', { Body: 'secret' }, 'Roadmap secret')
})

test.afterAll(async () => {
  await server?.dispose()
})

const see = (page: Page) => page.locator('weft-node-page [data-field="See"]')
const options = (page: Page) => see(page).locator('[role=option] button')

test('[FIND6] the link picker offers a readable node this device never opened, never an unreadable one; offline, the device’s nodes, marked', async ({ browser }) => {
  const a = await openLoggedIn(browser, server, ann, 'Pick/Card')
  const b = await openLoggedIn(browser, server, bob, 'Pick/Card')
  for (const { page } of [a, b]) {
    await see(page).getByRole('button', { name: 'Change…' }).click()
    await see(page).getByRole('combobox').fill('roadmap')
  }
  // Ann may read both: the word does match the node Bob cannot read.
  await expect(options(a.page)).toHaveCount(2)
  await expect(options(a.page).filter({ hasText: 'Roadmap secret' })).toHaveCount(1)
  // Bob: the deep node only, answered by the server (no offline note).
  await expect(options(b.page)).toHaveCount(1)
  await expect(options(b.page)).toContainText('Roadmap kept deep')
  await expect(options(b.page).filter({ hasText: 'Roadmap secret' })).toHaveCount(0)
  await expect(see(b.page).locator('[data-offline]')).toHaveCount(0)
  await options(b.page).first().click()
  await expect.poll(async () => (await getContent(server, ann, 'Pick/Card')).See).toEqual({ $ref: 'Pick/Deep/Archive/Roadmap' })
  await expect(see(b.page).getByRole('link', { name: 'Roadmap kept deep' })).toBeVisible()
  await expect(see(a.page).getByRole('link', { name: 'Roadmap kept deep' })).toBeVisible()

  // Offline: the nodes this device knows, marked as such; still nothing Bob cannot read.
  await b.context.setOffline(true)
  await see(b.page).getByRole('button', { name: 'Change…' }).click()
  await see(b.page).getByRole('combobox').fill('card')
  await expect(see(b.page).locator('[data-offline]')).toHaveText('Offline: only the nodes on this device.')
  await expect(options(b.page).filter({ hasText: 'Pick/Card' })).toHaveCount(1)
  await see(b.page).getByRole('combobox').fill('roadmap')
  await expect(see(b.page).locator('[data-offline]')).toBeVisible()
  await expect(options(b.page).filter({ hasText: 'Roadmap secret' })).toHaveCount(0)
  await a.context.close()
  await b.context.close()
})
