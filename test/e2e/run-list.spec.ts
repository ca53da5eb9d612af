import { mkdir } from 'node:fs/promises'
import { expect, test } from '@playwright/test'
import { adminAndViewerOn, api, openLoggedIn, putNode, startE2eServer, type E2eServer, type TestUser } from './fixtures.js'

/**
 * Issue 16 finding 8 (runs): the space page showed every run's full panel (its documents started
 * 2,760 px down) with no run numbers, starter, readable times or durations. A Code node's and a
 * space's runs are a compact list: number, status, started by, when, duration.
 */
let server: E2eServer
let ann: TestUser
let vic: TestUser

test.beforeAll(async () => {
  server = await startE2eServer()
  ;({ ann, vic } = await adminAndViewerOn(server, 'Lab', { Notes: { Body: 'a document' } }))
  await putNode(server, ann, 'Lab/Quick', 'Code', { Language: 'javascript', IsExecutable: true, Source: 'Log.info("quick"); return 1' }, 'Quick')
  await mkdir('test-results', { recursive: true })
})

test.afterAll(async () => {
  await server?.dispose()
})

test('[WEB13] a space and a Code node list their runs one line each: number, status, started by, when, duration; the run page has the rest', async ({ browser }) => {
  const runs: string[] = []
  for (const user of [ann, vic, ann, vic, ann, vic]) {
    const res = await api<{ path: string }>(server, user, 'POST', '/api/nodes/Lab/Quick/run', {})
    expect(res.status).toBe(201)
    runs.push(res.body.path)
  }
  const v = await openLoggedIn(browser, server, vic, 'Lab')
  const list = v.page.locator('weft-node-page weft-activity-strip ul.runs')
  await expect(list.locator('weft-run-row')).toHaveCount(6)
  await expect(list.locator('weft-run-row a.row[data-status="Succeeded"]')).toHaveCount(6, { timeout: 20_000 })
  // Newest first; the starter by name; a duration. Not numbered here: a space lists several
  // codes' runs, and a run numbered in two lists had two numbers.
  const first = list.locator('weft-run-row').first()
  await expect(first).toHaveAttribute('path', runs[5]!)
  await expect(first.locator('.num')).toHaveCount(0)
  await expect(first.locator('.who')).toContainText('started by Vic (you)')
  await expect(list.locator('weft-run-row').nth(1).locator('.who')).toContainText('started by Ann')
  await expect(first.locator('.when')).toContainText(/today .* · \d/)
  // No full panels: each run is one short line, and the page's own content is not pushed down.
  await expect(v.page.locator('weft-node-page weft-activity-panel')).toHaveCount(0)
  for (const height of await list.locator('weft-run-row').evaluateAll((els) => els.map((e) => e.getBoundingClientRect().height))) expect(height).toBeLessThan(60)
  for (const width of [1280, 390]) {
    await v.page.setViewportSize({ width, height: 844 })
    expect(await v.page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(width)
    await v.page.screenshot({ path: `test-results/run-list-space-${width}.png`, fullPage: true })
  }
  await v.page.setViewportSize({ width: 1280, height: 844 })

  // The Code node lists every run of it the reader may read, the same way.
  await v.page.goto('/#/n/Lab/Quick')
  const codeRuns = v.page.locator('weft-code-page weft-activity-strip ul.runs weft-run-row')
  await expect(codeRuns).toHaveCount(6)
  // A Code node's runs are numbered from its first.
  await expect(codeRuns.first().locator('.num')).toHaveText('#6')
  await expect(codeRuns.last().locator('.num')).toHaveText('#1')
  await v.page.screenshot({ path: 'test-results/run-list-code-1280.png', fullPage: true })
  // A line opens the run's page.
  await codeRuns.first().locator('a.row').click()
  await expect(v.page).toHaveURL(new RegExp(`#/n/${runs[5]!.replace(/[.]/g, '\\.')}$`))
  await expect(v.page.locator('weft-node-page weft-activity-panel .badge')).toHaveAttribute('data-status', 'Succeeded')
  await v.context.close()
})

test('[WEB13] a run that finished and logged a warning reads "Succeeded with warnings" (not "Warning"), and a run has one name in its list and on its panel', async ({ browser }) => {
  await putNode(server, ann, 'Lab/Careful', 'Code', { Language: 'javascript', IsExecutable: true, Source: 'Log.warn("close to the limit"); return { total: 42 }' }, 'Careful')
  const res = await api<{ path: string }>(server, ann, 'POST', '/api/nodes/Lab/Careful/run', {})
  expect(res.status).toBe(201)
  const a = await openLoggedIn(browser, server, ann, 'Lab/Careful')
  const row = a.page.locator('weft-code-page weft-activity-strip weft-run-row a.row[data-status="Warning"]')
  await expect(row.locator('.badge')).toHaveText('Succeeded with warnings', { timeout: 20_000 })
  await expect(row.locator('.what')).toContainText('Careful run')
  await row.click()
  const panel = a.page.locator('weft-node-page weft-activity-panel')
  await expect(panel.locator('.badge')).toHaveText('Succeeded with warnings')
  await a.page.goto('/#/n/Lab/Careful')
  await a.page.locator('weft-code-page').getByRole('button', { name: 'Run', exact: true }).click()
  // The panel under the Code node names its run as the list does.
  await expect(a.page.locator('weft-code-page weft-activity-panel header a')).toHaveText(/^Careful run$/, { timeout: 20_000 })
  await a.context.close()
})
