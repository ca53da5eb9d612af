import * as Y from 'yjs'
import { replayLog } from './compaction.js'

/**
 * [TOMB1] What a node leaves behind at its path when it is deleted or moved away: its Yjs history
 * with everything in it deleted and garbage-collected. No value survives (deleted items keep only
 * their length; whatever was inside a deleted map, array or text is dropped whole); what remains
 * is every struct's id, and for top-level fields their item headers (the field's name, where it
 * stood).
 *
 * Why: a Yjs client keeps every struct it synced. A copy of a deleted node (a browser that was
 * offline, an open stock provider that reconnects) pushes those structs into whatever stands at
 * the path next, and the deleted content comes back, mixed into a new node (or into a node a
 * restore put back). A node created over a tombstone starts from it: its state vector already
 * covers every old struct, so a stale copy's sync adds nothing old, and the delete set it is sent
 * deletes the old content in that copy. Deleted items rather than bare garbage-collected ranges,
 * so that what the copy writes next (a field set again refers to the field's last item) finds
 * what it refers to and lands, instead of being dropped by the server while the copy shows it.
 */

/** Deletes everything in `doc`, in one transaction (garbage collection drops the content). */
function deleteEverything(doc: Y.Doc): void {
  doc.transact((tr) => {
    for (const type of doc.share.values()) {
      for (const item of type._map.values()) if (!item.deleted) item.delete(tr)
      for (let item = type._start; item; item = item.right) if (!item.deleted) item.delete(tr)
    }
  })
}

function tombstoneFrom(doc: Y.Doc): Uint8Array | null {
  try {
    if (doc.store.clients.size === 0) return null
    deleteEverything(doc)
    return Y.encodeStateAsUpdate(doc)
  } finally {
    doc.destroy()
  }
}

/** The tombstone of a stored log (snapshot and updates), or null for a log with no structs. */
export function tombstoneOfLog(snapshot: Uint8Array | null, updates: readonly Uint8Array[]): Uint8Array | null {
  const doc = new Y.Doc({ gc: true })
  replayLog(doc, snapshot, updates)
  return tombstoneFrom(doc)
}

/** The tombstone of a doc as it is now (the doc itself is left as it is). */
export function tombstoneOfDoc(doc: Y.Doc): Uint8Array | null {
  return tombstoneOfLog(Y.encodeStateAsUpdate(doc), [])
}

/**
 * A tombstone from outside (a backup file), rewritten as this server would write it: whatever
 * content the bytes held is deleted. Throws on bytes that are not a Yjs update, or one whose
 * structs depend on others it lacks (they would stay pending, content and all).
 */
export function canonicalTombstone(update: Uint8Array): Uint8Array | null {
  const doc = new Y.Doc({ gc: true })
  try {
    Y.applyUpdate(doc, update)
  } catch (error) {
    doc.destroy()
    throw error
  }
  if (doc.store.pendingStructs || doc.store.pendingDs) {
    doc.destroy()
    throw new Error('the update depends on structs it does not carry')
  }
  return tombstoneFrom(doc)
}

/** The clocks a Yjs update (a tombstone, a snapshot, a merged log) covers. */
export function clocksOf(update: Uint8Array): Map<number, number> {
  return Y.decodeStateVector(Y.encodeStateVectorFromUpdate(update))
}

/** Both tombstones in one. */
export function mergeTombstones(a: Uint8Array | null, b: Uint8Array | null): Uint8Array | null {
  if (!a) return b
  if (!b) return a
  return Y.mergeUpdates([a, b])
}

