import { expect, test } from '@playwright/test'
import { adminAndViewerOn, field, getContent, openLoggedIn, startE2eServer, type E2eServer, type TestUser } from './fixtures.js'

/**
 * [STO10] Text no server stores (a NUL, half an emoji), pasted into a field: refused before it is
 * applied, and what was pasted is not lost: the message offers to save it with those characters
 * replaced (nobody can see a NUL to remove it by hand). Found: the field went back to its saved
 * value and the pasted text was gone.
 */
let server: E2eServer
let ann: TestUser
let vic: TestUser

test.beforeAll(async () => {
  server = await startE2eServer()
  ;({ ann, vic } = await adminAndViewerOn(server, 'Paste', { Card: { Caption: 'c0', Data: { n: 1 }, ShortCaption: 's0', ExtraData: { n: 1 } } }))
})

test.afterAll(async () => {
  await server?.dispose()
})

for (const width of [1280, 390]) {
  test(`a pasted NUL is refused with one click to save the text without it; the Viewer sees what was saved (${width} px)`, async ({ browser }) => {
    const a = await openLoggedIn(browser, server, ann, 'Paste/Card')
    const v = await openLoggedIn(browser, server, vic, 'Paste/Card')
    await a.page.setViewportSize({ width, height: 800 })
    await v.page.setViewportSize({ width, height: 800 })
    const stored = (await getContent(server, ann, 'Paste/Card')).Caption
    const pasted = `pasted ${width} \u0000 text`
    await field(a.page, 'Caption').fill(pasted)
    const error = a.page.locator('weft-node-page [data-error=fields]')
    await expect(error).toContainText('holds a character no server can store (a NUL, or half of an emoji), so it was not saved')
    const fix = error.getByRole('button', { name: 'Replace them with � and save' })
    await expect(fix).toBeVisible()
    await a.page.screenshot({ path: `test-results/weft-paste-nul-ann-${width}.png`, fullPage: true })
    expect((await getContent(server, ann, 'Paste/Card')).Caption).toBe(stored)
    await fix.click()
    const saved = `pasted ${width} \ufffd text`
    await expect(field(a.page, 'Caption')).toHaveValue(saved)
    await expect(error).toHaveCount(0)
    await expect.poll(async () => (await getContent(server, ann, 'Paste/Card')).Caption).toBe(saved)
    await expect(field(v.page, 'Caption')).toHaveValue(saved)

    // A JSON value whose text decodes to a NUL: the draft stays, and the same click saves it.
    await field(a.page, 'Data').fill(`{"n": "a\\u0000${width}"}`)
    await field(a.page, 'Data').evaluate((el: HTMLElement) => el.blur())
    await expect(error).toContainText('holds a character no server can store (a NUL, or half of an emoji), so it was not saved')
    await expect(field(a.page, 'Data')).toContainText(`{"n": "a\\u0000${width}"}`)
    await error.getByRole('button', { name: 'Replace them with � and save' }).click()
    await expect.poll(async () => (await getContent(server, ann, 'Paste/Card')).Data).toEqual({ n: `a\ufffd${width}` })
    await expect(error).toHaveCount(0)
    await v.page.screenshot({ path: `test-results/weft-paste-nul-vic-${width}.png`, fullPage: true })
    await a.page.screenshot({ path: `test-results/weft-paste-nul-ann-saved-${width}.png`, fullPage: true })
    await a.context.close()
    await v.context.close()
  })
}

for (const width of [1280, 390]) {
  test(`[WEB77] the refusal names the field by its label, as the page shows it, never its key (${width} px)`, async ({ browser }) => {
    const a = await openLoggedIn(browser, server, ann, 'Paste/Card')
    await a.page.setViewportSize({ width, height: 800 })
    const error = a.page.locator('weft-node-page [data-error=fields]')
    // A text field (text-field.ts).
    await field(a.page, 'Short caption').fill(`short ${width} \u0000`)
    await expect(error).toContainText('Short caption: that text holds a character no server can store')
    await expect(error).not.toContainText('ShortCaption')
    await error.getByRole('button', { name: 'Replace them with � and save' }).click()
    await expect(error).toHaveCount(0)
    // A JSON value (node-page.ts).
    await field(a.page, 'Extra data').fill(`{"n": "b\\u0000${width}"}`)
    await field(a.page, 'Extra data').evaluate((el: HTMLElement) => el.blur())
    await expect(error).toContainText('Extra data: that text holds a character no server can store')
    await expect(error).not.toContainText('ExtraData')
    await a.page.screenshot({ path: `test-results/weft-paste-nul-label-${width}.png`, fullPage: true })
    await error.getByRole('button', { name: 'Replace them with � and save' }).click()
    await expect.poll(async () => (await getContent(server, ann, 'Paste/Card')).ExtraData).toEqual({ n: `b\ufffd${width}` })
    await a.context.close()
  })
}
