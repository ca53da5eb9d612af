import { expect, test, type Page } from '@playwright/test'
import { adminAndViewerOn, api, field, grant, openLoggedIn, putNode, signUp, startE2eServer, syncStatus, waitForServiceWorker, type E2eServer, type TestUser } from './fixtures.js'

/**
 * What a page offers when the room has not told the role (offline, a first visit) and once the
 * room is denied. Each test here failed before [WEB85]/[WEB86]: an unknown role counted as every
 * right, and a denied room kept its last mask.
 */
let server: E2eServer
let ann: TestUser
let vic: TestUser
let bob: TestUser

test.beforeAll(async () => {
  server = await startE2eServer()
  ;({ ann, vic } = await adminAndViewerOn(server, 'Lens', { Seen: { Caption: 's0' } }))
  bob = await signUp(server, 'Bob')
  await grant(server, ann, 'Lens', bob.userId, 'Editor')
})
test.afterAll(async () => { await server?.dispose() })

const nodePage = (page: Page) => page.locator('weft-node-page')

/** The mask this device remembers for `path` ([WEB85]), read from the person's IndexedDB. */
async function rememberedMask(page: Page, user: TestUser, path: string): Promise<number | null> {
  return page.evaluate(async ({ db, key }) => {
    const open = indexedDB.open(db)
    const idb = await new Promise<IDBDatabase>((resolve, reject) => {
      open.onsuccess = () => resolve(open.result)
      open.onerror = () => reject(open.error)
    })
    try {
      const req = idb.transaction('meta').objectStore('meta').get(key)
      const row = await new Promise<{ value: number } | undefined>((resolve, reject) => {
        req.onsuccess = () => resolve(req.result as { value: number } | undefined)
        req.onerror = () => reject(req.error)
      })
      return row ? row.value : null
    } finally {
      idb.close()
    }
  }, { db: `weft-${user.userId}`, key: `permissions:${path}` })
}

/** Nothing that writes is offered on the open node page. */
async function expectNoEdits(page: Page, name: string) {
  const p = nodePage(page)
  await expect(p.getByRole('heading', { name })).toBeVisible()
  await expect(p.getByRole('button', { name: `Rename ${name}` })).toHaveCount(0)
  await expect(p.locator('form[aria-label="Add a field"]')).toHaveCount(0)
  await expect(p.locator('form[aria-label="New child node"]')).toHaveCount(0)
  await expect(p.locator('weft-node-actions')).toHaveCount(0)
}

for (const width of [1280, 390]) {
  test(`[WEB85] offline on a page never opened, a Viewer is offered no edits (her role in the space is remembered); an Editor there still edits (${width} px)`, async ({ browser }) => {
    const name = `Unseen ${width}`
    const path = `Lens/Unseen${width}`
    await putNode(server, ann, path, 'Document', { Caption: 'u0' }, name)
    const v = await openLoggedIn(browser, server, vic, 'Lens')
    const b = await openLoggedIn(browser, server, bob, 'Lens')
    for (const s of [v, b]) await s.page.setViewportSize({ width, height: 900 })
    // Both have the space's page (its room told the role) and its children listed.
    await expect(nodePage(v.page).getByRole('link', { name })).toBeVisible()
    await expect(nodePage(b.page).getByRole('link', { name })).toBeVisible()
    await expect.poll(() => rememberedMask(v.page, vic, 'Lens')).not.toBeNull()
    await expect.poll(() => rememberedMask(b.page, bob, 'Lens')).not.toBeNull()

    for (const s of [v, b]) {
      await s.context.setOffline(true)
      await expect(syncStatus(s.page)).toHaveAttribute('data-status', 'offline')
      await nodePage(s.page).getByRole('link', { name }).click()
    }
    // The Viewer: read-only, said in words, as online.
    await expectNoEdits(v.page, name)
    await expect(nodePage(v.page).locator('.readonly')).toHaveText('View only: your role can read this node but not change it.')
    await v.page.screenshot({ path: `test-results/web85-viewer-offline-${width}.png` })

    // The Editor: offline editing is the product.
    const bp = nodePage(b.page)
    await expect(bp.getByRole('heading', { name })).toBeVisible()
    await expect(bp.locator('.readonly')).toHaveCount(0)
    await bp.locator('form[aria-label="Add a field"] input[name="key"]').fill('Note')
    await bp.locator('form[aria-label="Add a field"] input[name="value"]').fill('written offline')
    await bp.locator('form[aria-label="Add a field"]').getByRole('button', { name: 'Add field' }).click()
    await expect(field(b.page, 'Note')).toHaveValue('written offline')
    await expect(bp.locator('form[aria-label="New child node"]')).toBeVisible()
    await b.page.screenshot({ path: `test-results/web85-editor-offline-${width}.png` })

    await b.context.setOffline(false)
    await expect.poll(async () => (await api<{ content: Record<string, unknown> }>(server, ann, 'GET', `/api/nodes/${path}`)).body.content.Note).toBe('written offline')
    await v.context.close()
    await b.context.close()
  })
}

