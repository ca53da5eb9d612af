/**
 * [ACT21] The pace at which the server takes script log lines, all runs together: a token bucket
 * of SCRIPT_LOG_LINES_PER_SECOND lines a second holding at most `burst` lines. A line costs one
 * per started KiB of its text (a 10,000-character line costs ten).
 *
 * A batch's lines are taken when they arrive; what waits is the worker's next batch: its
 * in-flight slot ([ACT12]) is given back once the bucket has paid for the batch. A script that
 * logs faster than the pace therefore waits (it is a flood), and the lines of every run share the
 * server's event loop with everything else at a bounded rate: each line costs the loop its Yjs
 * item, its JSON and their garbage collection, and a script logging as fast as it can otherwise
 * held the loop busy for as long as it logged. The bucket is one for the host, and batches are
 * paid in the order they arrive, so runs flooding at once share the pace evenly (each has at most
 * two batches in flight). 0 = no pace.
 */
export class LogPace {
  /** When the bucket has paid for every batch reserved so far (ms, `now`'s clock). */
  private paidUntil = Number.NEGATIVE_INFINITY

  constructor(
    private readonly linesPerSecond: number,
    private readonly burst: number,
    private readonly now: () => number = () => performance.now(),
  ) {}

  /** What a batch costs: one per line, plus one per further started KiB of a line's text. */
  static cost(lines: readonly { text: string }[]): number {
    let cost = 0
    for (const line of lines) cost += Math.max(1, Math.ceil(line.text.length / 1024))
    return cost
  }

  /** Reserves `cost` lines; answers how long (ms) until they are paid for (0: now). */
  reserve(cost: number): number {
    if (this.linesPerSecond <= 0) return 0
    const now = this.now()
    // A full bucket holds `burst` lines: time unused further back than that is not saved up.
    const from = Math.max(this.paidUntil, now - (this.burst * 1000) / this.linesPerSecond)
    this.paidUntil = from + (cost * 1000) / this.linesPerSecond
    return Math.max(0, this.paidUntil - now)
  }
}
