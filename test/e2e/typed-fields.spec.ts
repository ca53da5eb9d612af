import { mkdir } from 'node:fs/promises'
import { expect, test, type Page } from '@playwright/test'
import { adminAndViewerOn, getContent, openLoggedIn, putNode, startE2eServer, syncStatus, type E2eServer, type TestUser } from './fixtures.js'

/**
 * Issue 16 "Typed fields": an Editor (Ann, the space's Admin) and a Viewer (Vic) side by side on
 * one document with a field of every kind. Ann edits each with its own editor; Vic sees the
 * same values, read-only; screenshots at 1280 and 390 px.
 */
let server: E2eServer
let ann: TestUser
let vic: TestUser

const CARD = {
  Title: 'Launch plan',
  Done: false,
  Due: '2026-12-24',
  Tags: ['planning', 'q3'],
  See: { $ref: 'Typed/Other' },
  Meta: { owner: 'ann', budget: 3 },
  Count: 3,
  Notes: '# Goals\n\nShip the **beta** and write the [changelog](https://example.com/log).\n',
}

test.beforeAll(async () => {
  server = await startE2eServer()
  ;({ ann, vic } = await adminAndViewerOn(server, 'Typed', { Card: CARD, Other: { Body: 'x' }, Third: { Body: 'y' } }))
  await putNode(server, ann, 'Typed/Other', 'Document', { Body: 'x' }, 'Other page')
  await putNode(server, ann, 'Typed/Third', 'Document', { Body: 'y' }, 'Third doc')
  await mkdir('test-results', { recursive: true })
})

test.afterAll(async () => {
  await server?.dispose()
})

const nodePage = (page: Page) => page.locator('weft-node-page')
const value = (page: Page, key: string) => nodePage(page).locator(`[data-field="${key}"]`)

/** Adds a field through the "Add a field" form: its name, its kind, its value (a choice for a checkbox). */
async function addField(page: Page, name: string, kind: string, text: string) {
  const add = nodePage(page).getByRole('form', { name: 'Add a field' })
  await add.getByLabel('Field').fill(name)
  await add.getByLabel('Kind').selectOption(kind)
  const input = add.getByLabel('Value')
  if (kind === 'checkbox') await input.selectOption(text)
  else await input.fill(text)
  await add.getByRole('button', { name: 'Add field' }).click()
}

async function shoot(page: Page, name: string) {
  for (const width of [1280, 390]) {
    await page.setViewportSize({ width, height: width === 390 ? 844 : 900 })
    expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(width)
    await page.screenshot({ path: `test-results/typed-fields-${name}-${width}.png`, fullPage: true })
  }
  await page.setViewportSize({ width: 1280, height: 900 })
}

