import { distinctUntilChanged, type Observable } from 'rxjs'
import { app } from '../app-context.js'
import { liveStoreQuery } from '../store/index.js'
import { humanMessage } from './error-text.js'

/** [WEB104] Why the server refused a child created on this device while offline. */
export interface CreateRefusal {
  /** The name it was given (a path is never shown for a name). */
  name: string
  code: string
  /** In words ("You do not have permission to do that here."). */
  reason: string
}

/**
 * [WEB104] The server's refusal of the creation queued for `path` ([WEB97]: a Viewer, Create
 * rights lost meanwhile), once this device has dropped its copy of the node; null while the node
 * is there (or was refused because its name was taken: then a node is there, someone else's).
 * [WEB133] Read from the store (the refused creation is kept on its op row), so every tab and a
 * reload know it, until its author discards it (#/refused).
 */
export function createRefusal$(path: string): Observable<CreateRefusal | null> {
  const { store } = app().client
  return liveStoreQuery(store.db, ['nodes', 'ops'], async (): Promise<CreateRefusal | null> => {
    if (await store.getIndexRow(path)) return null
    const op = (await store.refusedOps()).findLast((o) => o.path === path && o.kind === 'create')
    if (op?.kind !== 'create' || !op.refusal) return null
    return { name: op.name, code: op.refusal.code, reason: humanMessage(op.refusal.code, op.refusal.message) }
  }).pipe(distinctUntilChanged((a, b) => a?.code === b?.code && a?.reason === b?.reason && a?.name === b?.name))
}

/** [WEB104] What is said of a child the server refused to create ("“Draft” was not created: …"). */
export function notCreatedLine(r: CreateRefusal): string {
  return `“${r.name}” was not created: the server refused it. ${r.reason}`
}
