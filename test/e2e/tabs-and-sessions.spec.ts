import { expect, test, type Route } from '@playwright/test'
import { api, editField, field, getContent, openLoggedIn, putNode, signUp, startE2eServer, syncStatus, waitForServiceWorker, type E2eServer, type TestUser } from './fixtures.js'

let server: E2eServer
let ann: TestUser

test.beforeAll(async () => {
  server = await startE2eServer()
  ann = await signUp(server, 'Ann')
  await putNode(server, ann, 'Desk', 'Space', {}, 'Desk')
  await putNode(server, ann, 'Desk/Note', 'Document', { Text: 't0' }, 'Note')
})

test.afterAll(async () => {
  await server?.dispose()
})

test('two tabs of the app stay in step, even offline', async ({ browser }) => {
  const { context, page: tab1 } = await openLoggedIn(browser, server, ann, 'Desk/Note')
  const tab2 = await context.newPage()
  await tab2.goto('/#/n/Desk/Note')
  await expect(field(tab1, 'Text')).toHaveValue('t0')
  await expect(field(tab2, 'Text')).toHaveValue('t0')

  await context.setOffline(true)
  await expect(syncStatus(tab1)).toHaveAttribute('data-status', 'offline')
  await editField(tab1, 'Text', 'from tab 1')
  // No server in between: the other tab hears it over BroadcastChannel and the shared store.
  await expect(field(tab2, 'Text')).toHaveValue('from tab 1')
  await expect(syncStatus(tab2)).toHaveAttribute('data-pending', '1')

  await context.setOffline(false)
  await expect(syncStatus(tab1)).toHaveAttribute('data-status', 'saved')
  await expect(syncStatus(tab2)).toHaveAttribute('data-status', 'saved')
  expect((await getContent(server, ann, 'Desk/Note')).Text).toBe('from tab 1')
  await context.close()
})

test('a node created offline is listed as pending and created on the server when back online', async ({ browser }) => {
  const { context, page } = await openLoggedIn(browser, server, ann, 'Desk')
  await context.setOffline(true)
  await expect(syncStatus(page)).toHaveAttribute('data-status', 'offline')
  const form = page.locator('weft-node-page').getByRole('form', { name: 'New child node' })
  await form.getByLabel('Name', { exact: true }).fill('Offline idea')
  await form.getByRole('button', { name: 'Create' }).click()
  const children = page.locator('weft-node-page ul.children')
  await expect(children.getByRole('link', { name: 'Offline idea' })).toBeVisible()
  await expect(syncStatus(page)).toHaveAttribute('data-pending', '1')
  expect((await api(server, ann, 'GET', '/api/nodes/Desk/Offline-idea')).status).toBe(404)

  await context.setOffline(false)
  await expect(syncStatus(page)).toHaveAttribute('data-status', 'saved')
  const created = await api<{ nodeType: string; name: string }>(server, ann, 'GET', '/api/nodes/Desk/Offline-idea')
  expect(created.status).toBe(200)
  expect(created.body).toMatchObject({ nodeType: 'Document', name: 'Offline idea' })
  await context.close()
})

test('a first visit that loses the network before its buttons and offline shell came gets both once back online, without a reload', async ({ browser }) => {
  // The component library and the service worker load once the first screen is up; hold those
  // two chunks, drop the network, then fail them as the browser would.
  const held: Route[] = []
  const { context, page } = await openLoggedIn(browser, server, ann, 'Desk', {
    waitForUi: false,
    beforeOpen: (ctx) => ctx.route(/\/assets\/(ui|pwa-update)-[\w-]+\.js$/, (route) => void held.push(route)),
  })
  await expect.poll(() => held.length).toBe(2)
  await context.setOffline(true)
  await expect(syncStatus(page)).toHaveAttribute('data-status', 'offline')
  for (const route of held) await route.abort('internetdisconnected')
  await context.unrouteAll()
  const form = page.locator('weft-node-page').getByRole('form', { name: 'New child node' })
  await expect(form.getByRole('button', { name: 'Create' })).toHaveCount(0)
  expect(await page.evaluate(() => customElements.get('wa-button') === undefined)).toBe(true)

  await context.setOffline(false)
  await expect(form.getByRole('button', { name: 'Create' })).toBeVisible()
  await waitForServiceWorker(page)
  await form.getByLabel('Name', { exact: true }).fill('After the drop')
  await form.getByRole('button', { name: 'Create' }).click()
  await expect(page.locator('weft-node-page ul.children').getByRole('link', { name: 'After the drop' })).toBeVisible()
  await expect(syncStatus(page)).toHaveAttribute('data-status', 'saved')
  expect((await api(server, ann, 'GET', '/api/nodes/Desk/After-the-drop')).status).toBe(200)
  await context.close()
})

test('a child created by someone else appears in the list without a reload', async ({ browser }) => {
  const { context, page } = await openLoggedIn(browser, server, ann, 'Desk')
  await expect(page.locator('weft-node-page ul.children').getByRole('link', { name: 'Note' })).toBeVisible()
  await putNode(server, ann, 'Desk/FromApi', 'Document', { A: 1 }, 'From the API')
  await expect(page.locator('weft-node-page ul.children').getByRole('link', { name: 'From the API' })).toBeVisible()
  await context.close()
})

