import type { Observable } from 'rxjs'
import type { Logger } from 'pino'
import {
  PARTITION_CATALOG,
  SYSTEM,
  activityMessage,
  finalStatusOf,
  isTerminal,
  isJsonObject,
  isWeftError,
  missingInputs,
  maxStatus,
  WeftError,
  principalName,
  type ActivityMessage,
  type ActivityProgress,
  type ActivityStatus,
  type JsonObject,
  type JsonValue,
  type MeshNode,
  type NodePath,
  type Principal,
} from '../../../shared/index.js'
import type { LiveChange, NodeApi } from '../../nodes/index.js'
import { meshCall } from './mesh-proxy.js'
import { inputRightsRefusal } from './run-route.js'
import {
  actAs,
  claimAppend,
  concatPages,
  defineEngine,
  lightPage,
  pageKey,
  every,
  realClock,
  requesterOf,
  type CancelTimer,
  type Clock,
  type KitEngine,
  type LightQuerySource,
  type LightRow,
} from '../kit/index.js'
import { ScriptHost, type ScriptOutcome, type ScriptRun } from './script-host.js'

export interface ActivityEngineConfig {
  timeoutMs: number
  memoryMb: number
  cancelGraceMs: number
  watchdogMs: number
  /** Log lines and progress from a script are written at most this often (one append per batch). */
  flushMs: number
  maxConcurrent: number
  spares: number
  /** [ACT15] Cores scripts may use at once (SCRIPT_CPU_SLOTS, default one less than the machine has); 0 = no limit. */
  cpuSlots: number
  /** How often running activities are checked for a lost run or watcher; null = never. */
  reconcileIntervalMs: number | null
  /** [ACT18] SCRIPT_LOG_MAX_LINES: lines kept per run (later ones dropped, one Warning says so). */
  logMaxLines: number
  /** [ACT18] SCRIPT_LOG_MAX_BYTES: UTF-8 bytes of line text kept per run. */
  logMaxBytes: number
  /** [ACT21] SCRIPT_LOG_LINES_PER_SECOND: log lines the server takes a second, shared by the runs logging at once (a script logging faster waits); 0 = no pace. */
  logLinesPerSecond?: number
  /** [ACT18] SCRIPT_MESH_IN_FLIGHT: Mesh calls of one run the server works on at once (later ones wait). */
  meshInFlight: number
  /** [ACT18] SCRIPT_MAX_RUNS_PER_USER: runs of one user at once (later ones wait, Running, with a message); 0 = no limit. */
  maxRunsPerUser: number
  /** [ACT18] MAX_PAYLOAD_BYTES: the largest value a script writes (Mesh call, ReturnValue, line, progress text). */
  maxPayloadBytes: number
  /**
   * [ACT15] SCRIPT_NICE: the script threads' CPU priority (0–19, default 10: below the event loop's,
   * so scripts never slow the server; on a machine busy with other work they get little CPU).
   */
  workerNice?: number
}

/** A run of this process: the in-memory half. The node stays the source of truth. */
interface LiveRun {
  path: NodePath
  script: ScriptRun | null
  messages: ActivityMessage[]
  progress: ActivityProgress | null
  flushTimer: CancelTimer | null
  /** A leading-edge flush is queued (a microtask away). */
  flushSoon: boolean
  /** The run's appends, chained: the terminal write waits for every one before it. */
  writes: Promise<unknown>
  /** When the log was last flushed (the throttle's leading edge). */
  lastFlushAt: number
  lastSign: number
  watchdog: CancelTimer | null
  watchdogFired: boolean
  /** The drain of pending lines under way, if any (one at a time). */
  draining: Promise<unknown> | null
  /** [ACT3] What the run's lines say so far (Error → Failed, Warning → Warning): the terminal write needs no scan of the log. */
  worst: ActivityStatus
  /** A cancel was passed to the script: later changes of the node need nothing more. */
  cancelSent: boolean
}

const LEVEL_STATUS: Record<ActivityMessage['Level'], ActivityStatus> = { Info: 'Succeeded', Warning: 'Warning', Error: 'Failed' }

