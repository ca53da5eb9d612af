import { expect, test, type Page } from '@playwright/test'
import { SYSTEM, type NodePath } from '../../shared/index.js'
import { adminAndViewerOn, api, field, getContent, openLoggedIn, putNode, signUp, startE2eServer, type E2eServer, type TestUser } from './fixtures.js'

/**
 * Issue 16 finding 7 (but search): rename, move, trash with Undo and a Trash page, Undo of a
 * field's removal, and the navigation revealing the open node; an Admin and a Viewer side by
 * side at 1280 and 390 px.
 */
let server: E2eServer
let ann: TestUser
let vic: TestUser

test.beforeAll(async () => {
  server = await startE2eServer()
  ;({ ann, vic } = await adminAndViewerOn(server, 'Desk', { Plans: { Title: 'Plans' }, Notes: { Title: 'Notes' } }))
  await putNode(server, ann, 'Archive', 'Space', {}, 'Archive')
  await putNode(server, ann, 'Desk/Plans/Q3', 'Document', { Goal: 'ship' }, 'Q3 goals')
})
test.afterAll(async () => {
  await server?.dispose()
})

const nodePage = (page: Page) => page.locator('weft-node-page')

test('[MOVE8] rename in place: the title changes, the path stays; a Viewer is not offered it', async ({ browser }) => {
  const a = await openLoggedIn(browser, server, ann, 'Desk/Notes')
  await nodePage(a.page).getByRole('button', { name: 'Rename Notes' }).click()
  const input = nodePage(a.page).getByLabel('New name', { exact: true })
  await input.fill('会議メモ ✍️')
  await input.press('Enter')
  await expect(nodePage(a.page).locator('h1')).toHaveText('会議メモ ✍️')
  await expect(a.page).toHaveURL(/#\/n\/Desk\/Notes$/)
  expect((await api<{ name: string }>(server, ann, 'GET', '/api/nodes/Desk/Notes')).body.name).toBe('会議メモ ✍️')
  await expect(a.page.locator('weft-nav-tree').getByRole('treeitem', { name: '会議メモ ✍️' })).toBeVisible()
  const v = await openLoggedIn(browser, server, vic, 'Desk/Notes')
  await expect(nodePage(v.page).locator('h1')).toHaveText('会議メモ ✍️')
  await expect(nodePage(v.page).getByRole('button', { name: /^Rename/ })).toHaveCount(0)
  await a.context.close()
  await v.context.close()
})

test('[MOVE1] Move… picks a new parent by name; the subtree goes along; a Viewer is not offered it, and is told why', async ({ browser }) => {
  const a = await openLoggedIn(browser, server, ann, 'Desk/Plans')
  await a.page.setViewportSize({ width: 1280, height: 900 })
  await nodePage(a.page).getByRole('button', { name: 'Move…' }).click()
  const dialog = nodePage(a.page).getByRole('dialog', { name: 'Move Plans' })
  await expect(dialog).toBeVisible()
  await dialog.getByRole('button', { name: 'All spaces' }).click()
  await dialog.getByRole('button', { name: 'Archive ›' }).click()
  await a.page.screenshot({ path: 'test-results/move-dialog-1280.png' })
  await dialog.getByRole('button', { name: 'Move into “Archive”' }).click()
  await expect(a.page).toHaveURL(/#\/n\/Archive\/Plans$/)
  await expect(nodePage(a.page).locator('h1')).toHaveText('Plans')
  await expect(nodePage(a.page).locator('.children').getByRole('link', { name: 'Q3 goals' })).toBeVisible()
  expect(await getContent(server, ann, 'Archive/Plans/Q3')).toEqual({ Goal: 'ship' })
  expect((await api(server, ann, 'GET', '/api/nodes/Desk/Plans')).status).toBe(404)
  // [WEB54] The Viewer of Desk is offered nothing she cannot use: no Move, Delete, Add field or
  // Create (greyed-out forms read as broken); one line says what her role allows.
  const v = await openLoggedIn(browser, server, vic, 'Desk/Notes')
  await expect(field(v.page, 'Title')).toBeVisible()
  await expect(nodePage(v.page).getByText('View only: your role can read this node but not change it.')).toBeVisible()
  for (const name of ['Move…', 'Delete', 'Add field', 'Create']) await expect(nodePage(v.page).getByRole('button', { name, exact: true })).toHaveCount(0)
  await expect(nodePage(v.page).getByRole('combobox')).toHaveCount(0)
  // Her fields read as text: no border, no box.
  const title = field(v.page, 'Title')
  await expect(title).toHaveValue('Notes')
  await expect(title).toHaveJSProperty('readOnly', true)
  expect(await title.evaluate((el) => getComputedStyle(el).borderTopColor)).toBe('rgba(0, 0, 0, 0)')
  // Alone on the page, no presence line at all ("Nobody else is here." read as "no members").
  await expect(nodePage(v.page).locator('.presence')).toBeHidden()
  await a.context.close()
  await v.context.close()
})

test('[MOVE1] [MOVE2] a taken place is refused with the reason; someone with the node open is told where it went', async ({ browser }) => {
  await putNode(server, ann, 'Desk/Memo', 'Document', { Body: 'desk' }, 'Memo')
  await putNode(server, ann, 'Archive/Memo', 'Document', { Body: 'archive' }, 'Memo')
  await putNode(server, ann, 'Desk/Letter', 'Document', { Body: 'hi' }, 'Letter')
  const a = await openLoggedIn(browser, server, ann, 'Desk/Memo')
  await nodePage(a.page).getByRole('button', { name: 'Move…' }).click()
  const dialog = nodePage(a.page).getByRole('dialog', { name: 'Move Memo' })
  await dialog.getByRole('button', { name: 'All spaces' }).click()
  await dialog.getByRole('button', { name: 'Archive ›' }).click()
  await dialog.getByRole('button', { name: 'Move into “Archive”' }).click()
  await expect(dialog.getByRole('alert')).toHaveText('Something with this name is already there. Rename one of them first.')
  expect(await getContent(server, ann, 'Desk/Memo')).toEqual({ Body: 'desk' })
  await dialog.getByRole('button', { name: 'Cancel' }).click()

  const v = await openLoggedIn(browser, server, vic, 'Desk/Letter')
  await expect(nodePage(v.page).locator('h1')).toHaveText('Letter')
  expect((await api(server, ann, 'POST', '/api/nodes/Desk/Letter/move', { to: 'Archive/Letter' })).status).toBe(200)
  await expect(nodePage(v.page).locator('[data-moved]')).toContainText('This node was moved.')
  await a.page.goto('/#/n/Desk/Letter')
  await expect(nodePage(a.page).locator('[data-moved]')).toBeVisible()
  await nodePage(a.page).getByRole('link', { name: 'Open it in its new place' }).click()
  await expect(a.page).toHaveURL(/#\/n\/Archive\/Letter$/)
  await expect(nodePage(a.page).locator('h1')).toHaveText('Letter')
  await a.context.close()
  await v.context.close()
})

test('[MOVE5] [MOVE6] Delete goes to the trash with Undo; the Admin restores from the Trash page; the Viewer cannot see it', async ({ browser }) => {
  await putNode(server, ann, 'Desk/Draft', 'Document', { Body: 'keep me' }, 'Draft')
  await putNode(server, ann, 'Desk/Old', 'Document', { Body: 'old' }, 'Old memo')
  const a = await openLoggedIn(browser, server, ann, 'Desk/Draft')
  await nodePage(a.page).getByRole('button', { name: 'Delete', exact: true }).click()
  await expect(a.page).toHaveURL(/#\/n\/Desk$/)
  const toast = a.page.locator('weft-toast')
  await expect(toast.getByText('Moved “Draft” to the trash.')).toBeVisible()
  await expect(nodePage(a.page).locator('.children').getByRole('link', { name: 'Draft' })).toHaveCount(0)
  await toast.getByRole('button', { name: 'Undo' }).click()
  await expect(a.page).toHaveURL(/#\/n\/Desk\/Draft$/)
  expect(await getContent(server, ann, 'Desk/Draft')).toEqual({ Body: 'keep me' })

  // Delete another, then restore it from the space's Trash page.
  await a.page.goto('/#/n/Desk/Old')
  await nodePage(a.page).getByRole('button', { name: 'Delete', exact: true }).click()
  await expect(a.page).toHaveURL(/#\/n\/Desk$/)
  await a.page.locator('weft-toast').getByRole('button', { name: 'Dismiss' }).last().click()
  await nodePage(a.page).getByRole('link', { name: 'Trash' }).click()
  const trash = a.page.locator('weft-trash-page')
  await expect(trash.getByText('Old memo')).toBeVisible()
  await expect(trash.getByText(/deleted by you/)).toBeVisible()
  await a.page.screenshot({ path: 'test-results/trash-1280.png' })
  const v = await openLoggedIn(browser, server, vic, 'Desk')
  await v.page.goto('/#/trash/Desk')
  await expect(v.page.locator('weft-trash-page')).toContainText('Only the Admins of this space see its trash.')
  await expect(nodePage(v.page).getByRole('link', { name: 'Trash' })).toHaveCount(0)
  await trash.getByRole('button', { name: 'Restore' }).click()
  await expect(trash.getByText('The trash is empty.')).toBeVisible()
  expect(await getContent(server, ann, 'Desk/Old')).toEqual({ Body: 'old' })
  expect((await api(server, vic, 'GET', '/api/nodes/Desk/Old')).status).toBe(200)
  await a.context.close()
  await v.context.close()
})

test('[WEB76] the Trash page\'s heading names its space, as the line under it does, at 1280 and 390 px', async ({ browser }) => {
  // A space whose name is not its path: the heading says the name.
  await putNode(server, ann, 'studio-7', 'Space', {}, 'Studio')
  await putNode(server, ann, 'studio-7/Sketch', 'Document', { Body: 'lines' }, 'Sketch')
  expect((await api(server, ann, 'POST', '/api/nodes/studio-7/Sketch/trash', {})).status).toBe(200)
  const a = await openLoggedIn(browser, server, ann, 'studio-7')
  await a.page.goto('/#/trash/studio-7')
  const trash = a.page.locator('weft-trash-page')
  for (const width of [1280, 390]) {
    await a.page.setViewportSize({ width, height: 800 })
    await expect(a.page.getByRole('heading', { level: 1 })).toHaveText('Trash of Studio')
    await expect(a.page.getByRole('heading', { level: 1 })).toHaveCount(1)
    await expect(trash.locator('[data-space]')).toHaveText('What was deleted in Studio')
    await expect(trash.getByText('Sketch')).toBeVisible()
    const scroll = await a.page.evaluate(() => ({ sw: document.documentElement.scrollWidth, iw: innerWidth }))
    expect(scroll.sw).toBeLessThanOrEqual(scroll.iw)
    await a.page.screenshot({ path: `test-results/trash-heading-${width}.png`, fullPage: true })
  }
  await a.context.close()
})

test('[MOVE9] removing a field shows Undo, which brings the value back', async ({ browser }) => {
  await putNode(server, ann, 'Desk/Card', 'Document', { Owner: 'Ann', Count: 3 }, 'Card')
  const a = await openLoggedIn(browser, server, ann, 'Desk/Card')
  await expect(field(a.page, 'Count')).toHaveValue('3')
  await nodePage(a.page).getByRole('button', { name: 'Remove field Count' }).click()
  await expect(field(a.page, 'Count')).toHaveCount(0)
  await expect.poll(async () => (await getContent(server, ann, 'Desk/Card')).Count).toBeUndefined()
  await a.page.locator('weft-toast').getByRole('button', { name: 'Undo' }).click()
  await expect(field(a.page, 'Count')).toHaveValue('3')
  await expect.poll(async () => (await getContent(server, ann, 'Desk/Card')).Count).toBe(3)
  await a.context.close()
})

test('[MOVE9] the navigation reveals and highlights the open node, at 1280 and 390 px, Admin and Viewer side by side', async ({ browser }) => {
  await putNode(server, ann, 'Desk/Notes/Deep', 'Document', {}, 'Deep page')
  for (const [who, user] of [['admin', ann], ['viewer', vic]] as const) {
    for (const width of [1280, 390]) {
      const s = await openLoggedIn(browser, server, user, 'Desk/Notes/Deep')
      await s.page.setViewportSize({ width, height: 900 })
      if (width === 390) await s.page.getByRole('button', { name: '☰ Nodes' }).click()
      const current = s.page.locator('weft-nav-tree [aria-current=page]')
      await expect(current).toHaveText(/Deep page/)
      await expect(current).toBeInViewport()
      await expect(s.page.locator('weft-nav-tree a[data-path="Desk/Notes"]')).toHaveAttribute('aria-expanded', 'true')
      expect(await s.page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth)).toBeLessThanOrEqual(0)
      await s.page.screenshot({ path: `test-results/nav-${who}-${width}.png`, fullPage: true })
      await s.context.close()
    }
  }
})

test('[WEB73] the Admin area is not offered Delete space… nor Move, even to an operator; a space of hers still is', async ({ browser }) => {
  const olga = await signUp(server, 'Olga Ops')
  await server.running.nodes.put(SYSTEM, `Admin/_Access/${olga.userId}_Access` as NodePath, { nodeType: 'AccessAssignment', content: { Subject: olga.userId, Role: 'Admin' } }, 'system')
  await putNode(server, olga, 'Olgas', 'Space', {}, 'Olga’s space')
  const o = await openLoggedIn(browser, server, olga, 'Olgas')
  const actions = nodePage(o.page).locator('weft-node-actions')
  await expect(actions.getByRole('button', { name: 'Delete space…' })).toBeVisible()
  await expect(actions.getByRole('link', { name: 'Trash', exact: true })).toBeVisible()
  await o.page.goto('/#/n/Admin')
  await expect(nodePage(o.page).locator('h1')).toBeVisible()
  for (const name of ['Delete space…', 'Delete…', 'Delete', 'Move…']) await expect(nodePage(o.page).getByRole('button', { name, exact: true })).toHaveCount(0)
  // Nothing in it ever goes to a trash: no Trash link either.
  await expect(nodePage(o.page).locator('weft-node-actions').getByRole('link', { name: 'Trash', exact: true })).toHaveCount(0)
  await o.page.screenshot({ path: 'test-results/web63-admin-1280.png' })
  await o.context.close()
})
