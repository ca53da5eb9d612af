// The production build of the server (`npm run build:server`, part of `npm run build`): plain
// JavaScript in dist-server/, run with `node dist-server/main.mjs`, no TypeScript loader at run
// time. One flat folder: the worker threads are entries beside the bundle, because the code that
// starts them resolves `./sqlite-writer-worker.mjs`, `./fold-worker.mjs` and `./script-worker.mjs` against its own
// `import.meta.url` (the bundle's, or a chunk's: every chunk lands in the same folder).
// Packages stay external and load from node_modules (better-sqlite3's native module, QuickJS's
// .wasm beside its own files); only this repository's sources are bundled.
//
//   node sync-server/build.mjs [--outdir <dir>]    (default dist-server/; a folder inside the
//                                                   checkout, so node_modules resolves)
import { cpSync, rmSync } from 'node:fs'
import process from 'node:process'
import { URL, fileURLToPath } from 'node:url'
import { build } from 'esbuild'

const root = fileURLToPath(new URL('..', import.meta.url))
const i = process.argv.indexOf('--outdir')
const outdir = i > 0 ? process.argv[i + 1] : `${root}dist-server`

rmSync(outdir, { recursive: true, force: true })
await build({
  absWorkingDir: root,
  entryPoints: {
    main: 'sync-server/main.ts',
    weft: 'sync-server/cli/weft.ts',
    'sqlite-writer-worker': 'sync-server/storage/sqlite-writer-worker.ts',
    'fold-worker': 'sync-server/storage/fold-worker.ts',
    'script-worker': 'sync-server/engines/activities/script-worker.ts',
  },
  outdir,
  outExtension: { '.js': '.mjs' },
  chunkNames: 'chunk-[hash]',
  bundle: true,
  splitting: true,
  format: 'esm',
  platform: 'node',
  target: 'node20',
  packages: 'external',
  sourcemap: true,
  // Read by script-host.ts: use the prebuilt script worker instead of bundling one at run time.
  define: { WEFT_COMPILED: 'true' },
  logLevel: 'warning',
})
// The gRPC service's definition, loaded at run time (contextual/proto-file.ts).
cpSync(`${root}proto`, `${outdir}/proto`, { recursive: true })