test('[WEB20][WEB23] every kind has its editor: switch, date, chips, link picker, JSON, Markdown; the Viewer sees the same, read-only', async ({ browser }) => {
  const a = await openLoggedIn(browser, server, ann, 'Typed/Card')
  const v = await openLoggedIn(browser, server, vic, 'Typed/Card')
  for (const { page } of [a, v]) {
    await expect(value(page, 'Done')).toHaveAttribute('data-kind', 'checkbox')
    await expect(value(page, 'Due')).toHaveAttribute('data-kind', 'date')
    await expect(value(page, 'Tags')).toHaveAttribute('data-kind', 'list')
    await expect(value(page, 'See')).toHaveAttribute('data-kind', 'link')
    await expect(value(page, 'Meta')).toHaveAttribute('data-kind', 'object')
    await expect(value(page, 'Notes')).toHaveAttribute('data-kind', 'longtext')
    // Lists are chips and links are the node's name, never raw JSON.
    await expect(value(page, 'Tags').locator('[data-chip] .text')).toHaveText(['planning', 'q3'])
    await expect(value(page, 'See').getByRole('link', { name: 'Other page' })).toBeVisible()
    await expect(value(page, 'See')).not.toContainText('$ref')
  }
  // Vic (Viewer) sees values, not editors that would be refused.
  await expect(nodePage(v.page).getByRole('switch', { name: 'Done' })).toBeDisabled()
  await expect(nodePage(v.page).getByLabel('Due', { exact: true })).toHaveAttribute('readonly', '')
  await expect(value(v.page, 'Tags').getByRole('button')).toHaveCount(0)
  await expect(value(v.page, 'See').getByRole('button')).toHaveCount(0)
  await expect(value(v.page, 'Meta').locator('.cm-content')).toHaveAttribute('contenteditable', 'false')
  await expect(value(v.page, 'Notes').locator('[data-preview]')).toContainText('Goals')
  await shoot(v.page, 'viewer')

  // Yes/no is a switch; a date is a date picker stored as ISO.
  await nodePage(a.page).getByRole('switch', { name: 'Done' }).click()
  await nodePage(a.page).getByLabel('Due', { exact: true }).fill('2026-12-31')
  await expect.poll(async () => getContent(server, ann, 'Typed/Card')).toMatchObject({ Done: true, Due: '2026-12-31' })
  await expect(nodePage(v.page).getByRole('switch', { name: 'Done' })).toBeChecked()
  await expect(nodePage(v.page).getByLabel('Due', { exact: true })).toHaveValue('2026-12-31')

  // Chips: remove one, add one.
  await value(a.page, 'Tags').getByRole('button', { name: 'Remove q3 from Tags' }).click()
  await value(a.page, 'Tags').getByLabel('Add to Tags').fill('launch')
  await value(a.page, 'Tags').getByLabel('Add to Tags').press('Enter')
  await expect.poll(async () => (await getContent(server, ann, 'Typed/Card')).Tags).toEqual(['planning', 'launch'])
  await expect(value(v.page, 'Tags').locator('[data-chip] .text')).toHaveText(['planning', 'launch'])

  // A link is picked by name over the nodes this device knows, stored as { $ref }.
  await value(a.page, 'See').getByRole('button', { name: 'Change…' }).click()
  await value(a.page, 'See').getByRole('combobox').fill('Third')
  await value(a.page, 'See').getByRole('button', { name: /Third doc/ }).click()
  await expect.poll(async () => (await getContent(server, ann, 'Typed/Card')).See).toEqual({ $ref: 'Typed/Third' })
  await expect(value(v.page, 'See').getByRole('link', { name: 'Third doc' })).toBeVisible()

  // JSON: text that is not JSON is refused inline with the parser's words, and never sent.
  const meta = value(a.page, 'Meta').locator('.cm-content')
  await meta.click()
  await a.page.keyboard.press('Control+a')
  await a.page.keyboard.type('{"owner": "bob",')
  await a.page.keyboard.press('Control+Enter')
  await expect(value(a.page, 'Meta').locator('[data-error=json]')).toContainText('Not valid JSON')
  expect((await getContent(server, ann, 'Typed/Card')).Meta).toEqual({ owner: 'ann', budget: 3 })
  await a.page.keyboard.press('Control+a')
  await a.page.keyboard.type('{"owner": "bob"}')
  await a.page.keyboard.press('Control+Enter')
  await expect.poll(async () => (await getContent(server, ann, 'Typed/Card')).Meta).toEqual({ owner: 'bob' })
  await expect(value(a.page, 'Meta').locator('[data-error=json]')).toHaveCount(0)
  await expect(value(v.page, 'Meta').locator('.cm-content')).toContainText('"owner": "bob"')
  await shoot(a.page, 'editor')
  await a.context.close()
  await v.context.close()
})

test('[WEB20] adding a field is one inline step: name, kind, value, each kind stored as its JSON', async ({ browser }) => {
  const a = await openLoggedIn(browser, server, ann, 'Typed/Other')
  await addField(a.page, 'Launch', 'date', '2027-01-15')
  await expect(value(a.page, 'Launch')).toHaveAttribute('data-kind', 'date')
  await addField(a.page, 'Ready', 'checkbox', 'yes')
  await expect(nodePage(a.page).getByRole('switch', { name: 'Ready' })).toBeChecked()
  await addField(a.page, 'Summary', 'longtext', 'Short *intro*')
  await expect(value(a.page, 'Summary')).toHaveAttribute('data-kind', 'longtext')
  await addField(a.page, 'Next', 'link', 'Third doc')
  await expect(value(a.page, 'Next').getByRole('link', { name: 'Third doc' })).toBeVisible()
  await expect.poll(async () => getContent(server, ann, 'Typed/Other')).toMatchObject({
    Launch: '2027-01-15',
    Ready: true,
    Summary: 'Short *intro*\n',
    Next: { $ref: 'Typed/Third' },
  })
  // The Markdown preview renders what was typed.
  await value(a.page, 'Summary').getByRole('button', { name: 'Preview' }).click()
  await expect(value(a.page, 'Summary').locator('[data-preview] em')).toHaveText('intro')
  await a.context.close()
})

