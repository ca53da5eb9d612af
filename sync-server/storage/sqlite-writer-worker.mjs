// Entry of the SQLite writer thread. Worker threads do not inherit the TypeScript loader of
// every host (vitest's, for one), so the thread registers tsx itself before loading the .ts.
import { register } from 'tsx/esm/api'

register()
await import('./sqlite-writer-worker.ts')
