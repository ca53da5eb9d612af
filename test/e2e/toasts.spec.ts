import { mkdir } from 'node:fs/promises'
import { expect, test, type Locator, type Page } from '@playwright/test'
import { adminAndViewerOn, api, getContent, openLoggedIn, putNode, startE2eServer, type E2eServer, type TestUser } from './fixtures.js'

/**
 * [WEB103] Toasts and the errors said meanwhile: an Undo stays ten seconds at the bottom of the
 * screen, and an error the page shows there is never under it. Ann (Admin) acts; Vic (Viewer)
 * watches the same page. At 1280 and 390 px.
 */
let server: E2eServer
let ann: TestUser
let vic: TestUser
const WIDTHS = [1280, 390] as const

test.beforeAll(async () => {
  server = await startE2eServer()
  ;({ ann, vic } = await adminAndViewerOn(server, 'Toasts', { Doc: { Title: 'doc', Extra1280: 'one', Extra390: 'two' } }))
  await putNode(server, ann, 'Toasts/Doc/Taken', 'Document', {}, 'Taken')
  await mkdir('test-results', { recursive: true })
})

test.afterAll(async () => {
  await server?.dispose()
})

const nodePage = (page: Page) => page.locator('weft-node-page')

type Box = { x: number; y: number; width: number; height: number }
function overlaps(p: Box, q: Box): boolean {
  return p.x < q.x + q.width && q.x < p.x + p.width && p.y < q.y + q.height && q.y < p.y + p.height
}

/** Whether any toast shares area with `target` on screen. */
async function coveredByToast(page: Page, target: Locator): Promise<boolean> {
  const t = await target.boundingBox()
  if (!t) return true
  const toasts = await page.locator('weft-toast [data-toast]').evaluateAll((els) => els.map((e) => e.getBoundingClientRect()).map((r) => ({ x: r.x, y: r.y, width: r.width, height: r.height })))
  return toasts.some((b) => overlaps(b, t))
}

test('[WEB103] an error said while an Undo is shown is never under it; the Undo stays reachable by pointer and keyboard', async ({ browser }) => {
  const a = await openLoggedIn(browser, server, ann, 'Toasts/Doc')
  const v = await openLoggedIn(browser, server, vic, 'Toasts/Doc')
  for (const width of WIDTHS) {
    await a.page.setViewportSize({ width, height: 900 })
    await v.page.setViewportSize({ width, height: 900 })
    const key = `Extra${width}`
    await expect(v.page.locator(`weft-node-page [data-field="${key}"]`)).toBeVisible()
    await nodePage(a.page).getByRole('button', { name: `Remove field Extra ${width}` }).click()
    const undo = a.page.locator('weft-toast').getByRole('button', { name: 'Undo' })
    await expect(undo).toBeVisible()
    await expect(v.page.locator(`weft-node-page [data-field="${key}"]`)).toHaveCount(0)

    // The next create's name is taken: its error (and its "Create … (2) instead") is said.
    const form = nodePage(a.page).getByRole('form', { name: 'New child node' })
    await form.getByLabel('Name', { exact: true }).fill('Taken')
    await form.getByRole('button', { name: 'Create' }).click()
    const error = nodePage(a.page).locator('[data-error=create]')
    await expect(error).toContainText('A node named “Taken” already exists here.')
    // The screen ends just under the error: where the Undo sits.
    const bottom = await error.evaluate((el) => el.getBoundingClientRect().bottom)
    await a.page.setViewportSize({ width, height: Math.ceil(bottom) + 24 })
    const fix = error.getByRole('button', { name: 'Create “Taken (2)” instead' })
    await expect(fix).toBeInViewport()
    await expect.poll(() => coveredByToast(a.page, error)).toBe(false)
    expect(await coveredByToast(a.page, fix)).toBe(false)
    await expect(undo).toBeInViewport()
    await a.page.screenshot({ path: `test-results/web103-error-over-undo-${width}.png` })
    await v.page.screenshot({ path: `test-results/web103-viewer-${width}.png` })

    // The Undo still works: by pointer at 1280 px, by keyboard (Shift+Tab from the page's end) at 390.
    if (width === 1280) await undo.click()
    else {
      // From the error's own button, Tab goes on through the page's last controls to the toast.
      await fix.focus()
      const focused = () => undo.evaluate((el) => (el.getRootNode() as ShadowRoot).activeElement === el)
      for (let i = 0; i < 8 && !(await focused()); i++) await a.page.keyboard.press('Tab')
      await expect(undo).toBeFocused()
      await a.page.keyboard.press('Enter')
    }
    await expect.poll(async () => (await getContent(server, ann, 'Toasts/Doc'))[key]).toBe(width === 1280 ? 'one' : 'two')
    await expect(v.page.locator(`weft-node-page [data-field="${key}"]`)).toBeVisible()
    // Once nothing would be covered, the toasts are at the bottom again.
    await form.getByLabel('Name', { exact: true }).fill('x')
    await expect(error).toHaveCount(0)
  }
  await a.context.close()
  await v.context.close()
})

test('[WEB103] an Undo that fails is said as an error (an alert) that stays until dismissed, however many toasts follow', async ({ browser }) => {
  await putNode(server, ann, 'Toasts/Gone', 'Document', { Body: 'b' }, 'Gone')
  await putNode(server, ann, 'Toasts/Many', 'Document', { Alpha: '1', Beta: '2', Gamma: '3', Delta: '4' }, 'Many')
  const a = await openLoggedIn(browser, server, ann, 'Toasts/Gone')
  await a.page.setViewportSize({ width: 390, height: 844 })
  await nodePage(a.page).getByRole('button', { name: 'Delete', exact: true }).click()
  const toast = a.page.locator('weft-toast')
  await expect(toast.getByText('Moved “Gone” to the trash.')).toBeVisible()
  // Meanwhile it is restored elsewhere (another tab, another Admin): this Undo can no longer work.
  const listed = await api<{ items: { trashPath?: string; path?: string }[] }>(server, ann, 'GET', '/api/trash/Toasts')
  const entry = listed.body.items[0]!
  const restored = await api(server, ann, 'POST', `/api/nodes/${entry.trashPath ?? entry.path}/restore`, {})
  expect(restored.status).toBe(200)
  await toast.getByRole('button', { name: 'Undo' }).click()
  const alert = toast.getByRole('alert')
  await expect(alert).toContainText('Could not undo:')
  // Four more Undo toasts: the error is still there (it was pushed out by the third).
  await a.page.goto('/#/n/Toasts/Many')
  for (const f of ['Alpha', 'Beta', 'Gamma', 'Delta']) {
    await nodePage(a.page).getByRole('button', { name: `Remove field ${f}` }).click()
    await expect(toast.getByText(`Removed field “${f}”.`)).toBeVisible()
  }
  await expect(alert).toContainText('Could not undo:')
  await a.page.screenshot({ path: 'test-results/web103-undo-failed-390.png' })
  await alert.getByRole('button', { name: 'Dismiss' }).click()
  await expect(alert).toHaveCount(0)
  await a.context.close()
})
