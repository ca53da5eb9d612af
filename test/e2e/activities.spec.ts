import { expect, test, type Page } from '@playwright/test'
import { api, openLoggedIn, putNode, startE2eServer, twoEditorsOn, type E2eServer, type TestUser } from './fixtures.js'

let server: E2eServer
let ann: TestUser
let bob: TestUser

test.beforeAll(async () => {
  server = await startE2eServer()
  ;({ ann, bob } = await twoEditorsOn(server, 'Lab', {}))
  await putNode(server, ann, 'Lab/Count', 'Code', {
    Language: 'javascript',
    IsExecutable: true,
    Source: 'for (let i = 0; ; i++) { Log.info("tick " + i); Progress((i % 100) / 100, "ticking"); await sleep(100) }',
  }, 'Count')
})

test.afterAll(async () => {
  await server?.dispose()
})

test('[ACT13] two browsers watch one activity, one cancels, both see Cancelled', async ({ browser }) => {
  const res = await api<{ path: string }>(server, ann, 'POST', '/api/nodes/Lab/Count/run', {})
  expect(res.status).toBe(201)
  const path = res.body.path
  const a = await openLoggedIn(browser, server, ann, path)
  const b = await openLoggedIn(browser, server, bob, path)
  const badgeA = a.page.locator('weft-activity-panel .badge').first()
  const badgeB = b.page.locator('weft-activity-panel .badge').first()
  await expect(badgeA).toHaveAttribute('data-status', 'Running')
  await expect(badgeB).toHaveAttribute('data-status', 'Running')
  // Live messages reach both, and each sees the other watching.
  await expect(a.page.locator('weft-activity-panel ol li').first()).toContainText('tick')
  await expect(b.page.locator('weft-activity-panel ol li').first()).toContainText('tick')
  await expect(a.page.locator('weft-node-page .presence')).toContainText('Bob')
  await b.page.locator('weft-activity-panel .cancel').click()
  await expect(badgeA).toHaveAttribute('data-status', 'Cancelled')
  await expect(badgeB).toHaveAttribute('data-status', 'Cancelled')
  await expect(a.page.locator('weft-activity-panel .rerun')).toBeVisible()
  await a.context.close()
  await b.context.close()
})

test('[ACT1] a Code page: the form edits the draft\'s Inputs directly, Run starts it, the panel shows the output', async ({ browser }) => {
  await putNode(server, ann, 'Lab/Greet', 'Code', {
    Language: 'typescript',
    IsExecutable: true,
    Inputs: { Who: { Type: 'string', Label: 'Who', Default: 'world' } },
    Source: 'const who: string = Inputs.Who; Log.info("greeting " + who); return "hello " + who',
  }, 'Greet')
  const a = await openLoggedIn(browser, server, ann, 'Lab/Greet')
  const page = a.page
  await page.locator('weft-code-page .new-run').click()
  const input = page.locator('weft-activity-form input#in-Who')
  await expect(input).toHaveValue('world')
  await input.fill('Bob')
  await input.dispatchEvent('change')
  // One Start, in the draft's own panel (no second Run beside it).
  const panel = page.locator('weft-code-page section[aria-label="Your run"] weft-activity-panel')
  await expect(page.locator('weft-code-page .run')).toHaveCount(0)
  await panel.locator('.start-run').click()
  await expect(panel.locator('.badge')).toHaveAttribute('data-status', 'Succeeded')
  await expect(panel.locator('pre.output')).toContainText('hello Bob')
  // Re-run: "Your run" follows the new run (it used to start unseen, the box kept the old one).
  const first = await panel.getAttribute('path')
  await panel.locator('.rerun').click()
  await expect(panel).not.toHaveAttribute('path', first!)
  await expect(panel.locator('.badge')).toHaveAttribute('data-status', 'Succeeded')
  await expect(panel.locator('pre.output')).toContainText('hello Bob')
  // On a run's own page, Re-run opens the new run.
  await page.goto(`/#/n/${first}`)
  const own = page.locator('weft-node-page weft-activity-panel')
  await own.locator('.rerun').click()
  await expect(page).not.toHaveURL(new RegExp(`#/n/${first}$`))
  await expect(page).toHaveURL(/#\/n\/.+\/_Activity\//)
  await expect(page.locator('weft-node-page weft-activity-panel .badge')).toHaveAttribute('data-status', 'Succeeded')
  await a.context.close()
})

test('[ACT1] a space shows the runs it hosts, the home feed shows runs its user started anywhere, a finished run\'s bar is full', async ({ browser }) => {
  await putNode(server, ann, 'Lab/Quick', 'Code', { Language: 'javascript', IsExecutable: true, Source: 'Progress(0.2, "a fifth"); Log.info("quick"); return 1' }, 'Quick')
  const res = await api<{ path: string }>(server, ann, 'POST', '/api/nodes/Lab/Quick/run', {})
  expect(res.status).toBe(201)
  // Routed to the partition root (no ActivityParentPath): Lab hosts it, not Ann's home.
  expect(res.body.path.startsWith('Lab/_Activity/')).toBe(true)
  const run = (page: Page) => page.locator(`weft-run-row[path="${res.body.path}"] a.row`)

  const b = await openLoggedIn(browser, server, bob, 'Lab')
  await expect(run(b.page)).toHaveAttribute('data-status', 'Succeeded')
  // A compact line: who started it, a link to the run's page.
  await expect(run(b.page)).toContainText('started by Ann')
  await run(b.page).click()
  // Succeeded: full, whatever fraction its script last reported.
  await expect(b.page.locator('weft-node-page weft-activity-panel progress')).toHaveJSProperty('value', 1)

  const a = await openLoggedIn(browser, server, ann)
  const feed = a.page.locator('weft-activity-strip section[aria-label="My activity"]')
  await expect(feed.locator(`weft-run-row[path="${res.body.path}"] a.row`)).toHaveAttribute('data-status', 'Succeeded')
  // Bob's home does not list Ann's run.
  await b.page.goto(`/#/n/${bob.userId}`)
  await expect(b.page.locator('weft-node-page h1, weft-node-page h2').first()).toBeVisible()
  await expect(b.page.locator(`weft-run-row[path="${res.body.path}"]`)).toHaveCount(0)

  // A run started after the home opened appears there as the feed announces it.
  const second = await api<{ path: string }>(server, ann, 'POST', '/api/nodes/Lab/Quick/run', {})
  await expect(feed.locator(`weft-run-row[path="${second.body.path}"] a.row`)).toHaveAttribute('data-status', 'Succeeded')
  await a.context.close()
  await b.context.close()
})
