import { expect, test } from '@playwright/test'
import { api, openLoggedIn, putNode, signUp, startE2eServer, type E2eServer, type TestUser } from './fixtures.js'

/**
 * Invite by email, end to end: an Admin invites an address from the members panel; that person
 * signs up in another browser context and the space appears in their navigation at once (the
 * grant and the pin land on sign-up; the app syncs the User node), without a reload.
 */
let server: E2eServer
let ann: TestUser

test.beforeAll(async () => {
  server = await startE2eServer()
  ann = await signUp(server, 'Ann')
  await putNode(server, ann, 'Atelier', 'Space', {}, 'Atelier')
})

test.afterAll(async () => {
  await server?.dispose()
})

test('an invited email signs up and sees the space in their navigation without a reload', async ({ browser }) => {
  const admin = await openLoggedIn(browser, server, ann, 'Atelier')
  const panel = admin.page.locator('weft-members-panel')
  await expect(panel.getByRole('table', { name: 'Members' })).toContainText('Ann')

  const email = `cleo${Date.now() % 100000}@example.com`
  const invite = panel.getByRole('form', { name: 'Invite by email' })
  await invite.getByLabel('Email').fill(email)
  await invite.getByLabel('Role').selectOption('Editor')
  await invite.getByRole('button', { name: 'Invite' }).click()
  await expect(panel.getByRole('status')).toContainText(`Invited ${email}`)
  const row = panel.getByRole('table', { name: 'Invites' }).locator('tr', { hasText: email })
  await expect(row).toContainText('Waiting for sign-up')

  // The invitee, in a fresh context, creates an account through the app.
  const context = await browser.newContext({ baseURL: server.url })
  const page = await context.newPage()
  await page.goto('/')
  await page.getByRole('button', { name: 'Create an account' }).click()
  const form = page.getByRole('form', { name: 'Sign up' })
  await form.getByLabel('Name').fill('Cleo')
  await form.getByLabel('Email').fill(email)
  await form.getByLabel('Password').fill('correct horse battery')
  await form.getByRole('button', { name: 'Sign up' }).click()

  await expect(page.locator('weft-nav-tree a[role=treeitem][data-path="Atelier"]').first()).toBeVisible()
  // The admin's panel shows the invite fired and the new member with the invited role.
  await expect(row).toContainText('Accepted')
  await expect(panel.getByRole('table', { name: 'Members' })).toContainText('Cleo')

  await context.close()
  await admin.context.close()
})

/**
 * [WEB137] An accepted invite lands in two writes: the grant, which the admin's change feed tells
 * of, then the invite's Fired mark, which no feed the admin follows tells of. CI once read the list
 * between the two, and the row said "Waiting for sign-up" for the minute until the safety net. Here
 * every list read in the first second after one first shows the new member is made to show the
 * invite still waiting (what those reads saw under load); the panel must read again on its own,
 * later, and say Accepted.
 */
test('[WEB137] an invite accepted between the grant and its mark still reads as accepted without a reload', async ({ browser }) => {
  const email = `dana${Date.now() % 100000}@example.com`
  let signedUp = false
  let firstSeen: number | null = null
  let stale = 0
  const admin = await openLoggedIn(browser, server, ann, 'Atelier', {
    beforeOpen: (context) =>
      context.route('**/api/spaces/Atelier/members', async (route) => {
        const response = await route.fetch()
        const body = (await response.json()) as { members: { email: string | null }[]; invites: { email: string | null; status: string; firedAt: string | null }[] }
        if (signedUp && body.members.some((m) => m.email === email) && Date.now() - (firstSeen ??= Date.now()) < 1000) {
          stale++
          for (const i of body.invites) if (i.email === email) Object.assign(i, { status: 'Pending', firedAt: null })
        }
        await route.fulfill({ response, json: body })
      }),
  })
  const panel = admin.page.locator('weft-members-panel')
  const invite = panel.getByRole('form', { name: 'Invite by email' })
  await invite.getByLabel('Email').fill(email)
  await invite.getByRole('button', { name: 'Invite' }).click()
  const row = panel.getByRole('table', { name: 'Invites' }).locator('tr', { hasText: email })
  await expect(row).toContainText('Waiting for sign-up')

  signedUp = true
  await signUp(server, 'Dana', email)
  await expect(panel.getByRole('table', { name: 'Members' })).toContainText('Dana')
  await expect(row).toContainText('Accepted')
  // The member was first read beside the invite still waiting: the panel read the list again itself.
  expect(stale).toBeGreaterThan(0)
  await admin.context.close()
})

test('a group admin pastes several addresses into "Invite by email"; members join on sign-up', async ({ browser }) => {
  await putNode(server, ann, 'Atelier/Crew', 'Group', {}, 'Crew')
  const existing = await signUp(server, 'Dora')
  const admin = await openLoggedIn(browser, server, ann, 'Atelier/Crew')
  const dialogHost = admin.page.locator('weft-group-invite-dialog')
  await dialogHost.getByRole('button', { name: 'Invite by email' }).click()
  const dialog = dialogHost.getByRole('dialog', { name: 'Invite to group' })
  const fresh = `eli${Date.now() % 100000}@example.com`
  await dialog.getByLabel('Email addresses').fill(`${fresh},\n${existing.email}; ${fresh}`)
  await expect(dialog).toContainText('2 addresses')
  await dialog.getByRole('combobox').selectOption('Viewer')
  await dialog.getByRole('button', { name: 'Send invites' }).click()
  const results = dialog.getByRole('list', { name: 'Results' })
  await expect(results).toContainText(`${fresh}: invited (joins on sign-up)`)
  await expect(results).toContainText(`${existing.email.toLowerCase()}: added now`)

  const res = await api<{ userId: string }>(server, null, 'POST', '/api/auth/signup', { email: fresh, password: 'correct horse battery', name: 'Eli' })
  expect(res.status).toBe(201)
  await expect.poll(async () => (await api(server, ann, 'GET', `/api/nodes/Atelier/Crew/${res.body.userId}_Membership`)).status).toBe(200)
  await admin.context.close()
})

test('[ACC41] a group invite says what it did: added now, already a member, or you', async ({ browser }) => {
  await putNode(server, ann, 'Atelier/Crew41', 'Group', {}, 'Crew41')
  const fay = await signUp(server, 'Fay')
  const admin = await openLoggedIn(browser, server, ann, 'Atelier/Crew41')
  const dialogHost = admin.page.locator('weft-group-invite-dialog')
  await dialogHost.getByRole('button', { name: 'Invite by email' }).click()
  const dialog = dialogHost.getByRole('dialog', { name: 'Invite to group' })
  const results = dialog.getByRole('list', { name: 'Results' })
  const send = async (emails: string) => {
    await dialog.getByLabel('Email addresses').fill(emails)
    await dialog.getByRole('button', { name: 'Send invites' }).click()
  }
  const fayEmail = fay.email.toLowerCase()
  const annEmail = ann.email.toLowerCase()
  await send(`${fayEmail}, ${annEmail}`)
  await expect(results).toContainText(`${fayEmail}: added now`)
  await expect(results).toContainText(`${annEmail}: added now`)
  // The same again: nothing changes, and the results say so (they said "added now" again).
  await send(`${fayEmail}, ${annEmail}`)
  await expect(results).toContainText(`${fayEmail}: already a member: nothing changed`)
  await expect(results).toContainText(`${annEmail}: that is you, already a member: nothing changed`)
  await expect(results).not.toContainText('added now')
  await admin.page.screenshot({ path: 'test-results/acc41-group-invite-results.png' })
  await admin.context.close()
})
