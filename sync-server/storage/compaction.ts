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
 * Past this many entries a log is compacted whatever its bytes: it bounds a load's replay (one
 * transaction, `replayLog`: 1,000 one-line updates onto a 30,000-line log replay in ~90 ms, about
 * half its snapshot's decoding; 5,000 took 1.8 s).
 */
export const COMPACT_MAX_UPDATES = 1_000

/** Whether a node's log is due for compaction (entries, and the bytes of log and snapshot). */
export function compactionDue(updates: number, logBytes: number, snapshotBytes: number): boolean {
  if (updates <= COMPACT_AFTER_UPDATES) return false
  return updates > COMPACT_MAX_UPDATES || logBytes * COMPACT_LOG_SHARE >= snapshotBytes
}

/**
 * Folds a snapshot and the updates logged after it into one update. Replaying through a Y.Doc
 * (rather than `Y.mergeUpdates`) lets Yjs garbage-collect deleted content, so a field overwritten
 * a thousand times shrinks to one live item; the resulting state (state vector, content, delete
 * set) is the same, which is all a syncing client depends on.
 */
/**
 * Applies a node's stored snapshot and log to `doc` in ONE transaction. Each update applied on its
 * own is a transaction whose cleanup costs in proportion to the doc: 200 one-line updates onto a
 * 30,000-line log took ~700 ms that way, ~11 ms in one transaction.
 */
export function replayLog(doc: Y.Doc, snapshot: Uint8Array | null, updates: readonly Uint8Array[]): void {
  doc.transact(() => {
    if (snapshot) Y.applyUpdate(doc, snapshot)
    for (const u of updates) Y.applyUpdate(doc, u)
  })
}

/** [STO5] The content a node's Yjs log holds: what a row whose content is stale really says. */
export function contentOfLog(snapshot: Uint8Array | null, updates: readonly Uint8Array[]): JsonObject {
  const doc = new Y.Doc()
  try {
    replayLog(doc, snapshot, updates)
    return docToJson(doc)
  } finally {
    doc.destroy()
  }
}

export function compactUpdates(snapshot: Uint8Array | null, updates: readonly Uint8Array[]): Uint8Array {
  const doc = new Y.Doc()
  try {
    replayLog(doc, snapshot, updates)
    return Y.encodeStateAsUpdate(doc)
  } finally {
    doc.destroy()
  }
}
