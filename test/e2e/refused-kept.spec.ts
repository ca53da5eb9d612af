import { expect, test, type Browser } from '@playwright/test'
import { adminAndViewerOn, api, editField, field, getContent, grant, openLoggedIn, putNode, signUp, startE2eServer, syncStatus, type E2eServer, type TestUser } from './fixtures.js'

/** Refused edits kept for their author: Try again once the role is back, and a deleted node's page. */
let server: E2eServer
let ann: TestUser

test.beforeAll(async () => {
  server = await startE2eServer()
  ;({ ann } = await adminAndViewerOn(server, 'Atelier', { Card: { Caption: 'c0' }, Sketch: { Caption: 's0' } }))
})

test.afterAll(async () => {
  await server?.dispose()
})

/** Eve, an Editor, types `typed` into the node's Caption offline; made a Viewer meanwhile: refused on reconnect. */
async function refusedEdit(browser: Browser, path: string, from: string, typed: string) {
  const eve = await signUp(server, 'Eve')
  await grant(server, ann, 'Atelier', eve.userId, 'Editor')
  const e = await openLoggedIn(browser, server, eve, path)
  await expect(field(e.page, 'Caption')).toHaveValue(from)
  await e.context.setOffline(true)
  await expect(syncStatus(e.page)).toHaveAttribute('data-status', 'offline')
  await editField(e.page, 'Caption', typed)
  await grant(server, ann, 'Atelier', eve.userId, 'Viewer')
  await e.context.setOffline(false)
  const refused = e.page.locator('weft-node-page .refused')
  await expect(refused).toContainText(typed)
  await expect(field(e.page, 'Caption')).toHaveValue(from)
  return { eve, e, refused }
}

test('[WEB82] a refused edit is tried again once the role may write: saved, nothing left refused', async ({ browser }) => {
  const { eve, e, refused } = await refusedEdit(browser, 'Atelier/Card', 'c0', 'c0 from the train')
  await grant(server, ann, 'Atelier', eve.userId, 'Editor')
  await expect(field(e.page, 'Caption')).not.toHaveAttribute('readonly', '')
  await refused.getByRole('button', { name: 'Try again' }).click()
  await expect(refused).toHaveCount(0)
  await expect(field(e.page, 'Caption')).toHaveValue('c0 from the train')
  await expect(syncStatus(e.page)).toHaveAttribute('data-status', 'saved')
  expect((await getContent(server, ann, 'Atelier/Card')).Caption).toBe('c0 from the train')
  await e.page.screenshot({ path: 'test-results/refused-kept-retried.png' })
  await e.context.close()
})

test('[WEB84] a deleted node\'s page says its refused edits are kept and links to them', async ({ browser }) => {
  const { e } = await refusedEdit(browser, 'Atelier/Sketch', 's0', 's0 kept for me')
  expect((await api(server, ann, 'DELETE', '/api/nodes/Atelier/Sketch')).status).toBeLessThan(300)
  await e.page.reload()
  await expect(e.page.locator('weft-moved-notice [data-deleted]')).toBeVisible()
  const kept = e.page.locator('weft-moved-notice [data-refused-kept]')
  await expect(kept).toContainText('Your refused edit of this node is kept on this device')
  await e.page.screenshot({ path: 'test-results/refused-kept-deleted-node.png' })
  await kept.getByRole('link', { name: 'copy or discard it' }).click()
  await expect(e.page).toHaveURL(/#\/refused$/)
  await expect(e.page.locator('weft-refused-list')).toContainText('s0 kept for me')
  await e.context.close()
})

test('[WEB83] a refused edit of a field someone removed meanwhile says so, and Try again adds the field back with the text', async ({ browser }) => {
  await putNode(server, ann, 'Atelier/Note', 'Document', { Caption: 'n0' })
  const a = await openLoggedIn(browser, server, ann, 'Atelier/Note')
  await expect(field(a.page, 'Caption')).toHaveValue('n0')
  // The entry as two tabs' replays left it (test/unit/web-refused-removed-field.test.ts makes it
  // against a real server): refused `invalid_update`, its field no longer in the node.
  await a.page.evaluate(async () => {
    const w = (globalThis as unknown as { __weft: { client: { store: { db: { outbox: { add(row: object): Promise<number> } } } } } }).__weft
    await w.client.store.db.outbox.add({
      path: 'Atelier/Note',
      patch: { ShortTitle: 'my lost title' },
      update: new Uint8Array(),
      status: 'refused',
      code: 'invalid_update',
      message: 'The update writes into a deleted type; reload the node.',
      at: new Date().toISOString(),
    })
  })
  const refused = a.page.locator('weft-node-page .refused')
  await expect(refused.locator('.reason')).toContainText('Someone removed Short title while this edit was on its way')
  await expect(refused.locator('.reason')).not.toContainText('The server could not apply this edit')
  await a.page.screenshot({ path: 'test-results/refused-kept-field-removed.png' })
  await refused.getByRole('button', { name: 'Try again' }).click()
  await expect(refused).toHaveCount(0)
  await expect(field(a.page, 'Short title')).toHaveValue('my lost title')
  await expect(syncStatus(a.page)).toHaveAttribute('data-status', 'saved')
  expect((await getContent(server, ann, 'Atelier/Note')).ShortTitle).toBe('my lost title')
  await a.context.close()
})

test('[WEB80] a second refused run of a field is its own entry: the first refused text stays on the node page and #/refused', async ({ browser }) => {
  await putNode(server, ann, 'Atelier/Plan', 'Document', { Caption: 'p0' })
  const { e, refused } = await refusedEdit(browser, 'Atelier/Plan', 'p0', 'p0 first paragraph')
  // Typed again into the same field (the rebuilt doc: the server's text), refused again: a Viewer's
  // edit is kept on the device, unsent. Made through the app's client: a Viewer's page offers no input.
  await e.page.evaluate(async () => {
    const w = (globalThis as unknown as { __weft: { client: { patch(path: string, patch: object): Promise<void> } } }).__weft
    let value = 'p0'
    for (const ch of ' more') await w.client.patch('Atelier/Plan', { Caption: (value += ch) })
  })
  await expect(refused.locator('li')).toHaveCount(2)
  await expect(refused.locator('li').nth(0).locator('pre')).toHaveText('p0 first paragraph')
  await expect(refused.locator('li').nth(1).locator('pre')).toHaveText('p0 more')
  await expect(refused.locator('li').nth(0)).toContainText('last typed today')
  await e.page.screenshot({ path: 'test-results/refused-kept-two-runs.png' })
  await e.page.goto(`${server.url}/#/refused`)
  await expect(e.page.locator('weft-refused-list pre')).toHaveText(['p0 first paragraph', 'p0 more'])
  expect((await getContent(server, ann, 'Atelier/Plan')).Caption).toBe('p0')
  await e.context.close()
})
