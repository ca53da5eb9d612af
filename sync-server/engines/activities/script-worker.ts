import { setPriority } from 'node:os'
import { parentPort, workerData } from 'node:worker_threads'
import { RELEASE_SYNC, newQuickJSWASMModuleFromVariant, newVariant, type QuickJSContext, type QuickJSHandle, type QuickJSRuntime } from 'quickjs-emscripten'
import { LOG_BATCHES_IN_FLIGHT, type FromWorker, type LogLine, type ScriptLimit, type ToWorker } from './script-protocol.js'
import { SCRIPT_FILE, WRAPPER_LINES, scriptLocation } from './script-location.js'
import { CpuTurn, type CpuSlotsInit } from './cpu-slots.js'
import { cutText, toStorableJson, toStorableText } from '../../../shared/storable-text.js'
import type { JsonValue } from '../../../shared/json.js'

/**
 * A script worker: runs ONE script in a fresh QuickJS (WASM) runtime, off the server's event
 * loop. The sandbox has no host objects at all: no fs, network, process, require or fetch;
 * only the globals the bootstrap below defines, each a thin shim over a host function that
 * posts a message to the main thread (which acts as the activity's owner). [ACT7]
 */

const port = parentPort!
// A lower scheduling priority for this thread only (Linux nice values are per thread): on a
// machine with fewer cores than busy scripts, the server's event loop gets the CPU first.
try {
  setPriority((workerData as { nice?: number } | null)?.nice ?? 10)
} catch {
  // Not permitted here: scripts run at the server's priority.
}
const send = (m: FromWorker) => port.postMessage(m)
/**
 * Log lines go to the host in batches (one message per LOG_BATCH_MS of a spinning script, or per
 * synchronous stretch): a message per line cost the server's event loop ~15 µs each, which a
 * script logging in a tight loop turned into a backlog.
 */
const LOG_BATCH_MS = 5
/** Lines a batch carries at most: taking one batch is one task of the server's event loop. */
const LOG_BATCH_LINES = 200
/**
 * [ACT12] LOG_BATCHES_IN_FLIGHT (script-protocol.ts): batches sent and not yet taken by the
 * server, at most; past it the script waits (it is a flood), so a script logging in a tight loop
 * goes at the pace the server takes its lines, and the server's event loop never meets a pile of
 * batches in one turn. A wait gives up after LOG_WAIT_MAX_MS: a backlog, never a stall. It is a
 * safety net, not a bound that applies: since [ACT21] a wait can rightly last seconds (16 runs
 * flooding 10,000-character lines wait ~6 s a batch for SCRIPT_LOG_LINES_PER_SECOND), and giving
 * up sooner would let them past the pace.
 */
const LOG_WAIT_MAX_MS = 30_000
const logsInFlight = (workerData as { logsInFlight?: Int32Array } | null)?.logsInFlight ?? null
/** A line (and progress text) is cut to this many characters in the sandbox, before it is copied out. */
const LINE_MAX_CHARS = 10_000
let logBatch: LogLine[] = []
let progressBatch: { fraction: number; text?: string } | null = null
let logBatchSince = 0
const batchEmpty = () => logBatch.length === 0 && progressBatch === null
/** The run's SCRIPT_TIMEOUT_MS deadline (Date.now()); a wait for a CPU slot gives up past it. */
let runDeadline = Number.POSITIVE_INFINITY
/** Whether the run was cancelled (its shared flag); a log wait ends when it is. */
let runAborted: () => boolean = () => false
// [ACT15] The interpreter runs only while this worker holds one of the host's CPU slots.
const turn = new CpuTurn(((workerData as { cpu?: CpuSlotsInit } | null)?.cpu ?? null))
/**
 * Blocks until the server has taken enough batches for one more to go out. [ACT21] Waiting is not
 * work: the CPU slot goes to another script meanwhile and is taken again (as before any
 * interpreter work) after the wait. Past the run's deadline, or cancelled, the script is stopped
 * (the interrupt handler sees it), not kept waiting: a cancel ends the run within its grace.
 */
