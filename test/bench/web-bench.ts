/**
 * Web client benchmarks, measured in Chromium via Playwright against the real server:
 *  - cold start to the child list rendered with 10,000 nodes in IndexedDB (offline, so the
 *    figure is the local-first path: service-worker shell + Dexie), and opening one node;
 *  - opening 1,000 documents from our one-database store vs y-indexeddb's database-per-doc;
 *  - 1,000 nodes edited offline, synced on reconnect over one socket;
 *  - a 10,000-line activity log opened in a fresh context, to its last line on screen.
 * Run alone: `npx tsx test/bench/web-bench.ts`.
 */
import { existsSync } from 'node:fs'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { pathToFileURL } from 'node:url'
import { chromium, type Browser, type BrowserContext, type Page } from '@playwright/test'
import { build } from 'vite'
import * as Y from 'yjs'
import { applyPatchToDoc } from '../../shared/merge-patch.js'
import { startServer } from '../../sync-server/server.js'
import type { WeftDb } from '../../web/store/db.js'

type Figures = Record<string, number | string>

export const GOALS = {
  coldStartListMedianMs: { op: '<', value: 300, unit: 'ms' },
  openNodeStoreMedianMs: { op: '<', value: 20, unit: 'ms' },
  open1000DocsSpeedupVsYIndexeddb: { op: '>=', value: 5, unit: '×' },
  offlineEdits1000SyncMs: { op: '<', value: 3000, unit: 'ms' },
  // Issue 11 names no figure ("still opens fast"): within 1.5× of a one-line log, side by side.
  open10kLineLogRatioTo1Line: { op: '<=', value: 1.5, unit: '×' },
} as const

/**
 * The browser's own address-bar popup, not part of any page: Chromium 156 (a full Chromium in
 * new headless mode) renders it as a WebUI (chrome://omnibox-popup.top-chrome, about 300
 * modules) in a renderer of its own, and redoes that work for every new window; each cold start
 * below opens one. Traced here it took ~150-360 ms of CPU per cold start beside the page's own
 * ~200-300 ms, on a 2-core machine. The figures measure the app, so it is switched off
 * (WEFT_BENCH_BROWSER_UI=1 keeps it, to compare with figures taken before: docs/BENCHMARKS.md).
 */
const BROWSER_UI_FEATURES = ['WebUIOmniboxPopup', 'WebUIOmniboxAimPopup']
/**
 * Playwright's own --disable-features (1.65). Chromium keeps one --disable-features switch (the
 * last), so ours must repeat Playwright's list or undo it.
 */
const PLAYWRIGHT_DISABLED_FEATURES = [
  'AvoidUnnecessaryBeforeUnloadCheckSync', 'DestroyProfileOnBrowserClose', 'HttpsUpgrades', 'HttpsFirstBalancedModeAutoEnable', 'LensOverlay', 'MediaRouter',
  'PaintHolding', 'ThirdPartyStoragePartitioning', 'AvoidCorsURLLoaderRestartOnRedirect', 'TcpPortRandomizationWin', 'OptimizationHints',
  'NetworkTimeServiceQuerying', 'AimEnabled', 'PreconnectToSearch',
]

const ROOT = resolve(import.meta.dirname, '../..')
/** Debian's whole Chromium as the figures so far were taken with, else its headless shell ([ensure-env.sh] installs that one). */
const CHROMIUM = ['/usr/bin/chromium', '/usr/lib/chromium/chromium-headless-shell'].find((p) => existsSync(p))
const N_NODES = 10_000
const N_DOCS = 1_000
const N_EDITS = 1_000

interface User {
  userId: string
  token: string
  name: string
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b)
  return s[Math.floor(s.length / 2)] ?? NaN
}

const round = (x: number, d = 1) => Number(x.toFixed(d))

async function signUp(url: string, name: string): Promise<User> {
  const email = `${name}-${Date.now()}-${Math.random().toString(36).slice(2, 8)}@example.com`
  const res = await fetch(`${url}/api/auth/signup`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ email, password: 'bench password 1', name }),
  })
  if (res.status !== 201) throw new Error(`signup: ${res.status} ${await res.text()}`)
  return { ...((await res.json()) as { userId: string; token: string }), name }
}

