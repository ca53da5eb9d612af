import { mkdir } from 'node:fs/promises'
import { expect, test, type Page } from '@playwright/test'
import { SYSTEM, type NodePath } from '../../shared/index.js'
import { api, grant, openLoggedIn, putNode, signUp, startE2eServer, syncStatus, type E2eServer, type TestUser } from './fixtures.js'

/**
 * Issue 15 "Use the app as two people (one a Viewer) around a shared Code node", issue 16
 * findings 4 and 6: who started a run, which code it ran and why a limit stopped it are on the
 * run's page, in words; nothing of a run is an input; a Viewer is not offered Cancel on someone
 * else's run; no phantom "refused" after runs.
 */
let server: E2eServer
let ann: TestUser
let vic: TestUser

const LOOP = 'for (let i = 0; ; i++) {\n  Log.info("tick " + i)\n  await sleep(100)\n}'
const HOG = 'const keep = []\nfor (;;) keep.push(new Array(100000).fill(keep.length))'

test.beforeAll(async () => {
  server = await startE2eServer()
  ann = await signUp(server, 'Ann')
  vic = await signUp(server, 'Vic')
  await putNode(server, ann, 'Lab', 'Space', {}, 'Lab')
  await grant(server, ann, 'Lab', vic.userId, 'Viewer')
  await putNode(server, ann, 'Lab/Loop', 'Code', { Language: 'javascript', IsExecutable: true, Source: LOOP }, 'Loop')
  await putNode(server, ann, 'Lab/Hog', 'Code', { Language: 'javascript', IsExecutable: true, Source: HOG }, 'Hog')
  await mkdir('test-results', { recursive: true })
})

test.afterAll(async () => {
  await server?.dispose()
})

const panel = (page: Page) => page.locator('weft-node-page weft-activity-panel').first()

async function shoot(page: Page, name: string) {
  for (const width of [1280, 390]) {
    await page.setViewportSize({ width, height: width === 390 ? 844 : 900 })
    // No sideways scroll at either width.
    expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(width)
    await page.screenshot({ path: `test-results/run-page-${name}-${width}.png`, fullPage: true })
  }
  await page.setViewportSize({ width: 1280, height: 900 })
}

/** Refused outbox entries of this browser (what the status bar counts), with their codes. */
function refusedRows(page: Page) {
  return page.evaluate(async () => {
    const w = (globalThis as unknown as { __weft: { client: { store: { db: { outbox: { toArray(): Promise<{ path: string; status: string; code?: string; message?: string; patch?: unknown }[]> } } } } } }).__weft
    const rows = await w.client.store.db.outbox.toArray()
    return rows.filter((r) => r.status === 'refused').map((r) => ({ path: r.path, code: r.code, message: r.message, patch: r.patch }))
  })
}

async function runOf(user: TestUser, code: string): Promise<string> {
  const res = await api<{ path: string }>(server, user, 'POST', `/api/nodes/${code}/run`, {})
  expect(res.status).toBe(201)
  return res.body.path
}

