import { mkdir } from 'node:fs/promises'
import { expect, test, type Page } from '@playwright/test'
import { adminAndViewerOn, api, getContent, grant, openLoggedIn, putNode, signUp, startE2eServer, syncStatus, type E2eServer, type TestUser } from './fixtures.js'

/**
 * Issue 16 "Home": a landing page (spaces, recent nodes, runs, pending invites), the profile as
 * its own page, nothing offered that the server refuses, an Operations entry, and a Code node
 * that starts from the script API's template.
 */
let server: E2eServer
let ann: TestUser
let vic: TestUser

test.beforeAll(async () => {
  server = await startE2eServer()
  ;({ ann, vic } = await adminAndViewerOn(server, 'Lab', { Notes: { Body: 'a document', Tags: ['planning', 'q3'] } }))
  await putNode(server, ann, 'Lab/Quick', 'Code', { Language: 'javascript', IsExecutable: true, Description: 'Says hello', Source: 'Log.info("quick"); return 1' }, 'Quick')
  await api(server, ann, 'PATCH', '/api/nodes/Lab/Notes', { See: { $ref: 'Lab/Quick' } })
  expect((await api(server, ann, 'POST', '/api/spaces/Lab/invites', { email: 'zoe@example.com', role: 'Viewer', pin: true })).status).toBe(201)
  await mkdir('test-results', { recursive: true })
})

test.afterAll(async () => {
  await server?.dispose()
})

/** Console errors of a page (a 404 probe, an exception) from now on. */
function consoleErrors(page: Page): string[] {
  const errors: string[] = []
  page.on('console', (m) => {
    if (m.type() === 'error') errors.push(m.text())
  })
  page.on('pageerror', (e) => errors.push(e.message))
  return errors
}

async function runStatus(user: TestUser, path: string): Promise<string | undefined> {
  return (await getContent(server, user, path)).Status as string | undefined
}

test('[WEB14] the landing page is a home: your spaces, recently opened nodes, your runs with their status, pending invites; the profile is its own page', async ({ browser }) => {
  const run = await api<{ path: string }>(server, vic, 'POST', '/api/nodes/Lab/Quick/run', {})
  expect(run.status).toBe(201)
  await expect.poll(() => runStatus(vic, run.body.path), { timeout: 30_000 }).toBe('Succeeded')

  const v = await openLoggedIn(browser, server, vic, 'Lab/Notes')
  await v.page.goto('/')
  const home = v.page.locator('weft-home-page')
  await expect(home.locator('h1')).toHaveText('Welcome, Vic')
  await expect(home.locator('[data-home="spaces"] a')).toHaveText(['Lab'])
  await expect(home.locator('[data-home="recent"] a').first()).toHaveText('Notes')
  const runRow = home.locator('[data-home="runs"] weft-run-row')
  await expect(runRow).toHaveCount(1)
  await expect(runRow.locator('a.row[data-status="Succeeded"]')).toContainText('Succeeded')
  await expect(home.locator('[data-home="invites"] li')).toContainText('zoe@example.com')
  await expect(home.locator('[data-home="invites"] li')).toContainText('Waiting for sign-up')
  await v.page.screenshot({ path: 'test-results/home-viewer-1280.png', fullPage: true })

  // The profile: Email is the system's (read-only, no ✕), the profile is never deleted.
  await home.getByRole('link', { name: 'Your profile' }).click()
  await expect(v.page).toHaveURL(new RegExp(`#/n/${vic.userId}$`))
  const page = v.page.locator('weft-node-page')
  await expect(page.locator('h1')).toHaveText('Vic')
  await expect(page.getByLabel('Email', { exact: true })).toHaveAttribute('readonly', '')
  await expect(page.getByRole('button', { name: 'Remove field Email' })).toHaveCount(0)
  // [WEB61] [WEB62] Keys read as words; the person's name is the heading (its Rename writes
  // FullName), not a second field beside it.
  await expect(page.getByRole('button', { name: 'Remove field Pinned paths' })).toHaveCount(1)
  await expect(page.getByText('PinnedPaths')).toHaveCount(0)
  await expect(page.getByLabel('FullName', { exact: true })).toHaveCount(0)
  await expect(page.getByRole('button', { name: 'Rename Vic' })).toBeVisible()
  await expect(page.getByRole('button', { name: 'Delete node' })).toHaveCount(0)
  await v.page.screenshot({ path: 'test-results/profile-viewer-1280.png', fullPage: true })
  await v.context.close()
})

