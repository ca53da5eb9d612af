import { mkdir } from 'node:fs/promises'
import { expect, test } from '@playwright/test'
import { api, openLoggedIn, signUp, startE2eServer, type E2eServer, type TestUser } from './fixtures.js'

/**
 * Issue 16 finding 2: names in most of the world's languages could not be created ("Use
 * letters, digits…"), and "Café ☕ notes?" became the path `Caf____notes_`. A name is free
 * Unicode; the path segment is derived (readable where it can be, a short id where it cannot);
 * the app shows names, never paths.
 */
let server: E2eServer
let ann: TestUser

test.beforeAll(async () => {
  server = await startE2eServer()
  ann = await signUp(server, 'Ann')
  await mkdir('test-results', { recursive: true })
})

test.afterAll(async () => {
  await server?.dispose()
})

const NAMES: [string, RegExp][] = [
  ['日本語のメモ', /^n-[0-9a-z]{6}$/],
  ['한국어 메모', /^n-[0-9a-z]{6}$/],
  ['Über uns', /^Uber-uns$/],
  ['🚀', /^n-[0-9a-z]{6}$/],
  ['Café ☕ notes?', /^Cafe-notes$/],
]

test('[WEB10] spaces and nodes named in any language: created as typed, shown by name in the page, its title, the navigation, breadcrumbs and pins; paths are derived', async ({ browser }) => {
  const a = await openLoggedIn(browser, server, ann)
  const { page } = a
  const nav = page.locator('weft-nav-tree')
  const segments = new Map<string, string>()
  for (const [name, shape] of NAMES) {
    await nav.locator('#new-space').fill(name)
    await nav.getByRole('button', { name: 'Create' }).click()
    await expect(page.locator('weft-node-page h1')).toHaveText(name)
    await expect(nav.locator('.error')).toHaveCount(0)
    const segment = decodeURIComponent(new URL(page.url()).hash.replace(/^#\/n\//, ''))
    expect(segment).toMatch(shape)
    segments.set(name, segment)
    await expect(page).toHaveTitle(`${name} · Weft`)
    await expect(nav.getByRole('treeitem', { name, exact: true })).toBeVisible()
    const node = await api<{ name: string }>(server, ann, 'GET', `/api/nodes/${segment}`)
    expect(node.body.name).toBe(name)
  }
  // The same name again is taken (the segment is stable per name): the next free name is offered.
  await nav.locator('#new-space').fill('日本語のメモ')
  await nav.getByRole('button', { name: 'Create' }).click()
  await expect(nav.locator('.error')).toContainText('日本語のメモ (2)')

  // A child named in Korean under the Japanese space: listed and shown by name, its breadcrumb names the space.
  await page.goto(`/#/n/${segments.get('日本語のメモ')}`)
  const form = page.locator('weft-node-page').getByRole('form', { name: 'New child node' })
  await form.getByLabel('Name', { exact: true }).fill('회의록 🚀')
  await form.getByRole('button', { name: 'Create' }).click()
  await page.locator('weft-node-page .children').getByRole('link', { name: '회의록 🚀' }).click()
  await expect(page.locator('weft-node-page h1')).toHaveText('회의록 🚀')
  const crumbs = page.locator('weft-node-page nav.crumbs')
  await expect(crumbs).toHaveText('日本語のメモ ›')
  // Nowhere on the page is a path shown.
  await expect(page.locator('weft-node-page header')).not.toContainText(segments.get('日本語のメモ')!)

  // Pinned spaces show their names.
  await api(server, ann, 'PATCH', `/api/nodes/${ann.userId}`, { PinnedPaths: [segments.get('Über uns'), segments.get('Café ☕ notes?')] })
  const pins = nav.locator('weft-tree-node', { has: page.locator('a') })
  await expect(nav).toContainText('Pinned')
  await expect(pins.filter({ hasText: 'Über uns' })).not.toHaveCount(0)
  await expect(nav).not.toContainText('Uber-uns')
  await expect(nav).not.toContainText('Cafe-notes')

  for (const width of [1280, 390]) {
    await page.setViewportSize({ width, height: 844 })
    if (width === 390) await page.getByRole('button', { name: /Nodes/ }).click()
    expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(width)
    await page.screenshot({ path: `test-results/names-${width}.png`, fullPage: true })
  }
  await a.context.close()
})
