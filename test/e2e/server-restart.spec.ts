import { expect, test } from '@playwright/test'
import { editField, field, getContent, openLoggedIn, startE2eServer, twoEditorsOn, syncStatus, type E2eServer, type TestUser } from './fixtures.js'

let server: E2eServer
let ann: TestUser
let bob: TestUser

test.beforeAll(async () => {
  server = await startE2eServer()
  ;({ ann, bob } = await twoEditorsOn(server, 'Ops', { Log: { Entry: 'e0', Note: 'n0' } }))
})

test.afterAll(async () => {
  await server?.dispose()
})

test('the server restarts mid-session: clients reconnect by themselves and keep syncing', async ({ browser }) => {
  const a = await openLoggedIn(browser, server, ann, 'Ops/Log')
  const b = await openLoggedIn(browser, server, bob, 'Ops/Log')
  await expect(field(a.page, 'Entry')).toHaveValue('e0')
  await expect(syncStatus(a.page)).toHaveAttribute('data-status', 'saved')

  await server.stop()
  await expect(syncStatus(a.page)).not.toHaveAttribute('data-status', 'saved')
  // An edit while the server is down waits in the outbox.
  await editField(a.page, 'Entry', 'e1')
  await expect(syncStatus(a.page)).toHaveAttribute('data-pending', '1')

  await server.start()
  await expect(syncStatus(a.page)).toHaveAttribute('data-status', 'saved', { timeout: 20_000 })
  await expect(syncStatus(b.page)).toHaveAttribute('data-status', 'saved', { timeout: 20_000 })
  await expect(field(b.page, 'Entry')).toHaveValue('e1')

  // And live sync carries on over the new connection, both ways.
  await editField(b.page, 'Note', 'n1')
  await expect(field(a.page, 'Note')).toHaveValue('n1')
  await expect(a.page.locator('weft-node-page .presence')).toContainText('Bob')
  expect(await getContent(server, ann, 'Ops/Log')).toMatchObject({ Entry: 'e1', Note: 'n1' })

  await a.context.close()
  await b.context.close()
})