test('[WEB9] an Editor\'s run seen by a Viewer: started by whom in words, no inputs, Cancel only for who may; "Stopping…" and Cancelled for both, nothing refused', async ({ browser }) => {
  const path = await runOf(ann, 'Lab/Loop')
  const a = await openLoggedIn(browser, server, ann, path)
  const v = await openLoggedIn(browser, server, vic, path)
  for (const { page } of [a, v]) {
    await expect(panel(page).locator('.badge')).toHaveAttribute('data-status', 'Running')
    await expect(panel(page).locator('ol.log li').first()).toContainText('tick')
    // Names, never ids: each sees Ann's name (the Viewer learns it from the space's members).
    await expect(panel(page).locator('[data-fact="started-by"]')).toContainText('Ann')
    await expect(panel(page).locator('[data-fact="started-by"]')).not.toContainText(ann.userId)
    // No field of a run is an input, and no "add a field" or "new child" form.
    await expect(page.locator('weft-node-page form.fields')).toHaveCount(0)
    await expect(page.locator('weft-node-page form.inline')).toHaveCount(0)
    await expect(page.locator('weft-node-page input:not([type=search]), weft-node-page textarea')).toHaveCount(0)
  }
  await expect(panel(v.page).locator('[data-fact="started-by"]')).not.toContainText('(you)')
  await expect(panel(a.page).locator('[data-fact="started-by"]')).toContainText('(you)')
  // The Viewer is not offered Cancel on Ann's run; she reads why.
  await expect(panel(v.page).locator('.cancel')).toHaveCount(0)
  await expect(panel(v.page).locator('[data-reason="steer"]')).toContainText('Only Ann')
  await expect(panel(a.page).locator('.cancel')).toBeVisible()
  // The live log follows its tail.
  await expect.poll(() => panel(v.page).locator('ol.log li').count(), { timeout: 20_000 }).toBeGreaterThan(30)
  await expect.poll(() => panel(v.page).locator('ol.log').evaluate((ol) => ol.scrollHeight > ol.clientHeight && ol.scrollHeight - ol.scrollTop - ol.clientHeight < 8)).toBe(true)
  await shoot(v.page, 'viewer-running')
  await shoot(a.page, 'editor-running')

  await panel(a.page).locator('.cancel').click()
  await expect(panel(v.page).locator('.badge')).toHaveAttribute('data-status', 'Cancelled')
  await expect(panel(a.page).locator('.badge')).toHaveAttribute('data-status', 'Cancelled')
  await expect(panel(a.page).locator('[data-fact="duration"]')).toContainText('took')
  // No phantom refusal on either side after the run.
  for (const { page } of [a, v]) {
    await expect(syncStatus(page)).toHaveAttribute('data-status', 'saved')
    expect(await refusedRows(page)).toEqual([])
    await expect(syncStatus(page)).not.toContainText('refused')
  }
  await a.context.close()
  await v.context.close()
})

test('[WEB9] a run opened before this device knows its node type: no string of it is "converted" to text, nothing refused (the phantom "1 refused")', async ({ browser }) => {
  const path = await runOf(ann, 'Lab/Loop')
  // The node's metadata (its type) arrives over HTTP only after the doc has synced over the socket.
  let release!: () => void
  const gate = new Promise<void>((r) => (release = r))
  const context = await browser.newContext({
    baseURL: server.url,
    storageState: { cookies: [], origins: [{ origin: server.url, localStorage: [{ name: 'weft.session', value: JSON.stringify({ userId: ann.userId, token: ann.token, name: ann.name }) }] }] },
  })
  await context.route(`**/api/nodes/${path}`, async (route) => {
    await gate
    await route.continue()
  })
  const page = await context.newPage()
  await page.goto(`/#/n/${path}`)
  // The doc is there (its log shows) while the index row is not: still a run page, no inputs.
  await expect(page.locator('weft-node-page ol.log li').first()).toContainText('tick')
  await expect(page.locator('weft-node-page input:not([type=search]), weft-node-page textarea')).toHaveCount(0)
  await expect(syncStatus(page)).toHaveAttribute('data-status', 'saved')
  release()
  await expect(page.locator('weft-node-page h1')).toHaveText('Loop run')
  await page.locator('weft-node-page weft-activity-panel .cancel').click()
  await expect(page.locator('weft-node-page weft-activity-panel .badge')).toHaveAttribute('data-status', 'Cancelled')
  await expect(syncStatus(page)).toHaveAttribute('data-status', 'saved')
  expect(await refusedRows(page)).toEqual([])
  await expect(syncStatus(page)).not.toContainText('refused')
  await context.close()
})

test('[WEB9] the Viewer\'s own run: she may cancel it; Ann sees it was Vic\'s', async ({ browser }) => {
  const path = await runOf(vic, 'Lab/Loop')
  const v = await openLoggedIn(browser, server, vic, path)
  const a = await openLoggedIn(browser, server, ann, path)
  await expect(panel(a.page).locator('[data-fact="started-by"]')).toContainText('Vic')
  await expect(panel(v.page).locator('.cancel')).toBeVisible()
  await panel(v.page).locator('.cancel').click()
  await expect(panel(a.page).locator('.badge')).toHaveAttribute('data-status', 'Cancelled')
  await expect(syncStatus(v.page)).toHaveAttribute('data-status', 'saved')
  expect(await refusedRows(v.page)).toEqual([])
  await expect(syncStatus(v.page)).not.toContainText('refused')
  await a.context.close()
  await v.context.close()
})

