import { expect, test, type Page } from '@playwright/test'
import { adminAndViewerOn, api, getContent, grant, openLoggedIn, putNode, signUp, startE2eServer, type E2eServer, type TestUser } from './fixtures.js'

/**
 * A new person's walk (Admin Ann, Viewer Vic) at 1280 and 390 px: what the shared pieces say
 * (toasts, errors, type and field names, refusals) is words a person can act on.
 */
let server: E2eServer
let ann: TestUser
let vic: TestUser

test.beforeAll(async () => {
  server = await startE2eServer()
  ;({ ann, vic } = await adminAndViewerOn(server, 'Lab', { Notes: { Body: 'a document' } }))
  await putNode(server, ann, 'Lab/triage', 'ContextualSubscription', {
    Operation: 'triage',
    Events: { NodeTypes: ['Document'], Kinds: ['Created'], PathPrefix: 'Lab' },
    Reactions: { note: { Command: 'patch', Target: '{event.path}', Parameters: { Note: { Type: 'string' } } } },
  }, 'Triage')
})
test.afterAll(async () => {
  await server?.dispose()
})

const nodePage = (page: Page) => page.locator('weft-node-page')
const toasts = (page: Page) => page.locator('weft-toast [data-toast]')

/** How many line boxes a button's label takes (1: it did not break). */
function labelLines(page: Page, name: string): Promise<number> {
  return toasts(page).getByRole('button', { name }).evaluate((b) => {
    const range = document.createRange()
    range.selectNodeContents(b)
    return new Set([...range.getClientRects()].map((r) => Math.round(r.top))).size
  })
}

test('[WEB60] a toast takes the width it needs at 390 px, its button label never breaks, a newer one replaces an "Open" offer, and opening the node dismisses it', async ({ browser }) => {
  const a = await openLoggedIn(browser, server, ann, 'Lab')
  await a.page.setViewportSize({ width: 390, height: 844 })
  const form = nodePage(a.page).getByRole('form', { name: 'New child node' })
  await form.getByLabel('Name', { exact: true }).fill('Minutes of the planning meeting')
  await form.getByRole('button', { name: 'Create' }).click()
  await expect(toasts(a.page)).toHaveCount(1)
  await expect(toasts(a.page)).toContainText('Created “Minutes of the planning meeting”.')
  expect(await labelLines(a.page, 'Open')).toBe(1)
  // Wider than the half of the screen that a box centred by translateX(-50%) was held to.
  const box = (await toasts(a.page).boundingBox())!
  expect(box.width).toBeGreaterThan(390 / 2)
  expect(box.x).toBeGreaterThanOrEqual(0)
  expect(box.x + box.width).toBeLessThanOrEqual(390)
  await a.page.screenshot({ path: 'test-results/toast-390.png' })

  await form.getByLabel('Name', { exact: true }).fill('Budget')
  await form.getByRole('button', { name: 'Create' }).click()
  await expect(toasts(a.page)).toHaveCount(1)
  await expect(toasts(a.page)).toContainText('Created “Budget”.')
  // Opened from the list, not the toast: the toast's offer is done.
  await nodePage(a.page).locator('.children').getByRole('link', { name: 'Budget' }).click()
  await expect(nodePage(a.page).locator('h1')).toHaveText('Budget')
  await expect(toasts(a.page)).toHaveCount(0)

  await a.page.setViewportSize({ width: 1280, height: 800 })
  await a.page.goto('/#/n/Lab')
  await form.getByLabel('Name', { exact: true }).fill('Agenda')
  await form.getByRole('button', { name: 'Create' }).click()
  await expect(toasts(a.page)).toContainText('Created “Agenda”.')
  expect(await labelLines(a.page, 'Open')).toBe(1)
  await a.page.screenshot({ path: 'test-results/toast-1280.png' })
  await a.context.close()
})

test('[WEB64] a search longer than the server takes cannot be typed, and a refused search says what to change', async ({ browser }) => {
  const a = await openLoggedIn(browser, server, ann, 'Lab')
  await a.page.keyboard.press('Control+k')
  const input = a.page.locator('weft-quick-find input[type="search"]')
  await expect(input).toBeVisible()
  await input.fill('x'.repeat(300))
  expect(await input.inputValue()).toHaveLength(200)
  await input.fill('one two three four five six seven eight nine')
  await expect(a.page.locator('weft-quick-find [role="alert"]')).toHaveText('A search has at most 8 words.')
  await a.page.setViewportSize({ width: 390, height: 844 })
  await a.page.screenshot({ path: 'test-results/find-390.png' })
  await a.context.close()
})

