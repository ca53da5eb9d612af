import { mkdir } from 'node:fs/promises'
import { expect, test, type Page, type Route } from '@playwright/test'
import { SYSTEM, type NodePath } from '../../shared/index.js'
import { analyzeAxe, api, getContent, grant, openLoggedIn, putNode, signUp, startE2eServer, syncStatus, type E2eServer, type TestUser } from './fixtures.js'

/**
 * Issue 18 item 7, the thread page (docs/SPEC.md [WEB30]–[WEB39]): messages with their authors,
 * the agent's answer streaming to everyone watching, the state in words, Stop, approvals,
 * sub-threads, a composer that works offline, a Viewer's read-only view, 390 px and axe.
 * Real server, real Chromium, the built-in agent (DESIGN.md "Threads (contract)").
 */
let server: E2eServer
let ann: TestUser
let bob: TestUser
let vic: TestUser

// Two or three browsers per test on a shared machine, and screenshots: room to breathe.
test.describe.configure({ timeout: 180_000 })

test.beforeAll(async () => {
  server = await startE2eServer()
  ann = await signUp(server, 'Ann')
  bob = await signUp(server, 'Bob')
  vic = await signUp(server, 'Vic')
  await putNode(server, ann, 'Talk', 'Space', {}, 'Talk')
  await grant(server, ann, 'Talk', bob.userId, 'Editor')
  await grant(server, ann, 'Talk', vic.userId, 'Viewer')
  await mkdir('test-results', { recursive: true })
})

test.afterAll(async () => {
  await server?.dispose()
})

async function newThread(name: string): Promise<string> {
  const path = `Talk/${name}`
  await putNode(server, ann, path, 'Thread', { Agent: { Kind: 'builtin' } }, name)
  return path
}

const tp = (page: Page) => page.locator('weft-thread-page')
const badge = (page: Page) => tp(page).locator('.state .badge')
const cells = (page: Page) => tp(page).locator('weft-thread-cell')
const composer = (page: Page) => tp(page).getByLabel('Message', { exact: true })

async function send(page: Page, text: string) {
  await composer(page).fill(text)
  await composer(page).press('Enter')
}

/**
 * [WEB70] A thread of `n` rounds (a long message each, and its answer), posted one after the
 * other as a person would (each ingested before the next: one round per message).
 */
async function longThread(name: string, n: number): Promise<string> {
  const path = await newThread(name)
  for (let i = 1; i <= n; i++) {
    const text = `Message ${i}: ${'a few words to make the cell wrap over more than one line at 390 px, '.repeat(3)}end of ${i}.`
    expect((await api(server, ann, 'POST', `/api/nodes/${path}/messages`, { id: `m${i}`, text })).status).toBe(201)
    await expect.poll(async () => {
      const c = await getContent(server, ann, path)
      return (c.IngestedMessageIds as string[] | undefined)?.length === i && c.Status === 'Idle'
    }).toBe(true)
  }
  return path
}

/** [WEB70] Whether the whole of `locator` is inside the viewport (not merely on the page). */
async function wholeInView(page: Page, locator: ReturnType<Page['locator']>): Promise<boolean> {
  const box = await locator.boundingBox()
  const vp = page.viewportSize()!
  return !!box && box.y >= 0 && box.y + box.height <= vp.height + 0.5 && box.x >= 0 && box.x + box.width <= vp.width + 0.5
}

const scrollY = (page: Page) => page.evaluate(() => scrollY)

/**
 * Records, in the page, every state the thread's badge took (a MutationObserver with old
 * values: a state shown for one frame is kept) and every text the agent's answers showed (each
 * animation frame). Functional, not timing: what was shown, in order.
 */
async function record(page: Page) {
  await expect(badge(page)).toBeVisible()
  await page.evaluate(() => {
    const deep = (root: Document | ShadowRoot, sel: string): Element | null => {
      const hit = root.querySelector(sel)
      if (hit) return hit
      for (const el of root.querySelectorAll('*')) {
        const found = el.shadowRoot ? deep(el.shadowRoot, sel) : null
        if (found) return found
      }
      return null
    }
    const w = window as unknown as { __kinds: string[]; __texts: string[] }
    w.__kinds = []
    w.__texts = []
    const host = deep(document, 'weft-thread-page')!
    const push = (k: string | null) => {
      if (k && w.__kinds.at(-1) !== k) w.__kinds.push(k)
    }
    push(host.shadowRoot!.querySelector('.badge')!.getAttribute('data-kind'))
    new MutationObserver((records) => {
      for (const r of records) {
        const el = r.target as Element
        if (r.type === 'attributes' && el.classList.contains('badge')) {
          push(r.oldValue)
          push(el.getAttribute('data-kind'))
        }
      }
    }).observe(host.shadowRoot!, { subtree: true, attributes: true, attributeFilter: ['data-kind'], attributeOldValue: true })
    const tick = () => {
      for (const cell of host.shadowRoot!.querySelectorAll('weft-thread-cell')) {
        const art = cell.shadowRoot?.querySelector('article[data-role="assistant"] [data-text]')
        const t = art?.textContent ?? ''
        if (t && w.__texts.at(-1) !== t) w.__texts.push(t)
      }
      requestAnimationFrame(tick)
    }
    tick()
  })
}

