import { parentPort, workerData } from 'node:worker_threads'
import { FoldThread } from './fold-thread.js'
import { SqliteWriter } from './sqlite-writer.js'
import { serializeError, toWire, type WriterInit, type WriterRequest, type WriterResponse } from './sqlite-writer-protocol.js'

// The writer thread: owns the only writing connection; compacts between requests.
// [PROD3] What this thread loads takes the files it needs from shared/ (errors, path, enums, json,
// merge-patch), never shared/index.ts: the barrel would load zod and every schema into this
// thread's heap too (~12 MB of the server's RSS, measured), for nothing it uses.
const init = workerData as WriterInit
const port = parentPort
if (!port) throw new Error('sqlite-writer-worker must run as a worker thread')
const writer = new SqliteWriter(init.file, init.busyTimeoutMs)
/** [SCALE15] Big nodes' folds run on the fold thread while this thread serves requests. */
const folds = new FoldThread()
let compactionScheduled = false
/** The compaction in progress (its fold may be on the fold thread), awaited by close. */
let compacting: Promise<void> = Promise.resolve()
let closing = false

function scheduleCompaction(): void {
  if (compactionScheduled || closing || writer.compactionBacklog === 0) return
  compactionScheduled = true
  // One node per turn: a request waiting in the queue is served before the next compaction.
  setImmediate(() => {
    compacting = compactOne().finally(() => {
      compactionScheduled = false
      scheduleCompaction()
    })
  })
}

/**
 * Reads the next waiting node's snapshot and log, folds them (a big node's on the fold thread:
 * ~150 ms for a 30,000-field node, during which every commit of the server waited when this
 * thread folded it), and writes the fold unless what it folded changed meanwhile.
 */
async function compactOne(): Promise<void> {
  try {
    const path = writer.takeCompaction()
    const read = path === undefined ? null : writer.readCompaction(path)
    if (!read) return
    const folded = await folds.fold(read.snapshot, read.logged.map((u) => u.data))
    writer.writeCompaction(read, folded)
  } catch {
    // The log stays as it is; a later write past the threshold schedules the node again.
  }
}

async function close(id: number): Promise<void> {
  closing = true
  await compacting
  try {
    while (writer.compactNext()) {
      // Finish waiting compactions: a reopened store starts with short logs.
    }
  } catch {
    // The logs stay as they are.
  }
  await folds.close()
  writer.close()
  port!.postMessage({ id, ok: true } satisfies WriterResponse)
  port!.close()
}

port.on('message', (request: WriterRequest) => {
  let response: WriterResponse
  try {
    switch (request.op) {
      case 'batch':
        response = { id: request.id, ok: true, value: toWire(writer.writeBatch(request.batch)) }
        break
      case 'move':
        response = { id: request.id, ok: true, value: writer.moveSubtree(request.move).map((value) => ({ ok: true, value })) }
        break
      case 'createAccount':
        writer.createAccount(request.account)
        response = { id: request.id, ok: true }
        break
      case 'deleteAccount':
        writer.deleteAccount(request.userId, request.email)
        response = { id: request.id, ok: true }
        break
      case 'saveToken':
        writer.saveToken(request.hash, request.userId, request.expiresAt)
        response = { id: request.id, ok: true }
        break
      case 'purgeChanges':
        writer.purgeChanges(request.below)
        response = { id: request.id, ok: true }
        break
      case 'purgeTokens':
        writer.purgeTokens(request.before)
        response = { id: request.id, ok: true }
        break
      case 'revokeToken':
        writer.revokeToken(request.hash)
        response = { id: request.id, ok: true }
        break
      case 'contextual':
        response = { id: request.id, ok: true, result: writer.contextual(request.call) }
        break
      case 'close':
        void close(request.id)
        return
      default:
        request satisfies never
        return
    }
  } catch (error) {
    response = { id: request.id, ok: false, error: serializeError(error) }
  }
  port.postMessage(response)
  scheduleCompaction()
})
