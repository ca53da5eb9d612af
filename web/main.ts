/// <reference types="vite/client" />
performance.mark('weft:boot')
import './components/weft-app.js'

// The component library (elements and theme) loads once the first screen is up, not in front
// of it: the list of a 10,000-child node renders first; buttons and badges upgrade in place.
const loadUi = () => void import('./components/ui.js')
if (typeof requestIdleCallback === 'function') requestIdleCallback(loadUi, { timeout: 1000 })
else setTimeout(loadUi, 200)

// The app shell works offline once the service worker has cached it (production builds only:
// in development Vite serves modules on demand and a cache would serve stale ones).
// Loaded after the first paint's modules: workbox-window is not on the cold-start path.
if (import.meta.env.PROD && 'serviceWorker' in navigator) {
  void import('./pwa-update.js').then((m) => m.registerServiceWorker())
}
