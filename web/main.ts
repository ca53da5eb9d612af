/// <reference types="vite/client" />
performance.mark('weft:boot')
import '@awesome.me/webawesome/dist/styles/themes/default.css'
import './components/weft-app.js'
import './components/extensions.js'

// The component library's elements (buttons, badges) load beside the app, not in front of it:
// the first render does not wait for them; they upgrade in place when defined.
void import('./components/ui.js')

// The app shell works offline once the service worker has cached it (production builds only:
// in development Vite serves modules on demand and a cache would serve stale ones).
// Loaded after the first paint's modules: workbox-window is not on the cold-start path.
if (import.meta.env.PROD && 'serviceWorker' in navigator) {
  void import('./pwa-update.js').then((m) => m.registerServiceWorker())
}