const history = (page: Page) => page.evaluate(() => (window as unknown as { __kinds: string[] }).__kinds)
const texts = (page: Page) => page.evaluate(() => (window as unknown as { __texts: string[] }).__texts)

/** Refused outbox entries of this browser (what the status bar counts). */
function refusedRows(page: Page) {
  return page.evaluate(async () => {
    const w = (globalThis as unknown as { __weft: { client: { store: { db: { outbox: { toArray(): Promise<{ status: string; code?: string }[]> } } } } } }).__weft
    return (await w.client.store.db.outbox.toArray()).filter((r) => r.status === 'refused')
  })
}

/**
 * Both pages at 1280 and 390 px, one screenshot each, named to be looked at side by side
 * (`threads-<name>-<width>-0.png` and `-1.png`). No third page pasting them into one picture: a
 * full-page screenshot of two full-page screenshots failed in CI ("Unable to capture screenshot").
 */
async function sideBySide(left: Page, right: Page, name: string) {
  for (const width of [1280, 390]) {
    for (const [i, page] of [left, right].entries()) {
      await page.setViewportSize({ width, height: width === 390 ? 844 : 900 })
      expect(await page.evaluate(() => document.documentElement.scrollWidth), `${name} ${width} scrolls sideways`).toBeLessThanOrEqual(width)
      await page.screenshot({ path: `test-results/threads-${name}-${width}-${i}.png`, fullPage: true, animations: 'disabled', timeout: 60_000 })
    }
  }
  for (const page of [left, right]) await page.setViewportSize({ width: 1280, height: 900 })
}

