import { mkdir } from 'node:fs/promises'
import { expect, test, type Page } from '@playwright/test'
import { api, grant, openLoggedIn, putNode, signUp, startE2eServer, type E2eServer, type TestUser } from './fixtures.js'

/**
 * Issue 16 finding 8, the run page like the best CI pages: Ann (the space's Admin) and Vic (a
 * Viewer) watch the same runs side by side. The log follows its tail unless scrolled up, with
 * times and search; a thrown error names its line, linked to the code, once; "Stopping…" for
 * both; a required input refuses an empty form before anything starts; someone else's run that
 * cannot be read says so.
 */
let server: E2eServer
let ann: TestUser
let vic: TestUser

const LOOP = 'for (let i = 0; ; i++) {\n  Log.info("tick " + i)\n  await sleep(100)\n}'
const THROWS = 'const a = 1\nLog.info("before")\n  null.foo()\nreturn a'
/** Ignores the cancel (no await, no Ct check): it runs until the grace period ends it. */
/** A full tail at once, then a line every 100 ms. */
const LONG = 'for (let i = 0; i < 250; i++) Log.info("early " + i)\nfor (let i = 0; ; i++) {\n  Log.info("tick " + i)\n  await sleep(100)\n}'
const STUBBORN = 'Log.info("busy")\nawait sleep(10)\nfor (;;) {}'
/** [ACT21] More lines at once than the server's log pace lets through without waiting. */
const CHATTY = 'for (let i = 0; i < 6000; i++) Log.info("line " + i)\nreturn 6000'

test.beforeAll(async () => {
  // A longer grace than the default 2 s, so "Stopping…" is on screen long enough to be seen
  // on a slow machine (the setting is read when the server starts).
  // And a log pace of 2,000 lines a second ([ACT21]), so Chatty's 6,000 lines meet it however
  // slow the machine (a server busy elsewhere may take lines slower than the default 10,000).
  const saved = { SCRIPT_CANCEL_GRACE_MS: process.env.SCRIPT_CANCEL_GRACE_MS, SCRIPT_LOG_LINES_PER_SECOND: process.env.SCRIPT_LOG_LINES_PER_SECOND }
  process.env.SCRIPT_CANCEL_GRACE_MS = '6000'
  process.env.SCRIPT_LOG_LINES_PER_SECOND = '2000'
  server = await startE2eServer()
  for (const [k, v] of Object.entries(saved)) {
    if (v === undefined) delete process.env[k]
    else process.env[k] = v
  }
  ann = await signUp(server, 'Ann')
  vic = await signUp(server, 'Vic')
  await putNode(server, ann, 'Lab', 'Space', {}, 'Lab')
  await grant(server, ann, 'Lab', vic.userId, 'Viewer')
  const code = (Source: string, extra: object = {}) => ({ Language: 'javascript', IsExecutable: true, Source, ...extra })
  await putNode(server, ann, 'Lab/Loop', 'Code', code(LOOP), 'Loop')
  await putNode(server, ann, 'Lab/Thrower', 'Code', code(THROWS), 'Thrower')
  await putNode(server, ann, 'Lab/Long', 'Code', code(LONG), 'Long')
  await putNode(server, ann, 'Lab/Stubborn', 'Code', code(STUBBORN), 'Stubborn')
  await putNode(server, ann, 'Lab/Chatty', 'Code', code(CHATTY), 'Chatty')
  await putNode(server, ann, 'Lab/Greet', 'Code', code('return "Hello, " + Inputs.Name', { Inputs: { Name: { Type: 'string', Label: 'Your name', Required: true } } }), 'Greet')
  await mkdir('test-results', { recursive: true })
})

test.afterAll(async () => {
  await server?.dispose()
})

const panel = (page: Page) => page.locator('weft-node-page weft-activity-panel').first()
const log = (page: Page) => panel(page).locator('weft-run-log')

async function shoot(page: Page, name: string) {
  for (const width of [1280, 390]) {
    await page.setViewportSize({ width, height: width === 390 ? 844 : 900 })
    expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(width)
    await page.screenshot({ path: `test-results/run-log-${name}-${width}.png`, fullPage: true })
  }
  await page.setViewportSize({ width: 1280, height: 900 })
}

async function runOf(user: TestUser, code: string, body: object = {}): Promise<string> {
  const res = await api<{ path: string }>(server, user, 'POST', `/api/nodes/${code}/run`, body)
  expect(res.status).toBe(201)
  return res.body.path
}

