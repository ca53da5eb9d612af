/**
 * Group commit: callers that arrive while a flush is pending share ONE transaction, so one fsync
 * acknowledges many writes. At most `maxInFlight` batches are in flight (default one); the next
 * batch gathers while they commit. Batches are handed to the writer in order and the writer
 * applies them in order, so versions follow submission order. Two in flight let a writer thread
 * commit one batch while the event loop prepares the next, instead of each waiting for the other.
 * A batch that reaches `eagerAt` items goes at once, without waiting for the turn to end: a long
 * turn (a thousand firings resumed by one acknowledgement) then feeds the writer as it goes.
 */
export type ItemResult<R> = { ok: true; value: R } | { ok: false; error: unknown }

/** Writes a batch in one transaction. Per-item results are for inputs refused before any write;
 * a throw means the transaction rolled back and every caller of the batch gets the error. */
export type BatchWriter<I, R> = (batch: readonly I[]) => Promise<ItemResult<R>[]> | ItemResult<R>[]

interface Pending<I, R> {
  input: I
  resolve: (value: R) => void
  reject: (error: unknown) => void
}

export class GroupCommitter<I, R> {
  private queue: Pending<I, R>[] = []
  /**
   * Submissions past `maxQueued`: they wait here, in order, and join the queue as batches leave
   * it. Nothing is dropped; callers just wait longer (their sockets stop being read meanwhile).
   */
  private overflow: Pending<I, R>[] = []
  private isScheduled = false
  private inFlight = 0
  private idleWaiters: (() => void)[] = []

  private readonly eagerAt: number

  constructor(
    private readonly write: BatchWriter<I, R>,
    /** Bounds one transaction's size (and the event-loop time a synchronous writer takes). */
    private readonly maxBatch = 1000,
    private readonly maxInFlight = 1,
    /** A queue this long is flushed at once when a slot is free (default: a full batch). */
    eagerAt = maxBatch,
    /** Most items queued for the writer at once. */
    private readonly maxQueued = 20 * maxBatch,
  ) {
    this.eagerAt = Math.max(1, Math.min(eagerAt, maxBatch))
  }

  get pending(): number {
    return this.queue.length + this.overflow.length
  }

  /** Items queued for the writer (never more than `maxQueued`). */
  get queued(): number {
    return this.queue.length
  }

  submit(input: I): Promise<R> {
    return new Promise<R>((resolve, reject) => {
      if (this.overflow.length > 0 || this.queue.length >= this.maxQueued) {
        this.overflow.push({ input, resolve, reject })
        this.schedule()
        return
      }
      this.queue.push({ input, resolve, reject })
      if (this.queue.length >= this.eagerAt && this.inFlight < this.maxInFlight) void this.flush()
      else this.schedule()
    })
  }

  /** Resolves once every submitted item has been written (or refused). */
  drain(): Promise<void> {
    if (this.isIdle()) return Promise.resolve()
    return new Promise((resolve) => this.idleWaiters.push(resolve))
  }

  private isIdle(): boolean {
    return this.queue.length === 0 && this.overflow.length === 0 && !this.isScheduled && this.inFlight === 0
  }

  /** Moves waiting submissions into the queue, in order, as far as there is room. */
  private admitOverflow(): void {
    if (this.overflow.length === 0) return
    const room = this.maxQueued - this.queue.length
    if (room > 0) this.queue.push(...this.overflow.splice(0, room))
  }

  private schedule(): void {
    if (this.isScheduled || this.inFlight >= this.maxInFlight) return
    this.isScheduled = true
    // setImmediate (not a microtask): lets callers woken by the same I/O turn join the batch.
    setImmediate(() => {
      this.isScheduled = false
      void this.flush()
    })
  }

  private async flush(): Promise<void> {
    this.admitOverflow()
    // An eager flush may have taken everything (or every slot) before this scheduled one ran.
    if (this.queue.length === 0 || this.inFlight >= this.maxInFlight) {
      this.settleIdle()
      return
    }
    this.inFlight++
    const batch = this.queue.splice(0, this.maxBatch)
    this.admitOverflow()
    if (this.queue.length > 0) this.schedule()
    try {
      const results = await this.write(batch.map((p) => p.input))
      batch.forEach((p, i) => {
        const r = results[i]
        if (!r) p.reject(new Error('Invariant: batch writer returned too few results'))
        else if (r.ok) p.resolve(r.value)
        else p.reject(r.error)
      })
    } catch (error) {
      for (const p of batch) p.reject(error)
    } finally {
      this.inFlight--
    }
    if (this.queue.length > 0) this.schedule()
    else this.settleIdle()
  }

  private settleIdle(): void {
    if (!this.isIdle()) return
    const waiters = this.idleWaiters
    this.idleWaiters = []
    for (const w of waiters) w()
  }
}
