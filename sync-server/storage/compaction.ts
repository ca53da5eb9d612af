import * as Y from 'yjs'
import { docToJson } from '../../shared/merge-patch.js'
import type { JsonObject } from '../../shared/index.js'

/**
 * A node's update log is compacted into its snapshot once it holds more than this many entries:
 * loading a node replays snapshot + log, so the log bounds load time; 200 small updates replay in
 * about a millisecond while keeping compaction rare on a hot node.
 */
export const COMPACT_AFTER_UPDATES = 200

/**
 * Folds a snapshot and the updates logged after it into one update. Replaying through a Y.Doc
 * (rather than `Y.mergeUpdates`) lets Yjs garbage-collect deleted content, so a field overwritten
 * a thousand times shrinks to one live item; the resulting state (state vector, content, delete
 * set) is the same, which is all a syncing client depends on.
 */
/** [STO5] The content a node's Yjs log holds: what a row whose content is stale really says. */
export function contentOfLog(snapshot: Uint8Array | null, updates: readonly Uint8Array[]): JsonObject {
  const doc = new Y.Doc()
  try {
    if (snapshot) Y.applyUpdate(doc, snapshot)
    for (const u of updates) Y.applyUpdate(doc, u)
    return docToJson(doc)
  } finally {
    doc.destroy()
  }
}

export function compactUpdates(snapshot: Uint8Array | null, updates: readonly Uint8Array[]): Uint8Array {
  const doc = new Y.Doc()
  try {
    doc.transact(() => {
      if (snapshot) Y.applyUpdate(doc, snapshot)
      for (const u of updates) Y.applyUpdate(doc, u)
    })
    return Y.encodeStateAsUpdate(doc)
  } finally {
    doc.destroy()
  }
}
