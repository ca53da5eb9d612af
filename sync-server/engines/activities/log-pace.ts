/**
 * [ACT21] The pace at which the server takes script log lines: SCRIPT_LOG_LINES_PER_SECOND lines
 * a second for all runs together, shared evenly among the runs logging now. A line costs one per
 * started 1,024 characters of its text (a 10,000-character line costs ten).
 *
 * Each run has its own bucket, refilled at its share of the pace (the pace divided by the runs
 * that sent lines within the last second) and holding at most the same share of `burst`. A
 * batch's lines are taken when they arrive; what waits is the worker's next batch: its in-flight
 * slot ([ACT12]) is given back once the run's bucket has paid for the batch. A script that logs
 * faster than its share therefore waits (it is a flood), while a run logging a line now and then
 * never waits behind another run's flood: its own bucket is never empty.
 *
 * Why: each line costs the server's event loop its Yjs item, its JSON and their garbage
 * collection; a script logging as fast as it can held the loop busy for as long as it logged.
 * 0 = no pace.
 */
export class LogPace {
  private readonly runs = new Map<unknown, { paidUntil: number; seen: number }>()

  constructor(
    private readonly linesPerSecond: number,
    private readonly burst: number,
    private readonly now: () => number = () => performance.now(),
  ) {}

  /** What a batch costs: one per line, plus one per further started 1,024 characters of a line. */
  static cost(lines: readonly { text: string }[]): number {
    let cost = 0
    for (const line of lines) cost += Math.max(1, Math.ceil(line.text.length / 1024))
    return cost
  }

  /** Reserves `cost` lines for `run`; answers how long (ms) until they are paid for (0: now). */
  reserve(run: unknown, cost: number): number {
    if (this.linesPerSecond <= 0) return 0
    const now = this.now()
    // A run that sent nothing for a second, and owes nothing, no longer takes a share.
    for (const [key, r] of this.runs) if (key !== run && r.seen < now - ACTIVE_MS && r.paidUntil <= now) this.runs.delete(key)
    let r = this.runs.get(run)
    if (!r) this.runs.set(run, (r = { paidUntil: Number.NEGATIVE_INFINITY, seen: now }))
    r.seen = now
    const share = this.linesPerSecond / this.runs.size
    // A full bucket holds its share of `burst`: at the share's rate, burst / pace seconds of it.
    const from = Math.max(r.paidUntil, now - (this.burst * 1000) / this.linesPerSecond)
    r.paidUntil = from + (cost * 1000) / share
    return Math.max(0, r.paidUntil - now)
  }

  /** The run ended: it takes no share any more. */
  forget(run: unknown): void {
    this.runs.delete(run)
  }

  /** Runs taking a share now (tests, diagnostics). */
  get active(): number {
    return this.runs.size
  }
}

/** A run that sent no lines for this long stops taking a share of the pace. */
const ACTIVE_MS = 1_000
