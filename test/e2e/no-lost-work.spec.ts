import { expect, test, type Page } from '@playwright/test'
import { api, field, getContent, grant, openLoggedIn, putNode, signUp, startE2eServer, syncStatus, twoEditorsOn, type E2eServer, type TestUser } from './fixtures.js'

let server: E2eServer
let ann: TestUser
let bob: TestUser

test.beforeAll(async () => {
  server = await startE2eServer()
  ;({ ann, bob } = await twoEditorsOn(server, 'Team', {
    'Week-1': { Summary: 'kept' },
    Meeting: { summary: 'Notes: ', count: 1 },
    Essay: { Body: 'First sentence. Second sentence.' },
    Offline: { Body: 'Alpha beta. Gamma delta.' },
    Typed: {},
  }))
})

test.afterAll(async () => {
  await server?.dispose()
})

function page$(page: Page) {
  return page.locator('weft-node-page')
}

async function placeCaret(page: Page, key: string, index: number) {
  await field(page, key).evaluate((el: HTMLInputElement, i: number) => {
    el.focus()
    el.setSelectionRange(i, i)
  }, index)
}

test('[WEB1] creating a taken name (after cleaning) changes nothing, says so and offers the next free name', async ({ browser }) => {
  const b = await openLoggedIn(browser, server, bob, 'Team')
  const form = page$(b.page).getByRole('form', { name: 'New child node' })
  await form.getByLabel('Name', { exact: true }).fill('Week?1')
  await form.getByRole('button', { name: 'Create' }).click()
  const error = page$(b.page).locator('[data-error=create]')
  await expect(error).toContainText('already exists here')
  // Named by names: what “Week?1” would replace is “Week-1”.
  await expect(error).toContainText('“Week?1” would take the place of “Week-1”')
  expect(await getContent(server, ann, 'Team/Week-1')).toEqual({ Summary: 'kept' })
  await b.page.screenshot({ path: '/tmp/weft-create-collision.png' })
  await error.getByRole('button', { name: 'Create “Week?1 (2)” instead' }).click()
  await expect(page$(b.page).locator('.children').getByRole('link', { name: 'Week?1 (2)' })).toBeVisible()
  expect((await api(server, bob, 'GET', '/api/nodes/Team/Week-1-2')).status).toBe(200)
  expect(await getContent(server, ann, 'Team/Week-1')).toEqual({ Summary: 'kept' })
  // The error belongs to that form: leaving the page clears it.
  await form.getByLabel('Name', { exact: true }).fill('Week 1')
  await form.getByRole('button', { name: 'Create' }).click()
  await expect(error).toBeVisible()
  await b.page.goto('/#/n/Team/Meeting')
  await expect(field(b.page, 'summary')).toBeVisible()
  await expect(page$(b.page).locator('[data-error]')).toHaveCount(0)
  await b.context.close()
})

test('[WEB1] an offline creation whose path was taken meanwhile is refused on replay, its content kept for the author', async ({ browser }) => {
  const b = await openLoggedIn(browser, server, bob, 'Team')
  await b.context.setOffline(true)
  await expect(syncStatus(b.page)).toHaveAttribute('data-status', 'offline')
  const form = page$(b.page).getByRole('form', { name: 'New child node' })
  await form.getByLabel('Name', { exact: true }).fill('Plans')
  await form.getByRole('button', { name: 'Create' }).click()
  const add = page$(b.page).getByRole('form', { name: 'Add a field' })
  // [WEB46] What was typed into Team's "Add a field" does not follow to the next node's page.
  await add.getByLabel('Field').fill('Stray')
  await page$(b.page).locator('.children').getByRole('link', { name: 'Plans' }).click()
  await expect(page$(b.page).getByRole('heading', { name: 'Plans', level: 1 })).toBeVisible()
  await expect(add.getByLabel('Field')).toHaveValue('')
  await add.getByLabel('Field').fill('Idea')
  await add.getByLabel('Value').fill('bob offline idea')
  await add.getByRole('button', { name: 'Add field' }).click()
  await expect(field(b.page, 'Idea')).toHaveValue('bob offline idea')
  // Meanwhile Ann creates the same path.
  await putNode(server, ann, 'Team/Plans', 'Document', { Owner: 'Ann' }, 'Plans')
  await b.context.setOffline(false)
  const refused = page$(b.page).locator('.refused')
  await expect(refused).toContainText('bob offline idea', { timeout: 15_000 })
  await expect(refused.locator('.reason')).toContainText('already exists')
  await expect(field(b.page, 'Owner')).toHaveValue('Ann')
  expect(await getContent(server, ann, 'Team/Plans')).toEqual({ Owner: 'Ann' })
  await expect(b.page.locator('weft-app .banner')).toContainText('already exists')
  await b.page.screenshot({ path: '/tmp/weft-offline-create-refused.png' })
  // The refused edit is the only refused entry (the status counts the same).
  await expect(syncStatus(b.page)).toContainText('1 refused')
  await b.context.close()
})

