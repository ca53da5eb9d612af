/**
 * Elements the first screen does not need. A cold start renders one node's page and its list;
 * everything else is fetched the first time its element is rendered (`need(tag)` beside the
 * template that renders it) and upgrades in place: Lit keeps the properties a template set on
 * the element before its definition arrived. What this keeps out of the entry chunk that every
 * cold start parses and runs: zod (the subscription page's typed client), the run, code and
 * thread pages, the home, the other pages and the sign-in form.
 */
const LOADERS = {
  'weft-auth-page': () => import('./auth-page.js'),
  'weft-home-page': () => import('./home-page.js'),
  'weft-trash-page': () => import('./trash-page.js'),
  'weft-contextual-page': () => import('./contextual-page.js'),
  'weft-my-consumers-page': () => import('./my-consumers-page.js'),
  'weft-operations-page': () => import('./operations-page.js'),
  'weft-operator-page': () => import('./operator-page.js'),
  'weft-thread-page': () => import('./thread-page.js'),
  'weft-members-panel': () => import('./members-panel.js'),
  'weft-group-invite-dialog': () => import('./group-invite-dialog.js'),
  'weft-code-page': () => import('./code-page.js'),
  'weft-activity-panel': () => import('./activity-panel.js'),
  'weft-activity-strip': () => import('./activity-strip.js'),
} satisfies Record<string, () => Promise<unknown>>

export type LazyTag = keyof typeof LOADERS

const asked = new Set<LazyTag>()

let firstScreenShown: () => void = () => {}
const firstScreen = new Promise<void>((resolve) => (firstScreenShown = resolve))

/** Said by the page once its first screen is rendered (a node page: its fields and its list). */
export function shownFirstScreen(): void {
  firstScreenShown()
}

/**
 * Runs `work` once the first screen is up (or `timeoutMs` after it is asked, on a page that never
 * says so): what frames the first screen (the navigation's items) reads and renders after it.
 */
export function afterFirstScreen(work: () => void, timeoutMs = 250): void {
  void Promise.race([firstScreen, new Promise((resolve) => setTimeout(resolve, timeoutMs))]).then(work)
}

/**
 * Runs `work` once the first screen is up and the page is idle (or `timeoutMs` after each, on a
 * page that never says so): what is not on the first screen does not compete with it for the
 * main thread of a cold start.
 */
export function whenIdle(work: () => void, timeoutMs = 1000): void {
  const idle = () => {
    if (typeof requestIdleCallback === 'function') requestIdleCallback(() => work(), { timeout: timeoutMs })
    else setTimeout(work, 0)
  }
  afterFirstScreen(idle, timeoutMs)
}

/** The pause before a failed module load is tried again while the browser says it is online: 1 s, doubling, at most 30 s. */
export const RETRY_ONLINE_MS = { first: 1000, most: 30_000 } as const

/**
 * Runs `load` (a module's dynamic import); a load that fails — the network went away before the
 * chunk came, on a first visit no service worker serves yet — is tried again when the browser is
 * back online, so a page opened just before the connection dropped still gets its buttons and its
 * offline shell once it returns, without a reload. A failure seen while the browser says it is
 * online (the connection came back before the failure reached the page, or the server failed the
 * fetch: a restart) is tried again after a pause, doubling: waiting for an `online` event then
 * waited for one that had already come, and the page never got the module.
 */
export function loadOrRetryOnline(load: () => Promise<unknown>, onFailed: () => void = () => {}, attempt = 0): void {
  load().catch((e: unknown) => {
    onFailed()
    const again = () => loadOrRetryOnline(load, onFailed, attempt + 1)
    if (navigator.onLine) {
      const ms = Math.min(RETRY_ONLINE_MS.most, RETRY_ONLINE_MS.first * 2 ** attempt)
      console.warn(`[weft] a module did not load; trying again in ${ms / 1000} s`, e)
      setTimeout(again, ms)
      return
    }
    console.warn('[weft] a module did not load; trying again when back online', e)
    window.addEventListener('online', again, { once: true })
  })
}

/** Starts loading the modules of these elements (once each; a failed load is tried again on the next call and when back online). */
export function need(...tags: LazyTag[]): void {
  for (const tag of tags) {
    if (asked.has(tag) || customElements.get(tag)) continue
    asked.add(tag)
    loadOrRetryOnline(LOADERS[tag], () => asked.delete(tag))
  }
}

const later = new Set<LazyTag>()

/**
 * As `need`, for elements below the first screen (a node's activity strip): their modules load
 * once the first screen is up and the page idle, so a cold start's list is not held up by them.
 */
export function needLater(...tags: LazyTag[]): void {
  for (const tag of tags) {
    if (later.has(tag) || asked.has(tag) || customElements.get(tag)) continue
    later.add(tag)
    whenIdle(() => {
      later.delete(tag)
      need(tag)
    })
  }
}
