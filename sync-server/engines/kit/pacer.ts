/**
 * Spreads many ready continuations over turns of the event loop (issue 18, the 1,000-rounds
 * bench). A thousand rounds woken at once (a release, a group commit resolving a thousand writes)
 * would each run their next synchronous step (a Yjs transaction, its encoding, the commit's
 * hand-off) in ONE microtask checkpoint: a block of hundreds of milliseconds no timer, socket or
 * /healthz gets into. `turn()` admits at most `perTurn` callers per turn of the loop; the rest
 * wait for the next turn (a `setImmediate` queued from an immediate runs on the NEXT iteration,
 * after timers and I/O). Order is first come, first served; nothing is dropped.
 *
 * Only pacing lives here: it changes when a step runs, never whether or how.
 */
export class Pacer {
  private readonly waiting: Array<() => void> = []
  private scheduled = false
  private admitted = 0

  constructor(private readonly perTurn: number) {}

  /** Callers waiting for a turn (diagnostics). */
  get queued(): number {
    return this.waiting.length
  }

  /** Resolves when this caller may take its step: at once while the turn has room, else a later turn. */
  turn(): Promise<void> {
    if (this.admitted < this.perTurn && this.waiting.length === 0) {
      this.admitted++
      this.schedule()
      return Promise.resolve()
    }
    return new Promise<void>((resolve) => {
      this.waiting.push(resolve)
      this.schedule()
    })
  }

  private schedule(): void {
    if (this.scheduled) return
    this.scheduled = true
    setImmediate(() => this.next())
  }

  private next(): void {
    this.scheduled = false
    this.admitted = 0
    const batch = this.waiting.splice(0, this.perTurn)
    this.admitted = batch.length
    for (const resolve of batch) resolve()
    if (this.waiting.length > 0 || this.admitted > 0) this.schedule()
  }
}