/**
 * [ACT12] Most lines one append carries. An append is one event-loop task whose cost follows its
 * lines (Yjs items, the update's encoding, the hand-off to storage): 200 keeps it around a
 * millisecond, so /healthz stays quick while a script floods its log.
 */
const LINES_PER_APPEND = 200

const RESTART_MESSAGE = 'The server restarted while this activity was running, so the run was lost. Run it again to retry.'

function now(clock: Clock): string {
  return new Date(clock.now()).toISOString()
}

/**
 * [ACT3][ACT4] The terminal fields: Status = max(floor — raised to Cancelled when a cancel was
 * requested — and what the lines say, `worst`); undefined (write nothing) once terminal: a
 * terminal status is final.
 */
function terminalPatch(cur: MeshNode, floor: ActivityStatus, extra: JsonObject, worst: ActivityStatus, progress: ActivityProgress | null, at: string): JsonObject | undefined {
  if (cur.nodeType !== 'ActivityLog' || isTerminal(cur.content.Status)) return undefined
  const effective = cur.content.RequestedStatus === 'Cancelled' ? maxStatus(floor, 'Cancelled') : floor
  const status = maxStatus(effective === 'Running' ? 'Succeeded' : effective, worst)
  const patch: JsonObject = { ...extra, Status: status, End: at }
  if (progress) patch.Progress = progress as unknown as JsonObject
  else if (cur.content.Progress === undefined && status === 'Succeeded') patch.Progress = { Fraction: 1 }
  return patch
}

/** What the reconciler reads of an activity: its path and the two status fields, never its log. */
const LIGHT_FIELDS = ['Status', 'RequestedStatus'] as const

/**
 * [ACT1]–[ACT10] The activity engine: the sole writer of every ActivityLog's Status, Messages,
 * Progress and result. Callers only patch RequestedStatus; the engine is built from the kit
 * (engines/kit, issue 17): the feed (with gap replay) and a paged reconciler kick the path of an
 * activity that needs work; one job per path at a time drives it through claims.
 */
export class ActivityEngine {
  private readonly runs = new Map<NodePath, LiveRun>()
  private readonly kit: KitEngine
  private readonly clock: Clock
  readonly host: ScriptHost
  private stopping = false
  /** True until the boot pass is done: a Running activity found then was left by a dead process. */
  private booting = true
  private started = false
  private used = false

  /** Spare script workers started and not yet taken by a run. */
  get spareWorkers(): number {
    return this.host.spareCount
  }

  /**
   * [PROD3] Somebody signed in: one spare script worker, so their first run starts as fast as any
   * (the rest of the pool comes with the first run). Not at boot: a server nobody uses holds no
   * worker (a thread and a QuickJS heap, ~12 MB of its resident memory).
   */
  inUse(): void {
    this.used = true
    if (this.started && !this.stopping) this.host.warmFirst()
  }
  /** Resolves waiters once no run is live here (tests: `settled`). */
  private drainedWaiters: Array<() => void> = []

  constructor(
    private readonly nodes: NodeApi & LightQuerySource,
    private readonly log: Logger,
    private readonly config: ActivityEngineConfig,
    signal: AbortSignal,
    opts: { clock?: Clock; changes$?: Observable<LiveChange> } = {},
  ) {
    this.clock = opts.clock ?? realClock
    this.host = new ScriptHost({ ...config, log, clock: this.clock })
    if (!signal.aborted) signal.addEventListener('abort', () => void this.stop(), { once: true })
    this.kit = defineEngine<{ source: number; row: LightRow }>(
      {
        name: 'activities',
        watch: (c) => {
          if (c.nodeType !== 'ActivityLog') return []
          // [ACT5] A run whose activity is deleted stops (it went on writing as its starter, and no
          // one could cancel it any more); one still queued never starts.
          if (c.kind === 'Deleted') {
            const run = this.runs.get(c.path)
            if (run) this.cancelRun(run)
            return []
          }
          return c.node && this.needsWork(c.path, c.node.content) ? [c.path] : []
        },
        replays: (r) => r.nodeType === 'ActivityLog' && r.kind !== 'Deleted',
        reconcile: {
          // [ACT9] Three light, paged scans; none loads a log's content.
          page: concatPages([
            lightPage(nodes, { nodeType: 'ActivityLog', where: { Status: 'Running' } }, LIGHT_FIELDS),
            lightPage(nodes, { nodeType: 'ActivityLog', where: { RequestedStatus: 'Running' } }, LIGHT_FIELDS),
            lightPage(nodes, { nodeType: 'ActivityLog', where: { RequestedStatus: 'Cancelled' } }, LIGHT_FIELDS),
          ]),
          keyOf: pageKey,
          needs: (item) => this.reconcileOne(item.row),
          intervalMs: config.reconcileIntervalMs,
        },
        handle: (path) => this.drive(path as NodePath),
        concurrency: 16,
      },
      { nodes, log, clock: this.clock, ...(opts.changes$ ? { changes$: opts.changes$ } : {}) },
    )
  }

