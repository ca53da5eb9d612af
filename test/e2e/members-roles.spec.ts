import { expect, test, type BrowserContext, type Page } from '@playwright/test'
import { api, field, grant, openLoggedIn, signUp, startE2eServer, twoEditorsOn, type E2eServer } from './fixtures.js'

/**
 * An Admin changes a member's role and removes a member in the Members panel ([WEB87]); the
 * invite form says what an invite did to someone's role ([ACC40]). Each failed before: the panel
 * had no role or remove controls, and a re-invite as Viewer said "access granted" while Bob
 * stayed Editor.
 */
let server: E2eServer

test.beforeAll(async () => { server = await startE2eServer() })
test.afterAll(async () => { await server?.dispose() })

const members = (page: Page) => page.locator('weft-members-panel')
const row = (page: Page, subject: string) => members(page).locator(`tr[data-subject="${subject}"]`)

for (const width of [1280, 390]) {
  test(`[WEB87][ACC40] an Admin changes a member's role and removes a member; a re-invite says the role it kept; a Viewer beside is offered neither (${width} px)`, async ({ browser }) => {
    const space = `Crew${width}`
    const { ann, bob } = await twoEditorsOn(server, space, { Plan: { Caption: 'p0' } })
    const vic = await signUp(server, 'Vic')
    await grant(server, ann, space, vic.userId, 'Viewer')
    const a = await openLoggedIn(browser, server, ann, space)
    const v = await openLoggedIn(browser, server, vic, space)
    const b = await openLoggedIn(browser, server, bob, `${space}/Plan`)
    for (const s of [a, v, b]) await s.page.setViewportSize({ width, height: 900 })
    await expect(field(b.page, 'Caption')).not.toHaveAttribute('readonly', '')

    // The Viewer beside: roles as text, no controls.
    await expect(row(v.page, bob.userId)).toContainText('Editor')
    await expect(members(v.page).locator('select[aria-label^="Role of"]')).toHaveCount(0)
    await expect(members(v.page).getByRole('button', { name: /^Remove/ })).toHaveCount(0)

    // The only Admin is offered no way to go.
    await expect(row(a.page, ann.userId).locator('[data-only-admin]')).toBeVisible()
    await expect(row(a.page, ann.userId).locator('select')).toHaveCount(0)

    // [ACC40] A re-invite as Viewer changes nothing, and says so; so does inviting oneself.
    const form = members(a.page).locator('form[aria-label="Invite by email"]')
    await form.getByLabel('Email').fill(bob.email)
    await form.locator('select[name="role"]').selectOption('Viewer')
    await form.getByRole('button', { name: 'Invite' }).click()
    await expect(members(a.page).locator('.notice')).toContainText('already has a higher role here (Editor)')
    await form.getByLabel('Email').fill(ann.email)
    await form.getByRole('button', { name: 'Invite' }).click()
    await expect(members(a.page).locator('.notice')).toContainText('is you: nothing changed')

    // [WEB87] Bob made a Viewer: the server holds it, and his open page follows.
    await row(a.page, bob.userId).locator('select').selectOption('Viewer')
    await expect(members(a.page).locator('.notice')).toContainText('is now a Viewer here')
    await expect.poll(async () => (await api<{ content: { Role: string } }>(server, ann, 'GET', `/api/nodes/${space}/_Access/${bob.userId}_Access`)).body.content.Role).toBe('Viewer')
    await expect(field(b.page, 'Caption')).toHaveAttribute('readonly', '')

    // Vic removed, after a confirmation in words.
    await row(a.page, vic.userId).getByRole('button', { name: /^Remove/ }).click()
    await expect(row(a.page, vic.userId)).toContainText("Remove Vic's access?")
    await a.page.screenshot({ path: `test-results/web87-members-${width}.png` })
    await row(a.page, vic.userId).getByRole('button', { name: 'Remove', exact: true }).click()
    await expect(members(a.page).locator('.notice')).toContainText('Vic no longer has access here.')
    await expect(row(a.page, vic.userId)).toHaveCount(0)
    expect((await api(server, ann, 'GET', `/api/nodes/${space}/_Access/${vic.userId}_Access`)).status).toBe(404)
    await expect(v.page.locator('weft-node-page [data-denied]')).toBeVisible()
    // Nothing sideways at this width.
    expect(await a.page.evaluate(() => document.documentElement.scrollWidth <= window.innerWidth)).toBe(true)
    for (const s of [a, v, b]) await s.context.close()
  })
}

test('[WEB105] a role changed or a member removed by another Admin shows in the Members panel of the Admin and of a Viewer beside, with no timer: the server tells of it', async ({ browser }) => {
  const space = 'Live105'
  const { ann, bob } = await twoEditorsOn(server, space, {})
  const [vic, carl, dan] = [await signUp(server, 'Vic'), await signUp(server, 'Carl'), await signUp(server, 'Dan')]
  await grant(server, ann, space, vic.userId, 'Viewer')
  await grant(server, ann, space, carl.userId, 'Admin')
  await grant(server, ann, space, dan.userId, 'Editor')
  // Time stands still in both pages once they show the list: only what the server pushes can update it (a poll cannot).
  const frozen = { beforeOpen: (c: BrowserContext) => c.clock.install() }
  const a = await openLoggedIn(browser, server, ann, space, frozen)
  const v = await openLoggedIn(browser, server, vic, space, frozen)
  for (const s of [a, v]) {
    await s.page.setViewportSize({ width: 1280, height: 900 })
    await expect(row(s.page, dan.userId)).toContainText('Editor')
    await s.page.clock.pauseAt(Date.now() + 1000)
  }
  await expect(row(a.page, bob.userId).getByRole('combobox', { name: 'Role of Bob' })).toHaveValue('Editor')
  await expect(row(v.page, bob.userId)).toContainText('Editor')

  // Carl, the other Admin, lowers Bob to Viewer and removes Dan (over the API, as his own app does).
  expect((await api(server, carl, 'PATCH', `/api/nodes/${space}/_Access/${bob.userId}_Access`, { Role: 'Viewer' })).status).toBe(200)
  expect((await api(server, carl, 'DELETE', `/api/nodes/${space}/_Access/${dan.userId}_Access`)).status).toBeLessThan(300)
  await expect(row(a.page, bob.userId).getByRole('combobox', { name: 'Role of Bob' })).toHaveValue('Viewer')
  await expect(row(a.page, dan.userId)).toHaveCount(0)
  await expect(row(v.page, bob.userId)).toContainText('Viewer')
  await expect(row(v.page, dan.userId)).toHaveCount(0)
  // The Viewer's own role, raised by Carl: her list says it too.
  expect((await api(server, carl, 'PATCH', `/api/nodes/${space}/_Access/${vic.userId}_Access`, { Role: 'Commenter' })).status).toBe(200)
  await expect(row(v.page, vic.userId)).toContainText('Commenter')
  await expect(row(a.page, vic.userId).getByRole('combobox', { name: 'Role of Vic' })).toHaveValue('Commenter')
  for (const width of [1280, 390]) {
    for (const [who, s] of [['admin', a], ['viewer', v]] as const) {
      await s.page.setViewportSize({ width, height: 900 })
      await members(s.page).scrollIntoViewIfNeeded()
      await s.page.screenshot({ path: `test-results/web105-members-${who}-${width}.png` })
    }
  }
  await a.context.close()
  await v.context.close()
})
