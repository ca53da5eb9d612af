import { fileURLToPath } from 'node:url'
import { defineConfig } from 'vite'
import { VitePWA } from 'vite-plugin-pwa'

const root = fileURLToPath(new URL('./web', import.meta.url))

/** Paths the service worker never answers: the API, the sockets and health checks go to the network. */
const NETWORK_ONLY = [/^\/api\//, /^\/mux/, /^\/sync\//, /^\/mcp/, /^\/healthz/]

export default defineConfig({
  root,
  // The sync server serves dist/ (STATIC_DIR) at /.
  build: { outDir: fileURLToPath(new URL('./dist', import.meta.url)), emptyOutDir: true, target: 'es2022', sourcemap: true },
  plugins: [
    // The offline app shell (Workbox): every file of the build is precached; navigations get
    // the cached index.html, so the app opens with no network. A new build waits until the
    // person accepts the "new version available" prompt (web/pwa-update.ts), so a page is
    // never swapped under someone typing.
    VitePWA({
      strategies: 'generateSW',
      registerType: 'prompt',
      injectRegister: false,
      manifest: {
        name: 'Weft',
        short_name: 'Weft',
        description: 'A local-first mesh of JSON nodes.',
        start_url: '/',
        display: 'standalone',
        theme_color: '#2f5bd3',
        background_color: '#fafbfd',
        icons: [],
      },
      workbox: {
        globPatterns: ['**/*.{js,css,html,svg,png,ico,webmanifest}'],
        navigateFallback: '/index.html',
        navigateFallbackDenylist: NETWORK_ONLY,
        clientsClaim: true,
        cleanupOutdatedCaches: true,
        maximumFileSizeToCacheInBytes: 4 * 1024 * 1024,
      },
    }),
  ],
  // `npx vite` serves the app with hot reload; the API and the socket go to a sync server
  // started separately (`npm run serve`, default port 8787; WEFT_SERVER to point elsewhere).
  server: {
    port: 5173,
    proxy: {
      '/api': process.env.WEFT_SERVER ?? 'http://127.0.0.1:8787',
      '/healthz': process.env.WEFT_SERVER ?? 'http://127.0.0.1:8787',
      '/mux': { target: process.env.WEFT_SERVER ?? 'http://127.0.0.1:8787', ws: true },
    },
  },
})
