import { expect, test } from '@playwright/test'
import { adminAndViewerOn, editField, field, openLoggedIn, putNode, startE2eServer, syncStatus, type E2eServer, type TestUser } from './fixtures.js'

let server: E2eServer
let ann: TestUser

test.beforeAll(async () => {
  server = await startE2eServer()
  ;({ ann } = await adminAndViewerOn(server, 'Narrow', { Card: { Caption: 'c0' } }))
})
test.afterAll(async () => { await server?.dispose() })

test('[WEB44] at 390 px the sticky top bar stays a bar when the status has something to say (offline, changes waiting)', async ({ browser }) => {
  await putNode(server, ann, 'Narrow/Doc', 'Document', { Caption: 'n0', Other: 'o0' }, 'Doc')
  const a = await openLoggedIn(browser, server, ann, 'Narrow/Doc')
  await a.page.setViewportSize({ width: 390, height: 844 })
  await expect(field(a.page, 'Caption')).toHaveValue('n0')
  await a.context.setOffline(true)
  await expect(syncStatus(a.page)).toHaveAttribute('data-status', 'offline')
  await editField(a.page, 'Other', 'o1')
  await editField(a.page, 'Caption', 'n1')
  await expect(syncStatus(a.page)).toHaveAttribute('data-pending', '2')
  const bar = await a.page.locator('weft-app .bar').boundingBox()
  // A sticky bar taller than an eighth of the phone's screen covers the page it sits on.
  expect(bar!.height).toBeLessThanOrEqual(844 / 8)
  // What the status says is still all there to read (not cut off).
  const status = syncStatus(a.page)
  expect(await status.evaluate((el) => el.scrollWidth <= el.clientWidth + 1)).toBe(true)
  await a.context.close()
})
