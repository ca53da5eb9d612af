import { combineLatest, distinctUntilChanged, map, type Observable } from 'rxjs'
import { app } from '../app-context.js'
import { liveStoreQuery } from '../store/index.js'
import { humanMessage } from './error-text.js'

/** [WEB104] Why the server refused a child created on this device while offline. */
export interface CreateRefusal {
  /** The name it was given, when made in this tab (a path is never shown for a name). */
  name: string | null
  code: string
  /** In words ("You do not have permission to do that here."). */
  reason: string
}

/**
 * [WEB104] The server's refusal of the creation queued for `path` ([WEB97]: a Viewer, Create
 * rights lost meanwhile), once this device has dropped its copy of the node; null while the node
 * is there (or was refused because its name was taken: then a node is there, someone else's).
 * Read from the session's refused operations (`opErrors$`), so it is known from the moment the
 * refusal lands until a reload or the "Not applied" note is dismissed.
 */
/** Names of the children made in this tab, by path: said when one of them is refused. */
const madeHere = new Map<string, string>()

/** [WEB104] Remembers the name of a child made here, for the words of its refusal. */
export function rememberMade(path: string, name: string): void {
  madeHere.set(path, name)
}

/** [WEB104] The name a child made in this tab was given (null: not made here). */
export function madeName(path: string): string | null {
  return madeHere.get(path) ?? null
}

export function createRefusal$(path: string): Observable<CreateRefusal | null> {
  const { client } = app()
  const refused$ = client.opErrors$.pipe(map((errs) => errs.find((e) => e.path === path && e.code !== 'already_exists') ?? null))
  const row$ = liveStoreQuery(client.store.db, ['nodes'], () => client.store.getIndexRow(path))
  return combineLatest([refused$, row$]).pipe(
    map(([e, row]) => (e && !row ? { name: madeHere.get(path) ?? null, code: e.code, reason: humanMessage(e.code, e.message) } : null)),
    distinctUntilChanged((a, b) => a?.code === b?.code && a?.reason === b?.reason && a?.name === b?.name),
  )
}

/** [WEB104] What is said of a child the server refused to create ("“Draft” was not created: …"). */
export function notCreatedLine(r: CreateRefusal): string {
  return `${r.name ? `“${r.name}”` : 'This node'} was not created: the server refused it. ${r.reason}`
}