test('[WEB61] [WEB62] a type reads as words everywhere it is shown; a subscription\'s hash and required fields are not offered to remove', async ({ browser }) => {
  const a = await openLoggedIn(browser, server, ann, 'Lab')
  const children = nodePage(a.page).locator('.children')
  await expect(children.locator('li', { hasText: 'Triage' }).locator('small')).toHaveText('Contextual subscription')
  await expect(nodePage(a.page).getByLabel('Type').locator('option[value="ContextualSubscription"]')).toHaveText('Contextual subscription')
  await children.getByRole('link', { name: 'Triage' }).click()
  await expect(nodePage(a.page).locator('h1')).toHaveText('Triage')
  await expect(nodePage(a.page).locator('wa-badge.type')).toHaveText('Contextual subscription')
  await expect(nodePage(a.page).locator('[data-field="Operation"]')).toBeVisible()
  await expect(nodePage(a.page).locator('[data-field="Hash"]')).toHaveCount(0)
  expect(String((await getContent(server, ann, 'Lab/triage')).Hash)).toMatch(/^[0-9a-f]{64}$/)
  await expect(nodePage(a.page).getByRole('button', { name: 'Remove field Operation' })).toHaveCount(0)
  await expect(nodePage(a.page).getByRole('button', { name: 'Remove field Events' })).toHaveCount(0)
  await a.page.setViewportSize({ width: 390, height: 844 })
  await a.page.screenshot({ path: 'test-results/subscription-390.png', fullPage: true })
  // Find's results say the type the same way.
  await a.page.keyboard.press('Control+k')
  await a.page.locator('weft-quick-find input[type="search"]').fill('Triage')
  await expect(a.page.locator('weft-quick-find li[data-path="Lab/triage"] .type')).toHaveText('Contextual subscription')
  await a.context.close()
})

test('[WEB62] a profile\'s fields read as words, and renaming oneself renames the person (one name)', async ({ browser }) => {
  const a = await openLoggedIn(browser, server, ann)
  await expect(nodePage(a.page).locator('label', { hasText: 'Pinned paths' })).toBeVisible()
  await expect(nodePage(a.page).getByText('PinnedPaths')).toHaveCount(0)
  await expect(nodePage(a.page).locator('[data-field="FullName"]')).toHaveCount(0)
  await nodePage(a.page).getByRole('button', { name: 'Rename Ann' }).click()
  await nodePage(a.page).getByLabel('New name').fill('Ann Lee')
  await nodePage(a.page).getByLabel('New name').press('Enter')
  await expect(nodePage(a.page).locator('h1')).toHaveText('Ann Lee')
  await expect.poll(async () => (await getContent(server, ann, ann.userId)).FullName).toBe('Ann Lee')
  // The top bar says the new name at once, and again once the app starts again.
  await expect(a.page.locator('weft-app .user')).toHaveText('Ann Lee')
  await a.page.reload()
  await expect(a.page.locator('weft-app .user')).toHaveText('Ann Lee')
  await a.context.close()
})

test('[WEB63] a page the reader may not open is named in words (never its id), with a way home', async ({ browser }) => {
  const v = await openLoggedIn(browser, server, vic, ann.userId)
  const denied = nodePage(v.page).locator('[data-denied]')
  await expect(denied).toContainText('You cannot open this page')
  await expect(denied).not.toContainText(ann.userId)
  await nodePage(v.page).getByRole('link', { name: 'Go to your home page' }).click()
  await expect(v.page.locator('weft-home-page h1')).toHaveText('Welcome, Vic')
  await v.page.setViewportSize({ width: 390, height: 844 })
  await v.page.goto(`/#/n/${ann.userId}`)
  await expect(denied).toBeVisible()
  await v.page.screenshot({ path: 'test-results/denied-390.png' })
  await v.context.close()
})

test('[WEB65] the trash names its space and leads back, says who deleted what by name and when in words; consumers say when they were made in words', async ({ browser }) => {
  const bob = await signUp(server, 'Bob')
  await grant(server, ann, 'Lab', bob.userId, 'Admin')
  await putNode(server, ann, 'Lab/Old', 'Document', { Body: 'old' }, 'Old memo')
  expect((await api(server, bob, 'POST', '/api/nodes/Lab/Old/trash')).status).toBe(200)
  const a = await openLoggedIn(browser, server, ann, 'Lab')
  await a.page.goto('/#/trash/Lab')
  const trash = a.page.locator('weft-trash-page')
  await expect(trash.locator('[data-space]')).toHaveText('What was deleted in Lab')
  const entry = trash.locator('li', { hasText: 'Old memo' })
  await expect(entry).toContainText(/Document · deleted by Bob · today \d\d:\d\d/)
  await expect(entry).not.toContainText(bob.userId)
  await a.page.setViewportSize({ width: 390, height: 844 })
  await a.page.screenshot({ path: 'test-results/trash-390.png', fullPage: true })
  await trash.getByRole('link', { name: 'Lab' }).click()
  await expect(nodePage(a.page).locator('h1')).toHaveText('Lab')
  await a.context.close()

  expect((await api(server, vic, 'POST', '/api/contextual/next', { subscription: 'Lab/triage', consumer: 'vic-laptop' })).status).toBe(200)
  const v = await openLoggedIn(browser, server, vic, 'Lab')
  await v.page.goto('/#/consumers')
  const mine = v.page.locator('weft-my-consumers-page li', { hasText: 'vic-laptop' })
  await expect(mine.locator('.meta')).toHaveText(/^made today \d\d:\d\d(:\d\d)?$/)
  await v.page.screenshot({ path: 'test-results/my-consumers-1280.png', fullPage: true })
  await v.context.close()
})
