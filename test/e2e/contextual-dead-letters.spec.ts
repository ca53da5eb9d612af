import { expect, test, type Page } from '@playwright/test'
import type { ContextualStatus, SubscriptionConsumers } from '../../shared/index.js'
import { api, openLoggedIn } from './fixtures.js'
import { deadLetter, triageSpec } from './contextual-fixtures.js'

/**
 * [WEB128] [CTX65] [CTX66] A subscription's status page, side by side: each dead letter says when
 * it died in words; Ann (Admin) re-drives one letter from its own row, Vic (Viewer) has no such
 * button. Vic's worker dead-lettered two events.
 */
const SUB = 'Ops/triage'

const env = triageSpec(SUB, 'model timed out', ({ server, ann, vic }) => deadLetter(server, ann, vic, SUB, 'Ops/inbox/plan', 'Q4 plan', 'quota exceeded'))

const card = (page: Page) => page.locator('weft-contextual-page [data-consumer="vic-worker"]')
const row = (page: Page, title: string) => card(page).locator('li[data-dead]', { has: page.getByRole('link', { name: title }) })

test('[WEB128] each dead letter says when it died; an Admin re-drives one letter from its row (named by its node), a Viewer cannot; the other letter stays dead', async ({ browser }) => {
  const { server, ann, vic } = env
  const v = await openLoggedIn(browser, server, vic, SUB)
  const a = await openLoggedIn(browser, server, ann, SUB)
  for (const page of [v.page, a.page]) {
    await page.goto(`/#/contextual/${SUB}`)
    await expect(card(page).locator('[data-count="Dead letters"]')).toHaveText('2')
    // When each died, in the app's words for a moment ("today 18:14:42"), the exact time on hover.
    for (const title of ['Q3 report', 'Q4 plan']) {
      const died = row(page, title).locator('[data-died]')
      await expect(died).toHaveText(/^died today \d\d:\d\d:\d\d$/)
      expect(Date.parse((await died.getAttribute('title'))!)).toBeGreaterThan(Date.now() - 10 * 60_000)
    }
  }
  // Vic: no re-drive at all, and the reason.
  await expect(card(v.page).getByRole('button', { name: /Re-drive/ })).toHaveCount(0)
  await expect(card(v.page).locator('[data-only-admin]')).toBeVisible()
  // Ann: one button per letter, named by its node, beside the one for every letter.
  await expect(card(a.page).getByRole('button', { name: 'Re-drive the dead letter of Q3 report' })).toBeVisible()
  await expect(card(a.page).getByRole('button', { name: 'Re-drive the dead letter of Q4 plan' })).toBeVisible()
  await expect(card(a.page).getByRole('button', { name: 'Re-drive 2 dead letters' })).toBeVisible()
  for (const width of [1280, 390]) {
    for (const [who, page] of [['viewer', v.page], ['admin', a.page]] as const) {
      await page.setViewportSize({ width, height: 844 })
      await page.screenshot({ path: `test-results/contextual-dead-letters-${who}-${width}.png`, fullPage: true })
      expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(width)
    }
  }

  await card(a.page).getByRole('button', { name: 'Re-drive the dead letter of Q3 report' }).click()
  await expect(a.page.getByText('Re-drove the dead letter of Q3 report (vic-worker).')).toBeVisible()
  // Only that letter left the list; the other is still dead, with its own button.
  for (const page of [a.page, v.page]) {
    await expect(card(page).locator('[data-count="Dead letters"]')).toHaveText('1')
    await expect(row(page, 'Q3 report')).toHaveCount(0)
    await expect(row(page, 'Q4 plan')).toHaveCount(1)
  }
  await expect(card(a.page).getByRole('button', { name: 'Re-drive the dead letter of Q4 plan' })).toBeVisible()
  await expect(card(a.page).getByRole('button', { name: 'Re-drive 1 dead letter' })).toBeVisible()
  await a.page.screenshot({ path: 'test-results/contextual-dead-letters-admin-after-390.png', fullPage: true })
  // The server agrees: Q3 report pending again, Q4 plan dead.
  const listed = (await api<SubscriptionConsumers>(server, ann, 'POST', '/api/contextual/consumers', { subscription: SUB })).body
  const c = listed.consumers.find((x) => x.name === 'vic-worker')!
  const st = (await api<ContextualStatus>(server, vic, 'POST', '/api/contextual/status', { consumerId: c.consumerId })).body
  expect({ dead: st.dead, pending: st.pending, letters: st.deadLetters.map((d) => d.path) }).toEqual({ dead: 1, pending: 1, letters: ['Ops/inbox/plan'] })
  await v.context.close()
  await a.context.close()
})

test('[WEB129] an Admin re-drives a letter another Admin re-drove meanwhile: told so in words, and the list catches up at once', async ({ browser }) => {
  // Q4 plan is dead whether or not the test before ran (it re-drives Q3 report only).
  const { server, ann } = env
  const a = await openLoggedIn(browser, server, ann, SUB)
  // The page's refresh is held (its timers do not run): what it shows stays as first read.
  await a.page.clock.install()
  await a.page.goto(`/#/contextual/${SUB}`)
  await a.page.reload()
  const button = card(a.page).getByRole('button', { name: 'Re-drive the dead letter of Q4 plan' })
  await expect(button).toBeVisible()
  // Someone else re-drives it first (through the API, as another Admin's page or script would).
  const listed = (await api<SubscriptionConsumers>(server, ann, 'POST', '/api/contextual/consumers', { subscription: SUB })).body
  const c = listed.consumers.find((x) => x.name === 'vic-worker')!
  const letter = c.deadLetters.find((d) => d.path === 'Ops/inbox/plan')!
  expect((await api(server, ann, 'POST', '/api/contextual/redrive', { consumerId: c.consumerId, eventId: letter.eventId })).status).toBe(200)
  await button.click()
  await expect(a.page.getByText('That letter is no longer dead: someone re-drove it meanwhile, or it was handled.')).toBeVisible()
  await expect(row(a.page, 'Q4 plan')).toHaveCount(0)
  await a.page.setViewportSize({ width: 390, height: 844 })
  await a.page.screenshot({ path: 'test-results/contextual-dead-letters-redriven-meanwhile-390.png', fullPage: true })
  await a.context.close()
})