  // ---------------------------------------------------------------- lifecycle

  /**
   * [ACT9] Recovery on boot is the reconciler's first pass: this process has no run yet, so an
   * activity Running now was left by a process that died: it ends Failed, naming the restart. A
   * pending start request is honoured. Later passes (ACTIVITY_RECONCILE_MS) fail a Running
   * activity with no run here and pick up a request the feed did not deliver.
   */
  async start(): Promise<void> {
    this.started = true
    if (this.used) this.host.warmFirst()
    await this.nodes.update(SYSTEM, PARTITION_CATALOG as NodePath, (c) => c ?? { nodeType: 'Document', name: 'Partition', content: {} }, 'system')
    await this.kit.start()
    await this.orphans
    this.booting = false
  }

  /**
   * Once, however often asked (the server's abort signal and its close both ask): a second caller
   * waits for the first stop, so the server closes the store only after the last terminal write.
   */
  stop(): Promise<void> {
    return (this.stopped ??= this.stopNow())
  }

  private stopped: Promise<void> | null = null

  private async stopNow(): Promise<void> {
    // The feed and the reconciler first: a shutting-down engine reacts to nothing more.
    this.stopping = true
    await this.kit.stop()
    for (const run of this.runs.values()) {
      run.flushTimer?.()
      run.watchdog?.()
    }
    await this.host.close()
    // Runs that ended meanwhile (their scripts stopped with the host) write their outcome now,
    // while the store is open, instead of being failed as orphans by the next boot.
    await Promise.all([...this.terminalWrites])
  }

  /** The terminal writes under way (awaited by stop). */
  private readonly terminalWrites = new Set<Promise<unknown>>()

  /** Whether an activity needs this engine now (what the feed kicks on; cheap, no reads). */
  private needsWork(path: NodePath, c: JsonObject): boolean {
    if (this.stopping || isTerminal(c.Status)) return false
    if (c.RequestedStatus === 'Cancelled') {
      const run = this.runs.get(path)
      // A cancelled draft has nothing to do (it simply never starts): every sweep used to read it
      // whole and claim it again, and their number only grows.
      return run ? !run.cancelSent : c.Status === 'Running'
    }
    return c.Status === undefined && c.RequestedStatus === 'Running'
  }

  /** Orphans failed by the pass under way (awaited by start, so /healthz follows recovery). */
  private orphans: Promise<unknown> = Promise.resolve()

  /** [ACT9] One light row of a reconcile pass: fail an orphan, or kick work the feed missed. */
  private reconcileOne(row: LightRow): NodePath[] {
    const c = row.fields as JsonObject
    if (c.Status === 'Running' && !this.runs.has(row.path)) {
      const reason = this.booting ? RESTART_MESSAGE : 'No run is behind this activity any more (its worker was lost). Run it again to retry.'
      const failing = this.failOrphan(row.path, reason).catch((err: unknown) => this.log.error({ err, path: row.path }, 'failing an orphaned activity failed'))
      this.orphans = Promise.all([this.orphans, failing])
      return []
    }
    return this.needsWork(row.path, c) ? [row.path] : []
  }

