import { expect, test, type Browser, type Page } from '@playwright/test'
import { getContent, grant, openLoggedIn, putNode, signUp, startE2eServer, twoEditorsOn, type E2eServer, type TestUser } from './fixtures.js'

/**
 * The Code page's CodeMirror editor, bound to Source's Y.Text with y-codemirror.next: people
 * typing at once both keep their words [WEB3], see each other's carets, undo only their own
 * edits; a keystroke over the server's limit is refused on the device [WEB6]; a Viewer's
 * editor is read-only [WEB8].
 */

let server: E2eServer
let ann: TestUser
let bob: TestUser
let carol: TestUser

const SOURCE = ['const first = "one"', 'const second = "two"', 'return first + " " + second'].join('\n')

test.beforeAll(async () => {
  server = await startE2eServer()
  ;({ ann, bob } = await twoEditorsOn(server, 'Lab', {}))
  carol = await signUp(server, 'Carol')
  await grant(server, ann, 'Lab', carol.userId, 'Viewer')
})

test.afterAll(async () => {
  await server?.dispose()
})

function editor(page: Page) {
  return page.locator('weft-code-editor .cm-content')
}

/** The editor is on the field's Y.Text (after the first writer's 'to-text' migration). */
async function boundToText(page: Page) {
  await expect(page.locator('weft-code-editor .editor')).toHaveAttribute('data-binding', 'text')
}

/** Source as this page's replica holds it (what the editor must show). */
function replicaSource(page: Page, path: string): Promise<unknown> {
  return page.evaluate((p) => {
    const client = (globalThis as unknown as { __weft: { client: { acquire(p: string): { content: Record<string, unknown> }; release(p: string): void } } }).__weft.client
    const replica = client.acquire(p)
    try {
      return replica.content.Source
    } finally {
      client.release(p)
    }
  }, path)
}

/** A Code node Lab/{name} made by Ann over HTTP; its path. */
async function createCode(name: string, source: string, language = 'javascript'): Promise<string> {
  const path = `Lab/${name}`
  await putNode(server, ann, path, 'Code', { Language: language, IsExecutable: true, Source: source }, name)
  return path
}

/** `user`'s browser on the Code page at `path`, its editor bound to Source's Y.Text. */
async function openEditor(browser: Browser, user: TestUser, path: string) {
  const opened = await openLoggedIn(browser, server, user, path)
  await boundToText(opened.page)
  return opened
}

/** Puts the caret at the end of line `n` (1-based) of the editor. */
async function caretAtEndOfLine(page: Page, n: number) {
  await editor(page).locator('.cm-line').nth(n - 1).click()
  await page.keyboard.press('End')
}