test('[WEB24] the live log: a time on every line, follows its tail until the reader scrolls up ("Jump to latest" brings it back), search marks the lines', async ({ browser }) => {
  const path = await runOf(ann, 'Lab/Loop')
  const a = await openLoggedIn(browser, server, ann, path)
  const v = await openLoggedIn(browser, server, vic, path)
  const ol = log(v.page).locator('ol.log')
  await expect.poll(() => ol.locator('li').count(), { timeout: 20_000 }).toBeGreaterThan(30)
  // Every line has its time.
  await expect(ol.locator('li').first().locator('time')).toHaveText(/^\d\d:\d\d:\d\d$/)
  expect(await ol.evaluate((el) => [...el.querySelectorAll('li')].every((li) => li.querySelector('time')))).toBe(true)
  // At the tail while new lines come.
  const atEnd = () => ol.evaluate((el) => el.scrollHeight - el.scrollTop - el.clientHeight < 8)
  await expect.poll(atEnd).toBe(true)
  await expect(log(v.page).getByRole('button', { name: /Jump to latest/ })).toHaveCount(0)
  // Vic scrolls up: the log stays where he is while lines keep coming. Even when a line lands
  // before the scroll event is dispatched (the next frame): CI caught the log yanking him back.
  const kept = await log(v.page).evaluate(async (el) => {
    const run = el as HTMLElement & { lines: unknown[]; updateComplete: Promise<boolean> }
    const list = run.shadowRoot!.querySelector('ol.log')!
    list.scrollTop = 0
    run.lines = [...run.lines, run.lines[run.lines.length - 1]]
    await run.updateComplete
    return list.scrollTop
  })
  expect(kept).toBe(0)
  const jump = log(v.page).getByRole('button', { name: /Jump to latest/ })
  await expect(jump).toBeVisible()
  const before = await ol.locator('li').count()
  await expect.poll(() => ol.locator('li').count()).toBeGreaterThan(before + 3)
  expect(await ol.evaluate((el) => el.scrollTop)).toBe(0)
  await expect(jump).toContainText('new')
  await shoot(v.page, 'scrolled-up')
  await jump.click()
  await expect.poll(atEnd).toBe(true)
  await expect(jump).toHaveCount(0)
  // Search keeps the lines holding the words, marked, and says how many.
  await log(v.page).getByRole('searchbox', { name: 'Search the log' }).fill('tick 1')
  await expect(log(v.page).locator('.count')).toContainText(/\d+ of \d+ lines match/)
  const shown = await ol.locator('li').allTextContents()
  expect(shown.length).toBeGreaterThan(0)
  for (const line of shown) expect(line).toContain('tick 1')
  await expect(ol.locator('mark').first()).toHaveText('tick 1')
  await shoot(v.page, 'search')
  await log(v.page).getByRole('searchbox', { name: 'Search the log' }).fill('')
  await panel(a.page).locator('.cancel').click()
  await expect(panel(v.page).locator('.badge')).toHaveAttribute('data-status', 'Cancelled')
  await a.context.close()
  await v.context.close()
})

