import { parentPort, workerData } from 'node:worker_threads'
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
let compactionScheduled = false

function scheduleCompaction(): void {
  if (compactionScheduled || writer.compactionBacklog === 0) return
  compactionScheduled = true
  // One node per turn: a request waiting in the queue is served before the next compaction.
  setImmediate(() => {
    compactionScheduled = false
    try {
      writer.compactNext()
    } catch {
      // The log stays as it is; a later write past the threshold schedules the node again.
    }
    scheduleCompaction()
  })
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
        while (writer.compactNext()) {
          // Finish waiting compactions: a reopened store starts with short logs.
        }
        writer.close()
        port.postMessage({ id: request.id, ok: true } satisfies WriterResponse)
        port.close()
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
