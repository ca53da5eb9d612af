import { fileURLToPath } from 'node:url'
import { defineConfig } from 'vite'
import { serviceWorkerPlugin } from './web/build/service-worker-plugin.js'

const root = fileURLToPath(new URL('./web', import.meta.url))

export default defineConfig({
  root,
  // The sync server serves dist/ (STATIC_DIR) at /.
  build: { outDir: fileURLToPath(new URL('./dist', import.meta.url)), emptyOutDir: true, target: 'es2022', sourcemap: true },
  plugins: [serviceWorkerPlugin()],
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