/** tsx (esbuild keepNames) wraps named functions inside page.evaluate callbacks in `__name`. */
async function withNameShim(context: BrowserContext): Promise<BrowserContext> {
  await context.addInitScript(() => {
    ;(globalThis as unknown as { __name: (f: unknown) => unknown }).__name = (f) => f
  })
  return context
}

async function newSignedInContext(browser: Browser, url: string, user: User): Promise<BrowserContext> {
  return withNameShim(await browser.newContext({
    baseURL: url,
    storageState: {
      cookies: [],
      origins: [{ origin: url, localStorage: [{ name: 'weft.session', value: JSON.stringify(user) }] }],
    },
  }))
}

async function openApp(context: BrowserContext, path: string): Promise<Page> {
  const page = await context.newPage()
  await page.goto(`/#/n/${path}`)
  await page.locator('weft-sync-status [role=status]').waitFor()
  return page
}

async function waitForMark(page: Page, name: string, timeoutMs = 15_000): Promise<number> {
  return page.evaluate(
    async ({ name, timeoutMs }) => {
      const end = performance.now() + timeoutMs
      for (;;) {
        const m = performance.getEntriesByName(name)[0]
        if (m) return m.startTime
        if (performance.now() > end) throw new Error(`mark ${name} never came`)
        await new Promise((r) => setTimeout(r, 2))
      }
    },
    { name, timeoutMs },
  )
}

/** 10,000 nodes in the local store (index rows + one doc state each), then cold starts offline. */
async function benchColdStart(browser: Browser, url: string, figures: Figures): Promise<void> {
  const user = await signUp(url, 'Cold')
  const context = await newSignedInContext(browser, url, user)
  let page = await openApp(context, user.userId)
  await page.evaluate(async () => {
    await navigator.serviceWorker.ready
    if (!navigator.serviceWorker.controller) await new Promise((r) => navigator.serviceWorker.addEventListener('controllerchange', r, { once: true }))
  })

  const t0 = performance.now()
  const CHUNK = 1000
  for (let start = 0; start < N_NODES; start += CHUNK) {
    const chunk = []
    for (let i = start; i < Math.min(N_NODES, start + CHUNK); i++) {
      const doc = new Y.Doc()
      applyPatchToDoc(doc, { Title: `Node ${i}`, Index: i, Tags: ['bench'], Body: `Body of node ${i}` })
      chunk.push({ i, state: Buffer.from(Y.encodeStateAsUpdate(doc)).toString('base64') })
    }
    await page.evaluate(
      async ({ userId, chunk }) => {
        const db = (globalThis as unknown as { __weft: { client: { store: { db: WeftDb } } } }).__weft.client.store.db
        const now = new Date().toISOString()
        const pad = (i: number) => String(i).padStart(5, '0')
        await db.transaction('rw', db.nodes, db.updates, async () => {
          await db.nodes.bulkPut(chunk.map(({ i }) => ({ path: `${userId}/n${pad(i)}`, parent: userId, nodeType: 'Document', name: `Node ${pad(i)}`, updatedAt: now, version: 0, pending: 0, refused: 0 })))
          await db.updates.bulkAdd(chunk.map(({ i, state }) => ({ path: `${userId}/n${pad(i)}`, update: Uint8Array.from(atob(state), (c) => c.charCodeAt(0)) })))
        })
      },
      { userId: user.userId, chunk },
    )
  }
  figures.seed10kNodesMs = round(performance.now() - t0, 0)
  console.log('[web-bench]', JSON.stringify(figures))

  // Offline: the start is served by the service worker and IndexedDB alone (and the server's
  // listing, which does not know these seeded nodes, cannot prune them).
  await context.setOffline(true)
  const starts: number[] = []
  for (let run = 0; run < 7; run++) {
    // A new page each time (a new document, no JS heap), after the previous one is gone.
    await page.close()
    page = await context.newPage()
    await page.goto(`/#/n/${user.userId}`)
    starts.push(await waitForMark(page, `weft:list-rendered:${user.userId}`))
    if (process.env.WEFT_BENCH_VERBOSE) {
      console.log(
        '[web-bench] cold start marks',
        await page.evaluate(() => {
          const nav = performance.getEntriesByType('navigation')[0] as PerformanceNavigationTiming
          const marks = Object.fromEntries(performance.getEntriesByType('mark').map((m) => [m.name.split(':').slice(0, 2).join(':'), Math.round(m.startTime)]))
          return { responseEnd: Math.round(nav.responseEnd), domInteractive: Math.round(nav.domInteractive), ...marks }
        }),
      )
    }
  }
  figures.coldStartListFirstMs = round(starts[0]!)
  figures.coldStartListMedianMs = round(median(starts.slice(1)))

  const storeOpens: number[] = []
  const pageOpens: number[] = []
  for (let k = 0; k < 15; k++) {
    const path = `${user.userId}/n${String(k * 613 + 7).padStart(5, '0')}`
    storeOpens.push(
      await page.evaluate(async (path) => {
        const w = (globalThis as unknown as { __weft: { client: { store: { loadDoc(p: string): Promise<{ getMap(n: string): { toJSON(): unknown } }> } } } }).__weft
        const t = performance.now()
        const doc = await w.client.store.loadDoc(path)
        doc.getMap('content').toJSON()
        return performance.now() - t
      }, path),
    )
    const before = await page.evaluate((path) => {
      const t = performance.now()
      location.hash = `#/n/${path}`
      return t
    }, path)
    pageOpens.push((await waitForMark(page, `weft:node-rendered:${path}`)) - before)
  }
  figures.openNodeStoreMedianMs = round(median(storeOpens), 2)
  figures.openNodePageMedianMs = round(median(pageOpens), 1)
  console.log('[web-bench]', JSON.stringify(figures))
  await context.close()
}