  /**
   * [ACT9] A Running activity with no run here ends Failed. A claim: the re-check (still Running,
   * still no run of ours), the Error line and the terminal fields are one write, so recover, sweep
   * and cancel racing on one run append exactly one line.
   */
  private async failOrphan(path: NodePath, reason: string): Promise<boolean> {
    const at = now(this.clock)
    const r = await claimAppend(this.nodes, path, 'Messages', [activityMessage('Error', reason, at)] as unknown as JsonValue[], {
      when: (cur) => cur.nodeType === 'ActivityLog' && cur.content.Status === 'Running' && !this.runs.has(path),
      patch: (cur) => terminalPatch(cur, 'Failed', { Error: reason }, 'Failed', null, at),
    })
    return r.claimed
  }

  // ---------------------------------------------------------------- driving

  /** Asks for an activity to be looked at (the run route, after it wrote a start request). */
  watch(path: NodePath): void {
    this.kit.kick(path)
  }

  /** The one job of a path: reads it and does what its state asks (all through claims). */
  private async drive(path: NodePath): Promise<void> {
    if (this.stopping) return
    const node = await this.nodes.get(SYSTEM, path)
    if (!node || node.nodeType !== 'ActivityLog' || isTerminal(node.content.Status)) return
    if (node.content.RequestedStatus === 'Cancelled') await this.cancel(path)
    else if (node.content.Status === undefined && node.content.RequestedStatus === 'Running') await this.claimAndStart(path)
  }

  /** Resolves once the feed, the reconciler and every job are idle and no run is live here. */
  async settled(): Promise<void> {
    await this.kit.idle()
    await this.orphans
    while (this.runs.size > 0) {
      await new Promise<void>((resolve) => this.drainedWaiters.push(resolve))
      await this.kit.idle()
    }
  }

  /**
   * Resolves once the feed, the reconciler and every job are idle, live runs or not: what the
   * engine was asked to do (start, cancel) it has done (tests on virtual time advance the clock then).
   */
  async idle(): Promise<void> {
    await this.kit.idle()
    await this.orphans
  }

  /** A reconcile pass now (tests; the periodic one runs on the clock). */
  reconcileNow(): Promise<void> {
    return this.kit.reconcileNow().then(async () => {
      await this.orphans
    })
  }

  // ---------------------------------------------------------------- starting

  /**
   * [ACT4] Two start requests start one run: the claim (no Status → Running) is the re-check
   * inside update, and the run is registered in that same synchronous stretch.
   */
  async claimAndStart(path: NodePath): Promise<void> {
    if (this.stopping) return
    let run: LiveRun | null = null
    const at = now(this.clock)
    let node: MeshNode | null
    try {
      node = await this.nodes.update(SYSTEM, path, (cur) => {
        if (!cur || cur.nodeType !== 'ActivityLog') return undefined
        const c = cur.content
        if (c.Status !== undefined || c.RequestedStatus !== 'Running' || this.runs.has(path)) return undefined
        run = this.register(path, finalStatusOf(c.Messages))
        return { nodeType: cur.nodeType, name: cur.name, content: { ...c, Status: 'Running', Start: at } }
      })
    } catch (err) {
      // The claim did not become durable: nothing runs, the next state change (or the sweep) retries.
      if (run) this.runs.delete(path)
      throw err
    }
    if (!run || !node) {
      if (run) this.runs.delete(path)
      return
    }
    await this.launch(run, node)
  }

  private register(path: NodePath, worst: ActivityStatus = 'Succeeded'): LiveRun {
    const run: LiveRun = {
      path,
      script: null,
      messages: [],
      progress: null,
      flushTimer: null,
      flushSoon: false,
      writes: Promise.resolve(),
      draining: null,
      lastFlushAt: 0,
      lastSign: this.clock.now(),
      watchdog: null,
      watchdogFired: false,
      worst,
      cancelSent: false,
    }
    this.runs.set(path, run)
    return run
  }