const waitForLogSlot = (inFlight: Int32Array) => {
  if (Atomics.load(inFlight, 0) < LOG_BATCHES_IN_FLIGHT) return
  const held = turn.holding
  turn.release()
  const deadline = performance.now() + LOG_WAIT_MAX_MS
  for (let n = Atomics.load(inFlight, 0); n >= LOG_BATCHES_IN_FLIGHT; n = Atomics.load(inFlight, 0)) {
    const left = deadline - performance.now()
    if (left <= 0 || Date.now() >= runDeadline || runAborted()) break
    Atomics.wait(inFlight, 0, n, Math.min(left, 50))
  }
  if (held) turn.acquire(() => Date.now() >= runDeadline)
}
const flushLogs = () => {
  if (batchEmpty()) return
  if (logsInFlight) {
    waitForLogSlot(logsInFlight)
    Atomics.add(logsInFlight, 0, 1)
  }
  send(progressBatch ? { t: 'logs', lines: logBatch, progress: progressBatch } : { t: 'logs', lines: logBatch })
  logBatch = []
  progressBatch = null
}
/**
 * [ACT18] SCRIPT_MEMORY_MB bounds the WASM memory itself, sized once and never grown (initial =
 * maximum; at least the 16 MB the interpreter's image needs). QuickJS's own malloc limit does not
 * hold under Emscripten (malloc_usable_size is unavailable, so it counts 8 bytes per block:
 * 800 MB of typed arrays passed a 64 MB limit); a fixed memory makes every allocation past it
 * fail inside QuickJS as "out of memory". A memory that never grows also never detaches its
 * buffer, so no typed-array view over it (quickjs-emscripten keeps some across calls into the
 * interpreter, e.g. in executePendingJobs) is ever read detached.
 */
const WASM_PAGE = 64 * 1024
const memoryMb = Math.max(16, (workerData as { memoryMb?: number } | null)?.memoryMb ?? 64)
const wasmMemory = new WebAssembly.Memory({ initial: (memoryMb * 1024 * 1024) / WASM_PAGE, maximum: (memoryMb * 1024 * 1024) / WASM_PAGE })
const wasmBuffer = wasmMemory.buffer
/**
 * Set once the interpreter asked for more memory than there is (its allocator tried to grow the
 * memory, which cannot grow). QuickJS then throws "out of memory", or, when even that error
 * cannot be allocated, `null`: either way the run failed for SCRIPT_MEMORY_MB.
 */
let heapFull = false
const grow = wasmMemory.grow.bind(wasmMemory)
wasmMemory.grow = (delta: number) => {
  heapFull = true
  return grow(delta)
}
// Loaded as the worker starts, so a warm worker runs its script without waiting for the WASM.
const quickjsReady = newQuickJSWASMModuleFromVariant(newVariant(RELEASE_SYNC, { wasmMemory })).then((q) => {
  send({ t: 'ready' })
  return q
})

/**
 * The sandbox's globals. Promises are made inside the sandbox (the host keeps their resolve and
 * reject functions), not with the library's newPromise, which reads a memory view it took before
 * the call that allocates the promise. [ACT18] A run's Mesh calls wait their turn here: at most
 * MESH_IN_FLIGHT reach the server at once, the rest queue in call order, held in the sandbox's
 * own (bounded) memory. A waitFor can last as long as its timeout, so waits do not queue (a queue
 * of waits would hold every later call): at most MESH_IN_FLIGHT are outstanding, and one more is
 * refused with `limit_exceeded`.
 */
