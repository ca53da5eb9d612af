/**
 * One job in flight per key, at most `concurrency` keys at once (issue 17). `kick(key)` asks for
 * the key's job: it starts when a slot is free; a kick while it runs marks the key dirty and the
 * job runs once more after it settles (many kicks meanwhile coalesce into that one rerun). The
 * job reads current state itself, so a rerun sees every change that dirtied it. Only coalescing
 * lives here: correctness comes from the claims the job makes.
 */
export class KeyedWorker<K> {
  private readonly queued: K[] = []
  private readonly waiting = new Set<K>()
  private readonly running = new Set<K>()
  private readonly dirty = new Set<K>()
  private idleWaiters: Array<() => void> = []
  private stopped = false

  constructor(
    private readonly job: (key: K) => Promise<unknown>,
    private readonly opts: { concurrency: number; onError: (err: unknown, key: K) => void },
  ) {}

  /** Keys queued or running. */
  get pending(): number {
    return this.waiting.size + this.running.size
  }

  isBusy(key: K): boolean {
    return this.waiting.has(key) || this.running.has(key)
  }

  kick(key: K): void {
    if (this.stopped) return
    if (this.running.has(key)) {
      this.dirty.add(key)
      return
    }
    if (this.waiting.has(key)) return
    this.waiting.add(key)
    this.queued.push(key)
    this.pump()
  }

  /** Resolves once nothing is queued or running (no polling: the last job to settle wakes it). */
  idle(): Promise<void> {
    if (this.pending === 0) return Promise.resolve()
    return new Promise((resolve) => this.idleWaiters.push(resolve))
  }

  /** Takes no more kicks; resolves once the running jobs settle. Queued ones are dropped. */
  async stop(): Promise<void> {
    this.stopped = true
    for (const k of this.queued.splice(0)) this.waiting.delete(k)
    this.dirty.clear()
    await this.idle()
  }

  private pump(): void {
    while (this.running.size < this.opts.concurrency && this.queued.length > 0) {
      const key = this.queued.shift() as K
      this.waiting.delete(key)
      this.running.add(key)
      Promise.resolve()
        .then(() => this.job(key))
        .catch((err: unknown) => this.opts.onError(err, key))
        .finally(() => {
          this.running.delete(key)
          if (this.dirty.delete(key)) this.kick(key)
          this.pump()
          if (this.pending === 0) {
            const waiters = this.idleWaiters
            this.idleWaiters = []
            for (const w of waiters) w()
          }
        })
    }
  }
}
