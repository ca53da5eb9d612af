import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import AxeBuilder from '@axe-core/playwright'
import { expect, type Browser, type BrowserContext, type Page } from '@playwright/test'
import { startServer } from '../../sync-server/server.js'
import { TEST_SCRYPT_N } from '../helpers/test-server.js'

type Running = Awaited<ReturnType<typeof startServer>>

/**
 * A real sync server for one test file: port 0, a fresh DATA_DIR, serving the built dist/.
 * `restart()` stops it and starts it again on the same port and data directory, which is what
 * a deploy looks like to a connected client.
 */
export interface E2eServer {
  readonly url: string
  readonly port: number
  readonly dataDir: string
  readonly running: Running
  stop(): Promise<void>
  start(): Promise<void>
  restart(): Promise<void>
  /** Stops the server and removes its data directory. */
  dispose(): Promise<void>
}

/** `config`: settings beyond the defaults (e.g. `stuckRunMs`), kept across restarts. */
export async function startE2eServer(config: Parameters<typeof startServer>[0] = {}): Promise<E2eServer> {
  const dataDir = await mkdtemp(join(tmpdir(), 'weft-e2e-'))
  const staticDir = resolve('dist')
  let running: Running | null = await startServer({ passwordScryptN: TEST_SCRYPT_N, ...config, port: 0, host: '127.0.0.1', dataDir, staticDir, logLevel: 'warn' })
  const port = running.port
  const url = `http://127.0.0.1:${port}`
  const server: E2eServer = {
    url,
    port,
    dataDir,
    get running() {
      if (!running) throw new Error('server is stopped')
      return running
    },
    async stop() {
      const r = running
      running = null
      await r?.close()
    },
    async start() {
      if (running) return
      // The port may linger for a moment after close; retry briefly.
      for (let attempt = 0; ; attempt++) {
        try {
          running = await startServer({ passwordScryptN: TEST_SCRYPT_N, ...config, port, host: '127.0.0.1', dataDir, staticDir, logLevel: 'warn' })
          return
        } catch (e) {
          if (attempt > 20) throw e
          await new Promise((r) => setTimeout(r, 100))
        }
      }
    },
    async restart() {
      await server.stop()
      await server.start()
    },
    async dispose() {
      await server.stop()
      await rm(dataDir, { recursive: true, force: true })
    },
  }
  return server
}

export interface TestUser {
  userId: string
  token: string
  email: string
  password: string
  name: string
}

let userCounter = 0

/** Signs a user up over HTTP (POST /api/auth/signup). */
export async function signUp(server: { url: string }, name: string, address?: string): Promise<TestUser> {
  const email = address ?? `${name.toLowerCase().replace(/[^a-z0-9]/g, '')}${++userCounter}${Date.now() % 100000}@example.com`
  const password = 'correct horse battery'
  const res = await fetch(`${server.url}/api/auth/signup`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ email, password, name }),
  })
  if (res.status !== 201) throw new Error(`signup failed: ${res.status} ${await res.text()}`)
  const body = (await res.json()) as { userId: string; token: string }
  return { ...body, email, password, name }
}

/** One HTTP call as `user`; returns status and parsed body. */
export async function api<T = unknown>(
  server: { url: string },
  user: TestUser | null,
  method: string,
  path: string,
  body?: unknown,
): Promise<{ status: number; body: T }> {
  const headers: Record<string, string> = {}
  if (user) headers.Authorization = `Bearer ${user.token}`
  if (body !== undefined) headers['Content-Type'] = method === 'PATCH' ? 'application/merge-patch+json' : 'application/json'
  const res = await fetch(server.url + path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) })
  const text = await res.text()
  return { status: res.status, body: (text ? JSON.parse(text) : null) as T }
}

/** Creates (PUT) a node and fails the test on anything but 200/201. */
export async function putNode(server: { url: string }, user: TestUser, path: string, nodeType: string, content: object, name?: string) {
  const res = await api(server, user, 'PUT', `/api/nodes/${path}`, { nodeType, name, content })
  if (res.status !== 200 && res.status !== 201) throw new Error(`PUT ${path}: ${res.status} ${JSON.stringify(res.body)}`)
  return res.body
}

/** Gives `subject` a role on `scope` ({scope}/_Access/{subject}_Access, as an Admin of scope). */
export async function grant(server: { url: string }, admin: TestUser, scope: string, subject: string, role: 'Viewer' | 'Commenter' | 'Editor' | 'Admin') {
  return putNode(server, admin, `${scope}/_Access/${subject}_Access`, 'AccessAssignment', { Subject: subject, Role: role })
}

/** Ann (Admin) and a second person with `role` on a new space holding `docs` (name → content). */
async function castOn(server: { url: string }, space: string, docs: Record<string, object>, other: string, role: 'Viewer' | 'Editor'): Promise<[TestUser, TestUser]> {
  const ann = await signUp(server, 'Ann')
  const second = await signUp(server, other)
  await putNode(server, ann, space, 'Space', {}, space)
  await grant(server, ann, space, second.userId, role)
  for (const [name, content] of Object.entries(docs)) await putNode(server, ann, `${space}/${name}`, 'Document', content, name)
  return [ann, second]
}

