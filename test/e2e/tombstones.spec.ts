import { expect, test } from '@playwright/test'
import { adminAndViewerOn, api, field, getContent, openLoggedIn, putNode, startE2eServer, syncStatus, type E2eServer, type TestUser } from './fixtures.js'

/**
 * [TOMB1] A node deleted (or trashed) and created again at its path, by someone else, while two
 * people's browsers keep the old one on the device: reopened, both see only the new node, the
 * Viewer is refused nothing, and nothing of the old one comes back to the server.
 */
let server: E2eServer
let ann: TestUser
let vic: TestUser

test.beforeAll(async () => {
  server = await startE2eServer()
  ;({ ann, vic } = await adminAndViewerOn(server, 'Desk', { Plan: { Title: 'Old plan', Secret: 'do not bring back' } }))
})
test.afterAll(async () => {
  await server?.dispose()
})

for (const how of ['deleted', 'trashed'] as const) {
  test(`[TOMB1] ${how} and created again at the same path: an Admin and a Viewer who had the old node on their device see only the new one, at 1280 and 390 px`, async ({ browser }) => {
    const path = `Desk/Plan${how === 'trashed' ? '2' : ''}`
    if (how === 'trashed') await putNode(server, ann, path, 'Document', { Title: 'Old plan', Secret: 'do not bring back' }, 'Plan')
    const a = await openLoggedIn(browser, server, ann, path)
    const v = await openLoggedIn(browser, server, vic, path)
    for (const p of [a.page, v.page]) await expect(field(p, 'Secret')).toHaveValue('do not bring back')
    await expect(syncStatus(a.page)).toHaveAttribute('data-status', 'saved')
    // Both go elsewhere; their devices keep the old node.
    for (const p of [a.page, v.page]) await p.goto('/#/n/Desk')
    // Someone else replaces it (over the API, as another device would).
    if (how === 'deleted') expect((await api(server, ann, 'DELETE', `/api/nodes/${path}`)).status).toBe(204)
    else expect((await api(server, ann, 'POST', `/api/nodes/${path}/trash`)).status).toBe(200)
    await putNode(server, ann, path, 'Document', { Title: 'New plan' }, 'Plan')
    for (const p of [a.page, v.page]) await p.goto(`/#/n/${path}`)
    for (const p of [a.page, v.page]) {
      await expect(field(p, 'Title')).toHaveValue('New plan')
      await expect(field(p, 'Secret')).toHaveCount(0)
    }
    await expect(syncStatus(a.page)).toHaveAttribute('data-status', 'saved')
    await expect(v.page.locator('weft-node-page .refused')).toHaveCount(0)
    expect(await getContent(server, ann, path)).toEqual({ Title: 'New plan' })
    // An edit on the new node from the device that held the old one lands.
    await field(a.page, 'Title').fill('New plan, edited')
    await field(a.page, 'Title').press('Enter')
    await expect.poll(() => getContent(server, ann, path)).toEqual({ Title: 'New plan, edited' })
    await expect(field(v.page, 'Title')).toHaveValue('New plan, edited')
    for (const [who, p] of [['admin', a.page], ['viewer', v.page]] as const) {
      for (const width of [1280, 390]) {
        await p.setViewportSize({ width, height: 900 })
        await p.screenshot({ path: `test-results/tombstone-${how}-${who}-${width}.png` })
      }
    }
    await expect(field(v.page, 'Secret')).toHaveCount(0)
    await a.context.close()
    await v.context.close()
  })
}
