import { mkdir } from 'node:fs/promises'
import { expect, test, type Locator, type Page } from '@playwright/test'
import { getContent, openLoggedIn, putNode, signUp, startE2eServer, type E2eServer, type TestUser } from './fixtures.js'

/**
 * What one person's long name does to everyone's page (a tester's walk, issue "hostile names"):
 * a 300-character field name, a 300-character node name, and the toast of a create over the
 * next create's error. At 1280 and 390 px.
 */
let server: E2eServer
let ann: TestUser

const LONG_KEY = 'Q'.repeat(300)
const SENTENCE = 'Quarterly planning document for the whole team including every sub-project and all of the stakeholders who need to be consulted before the deadline '
const LONG_NAME = `${SENTENCE}${SENTENCE}خطة عربية`
const WIDTHS = [1280, 390] as const

test.beforeAll(async () => {
  server = await startE2eServer()
  ann = await signUp(server, 'Ann')
  await putNode(server, ann, 'Team', 'Space', {}, 'Team')
  await putNode(server, ann, 'Team/Plan', 'Document', { Title: 'Plan', [LONG_KEY]: 'long key value', Count: 7 }, 'Plan')
  await putNode(server, ann, 'Team/Long', 'Document', { Title: 'long' }, LONG_NAME)
  await putNode(server, ann, 'Team/Long/Child', 'Document', { Title: 'child' }, 'Child')
  await mkdir('test-results', { recursive: true })
})

test.afterAll(async () => {
  await server?.dispose()
})

const nodePage = (page: Page) => page.locator('weft-node-page')

async function box(l: Locator) {
  const b = await l.boundingBox()
  expect(b).not.toBeNull()
  return b!
}

/** The font size of an element, in px (what a line of it is measured against). */
function fontSize(l: Locator): Promise<number> {
  return l.evaluate((el) => parseFloat(getComputedStyle(el).fontSize))
}

