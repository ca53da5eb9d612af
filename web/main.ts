/// <reference types="vite/client" />
performance.mark('weft:boot')
import './components/weft-app.js'
import './components/extensions.js'

// The app shell works offline once the service worker has cached it (production builds only:
// in development Vite serves modules on demand and a cache would serve stale ones).
if (import.meta.env.PROD && 'serviceWorker' in navigator) {
  navigator.serviceWorker.register('/sw.js', { scope: '/' }).catch((e: unknown) => console.warn('[weft] service worker not registered', e))
}