  /**
   * [ACT17] The run's starter as the authority model says now, or why it may not run: asked as the
   * run is launched, and again when a run that waited for its owner's slot starts.
   */
  private async authorize(activity: MeshNode): Promise<{ starter: Principal | null; refusal: string | null }> {
    const c = activity.content
    const requester = requesterOf(c.StartedBy, 'Execute', c.CodePath)
    let starter: Principal | null = null
    let refusal: string | null = null
    try {
      if (typeof c.CodePath !== 'string') refusal = 'The activity names no Code node to run.'
      else if (!requester) refusal = 'The activity names nobody who started it (StartedBy): nobody to run it as.'
      else if (typeof c.Source !== 'string') refusal = `The activity holds no Source (it was made before runs kept their code); run ${c.CodePath} again.`
      else {
        const code = await this.nodes.get(SYSTEM, requester.path)
        if (!code || code.nodeType !== 'Code') refusal = `There is no Code node at ${c.CodePath}.`
        else if (code.content.IsExecutable === false) refusal = `${c.CodePath} is not executable.`
        // [ACT1] A draft started by a patch of RequestedStatus is held to its Code node's required
        // inputs as POST …/run is (it ran without them).
        else {
          const missing = missingInputs(code.content, isJsonObject(c.Inputs) ? c.Inputs : {})
          if (missing.length > 0) refusal = `Required inputs are missing: ${missing.join(', ')}.`
          // Authorize as the caller, execute as system: the starter's right is re-checked as the run starts.
          else {
            const principal = actAs(this.nodes, requester)
            // [ACT22] And what its inputs ask of the starter (Export on an export's Root).
            refusal = inputRightsRefusal(this.nodes, principal, c.CodePath, code.content, isJsonObject(c.Inputs) ? c.Inputs : {}, 'the person who started it')?.message ?? null
            if (!refusal) starter = principal
          }
        }
      }
    } catch (err) {
      refusal = err instanceof WeftError && err.code === 'forbidden' ? `${requester?.userId ?? 'The starter'} may no longer execute ${String(c.CodePath)}.` : `The Code node could not be read: ${(err as Error).message}`
    }
    return { starter, refusal }
  }

  /**
   * [ACT17] As whom the run acts: its StartedBy (the principal whose request started it, checked
   * for Execute on the Code node then), re-checked now through the kit's one authority model. What
   * it runs: the Source kept on the activity when it was made, never the Code node's current one.
   */
  private async launch(run: LiveRun, activity: MeshNode): Promise<void> {
    const c = activity.content
    const { starter, refusal } = await this.authorize(activity)
    if (refusal || !starter) {
      this.finishRun(run, { ok: false, aborted: false, message: refusal ?? 'The run could not start.' })
      return
    }
    const owner = starter
    const language = c.Language === 'typescript' ? 'typescript' : 'javascript'
    const source = c.Source as string
    const inputs = (c.Inputs && typeof c.Inputs === 'object' && !Array.isArray(c.Inputs) ? c.Inputs : {}) as JsonObject
    run.script = this.host.run(source, language, inputs, {
      onStart: () => {
        run.lastSign = this.clock.now()
        this.armWatchdog(run)
      },
      onLog: (level, text, at) => this.push(run, activityMessage(level, text, at)),
      onProgress: (fraction, text) => {
        run.progress = text === undefined ? { Fraction: fraction } : { Fraction: fraction, Text: text }
        run.lastSign = this.clock.now()
        this.scheduleFlush(run)
      },
      onMesh: (op, args, signal) => meshCall(this.nodes, owner, op, args, signal),
      onQueued: (message) => this.push(run, activityMessage('Info', message, now(this.clock))),
      // A run that waited for its slot is checked again as it starts: a Code node made not
      // executable, or a starter who lost Execute, meanwhile, runs nothing.
      recheck: async () => (await this.authorize(activity)).refusal,
    }, principalName(owner))
    // A cancel requested between the claim and now is honoured at once.
    const latest = await this.nodes.get(SYSTEM, run.path)
    if (!latest || latest.content.RequestedStatus === 'Cancelled') this.cancelRun(run)
    void run.script.done.then((o) => this.finishRun(run, o))
  }

  // ---------------------------------------------------------------- the log

  private push(run: LiveRun, m: ActivityMessage): void {
    run.messages.push(m)
    run.worst = maxStatus(run.worst, LEVEL_STATUS[m.Level])
    run.lastSign = this.clock.now()
    this.scheduleFlush(run)
  }