test('[WEB21] text fields show the other people\'s carets and selections (single-line and long text), like the Code editor', async ({ browser }) => {
  const a = await openLoggedIn(browser, server, ann, 'Typed/Card')
  const v = await openLoggedIn(browser, server, vic, 'Typed/Card')
  const title = nodePage(a.page).getByLabel('Title', { exact: true })
  await expect(title).toHaveValue('Launch plan')
  await title.click()
  await title.evaluate((el: HTMLInputElement) => el.setSelectionRange(0, 6))
  await title.press('Shift+ArrowRight') // a selection made with the keyboard: "Launch "
  const caret = value(v.page, 'Title').locator('[data-remote-caret="Ann"]')
  await expect(caret).toBeVisible()
  await expect(value(v.page, 'Title').locator('[data-remote-selection]')).toHaveText('Launch ')
  await value(v.page, 'Title').screenshot({ path: 'test-results/typed-fields-title-caret.png' })
  // Leaving the field takes the caret away.
  await title.press('Tab')
  await expect(caret).toHaveCount(0)
  // Long text is CodeMirror bound to the Y.Text: the same carets, from the same awareness.
  await value(v.page, 'Notes').getByRole('button', { name: 'Source' }).click()
  await value(a.page, 'Notes').locator('.cm-content').click()
  await a.page.keyboard.press('Control+End')
  await a.page.keyboard.type('More.')
  await expect(value(v.page, 'Notes').locator('.cm-ySelectionCaret')).toBeVisible()
  await expect(value(v.page, 'Notes').locator('.cm-ySelectionInfo')).toHaveText('Ann')
  await expect(value(v.page, 'Notes').locator('.cm-content')).toContainText('More.')
  await shoot(v.page, 'viewer-carets')
  await a.context.close()
  await v.context.close()
})

test('[WEB22] the Markdown preview never runs what was typed: no raw HTML, no javascript: links', async ({ browser }) => {
  await putNode(server, ann, 'Typed/Evil', 'Document', {
    Notes: '<img src=x onerror="window.__pwned=1">\n\n[click](javascript:window.__pwned=2)\n\n<script>window.__pwned=3</script>\n\n**bold** <b onmouseover="window.__pwned=4">b</b>\n',
  }, 'Evil')
  const v = await openLoggedIn(browser, server, vic, 'Typed/Evil')
  const preview = value(v.page, 'Notes').locator('[data-preview]')
  await expect(preview.locator('strong')).toHaveText('bold')
  await expect(preview.locator('img, script, b, [onerror], [onmouseover]')).toHaveCount(0)
  await expect(preview.locator('a[href^="javascript"]')).toHaveCount(0)
  await expect(preview).toContainText('<img src=x onerror=')
  await preview.hover()
  expect(await v.page.evaluate(() => (window as unknown as { __pwned?: number }).__pwned)).toBeUndefined()
  await v.context.close()
})

test('[WEB23] a field the server writes alone is shown read-only even to its owner (a User\'s Email)', async ({ browser }) => {
  const a = await openLoggedIn(browser, server, ann)
  await expect(nodePage(a.page).getByLabel('Email', { exact: true })).toHaveAttribute('readonly', '')
  // [WEB15] Nothing offered that the server refuses: no ✕ at all for a field only the system writes.
  await expect(nodePage(a.page).getByRole('button', { name: 'Remove field Email' })).toHaveCount(0)
  // A field the owner writes stays an input ([WEB61]: labelled in words).
  await expect(nodePage(a.page).locator('label', { hasText: 'Pinned paths' })).toHaveCount(1)
  await expect(nodePage(a.page).getByRole('button', { name: 'Remove field Pinned paths' })).toHaveCount(1)
  await a.context.close()
})

test('[WEB93] a number too large to store ("1e999") is kept as typed and refused in words; the stored number stays', async ({ browser }) => {
  await putNode(server, ann, 'Typed/Counter', 'Document', { Count: 7 }, 'Counter')
  const a = await openLoggedIn(browser, server, ann, 'Typed/Counter')
  for (const width of [1280, 390]) {
    await a.page.setViewportSize({ width, height: 844 })
    const count = nodePage(a.page).getByLabel('Count', { exact: true })
    await expect(count).toHaveValue('7')
    await count.fill('1e999')
    await count.press('Enter')
    await expect(nodePage(a.page).locator('[data-error=fields]')).toContainText('“1e999” is not a finite number')
    await expect(count).toHaveValue('1e999')
    await count.evaluate((el: HTMLElement) => el.blur())
    await expect(count).toHaveValue('1e999')
    expect((await getContent(server, ann, 'Typed/Counter')).Count).toBe(7)
    await a.page.screenshot({ path: `test-results/number-too-large-${width}.png` })
    // A number it can hold is saved from the same box.
    await count.fill('12')
    await count.press('Enter')
    await expect.poll(async () => (await getContent(server, ann, 'Typed/Counter')).Count).toBe(12)
    await expect(nodePage(a.page).locator('[data-error=fields]')).toHaveCount(0)
    await count.fill('7')
    await count.press('Enter')
    await expect.poll(async () => (await getContent(server, ann, 'Typed/Counter')).Count).toBe(7)
  }
  await a.context.close()
})