test('[WEB2] typing stays in its field when a field sorting above it is added, and a remote commit never replaces a draft', async ({ browser }) => {
  const a = await openLoggedIn(browser, server, ann, 'Team/Meeting')
  const b = await openLoggedIn(browser, server, bob, 'Team/Meeting')
  await expect(field(b.page, 'summary')).toHaveValue('Notes: ')
  await placeCaret(b.page, 'summary', 7)
  await b.page.keyboard.type('bob ')
  // Alice adds `agenda`, which sorts above `summary`.
  const add = page$(a.page).getByRole('form', { name: 'Add a field' })
  await add.getByLabel('Field').fill('agenda')
  await add.getByLabel('Value').fill('1. budget')
  await add.getByRole('button', { name: 'Add field' }).click()
  await expect(field(b.page, 'agenda')).toHaveValue('1. budget')
  await b.page.keyboard.type('typed on')
  await expect(field(b.page, 'summary')).toHaveValue('Notes: bob typed on')
  await expect(field(b.page, 'summary')).toBeFocused()
  await expect(field(a.page, 'summary')).toHaveValue('Notes: bob typed on')
  await expect.poll(async () => getContent(server, ann, 'Team/Meeting')).toMatchObject({ summary: 'Notes: bob typed on', agenda: '1. budget' })

  // A number field: Bob's uncommitted draft survives Alice's commit to the same field.
  await field(b.page, 'count').fill('42')
  await api(server, ann, 'PATCH', '/api/nodes/Team/Meeting', { count: 7 })
  await expect(page$(b.page).locator('[data-changed-remotely=count]')).toContainText('7')
  await expect(field(b.page, 'count')).toHaveValue('42')
  await field(b.page, 'count').press('Enter')
  await field(b.page, 'count').evaluate((el: HTMLElement) => el.blur())
  await expect.poll(async () => (await getContent(server, ann, 'Team/Meeting')).count).toBe(42)
  await expect(field(a.page, 'count')).toHaveValue('42')
  await a.context.close()
  await b.context.close()
})

test('[WEB3] two users typing into the same text field at once both keep their words', async ({ browser }) => {
  const a = await openLoggedIn(browser, server, ann, 'Team/Essay')
  const b = await openLoggedIn(browser, server, bob, 'Team/Essay')
  await expect(field(a.page, 'Body')).toHaveValue('First sentence. Second sentence.')
  await expect(field(b.page, 'Body')).toHaveValue('First sentence. Second sentence.')
  await placeCaret(a.page, 'Body', 'First sentence'.length)
  await placeCaret(b.page, 'Body', 'First sentence. Second sentence'.length)
  await Promise.all([a.page.keyboard.type(' by ann', { delay: 15 }), b.page.keyboard.type(' by bob', { delay: 15 })])
  const expected = 'First sentence by ann. Second sentence by bob.'
  await expect(field(a.page, 'Body')).toHaveValue(expected)
  await expect(field(b.page, 'Body')).toHaveValue(expected)
  await expect.poll(async () => (await getContent(server, ann, 'Team/Essay')).Body).toBe(expected)
  // The caret stayed where each person typed (after their own words).
  expect(await field(b.page, 'Body').evaluate((el: HTMLInputElement) => el.selectionStart)).toBe(expected.indexOf(' by bob') + 7)
  await a.context.close()
  await b.context.close()
})