  /**
   * [ACT12] Lines and progress are coalesced: at most one append (one Yjs array insert) per flush
   * window. Throttled on the leading edge: a line after a quiet spell goes out at once, with what
   * the same worker message carried; under a stream, one append per window.
   */
  private scheduleFlush(run: LiveRun): void {
    if (run.flushTimer || run.flushSoon) return
    const wait = run.lastFlushAt + this.config.flushMs - this.clock.now()
    if (wait <= 0) {
      // The leading edge: after the lines and progress of this same worker message are pushed
      // (a microtask later), not after a timer: on the engine's clock, not on wall time.
      run.flushSoon = true
      queueMicrotask(() => {
        run.flushSoon = false
        void this.flush(run)
      })
      return
    }
    run.flushTimer = this.clock.setTimeout(() => {
      run.flushTimer = null
      void this.flush(run)
    }, wait)
  }

  /**
   * [ACT12] Writes the run's pending lines and progress. A backlog (a script logging as fast as it
   * can) goes out in slices of LINES_PER_APPEND, one slice per turn of the event loop: each
   * append is one task, so a request never waits behind thousands of lines. One drain at a time;
   * lines pushed while it runs are taken by it. Resolves once every slice is issued and durable.
   */
  private flush(run: LiveRun): Promise<unknown> {
    if (run.flushTimer) {
      run.flushTimer()
      run.flushTimer = null
    }
    if (!run.draining) {
      const draining: Promise<unknown> = this.drain(run).finally(() => {
        if (run.draining === draining) run.draining = null
      })
      run.draining = draining
    }
    return run.draining
  }

  private async drain(run: LiveRun): Promise<unknown> {
    // Issued now, not after the previous append is durable: the node service applies writes to a
    // node in the order they are called, and a watcher sees a line when it is applied. Waiting for
    // each commit's fsync before the next append made a streaming log's lines wait for it.
    const failed = (err: unknown) => this.log.warn({ err, path: run.path }, 'activity log write failed')
    for (;;) {
      while (run.messages.length > 0 || run.progress) {
        const messages = run.messages.splice(0, LINES_PER_APPEND)
        const last = run.messages.length === 0
        // Progress goes with the last slice: it is never ahead of the lines before it.
        const progress = last ? run.progress : null
        if (last) run.progress = null
        run.lastFlushAt = this.clock.now()
        // [ACT12] Lines and progress in one write, O(lines) whatever the log's length.
        const wrote = this.nodes
          .append(SYSTEM, run.path, 'Messages', messages as unknown as JsonValue[], 'engine', progress ? { patch: () => ({ Progress: progress as unknown as JsonObject }) } : {})
          .catch(failed)
        run.writes = Promise.all([run.writes, wrote])
        if (last) break
        await new Promise<void>((resolve) => setImmediate(resolve))
      }
      await run.writes
      // Lines that arrived while the slices became durable are this drain's too: a flush called
      // meanwhile got this drain back, so nothing else would write them (they would wait for the
      // next line, or go out all at once in the terminal write, past LINES_PER_APPEND).
      if (run.messages.length === 0 && !run.progress) return
    }
  }

  // ---------------------------------------------------------------- cancelling and finishing

  /**
   * [ACT5] RequestedStatus Cancelled: a live run is cancelled; a Running activity with no run
   * here ends Cancelled. A draft is left a draft (it simply does not start).
   */
  async cancel(path: NodePath): Promise<void> {
    const run = this.runs.get(path)
    if (run) {
      this.cancelRun(run)
      return
    }
    // A claim: the re-check, the line and the terminal fields are one write ([ACT9] racing).
    const at = now(this.clock)
    await claimAppend(this.nodes, path, 'Messages', [activityMessage('Info', 'Cancelled on request.', at)] as unknown as JsonValue[], {
      when: (cur) => cur.content.Status === 'Running' && cur.content.RequestedStatus === 'Cancelled' && !this.runs.has(path),
      patch: (cur) => terminalPatch(cur, 'Cancelled', {}, 'Cancelled', null, at),
    })
  }

  private cancelRun(run: LiveRun): void {
    if (!run.script || run.cancelSent) return
    run.cancelSent = true
    run.script.cancel()
  }

