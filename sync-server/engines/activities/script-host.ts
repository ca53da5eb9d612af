import { mkdirSync, rmSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { createRequire } from 'node:module'
import { Worker } from 'node:worker_threads'
import type * as Esbuild from 'esbuild'
import type { Logger } from 'pino'
import type { JsonObject, JsonValue } from '../../../shared/index.js'
import { LOG_BATCHES_IN_FLIGHT, type FromWorker, type MeshOp, type ScriptLanguage, type ScriptLimit, type ScriptLimits, type ToWorker } from './script-protocol.js'
import { CpuSlots } from './cpu-slots.js'
import { LogPace } from './log-pace.js'
import { realClock, type CancelTimer, type Clock } from '../kit/index.js'

let bundled: URL | null = null

/** `true` in the production build (sync-server/build.mjs defines it); undeclared under tsx. */
declare const WEFT_COMPILED: boolean | undefined

/**
 * The worker's code as one plain-JS file, built once per process with esbuild: a worker that
 * registers tsx compiles TypeScript as it starts (half a second per worker), a bundle starts in
 * a few tens of milliseconds. Falls back to the tsx entry if the build fails.
 */
function workerEntry(): URL {
  if (bundled) return bundled
  // The production build ships the worker compiled beside the bundle (dist-server/script-worker.mjs).
  if (typeof WEFT_COMPILED !== 'undefined' && WEFT_COMPILED) return (bundled = new URL('./script-worker.mjs', import.meta.url))
  try {
    // Inside node_modules, so the bundle's external imports resolve like the sources' do.
    const dir = fileURLToPath(new URL('../../../node_modules/.cache/weft-script-worker/', import.meta.url))
    mkdirSync(dir, { recursive: true })
    const outfile = join(dir, `worker-${process.pid}.mjs`)
    // Under tsx only (the production build never comes here); required, not imported, to stay synchronous.
    const { buildSync } = createRequire(import.meta.url)('esbuild') as typeof Esbuild
    buildSync({
      entryPoints: [fileURLToPath(new URL('./script-worker.ts', import.meta.url))],
      bundle: true,
      platform: 'node',
      format: 'esm',
      target: 'node20',
      outfile,
      // Resolved from the repository's node_modules at run time (quickjs loads its .wasm beside itself).
      external: ['quickjs-emscripten', 'esbuild'],
      logLevel: 'silent',
    })
    bundled = pathToFileURL(outfile)
  } catch {
    bundled = new URL('./script-worker.mjs', import.meta.url)
  }
  return bundled
}

export interface ScriptHostOptions extends ScriptLimits {
  /** After a cancel, a script still running this long is terminated (SCRIPT_CANCEL_GRACE_MS). */
  cancelGraceMs: number
  /** Scripts running at once; more wait their turn (each worker holds a WASM heap). */
  maxConcurrent: number
  /**
   * Workers kept started and loaded, so a run does not wait for a thread and its WASM (one from
   * `warmFirst`, the whole pool once a script has run).
   */
  spares: number
  /** [ACT15] Cores scripts may use at once (SCRIPT_CPU_SLOTS); 0 = no limit. */
  cpuSlots: number
  /** [ACT21] Log lines a second the server takes, shared by the runs logging at once (SCRIPT_LOG_LINES_PER_SECOND); 0 = no pace. */
  logLinesPerSecond?: number
  /**
   * [ACT18] Runs of one owner at once (SCRIPT_MAX_RUNS_PER_USER); that owner's further runs wait
   * for one of them to end, so one user never holds every script slot. 0 = no limit.
   */
  maxRunsPerUser?: number
  /**
   * The Linux nice value of each script thread (default 10: on a machine with fewer cores than
   * busy threads, the server's event loop gets the CPU first; 19 starved scripts on a machine
   * busy with other work, so far that a 10,000-line script missed a 1.5 s limit it meets at 10).
   */
  workerNice?: number
  log: Logger
  /** The grace and backstop timers and the lines' timestamps (default wall time; the test mesh's is virtual). */
  clock?: Clock
}

export interface ScriptRunHandlers {
  /** `at`: when the batch the line came in was taken (one timestamp a batch: lines of one batch arrive together). */
  onLog(level: 'Info' | 'Warning' | 'Error', text: string, at: string): void
  onProgress(fraction: number, text?: string): void
  /** A Mesh call of the script, to perform as the activity's owner; a refusal throws an error with `code`. */
  onMesh(op: MeshOp, args: JsonValue[], signal: AbortSignal): Promise<JsonValue>
  /** The script actually started (it may have waited for a free slot). */
  onStart?(): void
  /** [ACT18] The run waits because its owner already has SCRIPT_MAX_RUNS_PER_USER runs going (called once). */
  onQueued?(message: string): void
  /** [ACT17] Asked, when a run that waited gets its slot, why it may no longer start (null: it starts). */
  recheck?(): Promise<string | null>
}

export type ScriptOutcome =
  | { ok: true; value: JsonValue }
  | { ok: false; message: string; aborted: boolean; limit?: ScriptLimit | 'SCRIPT_CANCEL_GRACE_MS' }

export interface ScriptRun {
  /** Requests cancellation: Ct.aborted turns true, sleeps end; after the grace period the worker is terminated. */
  cancel(): void
  /** Terminates at once with this outcome (the watchdog, shutdown). */
  kill(message: string): void
  readonly done: Promise<ScriptOutcome>
}

/**
 * The source as the body of an async function `__weft_run` (top-level await and return work);
 * TypeScript types are stripped by esbuild's service, off the event loop.
 */
export async function compileScript(source: string, language: ScriptLanguage): Promise<string> {
  const wrapped = `async function __weft_run() {\n${source}\n}`
  if (language !== 'typescript') return wrapped
  // [PROD3] esbuild loads with the first TypeScript script, not at start.
  const { transform } = await import('esbuild')
  return (await transform(wrapped, { loader: 'ts', target: 'es2020' })).code
}

/** [ACT21] The log pace's bucket holds this many lines at least (a fifth of a second's pace if more). */
const LOG_BURST_MIN = 1_000

/** [ACT12] A log batch's in-flight slot, given back to its worker. */
function giveBack(logsInFlight: Int32Array): void {
  Atomics.sub(logsInFlight, 0, 1)
  Atomics.notify(logsInFlight, 0)
}

interface Spare {
  worker: Worker
  ready: Promise<void>
  /** [ACT12] Log batches the worker sent that this thread has not taken yet (shared Int32). */
  logsInFlight: Int32Array
}

/** A run waiting for a script slot: its owner ('' = counted against no owner). */
interface Waiter {
  owner: string
  start: () => void
}

/**
 * [ACT7] Runs scripts off the event loop: one worker thread per run (a QuickJS runtime inside),
 * terminated when the run ends, so nothing a script did survives it. A few spare workers are
 * kept loaded. The main thread only relays messages; the script's CPU is the worker's.
 */
export class ScriptHost {
  private readonly spares: Spare[] = []
  private running = 0
  private readonly queue: Waiter[] = []
  /** [ACT18] Runs holding a slot, per owner. */
  private readonly perOwner = new Map<string, number>()
  private closed = false
  private readonly logPace: LogPace
  private readonly live = new Set<ScriptRun>()
  /** Shared with every worker; ids for the runs at once, the spares, and workers still exiting. */
  readonly cpu: CpuSlots

  constructor(private readonly opts: ScriptHostOptions) {
    this.cpu = new CpuSlots(opts.cpuSlots, opts.maxConcurrent + opts.spares + 16)
    const pace = opts.logLinesPerSecond ?? 0
    this.logPace = new LogPace(pace, Math.max(LOG_BURST_MIN, pace / 5))
  }

  /** Starts spares until `upTo` are kept (default the whole pool, `spares`). */
  warm(upTo = this.opts.spares): void {
    while (!this.closed && this.spares.length < Math.min(upTo, this.opts.spares)) this.spares.push(this.spawn())
  }

  /**
   * [PROD3] Once someone uses the server (ActivityEngine.inUse): one spare, so the first run
   * starts as fast as any; the rest of the pool comes with the first run (each spare is a thread
   * and a QuickJS heap, ~11 MB, that a server whose scripts never run would hold for nothing).
   */
  warmFirst(): void {
    this.warm(1)
  }

  /** Spares started and not yet taken by a run. */
  get spareCount(): number {
    return this.spares.length
  }

  private spawn(): Spare {
    const cpu = this.cpu.allocate()
    const logsInFlight = new Int32Array(new SharedArrayBuffer(4))
    const worker = new Worker(workerEntry(), {
      // memoryMb sizes the worker's WASM memory once, before it knows its script ([ACT18]).
      workerData: { cpu, nice: this.opts.workerNice ?? 10, memoryMb: this.opts.memoryMb, logsInFlight },
      // A little above the script's own WASM limit: a runaway script cannot take the process.
      resourceLimits: { maxOldGenerationSizeMb: Math.max(64, this.opts.memoryMb * 2 + 64) },
      stdout: false,
      stderr: false,
    })
    worker.unref()
    // Whatever slot it held when it was terminated mid-slice is free again.
    worker.once('exit', () => this.cpu.free(cpu.id))
    const ready = new Promise<void>((resolve, reject) => {
      const onMessage = (m: FromWorker) => {
        if (m.t !== 'ready') return
        worker.off('message', onMessage)
        resolve()
      }
      worker.on('message', onMessage)
      worker.once('error', reject)
      worker.once('exit', () => reject(new Error('script worker exited before it was ready')))
    })
    ready.catch(() => undefined)
    return { worker, ready, logsInFlight }
  }

  private mayStart(owner: string): boolean {
    const perUser = this.opts.maxRunsPerUser ?? 0
    return this.running < this.opts.maxConcurrent && (owner === '' || perUser <= 0 || (this.perOwner.get(owner) ?? 0) < perUser)
  }

  private take(owner: string): void {
    this.running++
    if (owner !== '') this.perOwner.set(owner, (this.perOwner.get(owner) ?? 0) + 1)
  }

  /**
   * A script slot: at most maxConcurrent runs at once and, [ACT18], at most maxRunsPerUser of one
   * owner. Waiters start in arrival order, skipping those whose owner is at their limit (so one
   * user's queue never holds up another's run).
   */
  private async slot(owner: string, onQueued?: (message: string) => void): Promise<boolean> {
    const waiter: Waiter = { owner, start: () => undefined }
    const started = new Promise<void>((resolve) => (waiter.start = resolve))
    this.queue.push(waiter)
    this.dispatch()
    const waits = this.queue.includes(waiter)
    const perUser = this.opts.maxRunsPerUser ?? 0
    if (waits && owner !== '' && perUser > 0 && (this.perOwner.get(owner) ?? 0) >= perUser) {
      onQueued?.(`Waiting: ${perUser} runs of the same user are running, the most SCRIPT_MAX_RUNS_PER_USER (${perUser}) allows at once; this run starts when one of them ends.`)
    }
    await started
    return waits
  }

  /** Starts every waiter that may start now, in arrival order. */
  private dispatch(): void {
    for (let i = 0; i < this.queue.length && this.running < this.opts.maxConcurrent; ) {
      const w = this.queue[i]!
      if (!this.mayStart(w.owner)) {
        i++
        continue
      }
      this.queue.splice(i, 1)
      this.take(w.owner)
      w.start()
    }
  }

  private release(owner: string): void {
    this.running--
    if (owner !== '') {
      const n = (this.perOwner.get(owner) ?? 1) - 1
      if (n > 0) this.perOwner.set(owner, n)
      else this.perOwner.delete(owner)
    }
    this.dispatch()
  }

  /** `owner` (the principal the run acts as) is what SCRIPT_MAX_RUNS_PER_USER counts; omitted, the run counts against nobody. */
  run(source: string, language: ScriptLanguage, inputs: JsonObject, handlers: ScriptRunHandlers, owner = ''): ScriptRun {
    const cancelFlag = new SharedArrayBuffer(4)
    const flag = new Int32Array(cancelFlag)
    let worker: Worker | null = null
    let settle: (o: ScriptOutcome) => void = () => undefined
    let outcome: ScriptOutcome | null = null
    const clock = this.opts.clock ?? realClock
    let graceTimer: CancelTimer | null = null
    let backstop: CancelTimer | null = null
    let cancelled = false
    let holdsSlot = false
    const meshAbort = new AbortController()
    const done = new Promise<ScriptOutcome>((resolve) => (settle = resolve))
    const end = (o: ScriptOutcome) => {
      if (outcome) return
      outcome = o
      graceTimer?.()
      backstop?.()
      meshAbort.abort()
      if (worker) void worker.terminate()
      this.live.delete(run)
      this.logPace.forget(run)
      settle(o)
    }
    const run: ScriptRun = {
      cancel: () => {
        if (outcome || cancelled) return
        cancelled = true
        // Still waiting for its slot or its worker: it ends now and never starts (it used to start
        // once its turn came, and to say 2 s later that a script which never ran was terminated).
        if (!worker) return end({ ok: false, aborted: true, message: 'Cancelled before it started.' })
        Atomics.store(flag, 0, 1)
        worker?.postMessage({ t: 'cancel' } satisfies ToWorker)
        graceTimer = clock.setTimeout(() => {
          end({
            ok: false,
            aborted: true,
            limit: 'SCRIPT_CANCEL_GRACE_MS',
            message: `The script did not stop within SCRIPT_CANCEL_GRACE_MS (${this.opts.cancelGraceMs} ms) of the cancel and was terminated.`,
          })
        }, this.opts.cancelGraceMs)
      },
      kill: (message) => end({ ok: false, aborted: cancelled, message }),
      done,
    }
    this.live.add(run)
    void done.then(() => {
      if (holdsSlot) this.release(owner)
    })
    const start = async () => {
      let code: string
      try {
        code = await compileScript(source, language)
      } catch (err) {
        return end({ ok: false, aborted: false, message: `The script does not compile: ${(err as Error).message.split('\n').slice(0, 3).join(' ')}` })
      }
      const waited = await this.slot(owner, handlers.onQueued)
      holdsSlot = true
      if (outcome) {
        this.release(owner)
        holdsSlot = false
        return
      }
      if (waited && handlers.recheck) {
        const refusal = await handlers.recheck().catch((err: unknown) => `The run could not be checked again: ${(err as Error).message}`)
        if (refusal) return end({ ok: false, aborted: false, message: refusal })
        if (outcome) return
      }
      if (this.closed) return end({ ok: false, aborted: false, message: 'The server is shutting down.' })
      let spare = this.spares.shift() ?? this.spawn()
      try {
        await spare.ready
      } catch {
        spare = this.spawn()
        await spare.ready
      }
      this.warm()
      if (outcome) {
        void spare.worker.terminate()
        return
      }
      worker = spare.worker
      const logsInFlight = spare.logsInFlight
      /** [ACT21] Whether this run has said, once, that it logs faster than the pace. */
      let pacedSaid = false
      worker.on('message', (m: FromWorker) => {
        let paced = false
        if (m.t === 'logs') {
          // [ACT12] Taken: a worker flooding its log waits for this before it sends more;
          // [ACT21] given back once the run's share of the log pace has paid for the batch. The
          // run is told once, when it is really held back: its other batch is in flight too, so
          // the worker waits for this one.
          const wait = this.logPace.reserve(run, LogPace.cost(m.lines))
          paced = wait > 0 && !pacedSaid && Atomics.load(logsInFlight, 0) >= LOG_BATCHES_IN_FLIGHT
          if (wait <= 0) giveBack(logsInFlight)
          else setTimeout(giveBack, wait, logsInFlight).unref()
        }
        if (outcome) return
        switch (m.t) {
          case 'ready':
            return
          case 'logs':
            {
              const at = new Date(clock.now()).toISOString()
              for (const line of m.lines) handlers.onLog(line.level, line.text, at)
              if (paced) {
                pacedSaid = true
                handlers.onLog('Info', `This run logs faster than the server takes log lines (SCRIPT_LOG_LINES_PER_SECOND: ${(this.opts.logLinesPerSecond ?? 0).toLocaleString('en-US')} a second, shared by the runs logging at once): it waits while it logs, and no line is lost.`, at)
              }
            }
            if (m.progress) handlers.onProgress(m.progress.fraction, m.progress.text)
            return
          case 'mesh':
            handlers.onMesh(m.op, m.args, meshAbort.signal).then(
              (value) => worker?.postMessage({ t: 'mesh-result', id: m.id, ok: true, value: value ?? null } satisfies ToWorker),
              (err: unknown) => {
                const e = err as { code?: unknown; message?: unknown }
                worker?.postMessage({
                  t: 'mesh-result',
                  id: m.id,
                  ok: false,
                  code: typeof e?.code === 'string' ? e.code : 'internal',
                  message: typeof e?.message === 'string' ? e.message : 'The call failed.',
                } satisfies ToWorker)
              },
            )
            return
          case 'done':
            if (m.ok) end({ ok: true, value: m.value })
            else end({ ok: false, message: m.message, aborted: m.aborted || cancelled, limit: m.limit })
            return
          default:
            m satisfies never
        }
      })
      worker.once('error', (err) => {
        // The worker's own heap (what the script's calls and lines cost outside the WASM) ran out.
        if ((err as { code?: string }).code === 'ERR_WORKER_OUT_OF_MEMORY') {
          end({ ok: false, aborted: false, limit: 'SCRIPT_MEMORY_MB', message: `The script used more than SCRIPT_MEMORY_MB (${this.opts.memoryMb} MB) and was stopped.` })
        } else end({ ok: false, aborted: cancelled, message: `The script worker crashed: ${err.message}` })
      })
      worker.once('exit', () => end({ ok: false, aborted: cancelled, message: 'The script worker stopped unexpectedly.' }))
      // A message this thread cannot read (a value nested deeper than its stack, which the worker's
      // larger one could write): the run ends now, saying so. It was lost silently, and the run
      // held its slot until the watchdog ended it as SCRIPT_TIMEOUT_MS (stop 42).
      worker.on('messageerror', (err) => end({ ok: false, aborted: cancelled, message: `The script sent a value this server cannot read (nested too deeply?): ${err.message}` }))
      // The worker stops a spinning script itself (interrupt handler); this is the backstop. Wall
      // time, not the engine's clock: what it backs up, the worker's deadline, is wall time.
      backstop = realClock.setTimeout(() => {
        end({ ok: false, aborted: false, limit: 'SCRIPT_TIMEOUT_MS', message: `The script ran longer than SCRIPT_TIMEOUT_MS (${this.opts.timeoutMs} ms) and was terminated.` })
      }, this.opts.timeoutMs + 2_000)
      handlers.onStart?.()
      worker.postMessage({
        t: 'run',
        source: code,
        language,
        inputs,
        limits: {
          timeoutMs: this.opts.timeoutMs,
          memoryMb: this.opts.memoryMb,
          logMaxLines: this.opts.logMaxLines,
          logMaxBytes: this.opts.logMaxBytes,
          meshInFlight: this.opts.meshInFlight,
          maxPayloadBytes: this.opts.maxPayloadBytes,
        },
        cancelFlag,
      } satisfies ToWorker)
      if (cancelled) worker.postMessage({ t: 'cancel' } satisfies ToWorker)
    }
    start().catch((err: unknown) => end({ ok: false, aborted: false, message: `The script could not start: ${(err as Error).message}` }))
    return run
  }

  get activeRuns(): number {
    return this.live.size
  }

  async close(): Promise<void> {
    this.closed = true
    for (const r of [...this.live]) r.kill('The server is shutting down.')
    await Promise.all(this.spares.splice(0).map((s) => s.worker.terminate()))
    if (bundled?.protocol === 'file:' && bundled.pathname.includes('/.cache/')) {
      rmSync(fileURLToPath(bundled), { force: true })
      bundled = null
    }
  }
}
