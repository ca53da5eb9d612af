import { expect, test } from '@playwright/test'
import { field, editField, openLoggedIn, startE2eServer, twoEditorsOn, syncStatus, type E2eServer, type TestUser } from './fixtures.js'

let server: E2eServer
let ann: TestUser
let bob: TestUser

test.beforeAll(async () => {
  server = await startE2eServer()
  ;({ ann, bob } = await twoEditorsOn(server, 'Studio', { Plan: { Title: 'Draft', Owner: 'Ann' } }))
})

test.afterAll(async () => {
  await server?.dispose()
})

test('two users edit the same node and see each other live, and in presence', async ({ browser }) => {
  const a = await openLoggedIn(browser, server, ann, 'Studio/Plan')
  const b = await openLoggedIn(browser, server, bob, 'Studio/Plan')
  await expect(field(a.page, 'Title')).toHaveValue('Draft')
  await expect(field(b.page, 'Title')).toHaveValue('Draft')

  // Presence: each sees the other by name.
  await expect(a.page.locator('weft-node-page .presence')).toContainText('Bob')
  await expect(b.page.locator('weft-node-page .presence')).toContainText('Ann')

  await editField(a.page, 'Title', 'Final plan')
  await expect(field(b.page, 'Title')).toHaveValue('Final plan')

  await editField(b.page, 'Owner', 'Bob')
  await expect(field(a.page, 'Owner')).toHaveValue('Bob')
  // Both edits, to different fields from different writers, survive everywhere.
  await expect(field(b.page, 'Title')).toHaveValue('Final plan')
  await expect(syncStatus(a.page)).toHaveAttribute('data-status', 'saved')
  await expect(syncStatus(b.page)).toHaveAttribute('data-status', 'saved')

  // The navigation tree lists the shared space for Bob.
  await expect(b.page.locator('weft-nav-tree a[role=treeitem][data-path="Studio"]')).toBeVisible()

  await a.context.close()
  await b.context.close()
})
