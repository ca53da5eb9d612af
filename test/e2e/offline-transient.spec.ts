import { expect, test, type Page } from '@playwright/test'
import { failWrites } from '../helpers/storage-fault.js'
import { api, editField, field, getContent, grant, openLoggedIn, putNode, signUp, startE2eServer, syncStatus, type E2eServer, type TestUser } from './fixtures.js'
import { childCreatedOffline } from './offline-steps.js'

let server: E2eServer
let ann: TestUser
let bob: TestUser

test.beforeAll(async () => {
  server = await startE2eServer()
  ann = await signUp(server, 'Ann')
  bob = await signUp(server, 'Bob')
})

test.afterAll(async () => {
  await server?.dispose()
})

/** The operations this device keeps queued (its IndexedDB `ops` store, read in the page). */
function queuedOps(page: Page, userId: string): Promise<{ kind: string; path: string; tries?: number; lastCode?: string }[]> {
  return page.evaluate(
    (name) =>
      new Promise((resolve, reject) => {
        const open = indexedDB.open(name)
        open.onerror = () => reject(open.error)
        open.onsuccess = () => {
          const db = open.result
          const all = db.transaction('ops').objectStore('ops').getAll()
          all.onsuccess = () => {
            db.close()
            resolve(all.result)
          }
          all.onerror = () => reject(all.error)
        }
      }),
    `weft-${userId}`,
  )
}

test('[SYNC19] a child created offline whose creation then fails on the server (500) stays listed and pending, no refusal is said, and it lands by itself once the server can save it', async ({ browser }) => {
  const { link, ...b } = await childCreatedOffline(browser, server, ann, bob, 'Field19', 'Draft')
  // The server's storage fails for that node's row: its creation answers 500.
  const fault = failWrites(server.dataDir, 'nodes', ['INSERT'], 'Field19/Draft')
  try {
    await b.context.setOffline(false)
    await expect.poll(async () => (await queuedOps(b.page, bob.userId)).map((o) => [o.kind, o.path, (o.tries ?? 0) >= 1, o.lastCode ?? null]), { timeout: 15_000 }).toEqual([['create', 'Field19/Draft', true, 'internal']])
    await expect(syncStatus(b.page)).toHaveAttribute('data-status', 'syncing')
    await expect(link).toBeVisible()
    await expect(b.page.getByText(/Not applied/)).toHaveCount(0)
    await b.page.screenshot({ path: 'test-results/sync19-create-failing-on-server.png' })
    fault.heal()
    await expect(syncStatus(b.page)).toHaveAttribute('data-status', 'saved', { timeout: 30_000 })
    expect((await api(server, ann, 'GET', '/api/nodes/Field19/Draft')).status).toBe(200)
    await expect(link).toBeVisible()
    await expect(b.page.getByText(/Not applied/)).toHaveCount(0)
    await b.page.screenshot({ path: 'test-results/sync19-create-landed.png' })
  } finally {
    fault.heal()
  }
  await b.context.close()
})

test('[SYNC22] an edit typed offline into a node that is deleted and made again at its path meanwhile is not put into the new node: the page shows the new node, and the edit is kept, refused, for its author', async ({ browser }) => {
  await putNode(server, ann, 'Again', 'Space', {}, 'Again')
  await grant(server, ann, 'Again', bob.userId, 'Admin')
  await putNode(server, ann, 'Again/Note', 'Document', { Title: 'old title' }, 'Note')
  const a = await openLoggedIn(browser, server, ann, 'Again/Note')
  await expect(field(a.page, 'Title')).toHaveValue('old title')
  await a.context.setOffline(true)
  await expect(syncStatus(a.page)).toHaveAttribute('data-status', 'offline')
  await editField(a.page, 'Title', 'old title, typed offline')
  // Meanwhile Bob deletes the node and makes another at its path.
  expect((await api(server, bob, 'DELETE', '/api/nodes/Again/Note')).status).toBeLessThan(300)
  await putNode(server, bob, 'Again/Note', 'Document', { Title: 'new title' }, 'Note')
  await a.context.setOffline(false)
  await expect(field(a.page, 'Title')).toHaveValue('new title', { timeout: 20_000 })
  await expect(syncStatus(a.page)).toHaveAttribute('data-status', 'saved', { timeout: 20_000 })
  await expect(field(a.page, 'Title')).toHaveValue('new title')
  const refused = a.page.locator('weft-node-page .refused')
  await expect(refused).toContainText('old title, typed offline')
  // Said for what it is, and never sent again: Try again would put it into the new node.
  await expect(refused).toContainText('another node was made in its place: the edit was not put into it')
  await expect(refused.getByRole('button', { name: 'Copy' })).toBeVisible()
  await expect(refused.getByRole('button', { name: 'Try again' })).toHaveCount(0)
  await a.page.screenshot({ path: 'test-results/sync22-recreated-node.png' })
  expect(await getContent(server, bob, 'Again/Note')).toEqual({ Title: 'new title' })
  await a.context.close()
})