test('[WEB14] [WEB54] someone with no space yet is told no invites wait (not "Loading…" for ever) and makes her first space from the home; a node deleted since leaves "Recently opened", in both windows', async ({ browser }) => {
  const carol = await signUp(server, 'Carol')
  const c = await openLoggedIn(browser, server, carol)
  await c.page.goto('/')
  const home = c.page.locator('weft-home-page')
  await expect(home.locator('h1')).toHaveText('Welcome, Carol')
  await expect(home.getByText('No invites waiting.')).toBeVisible()
  // [WEB54] Each empty part says what would be there, naming only controls that exist; the first
  // space is made right here (at 390 px the navigation's form is behind a button).
  await expect(home.locator('[data-home="runs"]')).toContainText('Your runs')
  await expect(home.locator('[data-home="runs"]')).toContainText('None yet.')
  await expect(home.locator('weft-thread-list')).toContainText('choose Thread as its type and press Create')
  await c.page.setViewportSize({ width: 390, height: 844 })
  await home.getByLabel('Name your first space').fill('Jardín')
  await home.getByRole('button', { name: 'Create space' }).click()
  await expect(c.page.locator('weft-node-page h1')).toHaveText('Jardín')
  // Her space's invite form: visible labels, the least role chosen unless she picks more.
  const invite = c.page.locator('weft-members-panel').getByRole('form', { name: 'Invite by email' })
  await expect(invite.getByText('Email', { exact: true })).toBeVisible()
  await expect(invite.getByLabel('Role')).toHaveValue('Viewer')
  await expect(invite.getByLabel('Role').locator('option:checked')).toHaveText('Viewer · reads, runs scripts')
  // [WEB54] A node made here stays listed here, and the note that says so opens it.
  const form = c.page.locator('weft-node-page').getByRole('form', { name: 'New child node' })
  await form.getByLabel('Name', { exact: true }).fill('Semillas')
  await form.getByRole('button', { name: 'Create' }).click()
  await expect(c.page.locator('weft-node-page .children').getByRole('link', { name: 'Semillas' })).toBeVisible()
  await expect(c.page.locator('weft-toast')).toContainText('Created “Semillas”.')
  await c.page.locator('weft-toast').getByRole('button', { name: 'Open' }).click()
  await expect(c.page.locator('weft-node-page h1')).toHaveText('Semillas')
  expect(await c.page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(390)
  await c.page.screenshot({ path: 'test-results/first-space-390.png', fullPage: true })
  await c.context.close()

  await putNode(server, ann, 'Lab/Scratch', 'Document', { Body: 'soon gone' }, 'Scratch')
  const v = await openLoggedIn(browser, server, vic, 'Lab/Scratch')
  await expect(v.page.locator('weft-node-page h1')).toHaveText('Scratch')
  await v.page.goto('/')
  await expect(v.page.locator('weft-home-page [data-home="recent"] a').first()).toHaveText('Scratch')
  expect((await api(server, ann, 'POST', '/api/nodes/Lab/Scratch/trash', {})).status).toBe(200)
  // The Viewer on its page is told it was deleted, with the way back (not a "moved" link into a trash he cannot see).
  await v.page.goto('/#/n/Lab/Scratch')
  const notice = v.page.locator('weft-node-page [data-deleted]')
  await expect(notice).toContainText('This node was deleted')
  await expect(v.page.locator('weft-node-page h1')).toHaveCount(0)
  await notice.getByRole('link', { name: 'Back to the space' }).click()
  await expect(v.page).toHaveURL(/#\/n\/Lab$/)
  await v.page.goto('/')
  await expect(v.page.locator('weft-home-page [data-home="recent"]')).not.toContainText('Scratch')
  await expect(v.page.locator('weft-home-page [data-home="recent"] a').first()).toHaveText('Lab')
  await v.context.close()
})

test('[WEB138] an Admin opening a space is never told that only Admins invite while the room has not yet told her rights', async ({ browser }) => {
  const a = await openLoggedIn(browser, server, ann, ann.userId, {
    // Every frame, whether the members panel (in whichever shadow root) says it.
    beforeOpen: (context) =>
      context.addInitScript(() => {
        const w = window as unknown as { sawOnlyAdmins: boolean }
        w.sawOnlyAdmins = false
        const find = (root: Document | ShadowRoot): Element | null => {
          const here = root.querySelector('weft-members-panel')
          if (here) return here
          for (const el of root.querySelectorAll('*')) {
            const inner = el.shadowRoot ? find(el.shadowRoot) : null
            if (inner) return inner
          }
          return null
        }
        const look = () => {
          if (find(document)?.shadowRoot?.textContent?.includes("Only the space's Admins invite people.")) w.sawOnlyAdmins = true
          requestAnimationFrame(look)
        }
        requestAnimationFrame(look)
      }),
  })
  await a.page.goto('/#/n/Lab')
  const members = a.page.locator('weft-members-panel')
  await expect(members.getByRole('form', { name: 'Invite by email' })).toBeVisible()
  await expect(members.getByRole('table', { name: 'Members' })).toContainText('Vic')
  expect(await a.page.evaluate(() => (window as unknown as { sawOnlyAdmins: boolean }).sawOnlyAdmins)).toBe(false)
  await a.context.close()
})

test('[WEB15] nothing offered that the server refuses: no Invite form for a Viewer, invites in words, a Code node hides its check and LastActivityPath, a run has no inputs', async ({ browser }) => {
  const v = await openLoggedIn(browser, server, vic, 'Lab')
  const members = v.page.locator('weft-members-panel')
  await expect(members.getByRole('table', { name: 'Members' })).toContainText('Ann')
  await expect(members.getByRole('form', { name: 'Invite by email' })).toHaveCount(0)
  await expect(members).toContainText("Only the space's Admins invite people.")
  const invite = members.getByRole('table', { name: 'Invites' }).locator('tr', { hasText: 'zoe@example.com' })
  await expect(invite).toContainText('Waiting for sign-up')
  await expect(invite).not.toContainText('Pending')
  await expect(invite.getByRole('button', { name: 'Revoke' })).toHaveCount(0)
  await v.context.close()

  // The Admin is offered both.
  const a = await openLoggedIn(browser, server, ann, 'Lab')
  await expect(a.page.locator('weft-members-panel').getByRole('form', { name: 'Invite by email' })).toBeVisible()
  await expect(a.page.locator('weft-members-panel').getByRole('table', { name: 'Invites' }).getByRole('button', { name: 'Revoke' })).toHaveCount(1)

  // A Code node that has run: its syntax check (_Check) is not a child, LastActivityPath no field.
  const run = await api<{ path: string }>(server, ann, 'POST', '/api/nodes/Lab/Quick/run', {})
  await expect.poll(async () => (await getContent(server, ann, 'Lab/Quick')).LastActivityPath).toBe(run.body.path)
  await a.page.goto('/#/n/Lab/Quick')
  const code = a.page.locator('weft-node-page')
  await expect(code.locator('[data-field="Description"]')).toBeVisible()
  await expect(code.locator('[data-field="LastActivityPath"]')).toHaveCount(0)
  await expect(code.locator('section[aria-label="Children"] a')).toHaveCount(0)
  await expect(code.locator('section[aria-label="Children"]')).not.toContainText('Check')

  // A run's page: Status, Start, End, CreatedBy are text, never inputs, and nothing has a ✕.
  await expect.poll(() => runStatus(ann, run.body.path), { timeout: 30_000 }).toBe('Succeeded')
  await a.page.goto(`/#/n/${run.body.path}`)
  const runPage = a.page.locator('weft-node-page')
  await expect(runPage.locator('weft-activity-panel')).toContainText('Succeeded')
  // No field inputs (the log's search box is not a field).
  await expect(runPage.locator('input:not([type=search]), textarea')).toHaveCount(0)
  await expect(runPage.getByRole('button', { name: /^Remove field/ })).toHaveCount(0)
  await a.context.close()
})

test('[WEB16] a Viewer reads a list as chips and a link as the linked node\'s name, not raw JSON', async ({ browser }) => {
  const v = await openLoggedIn(browser, server, vic, 'Lab/Notes')
  const page = v.page.locator('weft-node-page')
  await expect(page.locator('[data-field="Tags"] [data-chip] .text')).toHaveText(['planning', 'q3'])
  await expect(page.locator('[data-field="Tags"]')).not.toContainText('[')
  const link = page.locator('[data-field="See"]').getByRole('link')
  await expect(link).toHaveText('Quick')
  await expect(page.locator('[data-field="See"]')).not.toContainText('$ref')
  await link.click()
  await expect(v.page).toHaveURL(/#\/n\/Lab\/Quick$/)
  await v.context.close()
})

test('[WEB18] Operations in the navigation lists the built-in and shared operations with their descriptions and one Run button each', async ({ browser }) => {
  const v = await openLoggedIn(browser, server, vic, 'Lab')
  await v.page.locator('weft-nav-tree').getByRole('treeitem', { name: 'Operations' }).click()
  await expect(v.page).toHaveURL(/#\/operations$/)
  const ops = v.page.locator('weft-operations-page')
  const builtIn = ops.locator('[data-operations="built-in"] > li')
  await expect(builtIn).toHaveCount(3)
  for (const name of ['ExportJson', 'ExportMarkdown', 'ImportJson']) {
    const op = ops.locator(`li[data-operation="Admin/Operations/${name}"]`)
    await expect(op.getByRole('link', { name })).toBeVisible()
    await expect(op.locator('.desc')).not.toBeEmpty()
    await expect(op.getByRole('button', { name: `Run ${name}` })).toHaveCount(1)
  }
  const quick = ops.locator('[data-operations="shared"] li[data-operation="Lab/Quick"]')
  await expect(quick).toContainText('Says hello')
  await v.page.screenshot({ path: 'test-results/operations-viewer-1280.png', fullPage: true })
  // No required input: Run starts it and opens the run.
  await quick.getByRole('button', { name: 'Run Quick' }).click()
  await expect(v.page).toHaveURL(/#\/n\/Lab\/_Activity\//)
  await expect(v.page.locator('weft-activity-panel')).toContainText('Succeeded', { timeout: 30_000 })
  // A required input with no default: Run opens the operation's form.
  await v.page.goto('/#/operations')
  await ops.getByRole('button', { name: 'Run ExportJson' }).click()
  await expect(v.page).toHaveURL(/#\/n\/Admin\/Operations\/ExportJson$/)
  // [WEB47] Before a run is made, its page says who will see it: a built-in operation's runs stay home.
  await expect(v.page.locator('weft-code-page .who-sees')).toHaveText('Your runs are kept in your home: only you see them.')
  // [WEB54] A reader of an operation meets what it does and its run first; the script is folded.
  const code = v.page.locator('weft-code-page')
  await expect(v.page.locator('weft-node-page p.description')).toHaveText('Export a subtree as a JSON bundle, to download or to import elsewhere.')
  await expect(code.locator('details.source')).not.toHaveAttribute('open')
  await expect(v.page.locator('weft-node-page details.setup')).not.toHaveAttribute('open')
  // [WEB54] [ACT22] A Viewer of Lab may not export it: said in words before Start, which is not offered.
  await code.getByRole('button', { name: 'New run…' }).click()
  const panel = v.page.locator('weft-code-page weft-activity-panel')
  // The node is chosen by its name from a list.
  await panel.getByRole('button', { name: 'Choose a node…' }).click()
  // With nothing typed, the places nearest the top come first (a space, not the operation itself).
  await expect(panel.getByRole('option').first().locator('button')).toHaveAttribute('data-pick', /^[^/]+$/)
  await panel.getByRole('combobox', { name: 'Find a node by name' }).fill('Lab')
  await panel.getByRole('option').locator('button[data-pick="Lab"]').click()
  await expect(panel.locator('#in-Root')).toHaveValue('Lab')
  await expect(panel.locator('[data-reason="requires"]')).toHaveText(
    'Subtree to export: your role at “Lab” does not include Export, which this needs there (Editors and Admins have it). Ask an Admin of “Lab”, or choose a node of your own.',
  )
  await expect(panel.locator('.start-run')).toHaveAttribute('disabled')
  await v.page.screenshot({ path: 'test-results/export-refused-viewer-1280.png', fullPage: true })
  // Her own home she may export: nothing said against it, Start offered.
  await panel.locator('#in-Root').fill(vic.userId)
  await panel.locator('#in-Root').press('Tab')
  await expect(panel.locator('[data-reason="requires"]')).toHaveCount(0)
  await expect(panel.locator('.start-run')).not.toHaveAttribute('disabled')
  // A path nobody can read is said to be one.
  await panel.locator('#in-Root').fill('Nowhere')
  await panel.locator('#in-Root').press('Tab')
  await expect(panel.locator('[data-reason="requires"]')).toHaveText('Subtree to export: no node you can read is at “Nowhere”.')
  // A space's own code: its runs are the space's, and the page says so by the space's name.
  await v.page.goto('/#/n/Lab/Quick')
  await expect(v.page.locator('weft-code-page .who-sees')).toContainText('Runs are kept in Lab: everyone who can read there may see each run')
  await v.page.setViewportSize({ width: 390, height: 844 })
  await v.page.locator('weft-code-page .who-sees').scrollIntoViewIfNeeded()
  await expect.poll(() => v.page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(390)
  await v.page.screenshot({ path: 'test-results/code-who-sees-viewer-390.png' })
  await v.context.close()
})

test('[WEB54] the Requires verdict follows a role change, and a server that cannot answer is not asked again in a loop', async ({ browser }) => {
  const wes = await signUp(server, 'Wes')
  await grant(server, ann, 'Lab', wes.userId, 'Viewer')
  const w = await openLoggedIn(browser, server, wes, 'Admin/Operations/ExportJson')
  const asked: string[] = []
  w.page.on('request', (r) => {
    if (r.url().includes('/api/permissions/')) asked.push(decodeURIComponent(r.url().split('/api/permissions/')[1]!))
  })
  await w.page.locator('weft-code-page').getByRole('button', { name: 'New run…' }).click()
  const panel = w.page.locator('weft-code-page weft-activity-panel')
  const root = panel.locator('#in-Root')
  await root.fill('Lab')
  await root.press('Tab')
  await expect(panel.locator('[data-reason="requires"]')).toContainText('does not include Export')
  await expect(panel.locator('.start-run')).toHaveAttribute('disabled')
  // Raised to Editor: the refusal goes (the change feed tells of the assignment), Start is offered.
  await grant(server, ann, 'Lab', wes.userId, 'Editor')
  await expect(panel.locator('[data-reason="requires"]')).toHaveCount(0, { timeout: 30_000 })
  await expect(panel.locator('.start-run')).not.toHaveAttribute('disabled')
  // The server failing: not judged (the server decides on Start), and asked once, not in a loop.
  await w.context.route('**/api/permissions/**', (route) => route.fulfill({ status: 503, contentType: 'application/json', body: '{"error":{"code":"unavailable","message":"down"}}' }))
  await root.fill('Lab/Notes')
  await root.press('Tab')
  await expect(syncStatus(w.page)).toHaveText(/All changes synced/)
  await expect.poll(() => asked.filter((p) => p === 'Lab/Notes').length).toBe(1)
  await expect(panel.locator('[data-reason="requires"]')).toHaveCount(0)
  await expect(panel.locator('.start-run')).not.toHaveAttribute('disabled')
  // Renders since (a second input change) ask nothing more about it.
  await root.fill('Lab/Notes ')
  await root.fill('Lab/Notes')
  await root.press('Tab')
  await expect(syncStatus(w.page)).toHaveText(/All changes synced/)
  expect(asked.filter((p) => p === 'Lab/Notes')).toHaveLength(1)
  await w.context.close()
})

test('[WEB19] a Code node created in the app starts from the commented script API template, which runs; creating logs no console error (no 404 probe)', async ({ browser }) => {
  const a = await openLoggedIn(browser, server, ann, 'Lab')
  const errors = consoleErrors(a.page)
  const form = a.page.locator('weft-node-page').getByRole('form', { name: 'New child node' })
  await form.getByLabel('Name').fill('Plan')
  await form.getByRole('button', { name: 'Create' }).click()
  await expect(a.page.locator('weft-node-page section[aria-label="Children"]').getByRole('link', { name: 'Plan' })).toBeVisible()
  await form.getByLabel('Name').fill('Script')
  await form.getByLabel('Type').selectOption('Code')
  await form.getByRole('button', { name: 'Create' }).click()
  const script = a.page.locator('weft-node-page section[aria-label="Children"]').getByRole('link', { name: 'Script' })
  await expect(script).toBeVisible()
  await script.click()
  await expect(a.page.locator('weft-code-page .cm-content')).toContainText('// A script runs on the server')
  await expect(a.page.locator('weft-code-page .cm-content')).toContainText('Mesh.query')
  const content = await getContent(server, ann, 'Lab/Script')
  expect(content).toMatchObject({ Language: 'javascript', IsExecutable: true })
  const run = await api<{ path: string }>(server, ann, 'POST', '/api/nodes/Lab/Script/run', {})
  await expect.poll(() => runStatus(ann, run.body.path), { timeout: 30_000 }).toBe('Succeeded')
  expect(errors).toEqual([])
  await a.context.close()
})

test('[WEB19] a name typed into New child node while the previous create is still answering is kept (the form is cleared as it is submitted, not when the answer lands)', async ({ browser }) => {
  const a = await openLoggedIn(browser, server, ann, 'Lab')
  // The create's answer is held back; the change feed still tells the page of the new child.
  let release: () => void = () => {}
  const held = new Promise<void>((resolve) => (release = resolve))
  await a.page.route('**/api/nodes/Lab/Drafts', async (route) => {
    if (route.request().method() !== 'PUT') return route.fallback()
    const response = await route.fetch()
    await held
    await route.fulfill({ response })
  })
  const form = a.page.locator('weft-node-page').getByRole('form', { name: 'New child node' })
  await form.getByLabel('Name', { exact: true }).fill('Drafts')
  await form.getByRole('button', { name: 'Create' }).click()
  await expect(a.page.locator('weft-node-page section[aria-label="Children"]').getByRole('link', { name: 'Drafts' })).toBeVisible()
  await form.getByLabel('Name', { exact: true }).fill('Minutes')
  await form.getByLabel('Type').selectOption('Code')
  release()
  await expect(a.page.locator('weft-toast')).toContainText('Created “Drafts”.')
  await expect(form.getByLabel('Name', { exact: true })).toHaveValue('Minutes')
  await expect(form.getByLabel('Type')).toHaveValue('Code')
  await a.context.close()
})

test('[WEB17] keyboard reachable: Tab goes from the navigation to an operation\'s Run button, and Enter runs it', async ({ browser }) => {
  const v = await openLoggedIn(browser, server, vic, 'Lab')
  await v.page.goto('/#/operations')
  await expect(v.page.locator('weft-operations-page li[data-operation="Lab/Quick"]')).toBeVisible()
  /** The text of the focused control, through shadow roots (a library button's label is its light DOM). */
  const focused = () =>
    v.page.evaluate(() => {
      let el: Element | null = document.activeElement
      let label = ''
      while (el) {
        if (el.tagName === 'WA-BUTTON' || el.getAttribute('role') === 'treeitem' || el.tagName === 'A') label = (el.textContent ?? '').replace(/\s+/g, ' ').trim()
        el = el.shadowRoot?.activeElement ?? null
      }
      return label
    })
  const seen: string[] = []
  for (let i = 0; i < 40 && seen.at(-1) !== 'Run Quick'; i++) {
    await v.page.keyboard.press('Tab')
    seen.push(await focused())
  }
  // The navigation tree is one tab stop (arrow keys move inside it): the open page's item.
  expect(seen).toContain('Operations')
  expect(seen.at(-1)).toBe('Run Quick')
  await v.page.keyboard.press('Enter')
  await expect(v.page).toHaveURL(/#\/n\/Lab\/_Activity\//)
  await v.context.close()
})