test('[WEB3] two people type into different lines of one script at once: both keep their words, see each other\'s caret, and Run runs it', async ({ browser }) => {
  const path = await createCode('Pair', SOURCE)
  const a = await openEditor(browser, ann, path)
  const b = await openEditor(browser, bob, path)
  await expect(editor(a.page)).toContainText('const first = "one"')
  await expect(editor(b.page)).toContainText('const second = "two"')

  await caretAtEndOfLine(a.page, 1)
  await caretAtEndOfLine(b.page, 2)
  await Promise.all([a.page.keyboard.type(' + "A"', { delay: 40 }), b.page.keyboard.type(' + "B"', { delay: 40 })])

  const expected = ['const first = "one" + "A"', 'const second = "two" + "B"', 'return first + " " + second'].join('\n')
  await expect.poll(() => replicaSource(a.page, path)).toBe(expected)
  await expect.poll(() => replicaSource(b.page, path)).toBe(expected)
  await expect.poll(async () => (await getContent(server, ann, path)).Source).toBe(expected)
  for (const page of [a.page, b.page]) {
    await expect(editor(page).locator('.cm-line').nth(0)).toContainText('const first = "one" + "A"')
    await expect(editor(page).locator('.cm-line').nth(1)).toContainText('const second = "two" + "B"')
  }

  // Each sees the other's caret, in the other's colour, named, on the line they typed in.
  const bobsCaret = editor(a.page).locator('.cm-line').nth(1).locator('.cm-ySelectionCaret')
  await expect(bobsCaret).toBeVisible()
  await expect(bobsCaret.locator('.cm-ySelectionInfo')).toHaveText('Bob')
  const annsCaret = editor(b.page).locator('.cm-line').nth(0).locator('.cm-ySelectionCaret')
  await expect(annsCaret.locator('.cm-ySelectionInfo')).toHaveText('Ann')
  expect(await bobsCaret.evaluate((el) => getComputedStyle(el).borderLeftColor)).not.toBe(await annsCaret.evaluate((el) => getComputedStyle(el).borderLeftColor))
  await expect(a.page.locator('weft-code-editor .cm-gutters .cm-lineNumbers')).toContainText('3')
  // Highlighting: the keyword and the string are styled spans.
  await expect(editor(a.page).locator('.cm-line').nth(0).locator('span').first()).toHaveText('const')
  await a.page.screenshot({ path: '/tmp/cm-two-editors-ann.png', fullPage: true })
  await b.page.screenshot({ path: '/tmp/cm-two-editors-bob.png', fullPage: true })

  // Ctrl-Z takes back one's own edit only: Bob's stays. Keystrokes further apart than the undo
  // manager's capture window (a loaded machine) are separate steps: each is undone in turn, and
  // none of them touches Bob's line.
  const undone = ['const first = "one"', 'const second = "two" + "B"', 'return first + " " + second'].join('\n')
  let steps = 0
  for (let now = await replicaSource(a.page, path); now !== undone; steps++) {
    expect(steps, 'Ann typed six characters: at most six undo steps').toBeLessThan(6)
    const before = now
    await a.page.keyboard.press('Control+z')
    await expect.poll(() => replicaSource(a.page, path)).not.toBe(before)
    now = await replicaSource(a.page, path)
    expect(String(now).split('\n').slice(1)).toEqual(['const second = "two" + "B"', 'return first + " " + second'])
  }
  await expect.poll(() => replicaSource(b.page, path)).toBe(undone)
  await expect.poll(async () => (await getContent(server, ann, path)).Source).toBe(undone)
  // Redo is an edit like the others: stored and sent.
  for (let i = 0; i < steps; i++) {
    const before = await replicaSource(a.page, path)
    await a.page.keyboard.press('Control+y')
    await expect.poll(() => replicaSource(a.page, path)).not.toBe(before)
  }
  await expect.poll(async () => (await getContent(server, ann, path)).Source).toBe(expected)

  // A reload keeps the text (it is on this device and on the server).
  await a.page.reload()
  await boundToText(a.page)
  await expect(editor(a.page).locator('.cm-line').nth(0)).toContainText('const first = "one" + "A"')
  await expect(editor(a.page).locator('.cm-line').nth(1)).toContainText('const second = "two" + "B"')

  // Run runs the script as edited.
  await a.page.locator('weft-code-page .run').click()
  const panel = a.page.locator('weft-code-page section[aria-label="Your run"] weft-activity-panel')
  await expect(panel.locator('.badge')).toHaveAttribute('data-status', 'Succeeded')
  await expect(panel.locator('pre.output')).toContainText('oneA twoB')
  await a.context.close()
  await b.context.close()
})

test('[WEB3] when the doc is swapped (another tab rebuilt the node), the editor follows the new Y.Text and its typing is still saved', async ({ browser }) => {
  const path = await createCode('Swap', SOURCE)
  const a = await openEditor(browser, ann, path)
  const b = await openEditor(browser, bob, path)
  await caretAtEndOfLine(a.page, 1)
  await a.page.keyboard.type(' + "1"')
  await expect.poll(async () => (await getContent(server, ann, path)).Source).toContain('"one" + "1"')
  // What a tab does when another tab of the same user rebuilt the node: reload it from IndexedDB.
  const swapped = await a.page.evaluate(async (p) => {
    type Replica = { textOf(k: string): unknown; applyFromTab(m: { kind: 'reload'; path: string }): void }
    const client = (globalThis as unknown as { __weft: { client: { acquire(p: string): Replica; release(p: string): void } } }).__weft.client
    const replica = client.acquire(p)
    try {
      const before = replica.textOf('Source')
      replica.applyFromTab({ kind: 'reload', path: p })
      for (let i = 0; i < 50 && replica.textOf('Source') === before; i++) await new Promise((r) => setTimeout(r, 20))
      return replica.textOf('Source') !== before
    } finally {
      client.release(p)
    }
  }, path)
  expect(swapped).toBe(true)
  await boundToText(a.page)
  // Typing after the swap goes into the new Y.Text: stored, sent, seen by Bob.
  await caretAtEndOfLine(a.page, 2)
  await a.page.keyboard.type(' + "2"')
  const expected = ['const first = "one" + "1"', 'const second = "two" + "2"', 'return first + " " + second'].join('\n')
  await expect.poll(async () => (await getContent(server, ann, path)).Source).toBe(expected)
  await expect.poll(() => replicaSource(b.page, path)).toBe(expected)
  await expect(editor(a.page).locator('.cm-line').nth(1)).toHaveText('const second = "two" + "2"')
  await a.context.close()
  await b.context.close()
})