test('[WEB24] a new line at a full tail adds one line and drops the oldest: the other lines are left alone', async ({ browser }) => {
  const path = await runOf(ann, 'Lab/Long')
  const v = await openLoggedIn(browser, server, vic, path)
  const ol = log(v.page).locator('ol.log')
  await expect(log(v.page).locator('.count')).toContainText(/^2[6-9]\d lines$/, { timeout: 20_000 })
  await expect(ol.locator('li')).toHaveCount(200)
  // Watch the list while ten more lines come: which of its nodes are added, removed or rewritten.
  const seen = await ol.evaluate(async (list) => {
    const count = (list.getRootNode() as ShadowRoot).host.shadowRoot!.querySelector('.count')!
    const total = () => Number(count.getAttribute('data-count'))
    const from = total()
    let added = 0
    let removed = 0
    let rewritten = 0
    const obs = new MutationObserver((records) => {
      for (const r of records) {
        if (r.type === 'childList' && r.target === list) {
          added += [...r.addedNodes].filter((n) => n.nodeName === 'LI').length
          removed += [...r.removedNodes].filter((n) => n.nodeName === 'LI').length
        } else if (r.target !== list) rewritten++
      }
    })
    obs.observe(list, { childList: true, subtree: true, characterData: true, attributes: true })
    while (total() < from + 10) await new Promise((r) => setTimeout(r, 50))
    obs.disconnect()
    const following = (list.getRootNode() as ShadowRoot).host as HTMLElement & { following: boolean }
    return { lines: total() - from, added, removed, rewritten, shown: list.querySelectorAll('li').length, following: following.following }
  })
  expect(seen.shown).toBe(200)
  expect(seen.added).toBe(seen.lines)
  expect(seen.removed).toBe(seen.lines)
  // Nothing inside the lines already shown changed.
  expect(seen.rewritten).toBe(0)
  await expect(ol.locator('li').last()).toContainText('tick')
  // Dropping the oldest line above the view does not count as the reader scrolling up: the log
  // still follows its tail (the browser's scroll anchoring moves the view up by that line).
  expect(seen.following).toBe(true)
  await expect(log(v.page).getByRole('button', { name: /Jump to latest/ })).toHaveCount(0)
  expect(await ol.evaluate((el) => el.scrollHeight - el.scrollTop - el.clientHeight < 8)).toBe(true)
  await v.context.close()
})

test('[ACT21] a run that logs faster than the server takes lines says so in its log, to its Viewer too; every line is kept', async ({ browser }) => {
  const path = await runOf(ann, 'Lab/Chatty')
  const a = await openLoggedIn(browser, server, ann, path)
  const v = await openLoggedIn(browser, server, vic, path)
  for (const p of [a.page, v.page]) await expect(panel(p).locator('.badge')).toHaveAttribute('data-status', 'Succeeded', { timeout: 60_000 })
  // Past the pace's first 1,000 lines the script waited: one line says why, with the setting.
  await log(v.page).getByRole('searchbox', { name: 'Search the log' }).fill('SCRIPT_LOG_LINES_PER_SECOND')
  await expect(log(v.page).locator('.count')).toContainText(/^1 of 6,?001 lines match/)
  await expect(log(v.page).locator('ol.log li')).toHaveCount(1)
  await expect(log(v.page).locator('ol.log li')).toContainText('it waits while it logs, and no line is lost')
  await shoot(v.page, 'paced')
  await a.context.close()
  await v.context.close()
})

test('[WEB25] a thrown error shows its line and column, links to that line of the code it ran, and is printed once', async ({ browser }) => {
  const path = await runOf(ann, 'Lab/Thrower')
  const a = await openLoggedIn(browser, server, ann, path)
  const v = await openLoggedIn(browser, server, vic, path)
  for (const { page } of [a, v]) {
    await expect(panel(page).locator('.badge')).toHaveAttribute('data-status', 'Failed')
    const error = panel(page).locator('[data-error=run]')
    await expect(error).toHaveAttribute('data-line', '3')
    await expect(error.getByRole('link', { name: /line 3, column \d+/ })).toBeVisible()
    await expect(error.locator('pre.at-line')).toContainText('null.foo()')
    // Once: not again as the log's last line.
    await expect(log(page).locator('ol.log li')).toHaveCount(1)
    await expect(log(page).locator('ol.log')).toContainText('before')
    const text = await panel(page).evaluate((el) => el.shadowRoot!.textContent ?? '')
    expect(text.split("cannot read property 'foo' of null").length - 1).toBe(1)
  }
  await panel(v.page).locator('[data-error=run]').getByRole('link', { name: /line 3/ }).click()
  await expect(panel(v.page).locator('details.code')).toHaveAttribute('open', '')
  const line = panel(v.page).locator('pre.source [data-line="3"]')
  await expect(line).toHaveClass(/marked/)
  await expect(line).toBeInViewport()
  await shoot(v.page, 'thrown')
  await a.context.close()
  await v.context.close()
})

test('[WEB26] "Stopping…" shows to both while a cancel is in progress, then Cancelled', async ({ browser }) => {
  const path = await runOf(ann, 'Lab/Stubborn')
  const a = await openLoggedIn(browser, server, ann, path)
  const v = await openLoggedIn(browser, server, vic, path)
  for (const { page } of [a, v]) await expect(panel(page).locator('.badge')).toHaveAttribute('data-status', 'Running')
  await panel(a.page).locator('.cancel').click()
  for (const { page } of [a, v]) await expect(panel(page).locator('[data-stopping]')).toHaveText('Stopping…')
  await shoot(v.page, 'stopping')
  for (const { page } of [a, v]) {
    await expect(panel(page).locator('.badge')).toHaveAttribute('data-status', 'Cancelled', { timeout: 20_000 })
    await expect(panel(page).locator('[data-stopping]')).toHaveCount(0)
  }
  await a.context.close()
  await v.context.close()
})

