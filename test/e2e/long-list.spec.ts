import { expect, test } from '@playwright/test'
import { openLoggedIn, putNode, signUp, startE2eServer, type E2eServer, type TestUser } from './fixtures.js'

let server: E2eServer
let ann: TestUser

const N = 230
const pad = (i: number) => String(i).padStart(3, '0')

test.beforeAll(async () => {
  server = await startE2eServer()
  ann = await signUp(server, 'Ann')
  await putNode(server, ann, 'Shelf', 'Space', {}, 'Shelf')
  for (let start = 0; start < N; start += 20) {
    await Promise.all(Array.from({ length: Math.min(20, N - start) }, (_, k) => putNode(server, ann, `Shelf/b${pad(start + k)}`, 'Document', {}, `Book ${pad(start + k)}`)))
  }
})

test.afterAll(async () => {
  await server?.dispose()
})

// The first screenful of a long list is rendered first; the rest of the first 200 follows.
test('a long child list shows its first 200 children in name order', async ({ browser }) => {
  const { context, page } = await openLoggedIn(browser, server, ann, 'Shelf')
  const children = page.locator('weft-node-page ul.children')
  await expect(children.getByRole('link', { name: 'Book 000' })).toBeVisible()
  await expect(children.getByRole('link', { name: 'Book 199' })).toBeAttached()
  await expect(children.locator('li')).toHaveCount(200)
  await expect(children.getByRole('link', { name: 'Book 200' })).toHaveCount(0)
  await expect(page.locator('weft-node-page').getByText('Showing the first 200.')).toBeVisible()
  await context.close()
})