  /** [ACT9] On the engine's clock: no message or progress for watchdogMs kills the run. */
  private armWatchdog(run: LiveRun): void {
    const period = Math.max(10, Math.min(1_000, Math.floor(this.config.watchdogMs / 4)))
    run.watchdog = every(this.clock, period, () => {
      if (this.clock.now() - run.lastSign < this.config.watchdogMs || run.watchdogFired) return
      run.watchdogFired = true
      run.script?.kill(`No message or progress for ACTIVITY_WATCHDOG_MS (${this.config.watchdogMs} ms); the run was stopped.`)
    })
  }

  private finishRun(run: LiveRun, outcome: ScriptOutcome): void {
    run.watchdog?.()
    run.watchdog = null
    const done = async () => {
      let floor: ActivityStatus = 'Succeeded'
      const extra: JsonObject = {}
      if (outcome.ok) {
        if (outcome.value !== null && outcome.value !== undefined) extra.ReturnValue = outcome.value
      } else if (outcome.aborted && !run.watchdogFired) {
        floor = 'Cancelled'
        this.push(run, activityMessage(outcome.limit ? 'Warning' : 'Info', outcome.limit ? outcome.message : 'Cancelled on request.', now(this.clock)))
      } else {
        floor = 'Failed'
        extra.Error = outcome.message
        this.push(run, activityMessage('Error', outcome.message, now(this.clock)))
      }
      // The backlog first, in slices ([ACT12]); the terminal write carries what came after it.
      await this.flush(run)
      const lines = run.messages.splice(0)
      const progress = run.progress
      run.progress = null
      // Every earlier append first: the terminal write carries the last lines with the status.
      await run.writes
      await this.terminal(run.path, floor, extra, lines, run.worst, progress)
    }
    // Not chained onto run.writes: that chain is the appends, which the terminal write awaits (a
    // chain that held the terminal write too would wait for itself).
    const writing = done()
      .catch((err: unknown) => this.log.error({ err, path: run.path }, 'activity terminal write failed'))
      .finally(() => {
        this.terminalWrites.delete(writing)
        if (this.runs.get(run.path) === run) this.runs.delete(run.path)
        if (this.runs.size === 0) {
          const waiters = this.drainedWaiters
          this.drainedWaiters = []
          for (const w of waiters) w()
        }
      })
    this.terminalWrites.add(writing)
  }

  /**
   * [ACT3][ACT4] The terminal write (terminalPatch), re-checked inside the write. [ACT12] O(1) in
   * the log's length: the last lines are appended and the few terminal fields patched in one
   * transaction; nothing reads, diffs or serialises the whole log.
   */
  private async terminal(
    path: NodePath,
    floor: ActivityStatus,
    extra: JsonObject,
    lines: ActivityMessage[],
    worst: ActivityStatus,
    progress: ActivityProgress | null,
  ): Promise<void> {
    const at = now(this.clock)
    // [ACT20] The return value is set whole: a merge patch would drop its null members.
    const write = (floor_: ActivityStatus, extra_: JsonObject, lines_: ActivityMessage[]) => {
      const { ReturnValue, ...fields } = extra_
      return this.nodes.append(SYSTEM, path, 'Messages', lines_ as unknown as JsonValue[], 'engine', {
        patch: (cur) => terminalPatch(cur, floor_, fields, worst, progress, at),
        ...(ReturnValue !== undefined ? { set: { ReturnValue } } : {}),
      })
    }
    try {
      await write(floor, extra, lines)
    } catch (err) {
      // A value the node cannot hold (a ReturnValue nested past MAX_JSON_DEPTH, too large): the run
      // ends Failed saying so, not Running until the sweep calls its worker lost.
      if (!isWeftError(err) || !('ReturnValue' in extra)) throw err
      const why = `The script's return value could not be stored (${err.code}): ${err.message}`
      await write('Failed', { Error: why }, [...lines, activityMessage('Error', why, at)])
    }
  }

  /** Activities with a live run in this process (diagnostics, tests, benchmarks). */
  liveRuns(): NodePath[] {
    return [...this.runs.keys()]
  }
}
