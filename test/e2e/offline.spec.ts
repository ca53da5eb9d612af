import { expect, test, type Page } from '@playwright/test'
import {
  api,
  editField,
  field,
  getContent,
  grant,
  openLoggedIn,
  putNode,
  startE2eServer,
  twoEditorsOn,
  syncStatus,
  waitForServiceWorker,
  type E2eServer,
  type TestUser,
} from './fixtures.js'
import { childCreatedOffline } from './offline-steps.js'

let server: E2eServer
let ann: TestUser
let bob: TestUser

test.beforeAll(async () => {
  server = await startE2eServer()
  ;({ ann, bob } = await twoEditorsOn(server, 'Field', { One: { Alpha: 'a0', Beta: 'b0' }, Two: { Gamma: 'g0' } }))
})

test.afterAll(async () => {
  await server?.dispose()
})

test('edits made offline survive an offline reload and reach the server and others when back online', async ({ browser }) => {
  const a = await openLoggedIn(browser, server, ann, 'Field/Two')
  await expect(field(a.page, 'Gamma')).toHaveValue('g0')
  await a.page.goto('/#/n/Field/One')
  await expect(field(a.page, 'Alpha')).toHaveValue('a0')
  await waitForServiceWorker(a.page)
  const b = await openLoggedIn(browser, server, bob, 'Field/One')
  await expect(field(b.page, 'Alpha')).toHaveValue('a0')

  await a.context.setOffline(true)
  await expect(syncStatus(a.page)).toHaveAttribute('data-status', 'offline')
  await editField(a.page, 'Alpha', 'a1')
  await editField(a.page, 'Beta', 'b1')
  await a.page.goto('/#/n/Field/Two')
  await editField(a.page, 'Gamma', 'g1')
  await expect(syncStatus(a.page)).toHaveAttribute('data-pending', '3')

  // Nothing left the browser.
  expect((await getContent(server, ann, 'Field/One')).Alpha).toBe('a0')

  // Reload with no network: the shell comes from the service worker, the data from IndexedDB.
  const reloaded = await a.page.reload()
  expect(reloaded?.fromServiceWorker()).toBe(true)
  await expect(syncStatus(a.page)).toHaveAttribute('data-status', 'offline')
  await expect(syncStatus(a.page)).toHaveAttribute('data-pending', '3')
  await expect(field(a.page, 'Gamma')).toHaveValue('g1')
  await expect(a.page.locator('weft-node-page .pending[data-pending="1"]')).toBeVisible()
  await a.page.goto('/#/n/Field/One')
  await expect(field(a.page, 'Alpha')).toHaveValue('a1')
  await expect(field(a.page, 'Beta')).toHaveValue('b1')
  await expect(a.page.locator('weft-node-page .pending[data-pending="2"]')).toBeVisible()

  await a.context.setOffline(false)
  await expect(syncStatus(a.page)).toHaveAttribute('data-status', 'saved', { timeout: 15_000 })
  await expect(field(b.page, 'Alpha')).toHaveValue('a1')
  await expect(field(b.page, 'Beta')).toHaveValue('b1')
  expect(await getContent(server, bob, 'Field/One')).toMatchObject({ Alpha: 'a1', Beta: 'b1' })
  expect(await getContent(server, bob, 'Field/Two')).toMatchObject({ Gamma: 'g1' })

  await a.context.close()
  await b.context.close()
})

test('[WEB131] [WEB95] a rename made offline works like an edit: the new name shows at once, is queued (through a reload), and reaches the server once back online', async ({ browser }) => {
  await putNode(server, ann, 'Field/Renamed', 'Document', { Body: 'x' }, 'Draft title')
  const a = await openLoggedIn(browser, server, ann, 'Field/Renamed')
  await waitForServiceWorker(a.page)
  const title = a.page.locator('weft-node-page weft-node-title')
  for (const [width, name] of [[1280, 'Offline title'], [390, 'Final title']] as const) {
    await a.page.setViewportSize({ width, height: 844 })
    await a.context.setOffline(true)
    await expect(syncStatus(a.page)).toHaveAttribute('data-status', 'offline')
    const rename = title.getByRole('button', { name: /^Rename / })
    await expect(rename).toBeEnabled()
    await rename.click()
    const box = title.getByLabel('New name')
    await box.fill(name)
    await box.press('Enter')
    await expect(title.locator('h1')).toHaveText(name)
    await expect(title.locator('[data-rename-queued]')).toBeVisible()
    await expect(title.getByRole('alert')).toHaveCount(0)
    await expect(syncStatus(a.page)).toHaveAttribute('data-pending', '1')
    await a.page.screenshot({ path: `test-results/rename-offline-${width}.png` })
    // Kept on the device: a reload with no network still shows it, still queued.
    await a.page.reload()
    await expect(title.locator('h1')).toHaveText(name)
    await expect(syncStatus(a.page)).toHaveAttribute('data-pending', '1')
    expect((await api<{ name: string }>(server, ann, 'GET', '/api/nodes/Field/Renamed')).body.name).not.toBe(name)
    await a.context.setOffline(false)
    await expect(syncStatus(a.page)).toHaveAttribute('data-status', 'saved')
    await expect(title.locator('[data-rename-queued]')).toHaveCount(0)
    await expect(title.locator('h1')).toHaveText(name)
    await expect.poll(async () => (await api<{ name: string }>(server, ann, 'GET', '/api/nodes/Field/Renamed')).body.name).toBe(name)
  }
  await a.context.close()
})

