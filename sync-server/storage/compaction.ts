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
 * A compaction rewrites the whole snapshot, so past COMPACT_AFTER_UPDATES a big node waits until
 * its log's bytes reach a quarter of its snapshot's: each byte appended then costs at most about
 * four bytes of snapshot rewritten, however big the node grows (a stream into one cell, a long
 * run log). At every 200 updates, a 60 KB answer cost ~300 bytes written per 6-byte token and a
 * big log's every line a rewrite of 1/200th of it, on the writer's core.
 */
export const COMPACT_LOG_SHARE = 4

/**
 * Past this many entries, or one per 64 bytes of snapshot if that is more, a log is compacted
 * whatever its bytes: it bounds a load's replay to about what decoding the snapshot costs.
 */
export const COMPACT_MAX_UPDATES = 5_000

/** Whether a node's log is due for compaction (entries, and the bytes of log and snapshot). */
export function compactionDue(updates: number, logBytes: number, snapshotBytes: number): boolean {
  if (updates <= COMPACT_AFTER_UPDATES) return false
  return updates > Math.max(COMPACT_MAX_UPDATES, snapshotBytes / 64) || logBytes * COMPACT_LOG_SHARE >= snapshotBytes
}

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