test('[WEB3] one of them offline: both keep their words after the reconnect', async ({ browser }) => {
  const a = await openLoggedIn(browser, server, ann, 'Team/Offline')
  const b = await openLoggedIn(browser, server, bob, 'Team/Offline')
  await expect(field(b.page, 'Body')).toHaveValue('Alpha beta. Gamma delta.')
  await b.context.setOffline(true)
  await expect(syncStatus(b.page)).toHaveAttribute('data-status', 'offline')
  await placeCaret(b.page, 'Body', 'Alpha beta. Gamma delta'.length)
  await b.page.keyboard.type(' epsilon')
  await expect(syncStatus(b.page)).toContainText('saved on this device, not yet synced')
  await placeCaret(a.page, 'Body', 'Alpha'.length)
  await a.page.keyboard.type(' omega')
  await expect.poll(async () => (await getContent(server, ann, 'Team/Offline')).Body).toBe('Alpha omega beta. Gamma delta.')
  await b.context.setOffline(false)
  const expected = 'Alpha omega beta. Gamma delta epsilon.'
  await expect(field(b.page, 'Body')).toHaveValue(expected, { timeout: 15_000 })
  await expect(field(a.page, 'Body')).toHaveValue(expected)
  await expect.poll(async () => (await getContent(server, ann, 'Team/Offline')).Body).toBe(expected)
  await a.context.close()
  await b.context.close()
})

test('[WEB5] a new field has a kind: numbers and booleans are stored as JSON numbers and booleans, in a stable order', async ({ browser }) => {
  const a = await openLoggedIn(browser, server, ann, 'Team/Typed')
  const add = page$(a.page).getByRole('form', { name: 'Add a field' })
  const addField = async (key: string, kind: string, value: string) => {
    await add.getByLabel('Field').fill(key)
    await add.getByLabel('Kind').selectOption(kind)
    // The value box takes the kind's shape: Yes/No is a choice.
    if (kind === 'checkbox') await add.getByLabel('Value').selectOption(value)
    else await add.getByLabel('Value').fill(value)
    await add.getByRole('button', { name: 'Add field' }).click()
    await expect(page$(a.page).locator(`[data-field="${key}"]`)).toBeVisible()
  }
  await addField('zeta', 'number', '3')
  await addField('done', 'checkbox', 'yes')
  await addField('tags', 'list', 'a, b')
  await addField('meta', 'object', '{"k": 1}')
  await addField('see', 'link', 'Team/Essay')
  await addField('alpha', 'text', 'true')
  await add.getByLabel('Field').fill('bad')
  await add.getByLabel('Kind').selectOption('number')
  await add.getByLabel('Value').fill('three')
  await add.getByRole('button', { name: 'Add field' }).click()
  await expect(page$(a.page).locator('[data-error=fields]')).toContainText('is not a number')
  await expect.poll(async () => getContent(server, ann, 'Team/Typed')).toEqual({
    zeta: 3,
    done: true,
    tags: ['a', 'b'],
    meta: { k: 1 },
    see: { $ref: 'Team/Essay' },
    alpha: 'true',
  })
  // Insertion order, not alphabetical; the same after a reload.
  const order = () => page$(a.page).locator('[data-field]').evaluateAll((els) => els.map((e) => e.getAttribute('data-field')))
  expect(await order()).toEqual(['zeta', 'done', 'tags', 'meta', 'see', 'alpha'])
  await a.page.reload()
  await expect(page$(a.page).locator('[data-field=alpha]')).toBeVisible()
  expect(await order()).toEqual(['zeta', 'done', 'tags', 'meta', 'see', 'alpha'])
  await expect(field(a.page, 'done')).toBeChecked()
  // A link reads as the node's name, never its path.
  await expect(page$(a.page).locator('[data-field=see]').getByRole('link', { name: 'Essay' })).toBeVisible()
  await a.context.close()
})

test('[WEB6] a 1.5 MB value is refused on the device with its size and the limit, and opens no reconnect loop', async ({ browser }) => {
  const a = await openLoggedIn(browser, server, ann, 'Team/Meeting')
  let opens = 0
  a.page.on('websocket', () => opens++)
  await expect(syncStatus(a.page)).toHaveAttribute('data-status', 'saved')
  const big = 'x'.repeat(1_500_000)
  await field(a.page, 'summary').evaluate((el: HTMLInputElement, v: string) => {
    el.value = v
    el.dispatchEvent(new Event('input', { bubbles: true }))
  }, big)
  const error = page$(a.page).locator('[data-error=fields]')
  await expect(error).toContainText('1.4 MB')
  await expect(error).toContainText('at most 1.0 MB')
  await a.page.waitForTimeout(5_000)
  expect(opens).toBeLessThanOrEqual(2)
  await expect(syncStatus(a.page)).toHaveAttribute('data-status', 'saved')
  expect(String((await getContent(server, ann, 'Team/Meeting')).summary).length).toBeLessThan(1000)
  // The field shows the stored value again, and the edit did not survive a reload.
  await expect(field(a.page, 'summary')).not.toHaveValue(big)
  await a.context.close()
})

