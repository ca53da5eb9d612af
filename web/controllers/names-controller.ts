import type { ReactiveController, ReactiveControllerHost } from 'lit'
import type { Observable } from 'rxjs'
import { app } from '../app-context.js'
import { liveStoreQuery } from '../store/index.js'
import { ObservableController } from './observable-controller.js'

export interface Named {
  path: string
  name: string
}

/** The name a person reads for `path` when this device knows no node there yet. */
function fallbackName(path: string): string {
  const { session } = app()
  if (path === session.userId) return session.name
  return path.slice(path.lastIndexOf('/') + 1)
}

function names$(paths: readonly string[], knownOnly: boolean): Observable<Named[]> {
  const { store } = app().client
  return liveStoreQuery(store.db, ['nodes'], async () => {
    const rows = await store.db.nodes.bulkGet(paths as string[])
    const named = paths.map((path, i) => (rows[i] ? { path, name: rows[i].name || fallbackName(path) } : knownOnly ? null : { path, name: fallbackName(path) }))
    return named.filter((n): n is Named => n !== null)
  })
}

/**
 * Names (never paths) for a list of paths, from the local index and live with it: the
 * breadcrumbs of a page, the pinned spaces. A node this device has not seen reads as its last
 * segment until it is listed.
 */
export class NamesController implements ReactiveController {
  private readonly names: ObservableController<Named[]>

  constructor(host: ReactiveControllerHost) {
    host.addController(this)
    this.names = new ObservableController<Named[]>(host)
  }

  hostConnected(): void {}

  /** `knownOnly`: leave out the paths this device holds no node at (deleted, moved, never seen). */
  watch(paths: readonly string[], knownOnly = false): void {
    this.names.watch(`${knownOnly ? 'known' : 'all'}\n${paths.join('\n')}`, () => names$(paths, knownOnly))
  }

  get value(): Named[] {
    return this.names.value ?? []
  }
}

/** The ancestors a breadcrumb shows: every proper prefix that is a node (reserved places like `_Activity` are not). */
export function ancestorsOf(path: string): string[] {
  const segments = path.split('/')
  const out: string[] = []
  for (let i = 1; i < segments.length; i++) {
    if (segments[i - 1]!.startsWith('_')) continue
    out.push(segments.slice(0, i).join('/'))
  }
  return out
}