test('[WEB6] a paste that would make Source larger than the server accepts is refused in the editor, with the sizes; nothing is stored or sent', async ({ browser }) => {
  const path = await createCode('Big', 'const n: number = 1', 'typescript')
  const a = await openEditor(browser, ann, path)
  await caretAtEndOfLine(a.page, 1)
  await editor(a.page).evaluate((el, n) => {
    const data = new DataTransfer()
    data.setData('text/plain', 'x'.repeat(n))
    el.dispatchEvent(new ClipboardEvent('paste', { clipboardData: data, bubbles: true, cancelable: true }))
  }, 1_100_000)
  await expect(a.page.locator('weft-code-editor [data-error="source"]')).toContainText('the server accepts at most 1.0 MB')
  expect(await replicaSource(a.page, path)).toBe('const n: number = 1')
  await expect(editor(a.page)).toHaveText('const n: number = 1')
  // A normal keystroke still goes through, and clears the error.
  await a.page.keyboard.type(';')
  await expect.poll(async () => (await getContent(server, ann, path)).Source).toBe('const n: number = 1;')
  await expect(a.page.locator('weft-code-editor [data-error="source"]')).toHaveCount(0)
  await a.context.close()
})

test('[WEB8] a Viewer\'s editor is read-only: typing changes nothing; others\' edits still appear', async ({ browser }) => {
  const path = await createCode('Look', SOURCE)
  const a = await openEditor(browser, ann, path)
  const c = await openEditor(browser, carol, path)
  // [WEB54] A reader meets the run first; the script is folded, one click away.
  const folded = c.page.locator('weft-code-page details.source')
  await expect(folded).not.toHaveAttribute('open')
  await folded.locator('summary').click()
  await expect(editor(c.page)).toHaveAttribute('contenteditable', 'false')
  await caretAtEndOfLine(c.page, 1)
  await c.page.keyboard.type('xyz')
  await c.page.keyboard.press('Control+z')
  expect(await replicaSource(c.page, path)).toBe(SOURCE)
  await expect(editor(c.page)).not.toContainText('xyz')
  // Ann's edit reaches the Viewer's editor.
  await caretAtEndOfLine(a.page, 3)
  await a.page.keyboard.type(' + "!"')
  await expect(editor(c.page).locator('.cm-line').nth(2)).toContainText('return first + " " + second + "!"')
  expect((await getContent(server, ann, path)).Source).toBe(SOURCE + ' + "!"')
  await c.page.evaluate(() => window.scrollTo(0, 0))
  await c.page.screenshot({ path: '/tmp/cm-viewer.png', fullPage: true })
  await a.context.close()
  await c.context.close()
})

test('[WEB8] at 390 px the Code page has no horizontal overflow; a long line scrolls inside the editor', async ({ browser }) => {
  const long = `const message = "${'a rather long line of code that does not fit a phone screen '.repeat(2)}"`
  const path = await createCode('Narrow', [long, ...SOURCE.split('\n')].join('\n'), 'typescript')
  const a = await openEditor(browser, ann, path)
  await a.page.setViewportSize({ width: 390, height: 844 })
  await expect(editor(a.page)).toContainText('const first')
  // Polled: the layout settles after the viewport change (a one-shot read raced it in CI).
  await expect.poll(() => a.page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(390)
  const box = () => a.page.locator('weft-code-editor .cm-editor').boundingBox()
  await expect.poll(async () => (await box())!.x).toBeGreaterThanOrEqual(0)
  await expect.poll(async () => { const b = (await box())!; return b.x + b.width }).toBeLessThanOrEqual(390)
  await a.page.screenshot({ path: '/tmp/cm-narrow-390.png', fullPage: true })
  await a.context.close()
})

test('[ACT16] the syntax check follows the typing: both people see the error with its line, then that it is fixed; Source is edited in one place', async ({ browser }) => {
  const path = await createCode('Checked', 'const a = 1\nreturn a')
  const a = await openEditor(browser, ann, path)
  const b = await openEditor(browser, bob, path)
  for (const page of [a.page, b.page]) await expect(page.locator('weft-code-page .check')).toHaveAttribute('data-check', 'Passed')
  // The editor owns Source: the field grid does not repeat it as a second, plain text box.
  await expect(a.page.locator('form.fields [name="Source"]')).toHaveCount(0)

  await caretAtEndOfLine(a.page, 1)
  await a.page.keyboard.type(' +', { delay: 30 })
  for (const page of [a.page, b.page]) {
    const check = page.locator('weft-code-page .check')
    await expect(check).toHaveAttribute('data-check', 'Failed')
    await expect(check).toContainText('Line 2, column 1')
  }
  await b.page.screenshot({ path: '/tmp/cm-check-failed-bob.png', fullPage: true })
  // Bob fixes it on his side; Ann sees the check pass.
  await caretAtEndOfLine(b.page, 1)
  await b.page.keyboard.type(' 1', { delay: 30 })
  for (const page of [a.page, b.page]) await expect(page.locator('weft-code-page .check')).toHaveAttribute('data-check', 'Passed')
  await expect.poll(async () => (await getContent(server, ann, path)).Source).toBe('const a = 1 + 1\nreturn a')
  await a.context.close()
  await b.context.close()
})