/** Our store vs y-indexeddb, opening the same 1,000 documents (5 updates each) cold. */
async function benchVsYIndexeddb(browser: Browser, url: string, figures: Figures): Promise<void> {
  const context = await withNameShim(await browser.newContext({ baseURL: url }))
  const page = await context.newPage()
  await page.goto('/web-bench.html')
  await page.waitForFunction(() => document.title === 'ready')
  const seeded = await page.evaluate((n) => window.weftBench.seed(n), N_DOCS)
  // Cold each time: a fresh page (no open databases, nothing cached in the JS heap).
  // sequential: one open after the other; best: ours in one transaction, y-indexeddb all
  // databases at once, each store with its own compaction policy (ours: one row per closed
  // node; y-indexeddb: trims past 500 updates); bestCompacted: y-indexeddb forced to one entry.
  for (const mode of ['sequential', 'best', 'bestCompacted'] as const) {
    await page.reload()
    await page.waitForFunction(() => document.title === 'ready')
    const r = await page.evaluate(({ n, mode }) => window.weftBench.openCold(n, mode), { n: N_DOCS, mode })
    const label = mode === 'best' ? '' : mode === 'sequential' ? 'Sequential' : 'VsCompacted'
    figures[`open1000Docs${label}OursMs`] = round(r.oursMs, 0)
    figures[`open1000Docs${label}YIndexeddbMs`] = round(r.yidbMs, 0)
    figures[`open1000Docs${label}SpeedupVsYIndexeddb`] = round(r.yidbMs / r.oursMs, 1)
  }
  figures.seed1000DocsOursMs = round(seeded.oursSeedMs, 0)
  figures.seed1000DocsYIndexeddbMs = round(seeded.yidbSeedMs, 0)
  console.log('[web-bench]', JSON.stringify(figures))
  await context.close()
}