test('[WEB90] a 300-character field name wraps in its label: every value and its ✕ stay in view, no sideways scroll', async ({ browser }) => {
  const a = await openLoggedIn(browser, server, ann, 'Team/Plan')
  for (const width of WIDTHS) {
    await a.page.setViewportSize({ width, height: 900 })
    await expect(nodePage(a.page).locator('[data-field]')).toHaveCount(3)
    expect(await a.page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(width)
    for (const key of ['Title', LONG_KEY, 'Count']) {
      const value = await box(nodePage(a.page).locator(`[data-field="${key}"]`))
      expect(value.x).toBeGreaterThanOrEqual(0)
      expect(value.x + value.width).toBeLessThanOrEqual(width)
      expect(value.width).toBeGreaterThan(width / 3)
    }
    const remove = nodePage(a.page).getByRole('button', { name: `Remove field ${LONG_KEY}` })
    const x = await box(remove)
    expect(x.x + x.width).toBeLessThanOrEqual(width)
    await a.page.screenshot({ path: `test-results/long-field-name-${width}.png` })
  }
  // The ✕ of that field works (it could not be reached).
  await nodePage(a.page).getByRole('button', { name: `Remove field ${LONG_KEY}` }).click()
  await expect.poll(async () => Object.keys(await getContent(server, ann, 'Team/Plan'))).toEqual(['Title', 'Count'])
  await a.context.close()
})

test('[WEB91] a 300-character node name is cut short in the navigation, the breadcrumb and a toast, and stays whole as their accessible name and tooltip', async ({ browser }) => {
  const a = await openLoggedIn(browser, server, ann, 'Team/Long/Child')
  for (const width of WIDTHS) {
    await a.page.setViewportSize({ width, height: 900 })
    if (width < 700) await a.page.locator('weft-app .bar').getByRole('button', { name: '☰ Nodes' }).click()
    const item = a.page.locator('weft-nav-tree').getByRole('treeitem', { name: LONG_NAME })
    await expect(item).toBeVisible()
    // Two lines at most (a line is at most 1.5 font sizes high), the whole name as its tooltip.
    expect((await box(item)).height).toBeLessThanOrEqual(2 * 1.5 * (await fontSize(item)) + 8)
    await expect(item.locator('[title]')).toHaveAttribute('title', LONG_NAME)
    if (width < 700) await a.page.locator('weft-app .bar').getByRole('button', { name: '☰ Nodes' }).click()

    const crumb = nodePage(a.page).getByRole('navigation', { name: 'Breadcrumb' }).getByRole('link', { name: LONG_NAME })
    await expect(crumb).toBeVisible()
    expect((await box(crumb)).height).toBeLessThanOrEqual(1.5 * (await fontSize(crumb)) + 2)
    expect(await a.page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(width)
    await a.page.screenshot({ path: `test-results/long-name-nav-crumbs-${width}.png` })
  }

  await a.page.goto('/#/n/Team/Plan')
  for (const width of WIDTHS) {
    await a.page.setViewportSize({ width, height: 900 })
    const form = nodePage(a.page).getByRole('form', { name: 'New child node' })
    await form.getByLabel('Name', { exact: true }).fill(`${LONG_NAME.slice(0, 290)} ${width}`)
    await form.getByRole('button', { name: 'Create' }).click()
    const message = a.page.locator('weft-toast [data-toast] .message')
    await expect(message).toHaveCount(1)
    await expect(message).toContainText(`${LONG_NAME.slice(0, 290)} ${width}`)
    await expect(message).toHaveAttribute('title', `Created “${LONG_NAME.slice(0, 290)} ${width}”.`)
    expect((await box(message)).height).toBeLessThanOrEqual(3 * 1.5 * (await fontSize(message)) + 2)
    const child = nodePage(a.page).locator('.children').getByRole('link', { name: `${LONG_NAME.slice(0, 290)} ${width}` })
    expect((await box(child)).height).toBeLessThanOrEqual(2 * 1.5 * (await fontSize(child)) + 2)
    await a.page.screenshot({ path: `test-results/long-name-toast-${width}.png` })
    await a.page.locator('weft-toast').getByRole('button', { name: 'Dismiss' }).click()
  }
  await a.context.close()
})

/** Whether two boxes share any area. */
function overlaps(p: { x: number; y: number; width: number; height: number }, q: { x: number; y: number; width: number; height: number }): boolean {
  return p.x < q.x + q.width && q.x < p.x + p.width && p.y < q.y + q.height && q.y < p.y + p.height
}

test('[WEB92] the toast of a create never covers the error of the next one, nor its "Create … (2) instead"', async ({ browser }) => {
  await putNode(server, ann, 'Team/Intl', 'Document', { Title: 'intl' }, 'Intl')
  const a = await openLoggedIn(browser, server, ann, 'Team/Intl')
  for (const width of WIDTHS) {
    await a.page.setViewportSize({ width, height: 800 })
    const name = `計画${width}`
    const form = nodePage(a.page).getByRole('form', { name: 'New child node' })
    await form.getByLabel('Name', { exact: true }).fill(name)
    await form.getByRole('button', { name: 'Create' }).click()
    await expect(a.page.locator('weft-toast [data-toast]')).toContainText(`Created “${name}”.`)
    await expect(nodePage(a.page).locator('.children').getByRole('link', { name })).toBeVisible()
    // A key that moves the focus (how a keyboard reaches the toast's Open) leaves the offer.
    await a.page.keyboard.press('Tab')
    await expect(a.page.locator('weft-toast [data-toast]')).toContainText(`Created “${name}”.`)

    await form.getByLabel('Name', { exact: true }).fill(name)
    await form.getByRole('button', { name: 'Create' }).click()
    const error = nodePage(a.page).locator('[data-error=create]')
    await expect(error).toContainText(`A node named “${name}” already exists here.`)
    const fix = error.getByRole('button', { name: `Create “${name} (2)” instead` })
    await expect(fix).toBeVisible()
    const covered = await a.page.locator('weft-toast [data-toast]').evaluateAll((toasts) => toasts.map((t) => t.getBoundingClientRect()).map((r) => ({ x: r.x, y: r.y, width: r.width, height: r.height })))
    for (const target of [await box(error), await box(fix)]) for (const t of covered) expect(overlaps(t, target)).toBe(false)
    await a.page.screenshot({ path: `test-results/create-error-uncovered-${width}.png` })
    await fix.click()
    await expect(nodePage(a.page).locator('.children').getByRole('link', { name: `${name} (2)` })).toBeVisible()
  }
  await a.context.close()
})

test('[WEB101] every breadcrumb item carries its whole name as tooltip and accessible name, however it is cut', async ({ browser }) => {
  await putNode(server, ann, 'Team/Long/Child/Leaf', 'Document', { Title: 'leaf' }, 'Leaf')
  const a = await openLoggedIn(browser, server, ann, 'Team/Long/Child/Leaf')
  for (const width of WIDTHS) {
    await a.page.setViewportSize({ width, height: 900 })
    const crumbs = nodePage(a.page).getByRole('navigation', { name: 'Breadcrumb' }).getByRole('link')
    await expect(crumbs).toHaveCount(3)
    for (const [i, name] of ['Team', LONG_NAME, 'Child'].entries()) {
      const crumb = crumbs.nth(i)
      await expect(crumb).toHaveAttribute('title', name)
      await expect(crumb).toHaveAccessibleName(name)
      // Every item is on the screen (the one after a long name ran off it at 390 px).
      const b = await box(crumb)
      expect(b.x + b.width).toBeLessThanOrEqual(width)
    }
    // The long one is cut on screen (its text overflows its box), and only its tooltip shows it whole there.
    const long = crumbs.nth(1)
    expect(await long.evaluate((el) => el.scrollWidth > el.clientWidth)).toBe(true)
    await long.hover()
    await a.page.screenshot({ path: `test-results/web101-breadcrumb-${width}.png` })
    await long.click()
    await expect(nodePage(a.page).locator('h1')).toContainText(LONG_NAME.slice(0, 40))
    await a.page.goBack()
  }
  await a.context.close()
})
