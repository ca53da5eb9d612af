import { mkdir } from 'node:fs/promises'
import { expect, test } from '@playwright/test'
import { editField, field, getContent, grant, openLoggedIn, putNode, signUp, startE2eServer, syncStatus, type E2eServer, type TestUser } from './fixtures.js'

/**
 * Issue 16 finding 3: refused offline typing was one entry per keystroke (13 keys → 13 entries,
 * most `invalid_update`), and the status bar's "13 refused" led nowhere. Refused edits are one
 * entry per node and field with the final text, Copy and Discard (one and all), and the count
 * opens that list from any page.
 */
let server: E2eServer
let ann: TestUser
let eve: TestUser

test.beforeAll(async () => {
  server = await startE2eServer()
  ann = await signUp(server, 'Ann')
  eve = await signUp(server, 'Eve')
  await putNode(server, ann, 'Gallery', 'Space', {}, 'Gallery')
  await grant(server, ann, 'Gallery', eve.userId, 'Editor')
  await putNode(server, ann, 'Gallery/Card', 'Document', { Caption: 'c0', Title: 't0' }, 'Card')
  await mkdir('test-results', { recursive: true })
})

test.afterAll(async () => {
  await server?.dispose()
})

test('[WEB11] 13 keystrokes refused offline are one entry with the final text; the status count opens the list from any page; Copy and Discard, one and all', async ({ browser }) => {
  const e = await openLoggedIn(browser, server, eve, 'Gallery/Card')
  await e.context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: server.url })
  await expect(field(e.page, 'Caption')).toHaveValue('c0')
  await e.context.setOffline(true)
  await expect(syncStatus(e.page)).toHaveAttribute('data-status', 'offline')
  // Thirteen keys into a text field, one by one, and one edit of another field.
  await field(e.page, 'Caption').click()
  await e.page.keyboard.press('End')
  await e.page.keyboard.type(' by eve 12345')
  await editField(e.page, 'Title', 'eve title')
  // Meanwhile Ann makes Eve a Viewer: on reconnect, every one of those edits is refused.
  await grant(server, ann, 'Gallery', eve.userId, 'Viewer')
  await e.context.setOffline(false)

  const list = e.page.locator('weft-node-page weft-refused-list')
  await expect(list.locator('li')).toHaveCount(2, { timeout: 15_000 })
  await expect(syncStatus(e.page)).toHaveAttribute('data-status', 'saved')
  const caption = list.locator('li', { hasText: 'Caption' })
  await expect(caption.locator('pre')).toHaveText('c0 by eve 12345')
  await expect(caption).toHaveAttribute('data-refused-count', /^(1[0-9]|[2-9][0-9])$/)
  await expect(caption.locator('.reason')).toContainText('forbidden')
  await expect(caption.locator('.reason')).not.toContainText('invalid_update')
  await expect(list.locator('li', { hasText: 'Title' }).locator('pre')).toHaveText('eve title')
  await expect(list.locator('li', { hasText: 'Title' }).locator('.reason')).toContainText('forbidden')
  // The status counts what the person sees: two fields, not fourteen edits.
  const count = e.page.locator('weft-sync-status a.refused')
  await expect(count).toHaveText('· 2 refused')
  expect((await getContent(server, ann, 'Gallery/Card')).Caption).toBe('c0')

  // From any page, the count opens the list of every node's refusals.
  await e.page.goto(`/#/n/${eve.userId}`)
  await expect(e.page.locator('weft-node-page h1')).toHaveText('Eve')
  await count.click()
  await expect(e.page).toHaveURL(/#\/refused$/)
  const all = e.page.locator('main weft-refused-list')
  await expect(all.locator('li')).toHaveCount(2)
  await expect(all.locator('li', { hasText: 'Caption' }).getByRole('link', { name: 'Card' })).toBeVisible()
  for (const width of [1280, 390]) {
    await e.page.setViewportSize({ width, height: 844 })
    expect(await e.page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(width)
    await e.page.screenshot({ path: `test-results/refused-list-${width}.png`, fullPage: true })
  }
  await e.page.setViewportSize({ width: 1280, height: 844 })

  // Copy puts the final text on the clipboard; Discard removes that entry (all its edits).
  await all.locator('li', { hasText: 'Caption' }).getByRole('button', { name: 'Copy' }).click()
  await expect.poll(() => e.page.evaluate(() => navigator.clipboard.readText())).toBe('c0 by eve 12345')
  await all.locator('li', { hasText: 'Caption' }).getByRole('button', { name: 'Discard' }).click()
  await expect(all.locator('li')).toHaveCount(1)
  await expect(count).toHaveText('· 1 refused')
  // The last one: Discard all (offered once there are several) or its own Discard.
  await all.locator('li').getByRole('button', { name: 'Discard' }).click()
  await expect(all).toContainText('Nothing was refused')
  await expect(count).toHaveCount(0)
  await e.context.close()
})

test('[WEB11] Discard all and Copy all take every entry at once', async ({ browser }) => {
  await grant(server, ann, 'Gallery', eve.userId, 'Editor')
  const e = await openLoggedIn(browser, server, eve, 'Gallery/Card')
  await e.context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: server.url })
  await expect(field(e.page, 'Caption')).toHaveValue('c0')
  await e.context.setOffline(true)
  await expect(syncStatus(e.page)).toHaveAttribute('data-status', 'offline')
  await editField(e.page, 'Title', 'second try')
  await field(e.page, 'Caption').click()
  await e.page.keyboard.press('End')
  await e.page.keyboard.type('!!')
  await grant(server, ann, 'Gallery', eve.userId, 'Viewer')
  await e.context.setOffline(false)
  const list = e.page.locator('weft-node-page weft-refused-list')
  await expect(list.locator('li')).toHaveCount(2, { timeout: 15_000 })
  await list.getByRole('button', { name: 'Copy all' }).click()
  await expect.poll(() => e.page.evaluate(() => navigator.clipboard.readText())).toContain('second try')
  await list.getByRole('button', { name: 'Discard all' }).click()
  await expect(list.locator('li')).toHaveCount(0)
  await expect(e.page.locator('weft-sync-status a.refused')).toHaveCount(0)
  await e.context.close()
})