test('[WEB96] what is typed while the previous value is being saved stays in the box (the save does not put its value back over it), and its own Enter saves it', async ({ browser }) => {
  await putNode(server, ann, 'Typed/Quick', 'Document', { Count: 1 }, 'Quick')
  const a = await openLoggedIn(browser, server, ann, 'Typed/Quick')
  for (const [label, first, next, stored] of [['Count', '12', '7', 7], ['Count', '30', '31', 31]] as const) {
    const box = nodePage(a.page).getByLabel(label, { exact: true })
    await expect(box).not.toHaveValue('')
    // One task: the first value is committed (its save starts), then the person types on at once.
    await box.evaluate((el: HTMLInputElement, [v1, v2]: readonly [string, string]) => {
      el.value = v1
      el.dispatchEvent(new Event('input', { bubbles: true }))
      el.dispatchEvent(new Event('change', { bubbles: true }))
      el.value = v2
      el.dispatchEvent(new Event('input', { bubbles: true }))
    }, [first, next] as const)
    await expect.poll(async () => String((await getContent(server, ann, 'Typed/Quick'))[label])).toBe(first)
    await expect(syncStatus(a.page)).toHaveAttribute('data-pending', '0')
    await expect(box).toHaveValue(next)
    // Its own commit (the change Enter fires after typing; typed by script, so sent as such).
    await box.dispatchEvent('change')
    await expect.poll(async () => (await getContent(server, ann, 'Typed/Quick'))[label]).toBe(stored)
    await expect(box).toHaveValue(next)
  }
  await a.context.close()
})

test('[WEB102] a field\'s refusal is shown at that field (its input described by it), not under the whole list; a problem of no field stays by the "Add a field" form', async ({ browser }) => {
  const many = Object.fromEntries(Array.from({ length: 10 }, (_, i) => [`Note${i}`, `n${i}`]))
  await putNode(server, ann, 'Typed/Long', 'Document', { Count: 7, Title: 'long one', ...many }, 'Long one')
  const a = await openLoggedIn(browser, server, ann, 'Typed/Long')
  for (const width of [1280, 390]) {
    await a.page.setViewportSize({ width, height: 844 })
    const count = nodePage(a.page).getByLabel('Count', { exact: true })
    await expect(count).toHaveValue('7')
    await count.fill('1e999')
    await count.press('Enter')
    const refusal = value(a.page, 'Count').getByRole('alert')
    await expect(refusal).toContainText('Count: “1e999” is not a finite number')
    await expect(count).toHaveAccessibleDescription(/“1e999” is not a finite number/)
    await expect(count).toHaveAttribute('aria-invalid', 'true')
    // Right under its box, above the next field; nothing said under the list.
    const [box, said, next] = await Promise.all([count.boundingBox(), refusal.boundingBox(), value(a.page, 'Title').boundingBox()])
    expect(said!.y).toBeGreaterThanOrEqual(box!.y + box!.height - 1)
    expect(said!.y + said!.height).toBeLessThanOrEqual(next!.y)
    await expect(nodePage(a.page).locator('[data-error=fields]')).toHaveCount(1)
    await a.page.screenshot({ path: `test-results/web102-field-refusal-${width}.png` })

    // A text field's refusal (a NUL pasted) goes beside that field; typing there does not hide Count's.
    const title = nodePage(a.page).getByLabel('Title', { exact: true })
    await title.fill(`long one ${width} \u0000`)
    const titleRefusal = value(a.page, 'Title').getByRole('alert')
    await expect(titleRefusal).toContainText('Title: that text holds a character no server can store')
    await expect(title).toHaveAccessibleDescription(/Title: that text holds a character/)
    await titleRefusal.getByRole('button', { name: 'Replace them with � and save' }).click()
    await expect(titleRefusal).toHaveCount(0)
    await expect.poll(async () => (await getContent(server, ann, 'Typed/Long')).Title).toBe(`long one ${width} \ufffd`)

    // A field that exists already, asked for by the "Add a field" form: said by that form.
    const add = nodePage(a.page).getByRole('form', { name: 'Add a field' })
    await add.getByLabel('Field').fill('Count')
    await add.getByRole('button', { name: 'Add field' }).click()
    const byForm = nodePage(a.page).locator('[data-error=fields]:not([data-error-field])')
    await expect(byForm).toContainText('A field named “Count” exists already')
    const [formBox, formSaid] = await Promise.all([add.boundingBox(), byForm.boundingBox()])
    expect(formSaid!.y + formSaid!.height).toBeLessThanOrEqual(formBox!.y)
    await add.getByLabel('Field').fill('')
    await count.fill('8')
    await count.press('Enter')
    await expect.poll(async () => (await getContent(server, ann, 'Typed/Long')).Count).toBe(8)
    await expect(nodePage(a.page).locator('[data-error=fields]')).toHaveCount(0)
    await expect(count).not.toHaveAttribute('aria-invalid', 'true')
    await count.fill('7')
    await count.press('Enter')
    await expect.poll(async () => (await getContent(server, ann, 'Typed/Long')).Count).toBe(7)
  }
  await a.context.close()
})
