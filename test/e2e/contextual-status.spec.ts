import { expect, test, type Page } from '@playwright/test'
import { adminAndViewerOn, api, openLoggedIn, putNode, startE2eServer, type E2eServer, type TestUser } from './fixtures.js'
import { triageWithDeadLetter } from './contextual-fixtures.js'

/**
 * [CTX38] A contextual subscription's status page: Vic (Viewer) runs a worker whose event
 * dead-letters; he sees its counts and last error but no re-drive; Ann (Admin) sees every consumer
 * and re-drives it. At 1280 and 390 px.
 */
let server: E2eServer
let ann: TestUser
let vic: TestUser

const SUB = 'Ops/triage'

test.beforeAll(async () => {
  server = await startE2eServer()
  ;({ ann, vic } = await adminAndViewerOn(server, 'Ops', { inbox: {} }))
  await triageWithDeadLetter(server, ann, vic, SUB, 'model timed out after 30 s')
})
test.afterAll(async () => {
  await server?.dispose()
})

const statusPage = (page: Page) => page.locator('weft-contextual-page')
const consumer = (page: Page, name: string) => statusPage(page).locator(`[data-consumer="${name}"]`)

async function openStatus(page: Page) {
  await page.locator('weft-node-page').getByRole('link', { name: 'Consumers and dead letters' }).click()
  await expect(page).toHaveURL(/#\/contextual\/Ops\/triage$/)
}

test('[CTX38] a Viewer sees its consumer\'s dead letter and last error, and no re-drive', async ({ browser }) => {
  const v = await openLoggedIn(browser, server, vic, SUB)
  await openStatus(v.page)
  const card = consumer(v.page, 'vic-worker')
  await expect(card.locator('[data-count="Dead letters"]')).toHaveText('1')
  await expect(card.locator('[data-owner]')).toHaveText('Your worker')
  // The event's node by its name, not its path.
  await expect(card.getByRole('list', { name: 'Dead letters of vic-worker' }).getByRole('link', { name: 'Q3 report' })).toHaveAttribute('href', '#/n/Ops/inbox/report')
  await expect(card).toContainText('Last error: model timed out after 30 s')
  await expect(statusPage(v.page).getByRole('button', { name: /Re-drive/ })).toHaveCount(0)
  await v.page.setViewportSize({ width: 390, height: 800 })
  await v.page.screenshot({ path: 'test-results/contextual-status-viewer-390.png', fullPage: true })
  // Readable at 390 px: nothing wider than the viewport.
  expect(await v.page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(390)
  await v.context.close()
})

test('[CTX38] an Admin sees every consumer and re-drives the dead letter; the page follows', async ({ browser }) => {
  const a = await openLoggedIn(browser, server, ann, SUB)
  await a.page.setViewportSize({ width: 1280, height: 900 })
  await openStatus(a.page)
  const card = consumer(a.page, 'vic-worker')
  await expect(card.locator('[data-count="Dead letters"]')).toHaveText('1')
  // [CTX55] Whose it is (an Admin may delete it), and the dead letter's event in words, not its number.
  await expect(card.locator('[data-owner]')).toHaveText('Vic’s worker')
  const deadLetter = card.getByRole('list', { name: 'Dead letters of vic-worker' }).locator('li')
  await expect(deadLetter).toContainText('when it was created · 1 attempt')
  await expect(deadLetter).not.toContainText('event ')
  await a.page.screenshot({ path: 'test-results/contextual-status-admin-1280.png', fullPage: true })
  await a.page.screenshot({ path: 'test-results/contextual-admin-1280.png', fullPage: true })
  await card.getByRole('button', { name: 'Re-drive 1 dead letter' }).click()
  await expect(card.locator('[data-count="Dead letters"]')).toHaveText('0')
  await expect(card.locator('[data-count="Pending"]')).toHaveText('1')
  // [CTX55] Changes since its last pull are not called lag (most are not its events).
  await expect(card.locator('[data-count="Lag"]')).toHaveCount(0)
  await expect(card.locator('[data-since-pull]')).toContainText(/since its last pull|every change so far/)
  await expect(card.getByRole('button', { name: /Re-drive/ })).toHaveCount(0)
  // Durable truth agrees: Vic's worker gets the event again, attempts starting over.
  const again = await api<{ item: { event: { path: string }; attempt: number } | null }>(server, vic, 'POST', '/api/contextual/next', { subscription: SUB, consumer: 'vic-worker', waitSeconds: 10 })
  expect(again.body.item).toMatchObject({ event: { path: 'Ops/inbox/report' }, attempt: 1 })
  // The page follows on its own (no reload): the event is leased now.
  await expect(card.locator('[data-count="Leased"]')).toHaveText('1')
  await a.page.setViewportSize({ width: 390, height: 800 })
  await a.page.screenshot({ path: 'test-results/contextual-status-admin-390.png', fullPage: true })
  expect(await a.page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(390)
  await a.context.close()
})

test('[CTX46] a Viewer deletes a consumer of his he no longer uses, after a confirmation; the other stays', async ({ browser }) => {
  const made = await api<{ consumerId: string }>(server, vic, 'POST', '/api/contextual/next', { subscription: SUB, consumer: 'vic-spare' })
  expect(made.status).toBe(200)
  const v = await openLoggedIn(browser, server, vic, SUB)
  await v.page.setViewportSize({ width: 390, height: 800 })
  await openStatus(v.page)
  const spare = consumer(v.page, 'vic-spare')
  await expect(spare).toBeVisible()
  await v.page.screenshot({ path: 'test-results/contextual-status-viewer-delete-390.png', fullPage: true })
  expect(await v.page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(390)
  // Dismissed: nothing happens.
  v.page.once('dialog', (d) => void d.dismiss())
  await spare.getByRole('button', { name: 'Delete consumer vic-spare' }).click()
  await expect(spare).toBeVisible()
  v.page.once('dialog', (d) => {
    expect(d.message()).toContain('Delete consumer “vic-spare”')
    void d.accept()
  })
  await spare.getByRole('button', { name: 'Delete consumer vic-spare' }).click()
  await expect(spare).toHaveCount(0)
  await expect(consumer(v.page, 'vic-worker')).toBeVisible()
  const status = await api(server, vic, 'POST', '/api/contextual/status', { consumerId: made.body.consumerId })
  expect(status.status).toBe(404)
  await v.context.close()
})

test('[CTX49] a Viewer finds, among all his consumers, the one whose subscription was deleted, and deletes it', async ({ browser }) => {
  await putNode(server, ann, 'Ops/old', 'ContextualSubscription', {
    Operation: 'old',
    Events: { NodeTypes: ['Document'], Kinds: ['Created'], PathPrefix: 'Ops/inbox' },
    Reactions: { note: { Command: 'patch', Target: '{event.path}', Parameters: { Note: { Type: 'string' } } } },
  }, 'Old triage')
  const made = await api<{ consumerId: string }>(server, vic, 'POST', '/api/contextual/next', { subscription: 'Ops/old', consumer: 'vic-old' })
  expect(made.status).toBe(200)
  expect((await api(server, ann, 'DELETE', '/api/nodes/Ops/old')).status).toBe(204)
  const v = await openLoggedIn(browser, server, vic, SUB)
  await v.page.setViewportSize({ width: 1280, height: 900 })
  await openStatus(v.page)
  await statusPage(v.page).getByRole('link', { name: 'all your consumers' }).click()
  await expect(v.page).toHaveURL(/#\/consumers$/)
  const mine = v.page.locator('weft-my-consumers-page')
  const old = mine.locator(`[data-consumer="${made.body.consumerId}"]`)
  await expect(old).toContainText('Ops/old · no longer current')
  await expect(mine.getByRole('link', { name: 'Triage' })).toBeVisible()
  await expect(mine).toContainText('1 shown get no more work')
  await v.page.screenshot({ path: 'test-results/my-consumers-viewer-1280.png', fullPage: true })
  await v.page.setViewportSize({ width: 390, height: 800 })
  await v.page.screenshot({ path: 'test-results/my-consumers-viewer-390.png', fullPage: true })
  expect(await v.page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(390)
  const before = Number(await mine.locator('[data-total]').getAttribute('data-total'))
  v.page.once('dialog', (d) => {
    expect(d.message()).toContain('Delete consumer “vic-old” of Ops/old')
    void d.accept()
  })
  await old.getByRole('button', { name: 'Delete consumer vic-old' }).click()
  await expect(old).toHaveCount(0)
  await expect(mine.locator('[data-total]')).toHaveAttribute('data-total', String(before - 1))
  // Durable truth agrees.
  expect((await api(server, vic, 'POST', '/api/contextual/status', { consumerId: made.body.consumerId })).status).toBe(404)
  await v.context.close()
})

test('[CTX38] an Admin makes a subscription from the app (a working definition), named in Japanese; its status page names it', async ({ browser }) => {
  const a = await openLoggedIn(browser, server, ann, 'Ops/inbox')
  await a.page.setViewportSize({ width: 1280, height: 900 })
  const create = a.page.locator('weft-node-page').getByRole('form', { name: 'New child node' })
  await create.getByLabel('Name').fill('受付トリアージ 📥')
  await create.getByLabel('Type').selectOption('ContextualSubscription')
  await create.getByRole('button', { name: 'Create' }).click()
  await a.page.locator('weft-node-page').getByRole('link', { name: '受付トリアージ 📥' }).click()
  await expect(a.page.locator('weft-node-page h1')).toHaveText('受付トリアージ 📥')
  await a.page.locator('weft-node-page').getByRole('link', { name: 'Consumers and dead letters' }).click()
  await expect(statusPage(a.page).getByRole('link', { name: '受付トリアージ 📥' })).toBeVisible()
  await expect(statusPage(a.page)).toContainText('No consumers yet')
  // The server compiled it: a worker's first pull makes a consumer of it.
  const path = decodeURIComponent(new URL(a.page.url()).hash.replace(/^#\/contextual\//, ''))
  const first = await api<{ consumerId: string }>(server, ann, 'POST', '/api/contextual/next', { subscription: path, consumer: 'ann-first' })
  expect(first.status).toBe(200)
  await expect(consumer(a.page, 'ann-first')).toBeVisible()
  await a.page.screenshot({ path: 'test-results/contextual-new-1280.png', fullPage: true })
  await a.page.setViewportSize({ width: 390, height: 800 })
  await a.page.screenshot({ path: 'test-results/contextual-new-390.png', fullPage: true })
  expect(await a.page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(390)
  await a.context.close()
})

test('[CTX55] a status page for a subscription that is not there says so once and stops asking (no 404 every few seconds)', async ({ browser }) => {
  // The page's clock runs as usual, and is moved on at will (no waiting in real time).
  const a = await openLoggedIn(browser, server, ann, SUB, { beforeOpen: (context) => context.clock.install() })
  let asked = 0
  a.page.on('request', (r) => {
    if (r.url().endsWith('/api/contextual/consumers')) asked++
  })
  await a.page.goto('/#/contextual/Ops/nothing-here')
  await expect(statusPage(a.page).getByRole('alert')).toHaveText('There is no contextual subscription here that you can read.')
  expect(asked).toBe(1)
  // Ten refresh periods later: still the one request.
  await a.page.clock.runFor(30_000)
  await expect(statusPage(a.page).getByRole('alert')).toBeVisible()
  expect(asked).toBe(1)
  // Opened for a subscription that is there: it reads (and refreshes) again.
  await a.page.goto(`/#/contextual/${SUB}`)
  await expect(consumer(a.page, 'vic-worker')).toBeVisible()
  const before = asked
  await a.page.clock.runFor(6_000)
  await expect.poll(() => asked).toBeGreaterThan(before)
  await a.context.close()
})
