/// <reference types="vite/client" />
performance.mark('weft:boot')
import './components/weft-app.js'
import { loadOrRetryOnline, whenIdle } from './components/lazy.js'

// The component library (elements and theme) loads once the first screen is up, not in front
// of it: the list of a 10,000-child node renders first; buttons and badges upgrade in place.
whenIdle(() => loadOrRetryOnline(() => import('./components/ui.js')))

// The app shell works offline once the service worker has cached it (production builds only:
// in development Vite serves modules on demand and a cache would serve stale ones).
// Registered once the first screen is up: workbox-window and the registration's messages are
// not on the cold-start path (a worker already in control serves this start anyway). A first
// visit that goes offline before then registers, and gets its buttons, once back online.
if (import.meta.env.PROD && 'serviceWorker' in navigator) {
  whenIdle(() => loadOrRetryOnline(() => import('./pwa-update.js').then((m) => m.registerServiceWorker())))
}
