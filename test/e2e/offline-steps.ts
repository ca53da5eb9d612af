import { expect, type Browser } from '@playwright/test'
import { grant, openLoggedIn, putNode, syncStatus, waitForServiceWorker, type E2eServer, type TestUser } from './fixtures.js'

/**
 * `space` (made by `admin`, `editor` an Editor in it) opened by `editor`, who goes offline and
 * creates the child `name` there: listed at once, queued for the server. The context is still
 * offline when this returns.
 */
export async function childCreatedOffline(browser: Browser, server: E2eServer, admin: TestUser, editor: TestUser, space: string, name: string) {
  await putNode(server, admin, space, 'Space', {}, space)
  await grant(server, admin, space, editor.userId, 'Editor')
  const b = await openLoggedIn(browser, server, editor, space)
  const page = b.page.locator('weft-node-page')
  const form = page.getByRole('form', { name: 'New child node' })
  await expect(form).toBeVisible()
  await waitForServiceWorker(b.page)
  await b.context.setOffline(true)
  await expect(syncStatus(b.page)).toHaveAttribute('data-status', 'offline')
  await form.getByLabel('Name').fill(name)
  await form.getByRole('button', { name: 'Create' }).click()
  const link = page.locator('section[aria-label="Children"]').getByRole('link', { name })
  await expect(link).toBeVisible()
  return { ...b, link }
}