const bootstrap = (meshInFlight: number) => `
(function (h, MESH_IN_FLIGHT, LINE_MAX) {
  'use strict';
  // The script's later changes to its globals do not reach the calls made here.
  const Promise = globalThis.Promise;
  class AbortError extends Error {
    constructor() { super('The activity was cancelled.'); this.name = 'AbortError'; this.code = 'cancelled'; }
  }
  const failure = (s) => { const d = JSON.parse(s); const e = new Error(d.message); e.code = d.code; return e; };
  const raw = (op, s) => new Promise((resolve, reject) => {
    const refused = h.call(op, s, resolve, reject);
    if (refused !== undefined) reject(refused);
  }).then((r) => (r === undefined ? undefined : JSON.parse(r)), (r) => { throw failure(r); });
  let inFlight = 0;
  const waiting = [];
  // A finished call hands its place straight to the next waiting one: never more than MESH_IN_FLIGHT.
  const release = () => { const next = waiting.shift(); if (next) next(); else inFlight--; };
  const call = async (op, args) => {
    const s = JSON.stringify(args);
    if (inFlight < MESH_IN_FLIGHT) inFlight++;
    else await new Promise((r) => waiting.push(r));
    try { return await raw(op, s); } finally { release(); }
  };
  let waits = 0;
  const waitFor = (path, fields, opts) => {
    if (waits >= MESH_IN_FLIGHT) {
      const e = new Error('This run already waits on ' + MESH_IN_FLIGHT + ' Mesh.waitFor calls, the most SCRIPT_MESH_IN_FLIGHT (' + MESH_IN_FLIGHT + ') allows at once; this one was refused.');
      e.code = 'limit_exceeded';
      return Promise.reject(e);
    }
    waits++;
    let s;
    try { s = JSON.stringify([path, fields ?? {}, opts ?? {}]); } catch (e) { waits--; return Promise.reject(e); }
    return raw('waitFor', s).finally(() => { waits--; });
  };
  const cut = (s) => {
    if (s.length <= LINE_MAX) return s;
    const c = s.charCodeAt(LINE_MAX - 1);
    return s.slice(0, c >= 0xd800 && c <= 0xdbff ? LINE_MAX - 1 : LINE_MAX) + '…';
  };
  // [STO10] NUL and half characters replaced here, as toStorableText does on the host: the runtime
  // hands the host a string only up to its first NUL, and half an emoji as one U+FFFD per byte.
  const text = (v) => cut(typeof v === 'string' ? v : (() => { try { return String(JSON.stringify(v)); } catch { return String(v); } })()).replace(/\\u0000|\\p{Cs}/gu, '\\uFFFD');
  const Log = Object.freeze({
    info: (t) => h.log('Info', text(t)),
    warn: (t) => h.log('Warning', text(t)),
    error: (t) => h.log('Error', text(t)),
  });
  globalThis.Log = Log;
  globalThis.console = Object.freeze({ log: Log.info, info: Log.info, warn: Log.warn, error: Log.error });
  globalThis.Progress = (fraction, t) => h.progress(Number(fraction), t === undefined ? undefined : text(t));
  globalThis.Ct = Object.freeze({
    get aborted() { return h.aborted(); },
    throwIfAborted() { if (h.aborted()) throw new AbortError(); },
  });
  globalThis.sleep = (ms) => new Promise((resolve) => h.sleep(Number(ms) || 0, resolve)).then(() => { if (h.aborted()) throw new AbortError(); });
  globalThis.Mesh = Object.freeze({
    get: (path) => call('get', [path]),
    put: (path, draft) => call('put', [path, draft ?? {}]),
    patch: (path, patch) => call('patch', [path, patch ?? {}]),
    delete: (path) => call('delete', [path]),
    query: (q) => call('query', [q ?? {}]),
    waitFor,
  });
})(globalThis.__weft_host, ${meshInFlight}, ${LINE_MAX_CHARS});
delete globalThis.__weft_host;
`

let current: { cancel(): void; meshResult(m: Extract<ToWorker, { t: 'mesh-result' }>): void } | null = null

port.on('message', (m: ToWorker) => {
  switch (m.t) {
    case 'run':
      void run(m)
      return
    case 'cancel':
      current?.cancel()
      return
    case 'mesh-result':
      current?.meshResult(m)
      return
    default:
      m satisfies never
  }
})