test('[WEB132] [SYNC24] a rename and a deletion made offline that the server refuses (Bob lost his rights meanwhile) are said, the typed name kept for him, the deleted space shown again', async ({ browser }) => {
  await putNode(server, ann, 'Field132', 'Space', {}, 'Field132')
  await putNode(server, ann, 'Field132/Notes', 'Document', { Body: 'x' }, 'Notes')
  await putNode(server, ann, 'Gone132', 'Space', {}, 'Gone132')
  await grant(server, ann, 'Field132', bob.userId, 'Editor')
  await grant(server, ann, 'Gone132', bob.userId, 'Admin')
  const b = await openLoggedIn(browser, server, bob, 'Gone132')
  await waitForServiceWorker(b.page)
  b.page.on('dialog', (d) => void d.accept())
  const page = b.page.locator('weft-node-page')
  await expect(page.getByRole('button', { name: 'Delete space…' })).toBeVisible()
  await b.page.goto('/#/n/Field132/Notes')
  const title = page.locator('weft-node-title')
  await expect(title.locator('h1')).toHaveText('Notes')
  await b.context.setOffline(true)
  await expect(syncStatus(b.page)).toHaveAttribute('data-status', 'offline')
  await title.getByRole('button', { name: 'Rename Notes' }).click()
  await title.getByLabel('New name').fill('Bob’s notes')
  await title.getByLabel('New name').press('Enter')
  await expect(title.locator('h1')).toHaveText('Bob’s notes')
  await b.page.goto('/#/n/Gone132')
  await page.getByRole('button', { name: 'Delete space…' }).click()
  await expect(syncStatus(b.page)).toHaveAttribute('data-pending', '2')

  await grant(server, ann, 'Field132', bob.userId, 'Viewer')
  await grant(server, ann, 'Gone132', bob.userId, 'Viewer')
  await b.context.setOffline(false)
  const toasts = b.page.locator('weft-toast [data-toast]')
  await expect(toasts.filter({ hasText: 'Deleting “Gone132” was refused by the server. You do not have permission to do that here. The node is shown again.' })).toBeVisible({ timeout: 15_000 })
  await expect(toasts.filter({ hasText: 'Renaming “Notes” to “Bob’s notes” was refused by the server.' })).toBeVisible()
  await expect(syncStatus(b.page)).toHaveAttribute('data-status', 'saved')
  await b.page.screenshot({ path: 'test-results/web132-refused-ops.png' })
  await b.page.goto('/#/n/Gone132')
  await expect(page.locator('h1')).toHaveText('Gone132')
  await b.page.goto('/#/n/Field132/Notes')
  await expect(title.locator('h1')).toHaveText('Notes')
  await expect(title.locator('[data-rename-refused]')).toContainText('Renaming “Notes” to “Bob’s notes” was refused by the server. You do not have permission to do that here. It keeps its name “Notes”.')
  await b.page.goto('/#/refused')
  const list = b.page.locator('weft-refused-list')
  await expect(list.locator('[data-refused-op="rename"] pre')).toHaveText('Bob’s notes')
  await expect(list.locator('[data-refused-op="delete"]')).toContainText('Deleting “Gone132” was refused')
  await list.locator('[data-refused-op="delete"]').getByRole('button', { name: 'Discard' }).click()
  await expect(list.locator('[data-refused-op="delete"]')).toHaveCount(0)
  expect((await api<{ name: string }>(server, ann, 'GET', '/api/nodes/Field132/Notes')).body.name).toBe('Notes')
  expect((await api(server, ann, 'GET', '/api/nodes/Gone132')).status).toBe(200)
  await b.context.close()
})

