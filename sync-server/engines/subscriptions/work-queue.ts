/**
 * Bounded concurrency for firings: 10,000 timers due in the same second, or a reconcile that
 * matches thousands of sign-ups, become a steady stream of writes the storage can group-commit,
 * not 10,000 concurrent promises.
 */
export class WorkQueue {
  private readonly waiting: Array<() => Promise<void>> = []
  private running = 0
  private idleWaiters: Array<() => void> = []

  constructor(
    private readonly concurrency: number,
    private readonly onError: (e: unknown) => void,
  ) {}

  get pending(): number {
    return this.waiting.length + this.running
  }

  push(task: () => Promise<void>): void {
    this.waiting.push(task)
    this.pump()
  }

  /** Resolves when nothing is queued or running. */
  onIdle(): Promise<void> {
    if (this.pending === 0) return Promise.resolve()
    return new Promise((resolve) => this.idleWaiters.push(resolve))
  }

  private pump(): void {
    while (this.running < this.concurrency && this.waiting.length > 0) {
      const task = this.waiting.shift() as () => Promise<void>
      this.running++
      void task()
        .catch(this.onError)
        .finally(() => {
          this.running--
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
