import { mkdir } from 'node:fs/promises'
import { expect, test, type Page } from '@playwright/test'
import { adminAndViewerOn, api, getContent, openLoggedIn, putNode, startE2eServer, type E2eServer, type TestUser } from './fixtures.js'

/**
 * The README's "First steps" screenshots. Always taken (into test-results/); with
 * WEFT_SCREENSHOTS=1 they are written to docs/img/ instead, to be committed:
 *   WEFT_SCREENSHOTS=1 npx playwright test test/e2e/screenshots.spec.ts
 */
const DIR = process.env.WEFT_SCREENSHOTS === '1' ? 'docs/img' : 'test-results/first-steps'
let server: E2eServer
let ann: TestUser

test.beforeAll(async () => {
  server = await startE2eServer()
  ;({ ann } = await adminAndViewerOn(server, 'Garden', {
    Plan: { Body: 'Tomatoes by the south wall; beans after the peas.', Notes: 'Water in the evening. Ask Vic about the seeds.' },
    Harvest: { Body: 'Weigh and note each picking.' },
  }))
  await putNode(server, ann, 'Garden/Count', 'Code', {
    Language: 'javascript',
    IsExecutable: true,
    Description: 'Counts the notes of the garden',
    Source: "const notes = await Mesh.query({ parent: 'Garden', nodeType: 'Document' })\nLog.info(`${notes.length} notes`)\nreturn notes.length",
  }, 'Count')
  const run = await api<{ path: string }>(server, ann, 'POST', '/api/nodes/Garden/Count/run', {})
  await expect.poll(async () => (await getContent(server, ann, run.body.path)).Status, { timeout: 30_000 }).toBe('Succeeded')
  await mkdir(DIR, { recursive: true })
})

test.afterAll(async () => {
  await server?.dispose()
})

async function shoot(page: Page, name: string) {
  await page.waitForLoadState('networkidle')
  await page.screenshot({ path: `${DIR}/${name}.png` })
}

test('[WEB14] first steps, as the README shows them: the home, a space, a script and its run', async ({ browser }) => {
  const { context, page } = await openLoggedIn(browser, server, ann, 'Garden/Plan')
  await page.setViewportSize({ width: 1024, height: 640 })
  await page.goto('/#/n/Garden')
  await page.goto('/')
  await expect(page.locator('weft-home-page [data-home="runs"] weft-run-row')).toHaveCount(1)
  await shoot(page, 'first-steps-home')
  await page.goto('/#/n/Garden/Plan')
  await expect(page.locator('weft-node-page h1')).toHaveText('Plan')
  await shoot(page, 'first-steps-document')
  await page.goto('/#/n/Garden/Count')
  await expect(page.locator('weft-code-page .cm-content')).toContainText('Mesh.query')
  await shoot(page, 'first-steps-code')
  await page.goto('/#/operations')
  await expect(page.locator('weft-operations-page li[data-operation="Garden/Count"]')).toBeVisible()
  await shoot(page, 'first-steps-operations')
  await context.close()
})