test('[WEB97] a child created offline that the server then refuses (Create rights lost meanwhile) is no longer listed under its parent; the refusal is said', async ({ browser }) => {
  const { link, ...b } = await childCreatedOffline(browser, server, ann, bob, 'Field97', 'Draft')
  // Meanwhile Bob becomes a Viewer: the server refuses the creation when it is sent.
  await grant(server, ann, 'Field97', bob.userId, 'Viewer')
  await b.context.setOffline(false)
  await expect(b.page.getByText(/Not applied: .*Draft/)).toBeVisible({ timeout: 15_000 })
  await expect(link).toHaveCount(0)
  await b.page.screenshot({ path: 'test-results/web97-refused-offline-create.png' })
  expect((await api(server, ann, 'GET', '/api/nodes/Field97/Draft')).status).toBe(404)
  await b.context.close()
})

/** Goes offline and creates `name` under the open node: listed at once, queued for the server. Its link. */
async function createOffline(page: Page, name: string) {
  const form = page.locator('weft-node-page').getByRole('form', { name: 'New child node' })
  await page.context().setOffline(true)
  await expect(syncStatus(page)).toHaveAttribute('data-status', 'offline')
  await form.getByLabel('Name').fill(name)
  await form.getByRole('button', { name: 'Create' }).click()
  const link = page.locator('weft-node-page section[aria-label="Children"]').getByRole('link', { name, exact: true })
  await expect(link).toBeVisible()
  return link
}

test('[WEB104] [WEB133] a child created offline that the server refuses: its "Created" toast says so and loses its Open; its page says it was not created (never a blank or "deleted" page)', async ({ browser }) => {
  await putNode(server, ann, 'Field104', 'Space', {}, 'Field104')
  await grant(server, ann, 'Field104', bob.userId, 'Editor')
  const a = await openLoggedIn(browser, server, ann, 'Field104')
  const b = await openLoggedIn(browser, server, bob, 'Field104')
  const page = b.page.locator('weft-node-page')
  for (const width of [1280, 390]) {
    await a.page.setViewportSize({ width, height: 800 })
    await b.page.setViewportSize({ width, height: 800 })
    // An Editor again (for the second round): the page offers the form as soon as it is told.
    await grant(server, ann, 'Field104', bob.userId, 'Editor')
    await expect(page.getByRole('form', { name: 'New child node' })).toBeVisible()
    await waitForServiceWorker(b.page)
    const name = `Draft ${width}`
    const link = await createOffline(b.page, name)
    const href = (await link.getAttribute('href'))!
    const toast = b.page.locator('weft-toast [data-toast]', { hasText: name })
    await expect(toast).toContainText(`Created “${name}”.`)
    await expect(toast.getByRole('button', { name: 'Open' })).toBeVisible()
    // The pointer rests on it (it stays while it does): nothing else is done on the page.
    await toast.hover()
    await grant(server, ann, 'Field104', bob.userId, 'Viewer')
    await b.context.setOffline(false)
    await expect(toast).toContainText(`“${name}” was not created: the server refused it. You do not have permission to do that here.`)
    await expect(toast).toHaveAttribute('role', 'alert')
    await expect(toast.getByRole('button', { name: 'Open' })).toHaveCount(0)
    await expect(link).toHaveCount(0)
    // The app's note names it as it was named, not by its path.
    await expect(b.page.getByText(`Not applied: creating “${name}”: You do not have permission to do that here.`)).toBeVisible()
    await b.page.screenshot({ path: `test-results/web104-toast-${width}.png` })
    // The Admin never saw it.
    await expect(a.page.locator('weft-node-page section[aria-label="Children"]').getByRole('link', { name })).toHaveCount(0)
    await a.page.screenshot({ path: `test-results/web104-admin-${width}.png` })
    await toast.getByRole('button', { name: 'Dismiss' }).click()

    // Its page (an Open or a link followed from before the refusal, the back button) says so, with a way back.
    await b.page.evaluate((h) => (location.hash = h), href)
    const notice = page.locator('weft-moved-notice [data-not-created]')
    await expect(notice).toContainText(`“${name}” was not created: the server refused it. You do not have permission to do that here.`)
    await expect(page.locator('weft-moved-notice')).not.toContainText('deleted')
    await b.page.screenshot({ path: `test-results/web104-page-${width}.png` })
    // [WEB133] Kept on the device: a reload (and another tab) says the same.
    await b.page.reload()
    await expect(notice).toContainText(`“${name}” was not created: the server refused it. You do not have permission to do that here.`)
    await notice.getByRole('link', { name: 'Back to where it was made' }).click()
    await expect(page.locator('h1')).toHaveText('Field104')
    expect((await api(server, ann, 'GET', `/api/nodes/${href.replace('#/n/', '')}`)).status).toBe(404)
  }
  await a.context.close()
  await b.context.close()
})
