// Entry of a script worker. Worker threads do not inherit the TypeScript loader of every host
// (vitest's, for one), so the thread registers tsx itself before loading the .ts.
import { register } from 'tsx/esm/api'

register()
await import('./script-worker.ts')
