import { Worker } from 'node:worker_threads'
import { compactUpdates } from './compaction.js'
import { tombstoneOfLog } from './tombstone.js'

export interface FoldRequest {
  id: number
  snapshot: Uint8Array | null
  updates: readonly Uint8Array[]
  /** [TOMB1] The log's tombstone (tombstone.ts) instead of its fold; empty when it covers nothing. */
  tombstone?: boolean
}

/** What the thread does with a request (and the host, inline). */
export function foldRequest(request: Omit<FoldRequest, 'id'>): Uint8Array {
  return request.tombstone ? (tombstoneOfLog(request.snapshot, request.updates) ?? new Uint8Array(0)) : compactUpdates(request.snapshot, request.updates)
}

export type FoldReply = { id: number; state: Uint8Array } | { id: number; error: string }

/** A fold sent to the thread, waiting for its reply. */
interface Pending {
  request: FoldRequest
  resolve: (state: Uint8Array) => void
  reject: (error: Error) => void
}

/**
 * Below this many bytes (snapshot and log together) a fold runs inline: quicker than the trip to
 * the thread, and too short to hold up the event loop (a 200-entry log of a small node folds in
 * about a millisecond).
 */
export const FOLD_INLINE_BYTES = 64 * 1024
/** An idle fold thread exits after this long: its heap is given back until the next big fold. */
const IDLE_MS = 30_000

/**
 * [SCALE15] Folds of big nodes' logs, on a worker thread: a 30,000-field node with a 1,000-entry
 * log folds in ~200 ms, during which the event loop that serves sockets and commits would stand
 * still (every commit of the instance waited that long). One thread, started on the first big
 * fold, folds one node at a time (compactions run one at a time anyway).
 */
export class FoldThread {
  private worker: Worker | null = null
  private nextId = 1
  private readonly pending = new Map<number, Pending>()
  private idle: NodeJS.Timeout | null = null
  private isClosed = false
  /** The thread could not start (its file missing from a build, say): folds run inline from then on. */
  private cannotStart = false

  constructor(
    private readonly inlineBytes = FOLD_INLINE_BYTES,
    private readonly entry: URL = new URL('./fold-worker.mjs', import.meta.url),
  ) {}

  /** The snapshot and log replayed into one update (compaction.ts's compactUpdates). */
  fold(snapshot: Uint8Array | null, updates: readonly Uint8Array[]): Promise<Uint8Array> {
    return this.run({ snapshot, updates })
  }

  /** [TOMB1] The log's tombstone (tombstone.ts `tombstoneOfLog`): a big node's is made here too. */
  async tombstone(snapshot: Uint8Array | null, updates: readonly Uint8Array[]): Promise<Uint8Array | null> {
    const state = await this.run({ snapshot, updates, tombstone: true })
    return state.byteLength > 0 ? state : null
  }

  private run(work: Omit<FoldRequest, 'id'>): Promise<Uint8Array> {
    let bytes = work.snapshot?.byteLength ?? 0
    for (const u of work.updates) bytes += u.byteLength
    const worker = bytes < this.inlineBytes || this.isClosed || this.cannotStart ? null : this.start()
    if (!worker) {
      try {
        return Promise.resolve(foldRequest(work))
      } catch (error) {
        return Promise.reject(error instanceof Error ? error : new Error(String(error)))
      }
    }
    const id = this.nextId++
    return new Promise((resolve, reject) => {
      const request: FoldRequest = { id, ...work }
      this.pending.set(id, { request, resolve, reject })
      worker.postMessage(request)
    })
  }

  /** Stops the thread; folds still waiting for it are refused. */
  async close(): Promise<void> {
    this.isClosed = true
    const worker = this.worker
    if (!worker) return
    this.fail(worker, new Error('The fold thread was closed.'))
    await worker.terminate()
  }

  /** The thread, started if need be; null when it cannot start (the fold then runs inline). */
  private start(): Worker | null {
    if (this.idle) clearTimeout(this.idle)
    this.idle = null
    if (this.worker) return this.worker
    let worker: Worker
    try {
      worker = new Worker(this.entry)
    } catch {
      this.cannotStart = true
      return null
    }
    // Ready once its module has loaded (it says so): 'online' comes before a missing import fails.
    let online = false
    // A fold in progress does not keep the process alive: close() is what waits for compactions.
    worker.unref()
    worker.on('message', (reply: FoldReply | { ready: true }) => {
      if ('ready' in reply) {
        online = true
        return
      }
      const waiting = this.pending.get(reply.id)
      if (!waiting) return
      this.pending.delete(reply.id)
      if ('error' in reply) waiting.reject(new Error(`The fold failed: ${reply.error}`))
      else waiting.resolve(reply.state)
      if (this.pending.size === 0 && this.worker === worker) {
        this.idle = setTimeout(() => this.stop(worker), IDLE_MS)
        this.idle.unref()
      }
    })
    // A thread that never came online will not the next time either: what waited folds inline.
    worker.on('error', (error) => (online ? this.fail(worker, error) : this.foldInline(worker)))
    worker.on('exit', (code) => (online ? this.fail(worker, new Error(`The fold thread exited (code ${code}).`)) : this.foldInline(worker)))
    this.worker = worker
    return worker
  }

  /**
   * The thread is gone: a fold that waited on it is refused (the log stays as it is), the next
   * fold starts another. A tombstone is made here instead: a delete or a move must not fail
   * because a compaction's thread did.
   */
  private fail(worker: Worker, error: Error): void {
    this.settlePending(worker, (waiting) => (waiting.request.tombstone ? this.runHere(waiting) : waiting.reject(error)))
  }

  private runHere({ request, resolve, reject }: Pending): void {
    try {
      resolve(foldRequest(request))
    } catch (error) {
      reject(error instanceof Error ? error : new Error(String(error)))
    }
  }

  /** The thread never came online: what waited on it folds here, and so does every later fold. */
  private foldInline(worker: Worker): void {
    if (this.worker === worker) this.cannotStart = true
    this.settlePending(worker, (waiting) => this.runHere(waiting))
  }

  /** Forgets `worker` (if it is still the thread) and settles every fold that waited on it. */
  private settlePending(worker: Worker, settle: (waiting: Pending) => void): void {
    if (this.worker !== worker) return
    this.worker = null
    for (const waiting of this.pending.values()) settle(waiting)
    this.pending.clear()
  }

  private stop(worker: Worker): void {
    if (this.worker !== worker || this.pending.size > 0) return
    this.worker = null
    void worker.terminate()
  }
}
