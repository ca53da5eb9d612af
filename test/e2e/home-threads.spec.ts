import { mkdir } from 'node:fs/promises'
import { expect, test, type Page } from '@playwright/test'
import { analyzeAxe, api, getContent, grant, openLoggedIn, putNode, signUp, startE2eServer, type E2eServer, type TestUser } from './fixtures.js'

/**
 * Issue 16 "Home: … your runs and threads with status" ([WEB40]): the home lists the threads the
 * person may read, latest first, each with its state in words and live; a question the agent
 * asked reads "Needs your answer" to those who may answer and "Waiting for an answer" to a
 * Viewer; sub-threads stay on their parent's page. Two people side by side, 1280 and 390 px, axe.
 */
let server: E2eServer
let ann: TestUser
let vic: TestUser

test.describe.configure({ timeout: 180_000 })

test.beforeAll(async () => {
  server = await startE2eServer()
  ann = await signUp(server, 'Ann')
  vic = await signUp(server, 'Vic')
  await putNode(server, ann, 'Talk', 'Space', {}, 'Talk')
  await grant(server, ann, 'Talk', vic.userId, 'Viewer')
  // A space Vic cannot read: its thread is never listed on her home.
  await putNode(server, ann, 'Private', 'Space', {}, 'Private')
  await putNode(server, ann, 'Private/Hidden', 'Thread', { Agent: { Kind: 'builtin' } }, 'Hidden plans')
  await mkdir('/tmp/find2', { recursive: true })
})

test.afterAll(async () => {
  await server?.dispose()
})

async function post(path: string, text: string) {
  const res = await api(server, ann, 'POST', `/api/nodes/${path}/messages`, { text })
  expect(res.status).toBe(201)
}

const threads = (page: Page) => page.locator('weft-home-page weft-thread-list [data-thread-link]')
const stateOf = (page: Page, path: string) => page.locator(`weft-home-page weft-thread-list [data-thread-link="${path}"] .state`)

test('[WEB40] the home lists your threads with their state, live; a question needs the answer of those who may give it', async ({ browser }) => {
  await putNode(server, ann, 'Talk/Weekly', 'Thread', { Agent: { Kind: 'builtin' } }, 'Weekly sync')
  await post('Talk/Weekly', '/ask Which day suits you?')
  await expect.poll(async () => (await getContent(server, ann, 'Talk/Weekly')).Disposition, { timeout: 60_000 }).toBe('AwaitingInput')

  const a = await openLoggedIn(browser, server, ann)
  const v = await openLoggedIn(browser, server, vic)
  for (const { page } of [a, v]) await page.goto('/')
  for (const { page } of [a, v]) await expect(page.locator('weft-home-page h2#h-threads')).toHaveText('Your threads')
  await expect(threads(a.page).locator('.name')).toContainText(['Weekly sync', 'Hidden plans'])
  await expect(threads(v.page).locator('.name')).toHaveText(['Weekly sync'])
  // The same state, in the words each may act on.
  await expect(stateOf(a.page, 'Talk/Weekly')).toHaveText('Needs your answer')
  await expect(stateOf(v.page, 'Talk/Weekly')).toHaveText('Waiting for an answer')
  await a.page.screenshot({ path: '/tmp/find2/home-threads-editor-1280.png', fullPage: true })
  await v.page.screenshot({ path: '/tmp/find2/home-threads-viewer-1280.png', fullPage: true })

  // Live: a new thread appears on both homes, and an answer changes the state without a reload.
  await putNode(server, ann, 'Talk/Retro', 'Thread', { Agent: { Kind: 'builtin' } }, 'Retro')
  await expect(threads(v.page).locator('.name')).toContainText(['Retro'])
  await post('Talk/Weekly', 'Thursday')
  for (const { page } of [a, v]) await expect(stateOf(page, 'Talk/Weekly')).toHaveText('Answered', { timeout: 60_000 })
  // The most recently active first.
  await expect(threads(v.page).first()).toHaveAttribute('data-thread-link', 'Talk/Weekly')

  // A sub-thread stays on its parent's page.
  await post('Talk/Retro', '/delegate list the actions')
  await expect.poll(async () => (await getContent(server, ann, 'Talk/Retro')).Disposition, { timeout: 60_000 }).toBe('Completed')
  await v.page.reload()
  await expect(threads(v.page).locator('.name')).toHaveText(['Retro', 'Weekly sync'])

  // 390 px: no sideways scroll; axe clean on the home for both.
  for (const { page } of [a, v]) {
    await page.setViewportSize({ width: 390, height: 844 })
    await expect(threads(page).first()).toBeVisible()
    expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(390)
    const axe = await analyzeAxe(page)
    expect(axe.violations.filter((x) => x.impact === 'serious' || x.impact === 'critical').map((x) => `${x.id}: ${x.nodes.map((n) => n.target.join(' ')).join(', ')}`)).toEqual([])
  }
  await a.page.screenshot({ path: '/tmp/find2/home-threads-editor-390.png', fullPage: true })
  await v.page.screenshot({ path: '/tmp/find2/home-threads-viewer-390.png', fullPage: true })

  // Clicking a thread opens its conversation.
  await threads(v.page).filter({ hasText: 'Weekly sync' }).click()
  await expect(v.page).toHaveURL(/#\/n\/Talk\/Weekly$/)
  await expect(v.page.locator('weft-thread-page')).toBeVisible()
  await a.context.close()
  await v.context.close()
})
