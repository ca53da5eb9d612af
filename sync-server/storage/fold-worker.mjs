// Entry of the fold thread. Worker threads do not inherit the TypeScript loader of every host
// (vitest's, for one), so the thread registers tsx itself before loading the .ts; the production
// build compiles fold-worker.ts to dist-server/fold-worker.mjs instead (sync-server/build.mjs).
import { register } from 'tsx/esm/api'

register()
await import('./fold-worker.ts')
