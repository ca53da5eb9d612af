import { expect, test, type Page } from '@playwright/test'
import { adminAndViewerOn, openLoggedIn, putNode, startE2eServer, type E2eServer, type TestUser } from './fixtures.js'

/**
 * Issue 16 finding 7 ("no search"): quick find. Ctrl+K (or the header's Search button) opens a
 * dialog whose typeahead asks the server's full-text index for what the caller may read; arrow
 * keys and Enter open a node; offline it searches the nodes the device holds ([FIND7]).
 */
let server: E2eServer
let ann: TestUser
let vic: TestUser

test.beforeAll(async () => {
  server = await startE2eServer()
  ;({ ann, vic } = await adminAndViewerOn(server, 'Team', { Plan: { Body: 'kickoff agenda' } }))
  await putNode(server, ann, 'Team/jp', 'Document', { Body: '議事録' }, '日本語のメモ')
  await putNode(server, ann, 'Team/jp2', 'Document', {}, '日本語の本')
  // Ann's own space, which Vic cannot read: a match there must never reach her.
  await putNode(server, ann, 'AnnOnly', 'Space', {}, 'Ann only')
  await putNode(server, ann, 'AnnOnly/secret', 'Document', { Body: 'kickoff secret plan' }, 'Secret kickoff')
})

test.afterAll(async () => {
  await server?.dispose()
})

const dialog = (page: Page) => page.locator('weft-quick-find wa-dialog')
const input = (page: Page) => page.locator('weft-quick-find input')
const results = (page: Page) => page.locator('weft-quick-find [role=option]')

test('[FIND2] Ctrl+K finds 日本語のメモ by 日本語; arrows and Enter open it', async ({ browser }) => {
  const { context, page } = await openLoggedIn(browser, server, ann)
  await page.keyboard.press('Control+k')
  await expect(dialog(page)).toHaveAttribute('open', '')
  await expect(input(page)).toBeFocused()
  await input(page).fill('日本語')
  await expect(results(page)).toHaveCount(2)
  await expect(results(page).first()).toHaveAttribute('aria-selected', 'true')
  // The shorter name ranks first; both are names that start with the query.
  await expect(results(page).locator('.name')).toHaveText(['日本語の本', '日本語のメモ'])
  // Each says where it is (two results of one name are told apart by it).
  await expect(results(page).locator('.where')).toHaveText(['in Team', 'in Team'])
  await input(page).press('ArrowDown')
  await expect(results(page).nth(1)).toHaveAttribute('aria-selected', 'true')
  await input(page).press('Enter')
  await expect(page).toHaveURL(/#\/n\/Team\/jp$/)
  await expect(page.locator('weft-node-page h1')).toHaveText('日本語のメモ')
  // Text is searched too, with a snippet.
  await page.keyboard.press('Control+k')
  await input(page).fill('議事録')
  await expect(results(page)).toHaveCount(1)
  await expect(results(page).locator('.snippet')).toHaveText('議事録')
  await context.close()
})

test('[FIND2] two people: the Viewer never finds a node she cannot read; Ann does', async ({ browser }) => {
  const a = await openLoggedIn(browser, server, ann)
  const v = await openLoggedIn(browser, server, vic)
  for (const { page } of [a, v]) {
    await page.keyboard.press('Control+k')
    await input(page).fill('kickoff')
  }
  await expect(a.page.locator('weft-quick-find [role=option] .name')).toHaveText(['Secret kickoff', 'Plan'])
  await expect(v.page.locator('weft-quick-find [role=option] .name')).toHaveText(['Plan'])
  await v.page.keyboard.press('Enter')
  await expect(v.page).toHaveURL(/#\/n\/Team\/Plan$/)
  // Her answer for a word only the unreadable node holds: nothing.
  await v.page.keyboard.press('Control+k')
  await input(v.page).fill('secret')
  await expect(v.page.locator('weft-quick-find [role=status]')).toHaveText('Nothing found for “secret”.')
  await expect(results(v.page)).toHaveCount(0)
  await a.context.close()
  await v.context.close()
})

test('[FIND2] [FIND7] at 390 px the header button opens it; offline it finds the nodes on this device by name and text, marked as offline results', async ({ browser }) => {
  const { context, page } = await openLoggedIn(browser, server, vic, 'Team/Plan')
  await page.setViewportSize({ width: 390, height: 800 })
  await expect(page.locator('weft-node-page h1')).toHaveText('Plan')
  await page.goto('/#/n/Team/jp')
  await expect(page.locator('weft-node-page h1')).toHaveText('日本語のメモ')
  await page.locator('weft-app wa-button.find').click()
  await expect(input(page)).toBeFocused()
  const width = await page.evaluate(() => document.documentElement.scrollWidth)
  expect(width).toBeLessThanOrEqual(390)
  await context.setOffline(true)
  const offlineNote = page.locator('weft-quick-find [role=status][data-offline]')
  await input(page).fill('メモ')
  await expect(offlineNote).toHaveText('Offline results: the names and text of the nodes on this device.')
  await expect(results(page).locator('.name')).toHaveText(['日本語のメモ'])
  await expect(results(page).locator('.where')).toHaveText(['in Team'])
  await expect(results(page).first()).toHaveAttribute('data-offline', '')
  // Words in any order, as online.
  await input(page).fill('メモ 日本語')
  await expect(results(page).locator('.name')).toHaveText(['日本語のメモ'])
  // Text this device holds (the Plan it opened): found with its snippet.
  await input(page).fill('agenda')
  await expect(offlineNote).toBeVisible()
  await expect(results(page).locator('.name')).toHaveText(['Plan'])
  await expect(results(page).locator('.snippet')).toHaveText('kickoff agenda')
  // Nothing of the node Vic cannot read, which this device never held.
  await input(page).fill('secret')
  await expect(results(page)).toHaveCount(0)
  await page.screenshot({ path: '/tmp/find2/quick-find-offline-390.png' })
  await input(page).fill('のメモ')
  await expect(results(page).locator('.name')).toHaveText(['日本語のメモ'])
  await input(page).press('Enter')
  await expect(page).toHaveURL(/#\/n\/Team\/jp$/)
  await context.close()
})