test('[WEB26] a required input left empty refuses the run before it starts; a draft offers one of Run / Start', async ({ browser }) => {
  // The server refuses a started run without it too.
  const refused = await api<{ error: { code: string } }>(server, vic, 'POST', '/api/nodes/Lab/Greet/run', {})
  expect(refused.status).toBe(400)
  expect(refused.body.error.code).toBe('invalid_request')
  const v = await openLoggedIn(browser, server, vic, 'Lab/Greet')
  const code = v.page.locator('weft-code-page')
  await expect(code.locator('.new-run')).toBeVisible()
  await expect(code.locator('.run')).toHaveCount(0)
  await code.locator('.new-run').click()
  const draft = code.locator('weft-activity-panel')
  await expect(draft.locator('.start-run')).toHaveAttribute('disabled', '')
  await expect(draft.locator('[data-reason=required]')).toContainText('Fill in Your name first.')
  // One action at a time: the draft's Start, not Run or New run… beside it.
  await expect(code.locator('.run')).toHaveCount(0)
  await expect(code.locator('.new-run')).toHaveCount(0)
  await expect(v.page.locator('.start-run:visible, .run:visible, .new-run:visible')).toHaveCount(1)
  await shoot(v.page, 'required')
  await draft.getByLabel('Your name').fill('Vic')
  await draft.getByLabel('Your name').press('Tab')
  await expect(draft.locator('.start-run')).not.toHaveAttribute('disabled')
  await draft.locator('.start-run').click()
  await expect(draft.locator('.badge')).toHaveAttribute('data-status', 'Succeeded', { timeout: 20_000 })
  await expect(draft).toContainText('Hello, Vic')
  await expect(code.locator('.new-run')).toBeVisible()
  await v.context.close()
})

test('[WEB26] another user\'s run on a shared operation: never "Loading activity…" forever; "You cannot see this run"', async ({ browser }) => {
  const path = await runOf(ann, 'Admin/Operations/ExportJson', { inputs: { Root: 'Lab' } })
  const a = await openLoggedIn(browser, server, ann, path)
  await expect(panel(a.page).locator('.badge')).toHaveAttribute('data-status', 'Succeeded', { timeout: 20_000 })
  const v = await openLoggedIn(browser, server, vic, path)
  await expect(v.page.locator('weft-node-page [data-denied]')).toContainText('You cannot see this run')
  await expect(v.page.locator('weft-node-page')).not.toContainText('Loading')
  // The operation's page lists only the runs Vic may read: none of Ann's.
  await v.page.goto('/#/n/Admin/Operations/ExportJson')
  await expect(v.page.locator('weft-code-page')).toBeVisible()
  await expect(v.page.locator('weft-code-page .new-run')).toBeVisible()
  await expect(v.page.locator('weft-node-page')).not.toContainText('Loading activity')
  await shoot(v.page, 'shared-operation')
  await a.context.close()
  await v.context.close()
})

test('[WEB52] a run made on a Code page is in its Runs list at once, though the change feed has not told of it', async ({ browser }) => {
  await putNode(server, ann, 'Lab/Twice', 'Code', { Language: 'javascript', IsExecutable: true, Source: 'return 2' }, 'Twice')
  const v = await openLoggedIn(browser, server, vic, 'Lab/Twice')
  // The change feed is held: only the page itself can put the runs in the list.
  await v.page.route('**/api/changes**', () => {})
  const page = v.page.locator('weft-code-page')
  const runs = page.locator('weft-activity-strip weft-run-row')
  await expect(page.locator('.run')).toBeVisible()
  await expect(runs).toHaveCount(0)
  for (const n of [1, 2]) {
    await page.locator('.run').click()
    await expect(page.locator('section[aria-label="Your run"] .badge')).toHaveAttribute('data-status', 'Succeeded', { timeout: 20_000 })
    await expect(runs).toHaveCount(n)
  }
  await shoot(v.page, 'own-runs-listed')
  await v.context.close()
})
