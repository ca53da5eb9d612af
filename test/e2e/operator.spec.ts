import { mkdir } from 'node:fs/promises'
import { expect, test, type Page } from '@playwright/test'
import { SYSTEM, type NodePath } from '../../shared/index.js'
import { analyzeAxe, api, openLoggedIn, putNode, signUp, startE2eServer, type E2eServer, type TestUser } from './fixtures.js'

/**
 * [OPS10] The operator's page in a real Chromium: an operator (Admin of the `Admin` partition)
 * sees the live figures and a stuck run with a link to it; anyone else gets no page (a refusal,
 * no figure) and a 403 from the endpoint; readable at 390 px; axe clean.
 */
let server: E2eServer
let ops: TestUser
let ann: TestUser
let runPath = ''

test.beforeAll(async () => {
  // Every run still Running is "stuck" here, so the test needs no wait.
  server = await startE2eServer({ stuckRunMs: 0 })
  ops = await signUp(server, 'Olga Ops')
  ann = await signUp(server, 'Ann')
  await server.running.nodes.put(SYSTEM, `Admin/_Access/${ops.userId}_Access` as NodePath, { nodeType: 'AccessAssignment', content: { Subject: ops.userId, Role: 'Admin' } }, 'system')
  await putNode(server, ann, 'Lab', 'Space', {}, 'Lab')
  // A name other than its path's last segment: [WEB74] the operator (in no space of Ann's) reads the run's own name.
  await putNode(server, ann, 'Lab/loop-1', 'Code', { Language: 'javascript', IsExecutable: true, Source: 'Log.info("started"); for (;;) await sleep(50)' }, 'Forever')
  runPath = (await api<{ path: string }>(server, ann, 'POST', '/api/nodes/Lab/loop-1/run', {})).body.path
  await mkdir('test-results', { recursive: true })
})

test.afterAll(async () => {
  if (runPath) await api(server, ann, 'PATCH', `/api/nodes/${runPath}`, { RequestedStatus: 'Cancelled' }).catch(() => undefined)
  await server?.dispose()
})

async function look(page: Page, label: string, width: number) {
  await page.setViewportSize({ width, height: 844 })
  await expect(page.locator('h1').first()).toBeVisible()
  const scroll = await page.evaluate(() => ({ sw: document.documentElement.scrollWidth, iw: innerWidth }))
  expect.soft(scroll.sw, `${label} scrolls sideways`).toBeLessThanOrEqual(scroll.iw)
  await page.screenshot({ path: `test-results/operator-${label}-${width}.png`, fullPage: true })
  const axe = await analyzeAxe(page)
  const bad = axe.violations.filter((v) => v.impact === 'serious' || v.impact === 'critical')
  expect.soft(bad.map((v) => `${v.id}: ${v.help} (${v.nodes.map((n) => n.target.join(' ')).join(', ')})`), `${label} axe`).toEqual([])
}

test('[OPS10][WEB74] an operator sees the live figures and the stuck run, linked to its node and named as the run is everywhere; 1280 and 390 px, axe clean', async ({ browser }) => {
  // A refusal to count: [OPS12] the Refused tile says it in words.
  expect((await api(server, ann, 'GET', '/api/nodes/Lab/Nothing-here')).status).toBe(404)
  const { context, page } = await openLoggedIn(browser, server, ops)
  // The navigation offers the page to an operator.
  await page.locator('weft-nav-tree [data-nav=operator]').click()
  await expect(page).toHaveURL(/#\/operator$/)
  const view = page.locator('weft-operator-page')
  await expect(view.getByRole('heading', { name: 'Operator', level: 1 })).toBeVisible()
  for (const id of ['connections', 'rooms', 'loaded-docs', 'updates-per-sec', 'acks-per-sec', 'commit-latency', 'refusals', 'engine-lag', 'engine-lease', 'dead-letters', 'consumers', 'event-loop']) {
    await expect(view.locator(`[data-figure=${id}] dd`)).not.toBeEmpty()
  }
  // Live: the operator's own socket counts, and the rates appear from the second reading.
  await expect(view.locator('[data-figure=connections] dd')).not.toHaveText('0')
  await expect(view.locator('[data-figure=updates-per-sec] dd')).not.toHaveText('—')
  await expect(view.locator('[data-figure=engine-lease] dd')).toHaveText(/^run here\s+activities · subscriptions · threads$/)
  // [SCALE17] Where each engine runs: all here, on a lone instance.
  for (const engine of ['subscriptions', 'activities', 'threads']) await expect(view.locator(`[data-engine=${engine}]`)).toContainText('(this instance)')
  const stuck = view.locator(`[data-stuck-run="${runPath}"]`)
  await expect(stuck).toBeVisible()
  await expect(stuck.getByRole('link')).toHaveAttribute('href', `#/n/${runPath}`)
  // [WEB74] The run's name as its own page and the run list say it (it read "Run of loop-1").
  await expect(stuck.getByRole('link')).toHaveText('Forever run')
  // [OPS12] Ann shares no space with the operator: her name comes with the overview, not her id.
  await expect(stuck).toContainText('started by Ann')
  await expect(stuck).not.toContainText(ann.userId)
  await expect(view.locator('[data-figure=refusals] [data-refusal=not_found]')).toHaveText(/^not found \d+$/)
  await expect(view.locator('[data-figure=refusals]')).not.toContainText('_')
  for (const width of [1280, 390]) await look(page, 'admin', width)
  await context.close()
})

test('[OPS10] anyone else: no navigation entry, no figures on #/operator, and 403 from the endpoint', async ({ browser }) => {
  const res = await api(server, ann, 'GET', '/api/admin/overview')
  expect(res.status).toBe(403)
  expect((res.body as { error: { code: string } }).error.code).toBe('forbidden')
  const { context, page } = await openLoggedIn(browser, server, ann)
  await expect(page.locator('weft-nav-tree [data-nav=operations]')).toBeVisible()
  await expect(page.locator('weft-nav-tree [data-nav=operator]')).toHaveCount(0)
  await page.goto('/#/operator')
  const view = page.locator('weft-operator-page')
  // [OPS12] In a person's words (no partition, no setting's name), with a way on.
  await expect(view.getByRole('alert')).toContainText('This page is for the people who run this Weft server')
  await expect(view.getByRole('alert')).not.toContainText('OPERATOR_EMAILS')
  await expect(view.getByRole('link', { name: 'Go to your home page' })).toHaveAttribute('href', '#/')
  await expect(view.locator('[data-figure]')).toHaveCount(0)
  await expect(view.locator('[data-stuck-run]')).toHaveCount(0)
  for (const width of [1280, 390]) await look(page, 'not-operator', width)
  await context.close()
})