test('[WEB30][WEB38] New → Thread from a space opens a thread with the built-in agent; a message and its streamed answer show author, role and time', async ({ browser }) => {
  const a = await openLoggedIn(browser, server, ann, 'Talk')
  const form = a.page.locator('weft-node-page form[aria-label="New child node"]')
  await form.getByLabel('Name').fill('Plans')
  await form.locator('select[name="nodeType"]').selectOption('Thread')
  await form.locator('wa-button[type="submit"]').click()
  await expect(a.page).toHaveURL(/#\/n\/Talk\/Plans$/)
  await expect(badge(a.page)).toHaveText('Ready')
  await expect(tp(a.page).locator('.agent')).toHaveText('Built-in agent')
  expect(await getContent(server, ann, 'Talk/Plans')).toMatchObject({ Agent: { Kind: 'builtin' } })

  await send(a.page, 'hello there')
  await expect(composer(a.page)).toHaveValue('')
  await expect(cells(a.page)).toHaveCount(2)
  const [mine, answer] = [cells(a.page).nth(0), cells(a.page).nth(1)]
  await expect(mine.locator('.who')).toHaveText('Ann (you)')
  await expect(mine.locator('.role')).toHaveText('Message')
  await expect(mine.locator('[data-text]')).toHaveText('hello there')
  await expect(mine.locator('time')).toContainText('today')
  await expect(answer.locator('.who')).toHaveText('Built-in agent')
  await expect(answer.locator('.role')).toHaveText('Agent')
  await expect(answer.locator('[data-text]')).toHaveText('You said: hello there')
  await expect(badge(a.page)).toHaveText('Answered')
  // The round's facts on the server: one message in, one answer.
  const c = await getContent(server, ann, 'Talk/Plans')
  expect(c.IngestedMessageIds).toHaveLength(1)
  expect(c.Messages).toHaveLength(2)
  expect(await refusedRows(a.page)).toEqual([])

  // The navigation lists what a person put under the thread, not its message cells (the page
  // shows those as messages) nor the system's `_` nodes.
  await putNode(server, ann, 'Talk/Plans/Notes', 'Document', {}, 'Notes')
  const threadItem = a.page.locator('weft-nav-tree [role="treeitem"][data-path="Talk/Plans"]')
  await threadItem.locator('.twisty').click()
  await expect(threadItem).toHaveAttribute('aria-expanded', 'true')
  await expect(a.page.locator('weft-nav-tree [role="treeitem"][data-path="Talk/Plans/Notes"]')).toBeVisible()
  await expect(a.page.locator('weft-nav-tree [role="treeitem"][data-path^="Talk/Plans/"]')).toHaveCount(1)
  await a.context.close()
})

test('[WEB31][WEB32] two browsers watch one answer stream in: both see "Thinking…", then the same answer, only ever a prefix of it; each sees the other here', async ({ browser }) => {
  const path = await newThread('Watch')
  const a = await openLoggedIn(browser, server, ann, path)
  const b = await openLoggedIn(browser, server, bob, path)
  for (const { page } of [a, b]) await record(page)
  await expect(a.page.locator('weft-node-page .presence')).toContainText('Bob')
  await expect(b.page.locator('weft-node-page .presence')).toContainText('Ann')

  await send(a.page, '/sleep 1500')
  const answer = 'You said: /sleep 1500'
  for (const { page } of [a, b]) {
    await expect(cells(page).nth(1).locator('[data-text]')).toHaveText(answer)
    await expect(badge(page)).toHaveText('Answered')
    const kinds = await history(page)
    expect(kinds.indexOf('thinking')).toBeGreaterThanOrEqual(0)
    expect(kinds.indexOf('answered')).toBeGreaterThan(kinds.indexOf('thinking'))
    const seen = await texts(page)
    expect(seen.at(-1)).toBe(answer)
    for (const t of seen) expect(answer.startsWith(t), `"${t}" is a prefix of the answer`).toBe(true)
  }
  // Bob's page names Ann as the author, never her id.
  await expect(cells(b.page).nth(0).locator('.who')).toHaveText('Ann')

  // A question ends the round waiting for an answer, said in words, with the question.
  await send(b.page, '/ask Which colour?')
  for (const { page } of [a, b]) {
    await expect(badge(page)).toHaveText('Waiting for your answer')
    await expect(tp(page).locator('[data-question]')).toContainText('Which colour?')
  }
  await sideBySide(a.page, b.page, 'watching')
  await a.context.close()
  await b.context.close()
})

test('[WEB31][WEB34] Stop mid-round: "Stopping…" then Cancelled for both; a cancelled thread answers the next message', async ({ browser }) => {
  const path = await newThread('Stop')
  const a = await openLoggedIn(browser, server, ann, path)
  const b = await openLoggedIn(browser, server, bob, path)
  for (const { page } of [a, b]) await record(page)
  await send(a.page, '/sleep 60000')
  for (const { page } of [a, b]) {
    await expect(badge(page)).toHaveText('Thinking…')
    await expect(cells(page).nth(1).locator('.thinking')).toHaveText('Thinking…')
    // Bob (Editor) holds the Thread permission too.
    await expect(tp(page).locator('.stop')).toBeVisible()
  }
  await tp(a.page).locator('.stop').click()
  for (const { page } of [a, b]) {
    await expect(badge(page)).toHaveText('Cancelled')
    await expect(tp(page).locator('.stop')).toHaveCount(0)
    const kinds = await history(page)
    expect(kinds, 'Stopping… was shown before Cancelled').toContain('stopping')
    expect(kinds.indexOf('cancelled')).toBeGreaterThan(kinds.indexOf('stopping'))
  }
  expect(await getContent(server, ann, path)).toMatchObject({ Status: 'Cancelled' })
  expect((await getContent(server, ann, path)).RequestedStatus ?? null).toBeNull()

  await send(b.page, 'again')
  for (const { page } of [a, b]) await expect(cells(page).nth(3).locator('[data-text]')).toHaveText('You said: again')
  for (const { page } of [a, b]) expect(await refusedRows(page)).toEqual([])
  await a.context.close()
  await b.context.close()
})

test('[WEB33] a message sent offline is kept on the device, then sent when online: ingested once, answered once', async ({ browser }) => {
  const path = await newThread('Offline')
  const a = await openLoggedIn(browser, server, ann, path)
  await expect(badge(a.page)).toHaveText('Ready')
  await a.context.setOffline(true)
  await expect(syncStatus(a.page)).toHaveAttribute('data-status', 'offline')
  await expect(tp(a.page).locator('[data-offline="yes"]')).toBeVisible()
  await send(a.page, 'written on the train')
  const mine = cells(a.page).nth(0)
  await expect(mine.locator('[data-text]')).toHaveText('written on the train')
  await expect(mine.locator('[data-note="local"]')).toBeVisible()
  // Nothing reached the server yet.
  expect((await getContent(server, ann, path)).UserMessageIds ?? []).toEqual([])

  await a.context.setOffline(false)
  await expect(cells(a.page).nth(1).locator('[data-text]')).toHaveText('You said: written on the train')
  await expect(cells(a.page)).toHaveCount(2)
  await expect(mine.locator('[data-note]')).toHaveCount(0)
  await expect(syncStatus(a.page)).toHaveAttribute('data-status', 'saved', { timeout: 15_000 })
  const c = await getContent(server, ann, path)
  expect(c.UserMessageIds).toHaveLength(1)
  expect(c.IngestedMessageIds).toHaveLength(1)
  expect(c.Messages).toHaveLength(2)
  const kids = await api<{ items: { path: string; nodeType: string; content: { Role?: string; Author?: string } }[] }>(server, ann, 'GET', `/api/nodes?parent=${encodeURIComponent(path)}`)
  const users = kids.body.items.filter((n) => n.content.Role === 'user')
  expect(users).toHaveLength(1)
  expect(users[0]!.content.Author).toBe(ann.userId)
  expect(kids.body.items.filter((n) => n.content.Role === 'assistant')).toHaveLength(1)
  // Created by Ann on her device, sent as her creation: nothing refused, nothing pending.
  expect(await refusedRows(a.page)).toEqual([])
  await a.context.close()
})

/** [WEB41] The page's first message post reaches the server; what the page gets back is `answer`'s. */
async function loseFirstAnswer(page: Page, answer: (route: Route) => Promise<void>): Promise<{ count: number }> {
  const seen = { count: 0 }
  await page.route('**/messages', async (route) => {
    if (seen.count > 0 || route.request().method() !== 'POST') return route.continue()
    seen.count++
    await route.fetch()
    await answer(route)
  })
  return seen
}

/** [WEB41] The page's first message post is answered 503 (the server never sees it); every post's id, in order. */
async function refuseFirstPost(page: Page): Promise<string[]> {
  const ids: string[] = []
  await page.route('**/messages', async (route) => {
    if (route.request().method() !== 'POST') return route.continue()
    ids.push((route.request().postDataJSON() as { id: string }).id)
    if (ids.length > 1) return route.continue()
    await route.fulfill({ status: 503, contentType: 'application/json', body: JSON.stringify({ error: { code: 'unavailable', message: 'storage unavailable' } }) })
  })
  return ids
}

test('[WEB41] a send whose answer was lost (the server posted it, a proxy answered 502) is not sent twice: the page sees it posted and lets the error go', async ({ browser }) => {
  const path = await newThread('LostAnswer')
  const a = await openLoggedIn(browser, server, ann, path)
  await expect(badge(a.page)).toHaveText('Ready')
  // The first post reaches the server and is done there; its answer is lost on the way back.
  const lost = await loseFirstAnswer(a.page, (route) => route.fulfill({ status: 502, contentType: 'text/html', body: '<html>Bad Gateway</html>' }))
  await send(a.page, 'only once please')
  await expect(cells(a.page).nth(1).locator('[data-text]')).toHaveText('You said: only once please')
  await expect(cells(a.page)).toHaveCount(2)
  await expect(tp(a.page).locator('.error[role="alert"]')).toHaveCount(0)
  await expect(composer(a.page)).toHaveValue('')
  expect(lost.count).toBe(1)
  const c = await getContent(server, ann, path)
  expect(c.UserMessageIds).toHaveLength(1)
  expect(c.Messages).toHaveLength(2)
  await a.context.close()
})

test('[WEB41] a send whose connection dropped after the server posted it: no offline copy refused, no error, one message', async ({ browser }) => {
  const path = await newThread('Dropped')
  const a = await openLoggedIn(browser, server, ann, path)
  await expect(badge(a.page)).toHaveText('Ready')
  const dropped = await loseFirstAnswer(a.page, (route) => route.abort('failed'))
  await send(a.page, 'over a bad line')
  await expect(cells(a.page).nth(1).locator('[data-text]')).toHaveText('You said: over a bad line')
  await expect(cells(a.page)).toHaveCount(2)
  await expect(tp(a.page).locator('.error[role="alert"]')).toHaveCount(0)
  await expect(composer(a.page)).toHaveValue('')
  expect(await refusedRows(a.page)).toEqual([])
  expect(dropped.count).toBe(1)
  expect((await getContent(server, ann, path)).UserMessageIds).toHaveLength(1)
  await a.context.close()
})

test('[WEB41] a send the server refused with a 503 comes back with the error; sent again, it goes under the same id, once', async ({ browser }) => {
  const path = await newThread('Busy')
  const a = await openLoggedIn(browser, server, ann, path)
  await expect(badge(a.page)).toHaveText('Ready')
  const ids = await refuseFirstPost(a.page)
  await send(a.page, 'are you there')
  await expect(tp(a.page).locator('.error[role="alert"]')).toContainText('Try again')
  await expect(composer(a.page)).toHaveValue('are you there')
  await a.page.setViewportSize({ width: 390, height: 844 })
  await a.page.screenshot({ path: 'test-results/web40-refused-390.png', fullPage: true })
  await composer(a.page).press('Enter')
  await expect(cells(a.page).nth(1).locator('[data-text]')).toHaveText('You said: are you there')
  await expect(cells(a.page)).toHaveCount(2)
  await expect(tp(a.page).locator('.error[role="alert"]')).toHaveCount(0)
  expect(ids).toHaveLength(2)
  expect(ids[1]).toBe(ids[0])
  expect((await getContent(server, ann, path)).UserMessageIds).toEqual([ids[0]])
  await a.context.close()
})

test('[WEB41] a send kept after a 503 is not queued offline under its id (its cell may be on the server half done): the text waits with the error, then goes once online', async ({ browser }) => {
  const path = await newThread('BusyThenOffline')
  const a = await openLoggedIn(browser, server, ann, path)
  await expect(badge(a.page)).toHaveText('Ready')
  const ids = await refuseFirstPost(a.page)
  await send(a.page, 'when you can')
  await expect(tp(a.page).locator('.error[role="alert"]')).toContainText('Try again')
  await a.context.setOffline(true)
  await expect(syncStatus(a.page)).toHaveAttribute('data-status', 'offline')
  await composer(a.page).press('Enter')
  await expect(tp(a.page).locator('.error[role="alert"]')).toBeVisible()
  await expect(composer(a.page)).toHaveValue('when you can')
  await expect(tp(a.page).locator('[data-note="local"]')).toHaveCount(0)
  await a.context.setOffline(false)
  await expect(syncStatus(a.page)).not.toHaveAttribute('data-status', 'offline')
  await composer(a.page).press('Enter')
  await expect(cells(a.page).nth(1).locator('[data-text]')).toHaveText('You said: when you can')
  await expect(cells(a.page)).toHaveCount(2)
  expect(ids).toEqual([ids[0], ids[0]])
  await a.context.close()
})

test('[WEB35] a Viewer reads the thread and its live state but is offered no composer and no Stop, and reads why', async ({ browser }) => {
  const path = await newThread('Viewer')
  const posted = await api<{ path: string }>(server, ann, 'POST', `/api/nodes/${path}/messages`, { id: 'first', text: 'hello' })
  expect(posted.status).toBe(201)
  const v = await openLoggedIn(browser, server, vic, path)
  await expect(cells(v.page).nth(1).locator('[data-text]')).toHaveText('You said: hello')
  await expect(cells(v.page).nth(0).locator('.who')).toHaveText('Ann')
  await api(server, ann, 'POST', `/api/nodes/${path}/messages`, { id: 'second', text: '/sleep 60000' })
  await expect(badge(v.page)).toHaveText('Thinking…')
  await expect(tp(v.page).locator('.stop')).toHaveCount(0)
  await expect(tp(v.page).locator('textarea, form.composer')).toHaveCount(0)
  await expect(tp(v.page).locator('[data-reason="thread"]')).toContainText('your role cannot post')
  await api(server, ann, 'PATCH', `/api/nodes/${path}`, { RequestedStatus: 'Cancelled' })
  await expect(badge(v.page)).toHaveText('Cancelled')
  await v.context.close()
})

test('[WEB36] an approval the agent waits for: Approve / Deny for an Editor (the answer is patched), disabled with the reason for a Viewer', async ({ browser }) => {
  const path = await newThread('Approve')
  // The engine's write, as the server makes it (system): the approval fields of DESIGN.md.
  await server.running.nodes.patch(SYSTEM, path as NodePath, {
    PendingApproval: { Id: 'ap1', Tool: 'patch', Args: { path: 'Talk/Notes', patch: { Done: true } }, Summary: 'Mark Talk/Notes as done', RequestedAt: new Date().toISOString() },
  }, 'engine')
  const a = await openLoggedIn(browser, server, ann, path)
  const v = await openLoggedIn(browser, server, vic, path)
  for (const { page } of [a, v]) {
    await expect(badge(page)).toHaveText('Waiting for approval')
    await expect(tp(page).locator('.approval')).toContainText('Mark Talk/Notes as done')
    await expect(tp(page).locator('.approval code').first()).toHaveText('patch')
  }
  await expect(tp(v.page).locator('.approve')).toHaveAttribute('disabled', '')
  await expect(tp(v.page).locator('.deny')).toHaveAttribute('disabled', '')
  await expect(tp(v.page).locator('[data-reason="approve"]')).toContainText('Editors')
  await expect(tp(a.page).locator('[data-reason="approve"]')).toHaveCount(0)
  await sideBySide(a.page, v.page, 'approval')
  await tp(a.page).locator('.approve').click()
  await expect.poll(async () => (await getContent(server, ann, path)).ApprovalAnswer).toEqual({ Id: 'ap1', Decision: 'Approved' })
  await expect(tp(a.page).locator('[data-answered="Approved"]')).toBeVisible()
  expect(await refusedRows(a.page)).toEqual([])
  await a.context.close()
  await v.context.close()
})

test('[WEB37][THR32][WEB72] a delegated sub-thread is a live link with its state on the parent, whose hand-back names it and links to it; its page links back and says why it has no Delete of its own', async ({ browser }) => {
  const path = await newThread('Delegate')
  const a = await openLoggedIn(browser, server, ann, path)
  await send(a.page, '/delegate /sleep 1000')
  const link = tp(a.page).locator('weft-thread-link')
  await expect(link).toHaveCount(1)
  await expect(link.locator('a')).toHaveAttribute('data-state', 'answered')
  await expect(cells(a.page).locator('article[data-role="assistant"] [data-text]').first()).toHaveText('Delegated: You said: /sleep 1000')
  // [THR32] The hand-back says the sub-thread's name as the Sub-threads list does, never its path.
  const handBack = cells(a.page).locator('article[data-role="tool"]')
  await expect(handBack.locator('[data-text]')).toHaveText('“Delegated: /sleep 1000” has finished.')
  await expect(handBack.locator('[data-text]')).not.toContainText('_sub.')
  await expect(handBack.locator('a[data-about]')).toHaveText('Open “Delegated: /sleep 1000”')
  await a.page.setViewportSize({ width: 390, height: 844 })
  await a.page.screenshot({ path: 'test-results/threads-handback-390.png', animations: 'disabled' })
  await a.page.setViewportSize({ width: 1280, height: 800 })
  await handBack.locator('a[data-about]').click()
  await expect(a.page).toHaveURL(/_sub\./)
  await expect(tp(a.page).locator('.parent a')).toHaveText('Delegate')
  await expect(cells(a.page).nth(1).locator('[data-text]')).toHaveText('You said: /sleep 1000')
  // [WEB72] The server trashes a sub-thread only with its parent: no harsher Delete is offered, the reason is said.
  const actions = a.page.locator('weft-node-page weft-node-actions')
  await expect(actions.locator('[data-reason="sub-thread"]')).toContainText('deleting that thread')
  await expect(actions.getByRole('button')).toHaveCount(0)
  await a.page.screenshot({ path: 'test-results/threads-subthread-1280.png', animations: 'disabled' })
  // The parent still offers Move… and Delete (to the trash, with Undo).
  await tp(a.page).locator('.parent a').click()
  await expect(actions.getByRole('button', { name: 'Delete', exact: true })).toBeVisible()
  await expect(actions.getByRole('button', { name: 'Move…' })).toBeVisible()
  await a.context.close()
})

test('[WEB37][THR23] a sub-thread waiting on its question can be withdrawn from its page: it is Cancelled and the parent says so; a Viewer is not offered it', async ({ browser }) => {
  const path = await newThread('Ask')
  const a = await openLoggedIn(browser, server, ann, path)
  await send(a.page, '/delegate /ask which colour?')
  const link = tp(a.page).locator('weft-thread-link a')
  await expect(link).toHaveCount(1)
  await link.click()
  await expect(a.page).toHaveURL(/_sub\./)
  const sub = decodeURIComponent(new URL(a.page.url()).hash.replace(/^#\/n\//, ''))
  const v = await openLoggedIn(browser, server, vic, sub)
  await expect(tp(v.page).locator('[data-question]')).toContainText('which colour?')
  await expect(tp(v.page).locator('.state .badge')).toHaveText('Waiting for an answer')
  await expect(tp(a.page).locator('.state .badge')).toHaveText('Waiting for your answer')
  await expect(tp(v.page).getByRole('button', { name: 'Withdraw the question' })).toHaveCount(0)
  await expect(tp(a.page).locator('[data-question]')).toContainText('which colour?')
  await sideBySide(a.page, v.page, 'withdraw')
  await tp(a.page).getByRole('button', { name: 'Withdraw the question' }).click()
  for (const page of [a.page, v.page]) {
    await expect(tp(page).locator('.state .badge')).toHaveText('Cancelled')
    await expect(tp(page).locator('[data-question]')).toHaveCount(0)
  }
  await expect(tp(a.page).getByRole('button', { name: 'Withdraw the question' })).toHaveCount(0)
  await expect.poll(async () => {
    const messages = ((await getContent(server, ann, path)).Messages ?? []) as string[]
    const tool = messages.find((m) => m.includes('/_t.'))
    return tool ? (await getContent(server, ann, tool)).Text : null
  }).toBe('“Delegated: /ask which colour?” was cancelled.')
  await a.context.close()
  await v.context.close()
})

test('[WEB39] a thread as an Editor and as a Viewer: axe clean, no sideways scroll at 1280 and 390 px', async ({ browser }) => {
  const path = await newThread('Look')
  await api(server, ann, 'POST', `/api/nodes/${path}/messages`, { id: 'one', text: 'A rather long first message so that the cell has to wrap at 390 px: Averyveryverylongunbrokenwordthatgoesonandonandonforever' })
  await expect.poll(async () => (await getContent(server, ann, path)).Disposition).toBe('Completed')
  const a = await openLoggedIn(browser, server, ann, path)
  const v = await openLoggedIn(browser, server, vic, path)
  for (const { page } of [a, v]) await expect(cells(page).nth(1).locator('[data-text]')).toContainText('You said:')
  await sideBySide(a.page, v.page, 'look')
  for (const { page } of [a, v]) {
    for (const width of [1280, 390]) {
      await page.setViewportSize({ width, height: 844 })
      const axe = await analyzeAxe(page)
      const bad = axe.violations.filter((x) => x.impact === 'serious' || x.impact === 'critical')
      expect(bad.map((x) => `${x.id}: ${x.help} (${x.nodes.map((n) => n.target.join(' ')).join(', ')})`)).toEqual([])
    }
  }
  await a.context.close()
  await v.context.close()
})

test('[WEB70][WEB71] a long thread opens at its latest message with the Message box (and while a round runs, its state and Stop) in view, at 1280 and 390 px, Admin and Viewer; new messages are followed at the end, not after scrolling up', async ({ browser }) => {
  const path = await longThread('Long', 12)
  const a = await openLoggedIn(browser, server, ann, path)
  const v = await openLoggedIn(browser, server, vic, path)
  const who = new Map([[a.page, 'admin'], [v.page, 'viewer']])
  for (const [width, height] of [[1280, 800], [390, 844]] as const) {
    for (const page of [a.page, v.page]) {
      await page.setViewportSize({ width, height })
      await expect(cells(page)).toHaveCount(24)
      await expect(cells(page).last().locator('[data-text]')).toContainText('end of 12.')
      // Opened at the end: the latest answer, the state and (for the Editor) the box are all in view.
      await expect.poll(() => wholeInView(page, cells(page).last()), `${who.get(page)} ${width}: the last message in view`).toBe(true)
      await expect.poll(() => wholeInView(page, badge(page)), `${who.get(page)} ${width}: the state in view`).toBe(true)
      if (page === a.page) await expect.poll(() => wholeInView(page, composer(page)), `admin ${width}: the Message box in view`).toBe(true)
      else await expect(composer(page)).toHaveCount(0)
      await page.screenshot({ path: `test-results/threads-long-${who.get(page)}-${width}.png`, animations: 'disabled' })
    }
  }
  await a.page.setViewportSize({ width: 1280, height: 800 })

  // A round running: its state and Stop stay at the bottom of the viewport, however long the thread.
  await send(a.page, '/sleep 60000')
  await expect(badge(a.page)).toHaveText('Thinking…')
  await expect.poll(() => wholeInView(a.page, tp(a.page).locator('.stop'))).toBe(true)
  await expect.poll(() => wholeInView(a.page, cells(a.page).last())).toBe(true)
  await a.page.screenshot({ path: 'test-results/threads-long-admin-running-1280.png', animations: 'disabled' })
  // Scrolled up to the first message, the box, the state and Stop are still at the bottom of the viewport.
  for (const [width, height] of [[390, 844], [1280, 800]] as const) {
    await a.page.setViewportSize({ width, height })
    await a.page.evaluate(() => scrollTo(0, 0))
    await expect.poll(() => scrollY(a.page)).toBe(0)
    await expect(cells(a.page).first()).toBeInViewport()
    for (const part of [composer(a.page), badge(a.page), tp(a.page).locator('.stop')]) await expect.poll(() => wholeInView(a.page, part), `${width}: in view scrolled up`).toBe(true)
    await a.page.screenshot({ path: `test-results/threads-long-admin-running-top-${width}.png`, animations: 'disabled' })
  }
  await tp(a.page).locator('.stop').click()
  await expect(badge(a.page)).toHaveText('Cancelled')
  // [WEB71] The stopped round's cell says so, instead of an empty bubble.
  await expect(cells(a.page).last().locator('[data-stopped]')).toHaveText('Stopped before it answered.')
  await expect(cells(v.page).last().locator('[data-stopped]')).toHaveText('Stopped before it answered.')
  await v.page.screenshot({ path: 'test-results/threads-long-viewer-stopped-390.png', animations: 'disabled' })

  // Scrolled up to read: a new message does not pull the reader down.
  await a.page.evaluate(() => scrollTo(0, 0))
  await expect.poll(() => scrollY(a.page)).toBe(0)
  await api(server, bob, 'POST', `/api/nodes/${path}/messages`, { id: 'from-bob-1', text: 'Bob was here' })
  await expect(cells(a.page).last().locator('[data-text]')).toHaveText('You said: Bob was here')
  await a.page.evaluate(() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r))))
  expect(await scrollY(a.page)).toBe(0)
  // Back at the end: the next one is followed into view.
  await a.page.evaluate(() => scrollTo(0, document.scrollingElement!.scrollHeight))
  await api(server, bob, 'POST', `/api/nodes/${path}/messages`, { id: 'from-bob-2', text: 'Bob again' })
  await expect(cells(a.page).last().locator('[data-text]')).toHaveText('You said: Bob again')
  await expect.poll(() => wholeInView(a.page, cells(a.page).last())).toBe(true)
  await expect.poll(() => wholeInView(a.page, composer(a.page))).toBe(true)
  await a.context.close()
  await v.context.close()
})

