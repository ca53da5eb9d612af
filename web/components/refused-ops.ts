import type { Observable } from 'rxjs'
import { app } from '../app-context.js'
import { liveStoreQuery, type OpRow } from '../store/index.js'
import { humanMessage } from './error-text.js'

/** A queued operation the server refused ([SYNC24]), as its author reads it. */
export type RefusedOp = OpRow & { id: number; refusal: { code: string; message: string } }

/** [SYNC24] This device's refused operations: every node's, or one node's (`path`). */
export function refusedOps$(path = ''): Observable<RefusedOp[]> {
  const { store } = app().client
  return liveStoreQuery(store.db, ['ops'], async () => (await store.refusedOps()).filter((o): o is RefusedOp => !path || o.path === path))
}

/** What the operation asked, in words ("Renaming it to “Final”", "Deleting “Notes”"). */
export function refusedOpWhat(op: OpRow, name: string): string {
  switch (op.kind) {
    case 'rename':
      return `Renaming “${op.from}” to “${op.name}”`
    case 'delete':
      return `Deleting “${name}”`
    case 'create':
      return `Creating “${op.name}”`
    default:
      return op satisfies never
  }
}

/** [WEB132] [SYNC24] The sentence said of a refused operation: what it asked, that it was refused, why. */
export function refusedOpLine(op: RefusedOp, name: string): string {
  const kept = op.kind === 'delete' ? ' The node is shown again.' : op.kind === 'rename' ? ` It keeps its name “${op.from}”.` : ''
  return `${refusedOpWhat(op, name)} was refused by the server. ${humanMessage(op.refusal.code, op.refusal.message)}${kept}`
}