test('[WEB85] offline, where this device knows no role at all: nothing is offered, and the page says why', async ({ browser }) => {
  // Vic opens a document by its link: the document's room tells her role there, nothing above it.
  const v = await openLoggedIn(browser, server, vic, 'Lens/Seen')
  await expect(field(v.page, 'Caption')).toHaveValue('s0')
  await expect.poll(() => rememberedMask(v.page, vic, 'Lens/Seen')).not.toBeNull()
  expect(await rememberedMask(v.page, vic, 'Lens')).toBeNull()
  await v.context.setOffline(true)
  await expect(syncStatus(v.page)).toHaveAttribute('data-status', 'offline')
  // The space, by its breadcrumb: its row is on this device, its role is not.
  await nodePage(v.page).getByRole('navigation', { name: 'Breadcrumb' }).getByRole('link', { name: 'Lens' }).click()
  await expectNoEdits(v.page, 'Lens')
  await expect(nodePage(v.page).locator('.readonly')).toHaveText('Your role here is not known yet: editing opens once connected.')
  await v.page.screenshot({ path: 'test-results/web85-role-unknown.png' })
  // Once connected, the room tells: a Viewer, said so.
  await v.context.setOffline(false)
  await expect(nodePage(v.page).locator('.readonly')).toHaveText('View only: your role can read this node but not change it.')
  await v.context.close()
})

for (const width of [1280, 390]) {
  test(`[WEB86] once access is removed the page is read-only with the reason, live and after a reload (${width} px)`, async ({ browser }) => {
    const eve = await signUp(server, `Eve${width}`)
    await grant(server, ann, 'Lens', eve.userId, 'Editor')
    const path = `Lens/Gone${width}`
    // One word, as the path: after the reload the page may know the node by its path only.
    const name = `Gone${width}`
    await putNode(server, ann, path, 'Document', { Caption: 'g0' }, name)
    const e = await openLoggedIn(browser, server, eve, path)
    await e.page.setViewportSize({ width, height: 900 })
    await expect(field(e.page, 'Caption')).not.toHaveAttribute('readonly', '')
    await expect(nodePage(e.page).getByRole('button', { name: `Rename ${name}` })).toBeVisible()

    expect((await api(server, ann, 'DELETE', `/api/nodes/Lens/_Access/${eve.userId}_Access`)).status).toBe(204)
    const denied = nodePage(e.page).locator('[data-denied]')
    await expect(denied).toContainText('Access removed')
    await expect(denied).toContainText('read-only')
    await expect(field(e.page, 'Caption')).toHaveAttribute('readonly', '')
    await expect(nodePage(e.page).getByRole('button', { name: 'Remove field Caption' })).toHaveCount(0)
    await expectNoEdits(e.page, name)
    await e.page.screenshot({ path: `test-results/web86-removed-live-${width}.png` })

    await e.page.reload()
    await expect(denied).toContainText('Access removed')
    await expect(field(e.page, 'Caption')).toHaveAttribute('readonly', '')
    await expectNoEdits(e.page, name)
    await e.page.screenshot({ path: `test-results/web86-removed-reloaded-${width}.png` })

    // Offline, the device remembers the access is gone: still read-only, said so.
    await waitForServiceWorker(e.page)
    await e.context.setOffline(true)
    await e.page.reload()
    await expect(nodePage(e.page).locator('.readonly')).toHaveText("You had no access here when last connected: this device's copy is shown read-only.")
    await expect(field(e.page, 'Caption')).toHaveAttribute('readonly', '')
    await expectNoEdits(e.page, name)
    await e.context.close()
  })
}

test('[WEB88] a group\'s "Invite by email" is offered to its Admins only, not to a Viewer beside them', async ({ browser }) => {
  await putNode(server, ann, 'Lens/Team', 'Group', {}, 'Team')
  const a = await openLoggedIn(browser, server, ann, 'Lens/Team')
  const v = await openLoggedIn(browser, server, vic, 'Lens/Team')
  await expect(nodePage(a.page).getByRole('button', { name: 'Invite by email' })).toBeVisible()
  await expect(nodePage(v.page).locator('.readonly')).toHaveText('View only: your role can read this node but not change it.')
  await expect(nodePage(v.page).getByRole('button', { name: 'Invite by email' })).toHaveCount(0)
  await a.context.close()
  await v.context.close()
})