test('[WEB75] a stopped round\'s cell from before [WEB71] (no Stopped mark) says it was stopped when the thread tells it (its last round, Cancelled); an older one keeps the neutral words', async ({ browser }) => {
  const path = await newThread('Stopped-long-ago')
  expect((await api(server, ann, 'POST', `/api/nodes/${path}/messages`, { id: 'ls1', text: '/sleep 60000' })).status).toBe(201)
  await expect.poll(async () => (await getContent(server, ann, path)).Status).toBe('Executing')
  expect((await api(server, ann, 'PATCH', `/api/nodes/${path}`, { RequestedStatus: 'Cancelled' })).status).toBe(200)
  await expect.poll(async () => (await getContent(server, ann, path)).Status).toBe('Cancelled')
  // The cell as the engine left it before [WEB71]: no Stopped mark.
  const cell = `${path}/_r.ls1` as NodePath
  await expect.poll(async () => (await getContent(server, ann, cell)).Stopped).toBe(true)
  await server.running.nodes.patch(SYSTEM, cell, { Stopped: null }, 'engine')
  expect((await getContent(server, ann, cell)).Stopped).toBeUndefined()
  const a = await openLoggedIn(browser, server, ann, path)
  const v = await openLoggedIn(browser, server, vic, path)
  for (const [width, height] of [[1280, 800], [390, 844]] as const) {
    for (const page of [a.page, v.page]) {
      await page.setViewportSize({ width, height })
      await expect(badge(page)).toHaveText('Cancelled')
      await expect(cells(page).last().locator('[data-stopped]')).toHaveText('Stopped before it answered.')
      await expect(cells(page).last().locator('[data-ended]')).toHaveCount(0)
    }
    await v.page.screenshot({ path: `test-results/threads-legacy-stopped-viewer-${width}.png`, animations: 'disabled' })
  }
  // A later round answers: the thread no longer tells how that older one ended, so it reads neutrally.
  await send(a.page, 'hello again')
  await expect(cells(a.page).last().locator('[data-text]')).toHaveText('You said: hello again')
  const older = tp(a.page).locator(`[data-cell="${cell}"]`)
  await expect(older.locator('[data-ended]')).toHaveText('No answer.')
  await expect(older.locator('[data-stopped]')).toHaveCount(0)
  await a.context.close()
  await v.context.close()
})