async function run(m: Extract<ToWorker, { t: 'run' }>): Promise<void> {
  const QuickJS = await quickjsReady
  const flag = new Int32Array(m.cancelFlag)
  const aborted = () => Atomics.load(flag, 0) === 1
  runAborted = aborted
  const deadline = Date.now() + m.limits.timeoutMs
  runDeadline = deadline
  const maxPayload = m.limits.maxPayloadBytes ?? 1024 * 1024
  const maxLines = m.limits.logMaxLines ?? Number.MAX_SAFE_INTEGER
  const maxLogBytes = m.limits.logMaxBytes ?? Number.MAX_SAFE_INTEGER
  const meshInFlight = Math.max(1, m.limits.meshInFlight ?? 64)
  let limit: ScriptLimit | undefined
  const runtime: QuickJSRuntime = QuickJS.newRuntime()
  // Refuses any one allocation past the limit (the fixed WASM memory bounds them all together).
  runtime.setMemoryLimit(memoryMb * 1024 * 1024)
  runtime.setMaxStackSize(1024 * 1024)
  const pastDeadline = () => Date.now() >= deadline
  // Called regularly while the interpreter runs: a spinning script is stopped at its deadline,
  // and hands its CPU slot on after each time slice when another script waits for one.
  runtime.setInterruptHandler(() => {
    // A line logged before a long spin goes out without waiting for the spin to end.
    if (!batchEmpty() && performance.now() - logBatchSince >= LOG_BATCH_MS) flushLogs()
    if (!pastDeadline() && turn.maybeYield(pastDeadline)) return false
    limit = 'SCRIPT_TIMEOUT_MS'
    return true
  })
  /** Runs interpreter work while holding a CPU slot (past the deadline, the interrupt stops it at once). */
  const onCpu = <T>(work: () => T): T => {
    turn.acquire(pastDeadline)
    try {
      return work()
    } finally {
      turn.release()
      // The end of a synchronous stretch (the script awaits, or is done): what it logged goes out.
      flushLogs()
    }
  }
  const vm: QuickJSContext = runtime.newContext()
  /** Resolve/reject functions of the sandbox's own promises, kept until the host settles them. */
  type Settler = { resolve: QuickJSHandle; reject: QuickJSHandle; wait: boolean }
  const pending = new Map<number, Settler>()
  // [ACT18] The bound of Mesh calls, kept here where a script cannot reach: the sandbox's own queue
  // (which makes calls past it wait) runs on the script's Promise, which the script can replace.
  const held = { calls: 0, waits: 0 }
  const sleeps = new Set<{ timer: NodeJS.Timeout; resolve: QuickJSHandle }>()
  let nextId = 1
  let settled = false
  let finishRun: (r: FromWorker) => void = () => undefined
  const finished = new Promise<FromWorker>((resolve) => (finishRun = resolve))
  const pump = () => {
    if (settled) return
    const r = onCpu(() => runtime.executePendingJobs())
    if (r.error) r.error.dispose()
    // The memory is fixed: a buffer that changed would mean views the library holds went stale.
    if (wasmMemory.buffer !== wasmBuffer) finishRun({ t: 'done', ok: false, aborted: false, message: 'The script host\'s memory changed size; the run was stopped.' })
  }
  /** Calls a sandbox function the host kept (a promise's resolve or reject) with one string or no argument. */
  const settle = (fnHandle: QuickJSHandle, value: string | undefined) => {
    const arg = value === undefined ? vm.undefined : vm.newString(value)
    const r = vm.callFunction(fnHandle, vm.undefined, arg)
    if (value !== undefined) arg.dispose()
    if (r.error) r.error.dispose()
    else r.value.dispose()
  }
  const drop = (s: Settler) => {
    s.resolve.dispose()
    s.reject.dispose()
  }

  const endSleep = (s: { timer: NodeJS.Timeout; resolve: QuickJSHandle }) => {
    clearTimeout(s.timer)
    sleeps.delete(s)
    if (settled || !s.resolve.alive) return
    settle(s.resolve, undefined)
    s.resolve.dispose()
    pump()
  }
  current = {
    cancel: () => {
      for (const s of [...sleeps]) endSleep(s)
    },
    meshResult: (r) => {
      const d = pending.get(r.id)
      if (!d || settled) return
      pending.delete(r.id)
      if (d.wait) held.waits--
      else held.calls--
      if (r.ok) settle(d.resolve, JSON.stringify(r.value ?? null))
      else settle(d.reject, JSON.stringify({ code: r.code, message: r.message }))
      drop(d)
      pump()
    },
  }

  // [ACT18] The run's log: lines past SCRIPT_LOG_MAX_LINES or SCRIPT_LOG_MAX_BYTES are dropped
  // here, before they cost the server anything; one Warning says so as the first is dropped,
  // and the run's last line counts them (an Error if an error was among them, so the status
  // still says the run failed).
  let keptLines = 0
  let keptBytes = 0
  let dropped = 0
  let droppedError: string | null = null
  const batch = (line: LogLine) => {
    if (batchEmpty()) logBatchSince = performance.now()
    logBatch.push(line)
    if (logBatch.length >= LOG_BATCH_LINES || performance.now() - logBatchSince >= LOG_BATCH_MS) flushLogs()
  }
  /** A line or progress text fits MAX_PAYLOAD_BYTES (a UTF-16 unit is at most 3 bytes of UTF-8). */
  const fit = (t: string) => (t.length * 3 > maxPayload && Buffer.byteLength(t) > maxPayload ? `${cutText(t, Math.floor(maxPayload / 3) - 1)}…` : t)
  const log = (level: LogLine['level'], raw: string) => {
    // [STO10] What the script printed is kept: a NUL or half an emoji (its own, or a cut's) becomes U+FFFD.
    const text = fit(toStorableText(raw))
    const bytes = Buffer.byteLength(text)
    if (dropped === 0 && keptLines < maxLines && keptBytes + bytes <= maxLogBytes) {
      keptLines++
      keptBytes += bytes
      batch({ level, text })
      return
    }
    if (dropped === 0) {
      const which = keptLines >= maxLines ? `SCRIPT_LOG_MAX_LINES (${maxLines} lines)` : `SCRIPT_LOG_MAX_BYTES (${maxLogBytes} bytes)`
      batch({ level: 'Warning', text: `This run's log reached ${which}: later lines are dropped.` })
    }
    dropped++
    if (level === 'Error' && droppedError === null) droppedError = cutText(text, 1_000)
  }
  const droppedSummary = (): LogLine | null => {
    if (dropped === 0) return null
    if (droppedError !== null) return { level: 'Error', text: `${dropped} log lines were dropped past the run's log limit; one of them was an error: ${droppedError}` }
    return { level: 'Info', text: `${dropped} log lines were dropped past the run's log limit.` }
  }

  const host = vm.newObject()
  const fn = (name: string, impl: (...args: QuickJSHandle[]) => QuickJSHandle | undefined) => {
    const f = vm.newFunction(name, impl)
    vm.setProp(host, name, f)
    f.dispose()
  }
  fn('log', (level, text) => {
    const l = vm.getString(level)
    log(l === 'Warning' || l === 'Error' ? l : 'Info', vm.getString(text))
    return undefined
  })
  fn('progress', (fraction, text) => {
    const f = vm.getNumber(fraction)
    const t = text && vm.typeof(text) === 'string' ? fit(vm.getString(text)) : undefined
    if (batchEmpty()) logBatchSince = performance.now()
    // Only the latest progress of a batch is sent: Progress in a tight loop is one message per batch.
    progressBatch = { fraction: Number.isFinite(f) ? Math.min(1, Math.max(0, f)) : 0, ...(t === undefined ? {} : { text: t }) }
    if (performance.now() - logBatchSince >= LOG_BATCH_MS) flushLogs()
    return undefined
  })
  fn('aborted', () => (aborted() ? vm.true : vm.false))
  fn('sleep', (ms, resolve) => {
    const wait = Math.max(0, Math.min(vm.getNumber(ms) || 0, 2 ** 31 - 1))
    const s = { timer: setTimeout(() => endSleep(s), aborted() ? 0 : wait), resolve: resolve!.dup() }
    sleeps.add(s)
    return undefined
  })
  fn('call', (op, args, resolve, reject) => {
    const s = vm.getString(args)
    // [ACT18] Measured here, in the worker: a 20 MB value never reaches the server's event loop.
    if (s.length * 3 > maxPayload && Buffer.byteLength(s) > maxPayload) {
      return vm.newString(
        JSON.stringify({
          code: 'payload_too_large',
          message: `The Mesh.${vm.getString(op)} call carries ${Buffer.byteLength(s)} bytes of JSON, more than MAX_PAYLOAD_BYTES (${maxPayload}); nothing was written.`,
        }),
      )
    }
    // The sandbox keeps this from happening (N calls and N waits); a script that replaced its
    // Promise gets past the sandbox's queue, not past this.
    const wait = vm.getString(op) === 'waitFor'
    if ((wait ? held.waits : held.calls) >= meshInFlight) {
      return vm.newString(JSON.stringify({ code: 'limit_exceeded', message: `More than SCRIPT_MESH_IN_FLIGHT (${meshInFlight}) Mesh ${wait ? 'waits' : 'calls'} at once.` }))
    }
    if (wait) held.waits++
    else held.calls++
    const id = nextId++
    pending.set(id, { resolve: resolve!.dup(), reject: reject!.dup(), wait })
    flushLogs()
    send({ t: 'mesh', id, op: vm.getString(op) as never, args: JSON.parse(s) as never })
    return undefined
  })
  vm.setProp(vm.global, '__weft_host', host)
  host.dispose()
  const inputs = vm.newString(JSON.stringify(m.inputs ?? {}))
  const parsed = vm.unwrapResult(vm.evalCode('(s) => Object.freeze(JSON.parse(s))'))
  const inputsValue = vm.unwrapResult(vm.callFunction(parsed, vm.undefined, inputs))
  vm.setProp(vm.global, 'Inputs', inputsValue)
  for (const h of [inputs, parsed, inputsValue]) h.dispose()
  vm.unwrapResult(vm.evalCode(bootstrap(meshInFlight))).dispose()

  // The deadline also holds while the script waits (sleep, Mesh): no interpreter runs then.
  const deadlineTimer = setTimeout(() => {
    limit = 'SCRIPT_TIMEOUT_MS'
    finishRun({ t: 'done', ok: false, aborted: false, limit, message: `The script ran longer than SCRIPT_TIMEOUT_MS (${m.limits.timeoutMs} ms) and was stopped.` })
  }, m.limits.timeoutMs)

  const failure = (message: string): FromWorker => {
    if (limit === 'SCRIPT_TIMEOUT_MS') {
      return { t: 'done', ok: false, aborted: false, limit, message: `The script ran longer than SCRIPT_TIMEOUT_MS (${m.limits.timeoutMs} ms) and was stopped.` }
    }
    if (heapFull || /out of memory/i.test(message)) {
      return { t: 'done', ok: false, aborted: false, limit: 'SCRIPT_MEMORY_MB', message: `The script used more than SCRIPT_MEMORY_MB (${memoryMb} MB) and was stopped.` }
    }
    // [STO10] A thrown message reaches here as JSON (a NUL or half an emoji intact): made storable,
    // or the run's final write would be refused and the run left Running. [ACT18] And cut as a log
    // line is: it becomes the run's Error and its last line (a 20 MB throw was stored whole).
    return { t: 'done', ok: false, aborted: aborted(), message: toStorableText(cutText(message, LINE_MAX_CHARS)) }
  }

  // Compiled on the main thread (script-host.ts compileScript): the function wrapping the source.
  const code = m.source
  // The wrapper's closing line is not the person's: a frame there (never, in practice) names no line.
  const sourceLines = code.split('\n').length - WRAPPER_LINES - 1
  {
    const result = onCpu(() => vm.evalCode(`${code}\n__weft_run().then((v) => JSON.stringify(v === undefined ? null : v))`, SCRIPT_FILE))
    if (result.error) {
      // Reading a thrown value runs the script's own code (a getter, a toString): in a CPU slot.
      finishRun(failure(onCpu(() => errorText(vm, result.error!, sourceLines))))
      result.error.dispose()
    } else {
      const promise = result.value
      vm.resolvePromise(promise).then((r) => {
        if (r.error) {
          const thrown = r.error
          finishRun(failure(onCpu(() => errorText(vm, thrown, sourceLines))))
          r.error.dispose()
          return
        }
        const s = vm.getString(r.value)
        r.value.dispose()
        // [ACT18] The return value is measured here too, before anything reaches the server.
        if (s.length * 3 > maxPayload && Buffer.byteLength(s) > maxPayload) {
          finishRun({
            t: 'done',
            ok: false,
            aborted: false,
            limit: 'MAX_PAYLOAD_BYTES',
            message: `The script returned ${Buffer.byteLength(s)} bytes of JSON, more than MAX_PAYLOAD_BYTES (${maxPayload}); the value was not kept.`,
          })
          return
        }
        let value: unknown = null
        try {
          value = JSON.parse(s)
        } catch {
          value = null
        }
        finishRun({ t: 'done', ok: true, value: toStorableJson((value ?? null) as JsonValue) as never })
      }, (err: unknown) => finishRun(failure(String(err))))
      promise.dispose()
      pump()
    }
  }
  const outcome = await finished
  settled = true
  clearTimeout(deadlineTimer)
  for (const s of sleeps) clearTimeout(s.timer)
  const summary = droppedSummary()
  if (summary) logBatch.push(summary)
  flushLogs()
  send(outcome)
  // One run per worker: the main thread terminates it, nothing is disposed piecemeal (a runtime
  // with live handles cannot be freed cleanly, and the thread's memory goes with it anyway).
}

function errorText(vm: QuickJSContext, handle: QuickJSHandle, sourceLines = Number.MAX_SAFE_INTEGER): string {
  try {
    const e = vm.dump(handle) as unknown
    if (e && typeof e === 'object') {
      const o = e as { name?: string; message?: string; stack?: unknown }
      const text = [o.name, o.message].filter(Boolean).join(': ') || JSON.stringify(e)
      // The run page links "line N, column M" to that line of the code the run executed.
      const at = scriptLocation(o.stack, sourceLines)
      return at ? `${text} (line ${at.line}, column ${at.column})` : text
    }
    return String(e)
  } catch {
    return 'The script failed.'
  }
}

