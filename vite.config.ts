import { fileURLToPath } from 'node:url'
import { defineConfig } from 'vite'
import { serviceWorkerPlugin } from './web/build/service-worker-plugin.js'

const root = fileURLToPath(new URL('./web', import.meta.url))

export default defineConfig({
  root,
  // The sync server serves dist/ (STATIC_DIR) at /.
  build: { outDir: fileURLToPath(new URL('./dist', import.meta.url)), emptyOutDir: true, target: 'es2022', sourcemap: true },
  plugins: [serviceWorkerPlugin()],
  server: { port: 5173 },
})