/** Ann (Admin) and Bob (Editor) on a new space holding `docs` (name → content): the usual cast. */
export async function twoEditorsOn(server: { url: string }, space: string, docs: Record<string, object>): Promise<{ ann: TestUser; bob: TestUser }> {
  const [ann, bob] = await castOn(server, space, docs, 'Bob', 'Editor')
  return { ann, bob }
}

/** Ann (Admin) and Vic (Viewer) on a new space holding `docs`: the cast of the role-aware tests. */
export async function adminAndViewerOn(server: { url: string }, space: string, docs: Record<string, object>): Promise<{ ann: TestUser; vic: TestUser }> {
  const [ann, vic] = await castOn(server, space, docs, 'Vic', 'Viewer')
  return { ann, vic }
}

export async function getContent(server: { url: string }, user: TestUser, path: string): Promise<Record<string, unknown>> {
  const res = await api<{ content: Record<string, unknown> }>(server, user, 'GET', `/api/nodes/${path}`)
  if (res.status !== 200) throw new Error(`GET ${path}: ${res.status}`)
  return res.body.content
}

/**
 * Puts `user`'s session where the app keeps it (localStorage `weft.session`) before the app's
 * first script runs in this context, once: what `storageState` does, without the extra page
 * Playwright opens and closes for it (about 0.3 s a context, most of a context's cost). Once
 * means once per context, across its pages and reloads: a session the app later drops (signed
 * out, refused) stays dropped, as with `storageState`.
 */
async function signInBeforeFirstScript(context: BrowserContext, server: { url: string }, user: TestUser): Promise<void> {
  const session = JSON.stringify({ userId: user.userId, token: user.token, name: user.name })
  await context.addInitScript(({ origin, session }) => {
    if (location.origin !== origin) return
    try {
      if (localStorage.getItem('weft.e2e.seeded') !== null) return
      localStorage.setItem('weft.e2e.seeded', '1')
      localStorage.setItem('weft.session', session)
    } catch {
      // A document without storage (about:blank, a sandboxed frame): nothing to sign in.
    }
  }, { origin: new URL(server.url).origin, session })
}

/**
 * A browser context signed in as `user` (the session the app keeps in localStorage), with the
 * app open at `path` (default: the user's home) and its component library loaded (what a person
 * sees a second after opening it: buttons are buttons). The service worker may not be in control
 * yet: a test that reloads offline waits for it (`waitForServiceWorker`). `beforeOpen` runs on
 * the context before the first page is opened (routes to hold a request).
 */
export async function openLoggedIn(
  browser: Browser,
  server: { url: string },
  user: TestUser,
  path?: string,
  options: { beforeOpen?: (context: BrowserContext) => Promise<unknown>; waitForUi?: boolean } = {},
): Promise<{ context: BrowserContext; page: Page }> {
  const context = await browser.newContext({ baseURL: server.url })
  await signInBeforeFirstScript(context, server, user)
  const page = await context.newPage()
  page.on('pageerror', (e) => console.log(`[${user.name} pageerror]`, e.message))
  if (process.env.WEFT_E2E_CONSOLE) page.on('console', (m) => console.log(`[${user.name} ${m.type()}]`, m.text()))
  await options.beforeOpen?.(context)
  await page.goto(`/#/n/${path ?? user.userId}`)
  await expect(page.locator('weft-sync-status [role=status]')).toBeVisible()
  if (options.waitForUi !== false) await page.waitForFunction(() => customElements.get('wa-button') !== undefined)
  return { context, page }
}

/** Resolves once a service worker controls the page (needed before testing offline reloads). */
export async function waitForServiceWorker(page: Page): Promise<void> {
  await page.evaluate(async () => {
    await navigator.serviceWorker.ready
    if (!navigator.serviceWorker.controller) {
      await new Promise<void>((resolve) => navigator.serviceWorker.addEventListener('controllerchange', () => resolve(), { once: true }))
    }
  })
}

/** The sync status element's `data-status` (offline / connecting / syncing / saved / final). */
export function syncStatus(page: Page) {
  return page.locator('weft-sync-status [role=status]')
}

/** The input bound to a content field on the open node page (by its label). */
export function field(page: Page, key: string) {
  return page.locator('weft-node-page').getByLabel(key, { exact: true })
}

/** Types a value into a field and commits it (change event) with Enter. */
export async function editField(page: Page, key: string, value: string): Promise<void> {
  const input = field(page, key)
  await input.fill(value)
  await input.press('Enter')
  // `change` fires on Enter for text inputs only after a blur in some cases: blur explicitly.
  await input.evaluate((el: HTMLElement) => el.blur())
}

/**
 * axe-core's findings on the page as it is now: one `axe.run` in the page ("legacy mode"). The
 * default runs `axe.runPartial` in every frame, then opens a blank page in the context, injects
 * axe there again and calls `axe.finishRun`: what that adds is cross-origin frames, and the app
 * has no frames. Same rules, same results (compared on every page of one-look), a third less
 * time per page.
 */
export function analyzeAxe(page: Page) {
  return new AxeBuilder({ page }).setLegacyMode().analyze()
}
