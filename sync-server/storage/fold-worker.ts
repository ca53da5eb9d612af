import { setPriority } from 'node:os'
import { parentPort } from 'node:worker_threads'
import { foldRequest, type FoldReply, type FoldRequest } from './fold-thread.js'

// The fold thread: replays a node's snapshot and log into one update, off the event loop that
// serves sockets and commits (and a deleted node's tombstone). It loads yjs, compaction.ts and
// tombstone.ts only (no shared/index.ts barrel).
const port = parentPort
if (!port) throw new Error('fold-worker must run as a worker thread')
// A lower scheduling priority for this thread only (Linux nice values are per thread): a fold is
// background work; on a machine with few cores the event loop and the database get the CPU first.
// Elsewhere the call would lower the whole process, for good: only on Linux.
if (process.platform === 'linux') {
  try {
    setPriority(10)
  } catch {
    // Not permitted here: folds run at the server's priority.
  }
}

port.on('message', (request: FoldRequest) => {
  try {
    const state = foldRequest(request)
    port.postMessage({ id: request.id, state } satisfies FoldReply, [state.buffer as ArrayBuffer])
  } catch (error) {
    port.postMessage({ id: request.id, error: error instanceof Error ? error.message : String(error) } satisfies FoldReply)
  }
})
// Loaded: the host falls back to folding inline only if this never comes.
port.postMessage({ ready: true })
