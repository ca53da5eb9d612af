import { cp, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { expect, test } from '@playwright/test'
import { startServer } from '../../sync-server/server.js'
import { openLoggedIn, signUp, waitForServiceWorker } from './fixtures.js'

type Running = Awaited<ReturnType<typeof startServer>>
let running: Running
let staticDir: string
let dataDir: string

test.beforeAll(async () => {
  // A copy of the build this test may change, as a deploy would.
  staticDir = await mkdtemp(join(tmpdir(), 'weft-e2e-dist-'))
  dataDir = await mkdtemp(join(tmpdir(), 'weft-e2e-'))
  await cp(resolve('dist'), staticDir, { recursive: true })
  running = await startServer({ port: 0, host: '127.0.0.1', dataDir, staticDir, logLevel: 'warn' })
})

test.afterAll(async () => {
  await running?.close()
  await rm(staticDir, { recursive: true, force: true })
  await rm(dataDir, { recursive: true, force: true })
})

test('[WEB7] a new build is offered as "new version available" and applied only when the person accepts', async ({ browser }) => {
  const server = { url: `http://127.0.0.1:${running.port}` }
  const ann = await signUp(server, 'Ann')
  const { page, context } = await openLoggedIn(browser, server, ann)
  await waitForServiceWorker(page)
  await expect(page.locator('[data-update-available]')).toHaveCount(0)
  // Deploy: the service worker script changes.
  const sw = join(staticDir, 'sw.js')
  await writeFile(sw, (await readFile(sw, 'utf8')) + '\n// next build\n')
  await page.evaluate(async () => (await navigator.serviceWorker.getRegistration())?.update())
  const prompt = page.locator('weft-app').locator('[data-update-available]')
  await expect(prompt).toContainText('A new version of Weft is available')
  await page.screenshot({ path: '/tmp/weft-update-prompt.png' })
  const reloaded = page.waitForEvent('load')
  await prompt.getByRole('button', { name: 'Reload to update' }).click()
  await reloaded
  await expect(page.locator('weft-sync-status [role=status]')).toBeVisible()
  await expect(page.locator('[data-update-available]')).toHaveCount(0)
  await context.close()
})