test('[WEB8] at 390 px the page is usable: no sideways scrolling, navigation behind a button, a Viewer offered no action she cannot use', async ({ browser }) => {
  const vic = await signUp(server, 'Vic')
  await grant(server, ann, 'Team', vic.userId, 'Viewer')
  const a = await openLoggedIn(browser, server, ann, 'Team/Essay')
  await a.page.setViewportSize({ width: 390, height: 844 })
  await expect(field(a.page, 'Body')).toBeVisible()
  const overflow = () => a.page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth)
  expect(await overflow()).toBeLessThanOrEqual(0)
  await a.page.screenshot({ path: '/tmp/weft-390-node.png', fullPage: true })
  await expect(a.page.locator('weft-nav-tree')).toBeHidden()
  await a.page.getByRole('button', { name: '☰ Nodes' }).click()
  await expect(a.page.locator('weft-nav-tree')).toBeVisible()
  await a.page.screenshot({ path: '/tmp/weft-390-nav.png', fullPage: true })
  expect(await overflow()).toBeLessThanOrEqual(0)
  await a.context.close()

  const v = await openLoggedIn(browser, server, vic, 'Team/Essay')
  await v.page.setViewportSize({ width: 390, height: 844 })
  await expect(page$(v.page).getByText('View only: your role can read this node but not change it.')).toBeVisible()
  await expect(page$(v.page).getByRole('button', { name: 'Delete', exact: true })).toHaveCount(0)
  await expect(page$(v.page).getByRole('button', { name: 'Add field' })).toHaveCount(0)
  await v.page.screenshot({ path: '/tmp/weft-390-viewer.png', fullPage: true })
  await v.context.close()
})

test('[WEB7] the status tells offline from an unreachable server, and says what is saved on this device', async ({ browser }) => {
  const a = await openLoggedIn(browser, server, ann, 'Team/Meeting')
  await expect(syncStatus(a.page)).toHaveAttribute('data-status', 'saved')
  await expect(syncStatus(a.page)).toContainText('All changes synced')
  await a.context.setOffline(true)
  await expect(syncStatus(a.page)).toHaveAttribute('data-status', 'offline')
  await expect(syncStatus(a.page)).toContainText('You are offline')
  await expect(syncStatus(a.page)).toContainText('last synced at')
  await a.context.setOffline(false)
  await expect(syncStatus(a.page)).toHaveAttribute('data-status', 'saved')
  // The network is there, the server is not.
  await server.stop()
  await expect(syncStatus(a.page)).toHaveAttribute('data-status', 'unreachable')
  await expect(syncStatus(a.page)).toContainText('The server cannot be reached')
  await field(a.page, 'summary').fill('typed while the server is down')
  await expect(syncStatus(a.page)).toContainText('1 change saved on this device, not yet synced')
  await a.page.screenshot({ path: '/tmp/weft-unreachable.png' })
  await server.start()
  await expect(syncStatus(a.page)).toHaveAttribute('data-status', 'saved', { timeout: 20_000 })
  expect((await getContent(server, ann, 'Team/Meeting')).summary).toBe('typed while the server is down')
  await a.context.close()
})

test('[WEB1] a new space whose name is taken is not created over it; the next free name is offered', async ({ browser }) => {
  const b = await openLoggedIn(browser, server, bob)
  const nav = b.page.locator('weft-nav-tree')
  await nav.getByPlaceholder('New space').fill('Team')
  await nav.getByRole('button', { name: 'Create' }).click()
  await expect(nav.getByRole('alert')).toContainText('A space named like “Team” exists already')
  await expect(nav.getByPlaceholder('New space')).toHaveValue('Team (2)')
  expect((await api(server, ann, 'GET', '/api/nodes/Team')).status).toBe(200)
  await nav.getByRole('button', { name: 'Create' }).click()
  await expect(b.page.locator('weft-node-page h1')).toHaveText('Team (2)')
  await b.context.close()
})
