import { mkdir } from 'node:fs/promises'
import { expect, test, type Page } from '@playwright/test'
import { adminAndViewerOn, analyzeAxe, api, openLoggedIn, putNode, startE2eServer, type E2eServer, type TestUser } from './fixtures.js'

/**
 * Issue 16 "One look": every page, as an Admin and as a Viewer, at 1280 and 390 px: no serious
 * or critical axe violation, no sideways scroll (even with a long unbroken name), no console
 * error in normal use, and a screenshot of each in test-results/ to look at.
 */
let server: E2eServer
let ann: TestUser
let vic: TestUser
let runPath = ''
const LONG = 'Averyveryverylongunbrokennamewithoutanyspacesatallthatgoesonandonforeverandever'

test.beforeAll(async () => {
  server = await startE2eServer()
  ;({ ann, vic } = await adminAndViewerOn(server, 'Lab', { Notes: { Body: 'a document', Tags: ['planning', 'q3'] } }))
  await putNode(server, ann, `Lab/${LONG}`, 'Document', { Body: 'long' }, LONG)
  await api(server, ann, 'PATCH', '/api/nodes/Lab/Notes', { Owner: { $ref: ann.userId } })
  await putNode(server, ann, 'Lab/Quick', 'Code', { Language: 'javascript', IsExecutable: true, Description: 'Says hello', Source: 'Log.info("quick"); return 1' }, 'Quick')
  const run = await api<{ path: string }>(server, vic, 'POST', '/api/nodes/Lab/Quick/run', {})
  runPath = run.body.path
  await api(server, ann, 'POST', '/api/spaces/Lab/invites', { email: 'zoe@example.com', role: 'Viewer', pin: true })
  await mkdir('test-results', { recursive: true })
})

test.afterAll(async () => {
  await server?.dispose()
})

const pages = (user: TestUser): [string, string][] => [
  ['home', '#/'],
  ['profile', `#/n/${user.userId}`],
  ['space', '#/n/Lab'],
  ['document', '#/n/Lab/Notes'],
  ['long-name', `#/n/Lab/${LONG}`],
  ['code', '#/n/Lab/Quick'],
  ['run', `#/n/${runPath}`],
  ['operations', '#/operations'],
  ['refused', '#/refused'],
]

async function checkPage(page: Page, label: string, width: number) {
  await page.setViewportSize({ width, height: 844 })
  // The page has settled when its heading is there.
  await expect(page.locator('h1').first()).toBeVisible()
  await page.waitForLoadState('networkidle')
  const scroll = await page.evaluate(() => ({ sw: document.documentElement.scrollWidth, iw: innerWidth }))
  expect.soft(scroll.sw, `${label} scrolls sideways`).toBeLessThanOrEqual(scroll.iw)
  await page.screenshot({ path: `test-results/one-look-${label}-${width}.png`, fullPage: true })
  const axe = await analyzeAxe(page)
  const bad = axe.violations.filter((v) => v.impact === 'serious' || v.impact === 'critical')
  expect.soft(bad.map((v) => `${v.id}: ${v.help} (${v.nodes.map((n) => n.target.join(' ')).join(', ')})`), `${label} axe`).toEqual([])
}

for (const who of ['admin', 'viewer'] as const) {
  test(`[WEB17] one look as ${who}: axe clean, no sideways scroll at 1280 and 390 px, no console error, on every page`, async ({ browser }) => {
    test.setTimeout(240_000)
    const user = who === 'admin' ? ann : vic
    const { context, page } = await openLoggedIn(browser, server, user, '')
    const errors: string[] = []
    page.on('console', (m) => {
      if (m.type() === 'error') errors.push(m.text())
    })
    page.on('pageerror', (e) => errors.push(e.message))
    for (const [name, hash] of pages(user)) {
      await page.goto(`/${hash}`)
      for (const width of [1280, 390]) await checkPage(page, `${who}-${name}`, width)
    }
    // The login page, signed out.
    const anonContext = await browser.newContext({ baseURL: server.url })
    const anon = await anonContext.newPage()
    anon.on('console', (m) => {
      if (m.type() === 'error') errors.push(m.text())
    })
    await anon.goto('/')
    for (const width of [1280, 390]) await checkPage(anon, `${who}-login`, width)
    await anonContext.close()
    expect(errors).toEqual([])
    await context.close()
  })
}
