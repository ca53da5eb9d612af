/// <reference types="vite/client" />
performance.mark('weft:boot')
import './components/weft-app.js'
import './components/extensions.js'

// The app shell works offline once the service worker has cached it (production builds only:
// in development Vite serves modules on demand and a cache would serve stale ones).
// Loaded after the first paint's modules: workbox-window is not on the cold-start path.
if (import.meta.env.PROD && 'serviceWorker' in navigator) {
  void import('./pwa-update.js').then((m) => m.registerServiceWorker())
}