test('[WEB9] a limit that stopped a run is named in words: "Stopped: … (SCRIPT_MEMORY_MB …)"', async ({ browser }) => {
  const path = await runOf(ann, 'Lab/Hog')
  const v = await openLoggedIn(browser, server, vic, path)
  await expect(panel(v.page).locator('.badge')).toHaveAttribute('data-status', 'Failed', { timeout: 30_000 })
  const stopped = panel(v.page).locator('.stopped')
  await expect(stopped).toContainText('Stopped:')
  await expect(stopped).toContainText('more memory than a run may use')
  await expect(stopped).toHaveAttribute('data-limit', 'SCRIPT_MEMORY_MB')
  // The error is printed once.
  await expect(panel(v.page).locator('ol.log li', { hasText: 'SCRIPT_MEMORY_MB' })).toHaveCount(0)
  await shoot(v.page, 'viewer-limit')
  await v.context.close()
})

test('[WEB9] who started a draft someone else made, and the code it ran (as it was, collapsed; "differs from the current code" once the Code node changed)', async ({ browser }) => {
  // The engine's record of a run (DESIGN.md "Activities": StartedBy, Source kept on the
  // activity; an Error naming the limit), written as the engine writes it.
  const path = 'Lab/_Activity/20260101T000000Z-recorded' as NodePath
  await server.running.nodes.create(SYSTEM, path, {
    nodeType: 'ActivityLog',
    name: 'Loop run',
    content: {
      Category: 'Script',
      CodePath: 'Lab/Loop',
      Source: LOOP,
      Inputs: { Who: 'everyone' },
      Messages: [{ Level: 'Info', Text: 'tick 0', At: '2026-01-01T00:00:01.000Z' }],
      CreatedBy: vic.userId,
      StartedBy: ann.userId,
      Status: 'Failed',
      Start: '2026-01-01T00:00:00.000Z',
      End: '2026-01-01T00:00:04.500Z',
      Error: 'The run wrote more than SCRIPT_LOG_MAX_LINES (10000 lines) and was stopped.',
    },
  }, 'engine')
  const v = await openLoggedIn(browser, server, vic, path)
  const p = panel(v.page)
  await expect(p.locator('[data-fact="started-by"]')).toContainText('Started by Ann')
  await expect(p.locator('[data-fact="created-by"]')).toContainText('draft made by Vic (you)')
  await expect(p.locator('[data-fact="duration"]')).toContainText('took 4.5 s')
  await expect(p.locator('.stopped')).toContainText('more log lines than a run may keep')
  await expect(p.locator('.stopped')).toContainText('10000 lines')
  await expect(p.locator('dl.inputs')).toContainText('everyone')
  // The code it ran: collapsed, with line numbers, the same as the Code node for now.
  const code = p.locator('details.code')
  await expect(code).toBeVisible()
  await expect(code).not.toHaveAttribute('open', '')
  await expect(code.locator('summary')).toContainText('4 lines')
  await expect(code.locator('[data-differs]')).toHaveCount(0)
  await code.locator('summary').click()
  await expect(code.locator('pre.source .line')).toHaveCount(4)
  await expect(code.locator('pre.source .line').first()).toHaveText('for (let i = 0; ; i++) {')
  await shoot(v.page, 'viewer-recorded')

  // Ann edits the Code node: the run's page says its code differs (what it ran stays).
  await api(server, ann, 'PATCH', '/api/nodes/Lab/Loop', { Source: 'return 42' })
  await expect(code.locator('[data-differs]')).toHaveText('differs from the current code')
  await expect(code.locator('pre.source .line').first()).toHaveText('for (let i = 0; ; i++) {')
  await v.context.close()
})