test('an invalid session is refused for good: the user is told and the app stops retrying', async ({ browser }) => {
  const bogus: TestUser = { ...ann, token: 'revoked-or-invalid-token' }
  const { context, page } = await openLoggedIn(browser, server, bogus)
  let sockets = 0
  page.on('websocket', () => sockets++)
  await expect(syncStatus(page)).toHaveAttribute('data-status', 'final')
  await expect(page.locator('weft-app').getByRole('alert')).toContainText('signed out')
  await page.waitForTimeout(1500)
  expect(sockets).toBe(0)
  await context.close()
})

test('the navigation tree works from the keyboard and fields are labelled', async ({ browser }) => {
  await putNode(server, ann, 'Keys', 'Space', {}, 'Keys')
  await putNode(server, ann, 'Keys/Only', 'Document', { Text: 'k' }, 'Only')
  const { context, page } = await openLoggedIn(browser, server, ann)
  const tree = page.locator('weft-nav-tree').getByRole('tree', { name: 'Nodes' })
  const home = tree.getByRole('treeitem', { name: 'Ann' })
  const keys = tree.getByRole('treeitem', { name: 'Keys' })
  const only = tree.getByRole('treeitem', { name: 'Only' })
  await expect(keys).toBeVisible()
  await home.focus()
  await page.keyboard.press('ArrowDown')
  await expect(home).not.toBeFocused()
  await keys.focus()
  await page.keyboard.press('ArrowRight')
  await expect(keys).toHaveAttribute('aria-expanded', 'true')
  await expect(only).toBeVisible()
  await page.keyboard.press('ArrowDown')
  await expect(only).toBeFocused()
  await page.keyboard.press('ArrowUp')
  await expect(keys).toBeFocused()
  await page.keyboard.press('ArrowDown')
  await page.keyboard.press('Enter')
  await expect(page).toHaveURL(/#\/n\/Keys\/Only$/)
  // Every field has a label that names it.
  await expect(page.locator('weft-node-page').getByLabel('Text', { exact: true })).toHaveValue('k')
  await context.close()
})

test('[MOVE5] a node is deleted from its page (to the trash) and is gone from the server and the list', async ({ browser }) => {
  await putNode(server, ann, 'Desk/Doomed', 'Document', { X: 1 }, 'Doomed')
  const { context, page } = await openLoggedIn(browser, server, ann, 'Desk/Doomed')
  await expect(field(page, 'X')).toHaveValue('1')
  await page.locator('weft-node-page').getByRole('button', { name: 'Delete', exact: true }).click()
  await expect(page).toHaveURL(/#\/n\/Desk$/)
  await expect(page.locator('weft-node-page ul.children').getByRole('link', { name: 'Doomed' })).toHaveCount(0)
  expect((await api(server, ann, 'GET', '/api/nodes/Desk/Doomed')).status).toBe(404)
  await context.close()
})

test('[WEB94] signing out in one tab: the other tab says so in words (no close code), and no page of the tab that signed out fails', async ({ browser }) => {
  // A user of its own: signing out revokes the token every other test here signs in with.
  const sam = await signUp(server, 'Sam')
  await putNode(server, sam, 'Sams', 'Space', {}, 'Sam’s space')
  await putNode(server, sam, 'Sams/Plan', 'Document', { Text: 'x', Count: 3 }, 'Plan')
  const { context, page: tab1 } = await openLoggedIn(browser, server, sam, 'Sams/Plan')
  const errors: string[] = []
  tab1.on('pageerror', (e) => errors.push(e.message))
  tab1.on('console', (m) => m.type() === 'error' && errors.push(m.text()))
  const tab2 = await context.newPage()
  await tab2.goto('/#/n/Sams/Plan')
  await expect(field(tab1, 'Text')).toHaveValue('x')
  await expect(field(tab2, 'Text')).toHaveValue('x')
  // The navigation shows the space's children too: more pages with live queries when it ends.
  await expect(tab1.locator('weft-nav-tree').getByRole('treeitem', { name: 'Plan' })).toBeVisible()

  await tab1.locator('weft-app .bar').getByRole('button', { name: 'Sign out' }).click()
  await expect(tab1.locator('weft-auth-page')).toBeVisible()
  const banner = tab2.locator('weft-app').getByRole('alert')
  await expect(banner).toContainText('You signed out in another tab.')
  await expect(banner).not.toContainText('4401')
  await expect(banner).not.toContainText('unauthorized')
  await tab2.screenshot({ path: 'test-results/signed-out-in-other-tab.png' })
  // The tab that signed out settles (its sign-in form is usable) with no page having failed.
  await expect(tab1.locator('weft-auth-page').getByRole('button').first()).toBeVisible()
  expect(errors.filter((e) => !/401|Unauthorized/i.test(e))).toEqual([])
  await context.close()
})
