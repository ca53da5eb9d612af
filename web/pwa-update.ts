/// <reference types="vite-plugin-pwa/client" />
import { registerSW } from 'virtual:pwa-register'

/**
 * Registers the Workbox service worker (built by vite-plugin-pwa) and tells the app when a new
 * build is waiting: `weft:update-available` on window, whose detail applies it (the waiting
 * worker takes over and the page reloads). Settles once registered, or rejects when it could not
 * be (offline before workbox-window or sw.js came): the caller tries again when back online.
 */
export function registerServiceWorker(): Promise<void> {
  let registered: () => void = () => {}
  let failed: (e: unknown) => void = () => {}
  const done = new Promise<void>((resolve, reject) => ((registered = resolve), (failed = reject)))
  const update = registerSW({
    immediate: true,
    onNeedRefresh() {
      // The plugin reloads only for updates its own Workbox instance found; a worker the browser
      // found by itself (a deploy noticed on a later check) is "external": reload on the
      // controller change in both cases.
      const apply = () => {
        navigator.serviceWorker.addEventListener('controllerchange', () => location.reload(), { once: true })
        void update(true)
      }
      window.dispatchEvent(new CustomEvent('weft:update-available', { detail: apply }))
    },
    onRegisteredSW() {
      registered()
    },
    onRegisterError(e: unknown) {
      failed(e)
    },
  })
  return done
}