/** 1,000 nodes edited offline; time from the network's return to every edit acknowledged. */
async function benchOfflineSync(browser: Browser, url: string, figures: Figures): Promise<void> {
  const user = await signUp(url, 'Sync')
  const paths = Array.from({ length: N_EDITS }, (_, i) => `${user.userId}/s${String(i).padStart(4, '0')}`)
  const t0 = performance.now()
  for (let start = 0; start < paths.length; start += 25) {
    await Promise.all(
      paths.slice(start, start + 25).map(async (path) => {
        const res = await fetch(`${url}/api/nodes/${path}`, {
          method: 'PUT',
          headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${user.token}` },
          body: JSON.stringify({ nodeType: 'Document', content: { Value: -1 } }),
        })
        if (res.status !== 201) throw new Error(`PUT ${path}: ${res.status}`)
      }),
    )
  }
  figures.create1000NodesHttpMs = round(performance.now() - t0, 0)

  const context = await newSignedInContext(browser, url, user)
  const page = await openApp(context, user.userId)
  await page.locator('weft-sync-status [data-status=saved]').waitFor()
  // The user had these nodes on the device before going offline (an edit to a node the client
  // never saw would be a concurrent write racing the server's value, not an edit of it).
  figures.prefetch1000NodesMs = round(
    await page.evaluate(async (paths) => {
      const w = (globalThis as unknown as { __weft: { client: { prefetch(p: string[]): Promise<void> } } }).__weft
      const t = performance.now()
      await w.client.prefetch(paths)
      return performance.now() - t
    }, paths),
    0,
  )
  console.log('[web-bench]', JSON.stringify(figures))
  await context.setOffline(true)
  await page.locator('weft-sync-status [data-status=offline]').waitFor()
  console.log('[web-bench]', JSON.stringify(figures))
  figures.offlineEdits1000ApplyMs = round(
    await page.evaluate(async (paths) => {
      const w = (globalThis as unknown as { __weft: { client: { patch(p: string, patch: object): Promise<void> } } }).__weft
      const t = performance.now()
      for (let i = 0; i < paths.length; i++) await w.client.patch(paths[i]!, { Value: i })
      return performance.now() - t
    }, paths),
    0,
  )
  let sockets = 0
  page.on('websocket', () => sockets++)
  await page.evaluate(() => {
    const g = globalThis as unknown as {
      __onlineAt?: number
      __timeline: Record<string, number>
      __weft: { client: { conn: { tap: ((d: string, f: { type: number }) => void) | null } } }
    }
    addEventListener('online', () => (g.__onlineAt = performance.now()), { once: true })
    g.__timeline = {}
    const names: Record<number, string> = { 0: 'join', 2: 'sync', 4: 'update', 5: 'ack', 6: 'refused', 8: 'joined' }
    g.__weft.client.conn.tap = (d, f) => {
      const key = `${d}:${names[f.type] ?? f.type}`
      const t = Math.round(performance.now() - (g.__onlineAt ?? 0))
      g.__timeline[`${key}:first`] ??= t
      g.__timeline[`${key}:last`] = t
      g.__timeline[`${key}:count`] = (g.__timeline[`${key}:count`] ?? 0) + 1
    }
  })
  await context.setOffline(false)
  const syncMs = await page.evaluate(async () => {
    const g = globalThis as unknown as { __onlineAt?: number; __weft: { client: { store: { totalPending(): Promise<number> } } } }
    const end = performance.now() + 60_000
    for (;;) {
      if (g.__onlineAt !== undefined && (await g.__weft.client.store.totalPending()) === 0) return performance.now() - g.__onlineAt
      if (performance.now() > end) throw new Error('offline edits did not sync within 60 s')
      await new Promise((r) => setTimeout(r, 5))
    }
  })
  figures.offlineEdits1000SyncMs = round(syncMs, 0)
  if (process.env.WEFT_BENCH_VERBOSE) console.log('[web-bench] sync timeline', await page.evaluate(() => (globalThis as unknown as { __timeline: unknown }).__timeline))
  figures.offlineEdits1000Sockets = sockets
  // The server has every edit.
  for (const i of [0, 1, 499, 998, 999]) {
    const res = await fetch(`${url}/api/nodes/${paths[i]}`, { headers: { Authorization: `Bearer ${user.token}` } })
    const node = (await res.json()) as { content: { Value: number } }
    if (node.content.Value !== i) throw new Error(`server lacks the edit of ${paths[i]}: ${JSON.stringify(node.content)}`)
  }
  await context.close()
}

/**
 * Issue 11: a 10,000-line activity log opens fast. Side by side, interleaved, each in a fresh
 * browser context (nothing cached): a run that logged 10,000 lines and one that logged one line,
 * from navigation to the last line on screen (the panel renders the tail, the rest behind "Show
 * earlier lines"). Most of either figure is the app's own first load in a fresh context; the
 * ratio is what the log's length adds.
 */
async function benchOpenLog(browser: Browser, url: string, figures: Figures): Promise<void> {
  const user = await signUp(url, 'logger')
  const headers = { 'Content-Type': 'application/json', Authorization: `Bearer ${user.token}` }
  const runOf = async (name: string, lines: number) => {
    const code = `${user.userId}/${name}`
    const source = `for (let i = 0; i < ${lines}; i++) Log.info("line " + i); return "done"`
    const put = await fetch(`${url}/api/nodes/${code}`, { method: 'PUT', headers, body: JSON.stringify({ nodeType: 'Code', content: { Language: 'javascript', IsExecutable: true, Source: source } }) })
    if (put.status !== 201 && put.status !== 200) throw new Error(`code: ${put.status}`)
    const started = await fetch(`${url}/api/nodes/${code}/run`, { method: 'POST', headers, body: '{}' })
    const { path } = (await started.json()) as { path: string }
    for (let i = 0; ; i++) {
      const node = (await (await fetch(`${url}/api/nodes/${path}`, { headers })).json()) as { content: { Status?: string } }
      if (node.content.Status === 'Succeeded') return path
      if (i > 300) throw new Error(`the ${lines}-line run did not finish: ${node.content.Status}`)
      await new Promise((r) => setTimeout(r, 100))
    }
  }
  const big = await runOf('chatty', 10_000)
  const small = await runOf('terse', 1)
  const open = async (path: string, last: string) => {
    const context = await newSignedInContext(browser, url, user)
    const page = await context.newPage()
    const t0 = Date.now()
    await page.goto(`/#/n/${path}`)
    await page.locator('weft-activity-panel ol li', { hasText: last }).waitFor({ timeout: 30_000 })
    const ms = Date.now() - t0
    await context.close()
    return ms
  }
  await open(small, 'line 0') // warm-up: the server's first bundle reads
  const bigs: number[] = []
  const smalls: number[] = []
  for (let i = 0; i < 5; i++) {
    bigs.push(await open(big, 'line 9999'))
    smalls.push(await open(small, 'line 0'))
  }
  figures.open10kLineLogMedianMs = round(median(bigs), 0)
  figures.open1LineLogMedianMs = round(median(smalls), 0)
  figures.open10kLineLogRatioTo1Line = round(median(bigs) / median(smalls), 2)
}

export async function benchWeb(): Promise<Figures> {
  const figures: Figures = {}
  await build({ configFile: join(ROOT, 'vite.config.ts'), logLevel: 'warn' })
  const benchDist = join(ROOT, '.tmp', 'web-bench-dist')
  await build({
    configFile: false,
    root: join(ROOT, 'test', 'bench'),
    logLevel: 'warn',
    build: { outDir: benchDist, emptyOutDir: true, target: 'es2022', rollupOptions: { input: join(ROOT, 'test', 'bench', 'web-bench.html') } },
  })
  const dataDir = await mkdtemp(join(tmpdir(), 'weft-web-bench-'))
  const benchDataDir = await mkdtemp(join(tmpdir(), 'weft-web-bench-page-'))
  const server = await startServer({ port: 0, host: '127.0.0.1', dataDir, staticDir: join(ROOT, 'dist'), logLevel: 'warn' })
  const pageServer = await startServer({ port: 0, host: '127.0.0.1', dataDir: benchDataDir, staticDir: benchDist, logLevel: 'warn' })
  const args = ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync']
  if (!process.env.WEFT_BENCH_BROWSER_UI) args.push(`--disable-features=${[...PLAYWRIGHT_DISABLED_FEATURES, ...BROWSER_UI_FEATURES].join(',')}`)
  const browser = await chromium.launch({ executablePath: CHROMIUM, args })
  figures.chromium = browser.version()
  try {
    // WEFT_BENCH_ONLY=cold|docs|sync runs one part (when tuning).
    const only = process.env.WEFT_BENCH_ONLY
    if (!only || only === 'cold') await benchColdStart(browser, server.url, figures)
    if (!only || only === 'docs') await benchVsYIndexeddb(browser, pageServer.url, figures)
    if (!only || only === 'sync') await benchOfflineSync(browser, server.url, figures)
    if (!only || only === 'log') await benchOpenLog(browser, server.url, figures)
  } finally {
    await browser.close()
    await server.close()
    await pageServer.close()
    await rm(dataDir, { recursive: true, force: true })
    await rm(benchDataDir, { recursive: true, force: true })
  }
  return figures
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  benchWeb().then(
    (f) => {
      console.log(JSON.stringify(f, null, 2))
      process.exit(0)
    },
    (e: unknown) => {
      console.error(e)
      process.exit(1)
    },
  )
}
