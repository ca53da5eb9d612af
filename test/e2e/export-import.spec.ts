import { expect, test, type Page } from '@playwright/test'
import { adminAndViewerOn, api, openLoggedIn, putNode, startE2eServer, type E2eServer, type TestUser } from './fixtures.js'

/**
 * Issue 16 finding 1: export then import dropped every script that had run ("Imported 5 of 9",
 * each Code node refused `forbidden_field` for the system-written LastActivityPath). Through the
 * app: export a space whose Code has run, paste the bundle into Import, and nothing is refused.
 */
let server: E2eServer
let ann: TestUser
let vic: TestUser

test.beforeAll(async () => {
  server = await startE2eServer()
  ;({ ann, vic } = await adminAndViewerOn(server, 'Src', { Notes: { Body: 'kept' } }))
  await putNode(server, ann, 'Src/Tool', 'Code', { Language: 'javascript', IsExecutable: true, Source: 'return 1' }, 'Tool')
  await putNode(server, ann, 'Dst', 'Space', {}, 'Dst')
})

test.afterAll(async () => {
  await server?.dispose()
})

/** Opens a built-in operation, fills its form in a new draft, starts it, and waits for the end. */
async function runOperation(page: Page, op: string, inputs: Record<string, string>) {
  await page.goto(`/#/n/Admin/Operations/${op}`)
  await page.locator('weft-code-page .new-run').click()
  const run = page.locator('weft-code-page section[aria-label="Your run"] weft-activity-panel')
  for (const [name, value] of Object.entries(inputs)) {
    const input = run.locator(`weft-activity-form #in-${name}`)
    await input.fill(value)
    await input.dispatchEvent('change')
  }
  await expect(run.locator('.start-run')).toBeEnabled()
  await run.locator('.start-run').click()
  await expect(run.locator('.badge')).toHaveAttribute('data-status', /Succeeded|Warning|Failed/, { timeout: 30_000 })
  return run
}

test('[XFER1] export a space whose Code has run, import the bundle: "Imported N of N", nothing refused, the Code node comes along', async ({ browser }) => {
  // The Code node has run: it carries the system-written LastActivityPath.
  expect((await api(server, ann, 'POST', '/api/nodes/Src/Tool/run', {})).status).toBe(201)
  await expect.poll(async () => (await api<{ content: Record<string, unknown> }>(server, ann, 'GET', '/api/nodes/Src/Tool')).body.content.LastActivityPath).toBeTruthy()

  const a = await openLoggedIn(browser, server, ann)
  const exported = await runOperation(a.page, 'ExportJson', { Root: 'Src' })
  await expect(exported.locator('.badge')).toHaveAttribute('data-status', 'Succeeded')
  const bundle = (await exported.locator('pre.output').textContent()) ?? ''
  expect(bundle).not.toContain('LastActivityPath')
  const count = (JSON.parse(bundle) as { Nodes: unknown[] }).Nodes.length

  const imported = await runOperation(a.page, 'ImportJson', { Bundle: bundle, Target: 'Dst' })
  await expect(imported.locator('.badge')).toHaveAttribute('data-status', 'Succeeded')
  await expect(imported.locator('ol.log')).toContainText(`Imported ${count} of ${count} nodes into Dst.`)
  await expect(imported.locator('ol.log')).not.toContainText('Refused')
  const tool = await api<{ content: Record<string, unknown> }>(server, ann, 'GET', '/api/nodes/Dst/Src/Tool')
  expect(tool.status).toBe(200)
  expect(tool.body.content.Source).toBe('return 1')
  // Access came along: the Viewer reads the imported copy.
  expect((await api(server, vic, 'GET', '/api/nodes/Dst/Src/Notes')).status).toBe(200)
  await a.context.close()
})
