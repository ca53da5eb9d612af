// Entry of the bench's log watcher thread: worker threads do not inherit tsx, so it registers it.
import { register } from 'tsx/esm/api'

register()
await import('./log-watcher.ts')
