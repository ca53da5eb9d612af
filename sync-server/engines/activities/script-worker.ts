import { setPriority } from 'node:os'
import { parentPort, workerData } from 'node:worker_threads'
import { getQuickJS, type QuickJSContext, type QuickJSDeferredPromise, type QuickJSHandle, type QuickJSRuntime } from 'quickjs-emscripten'
import type { FromWorker, ScriptLimit, ToWorker } from './script-protocol.js'
import { CpuTurn, type CpuSlotsInit } from './cpu-slots.js'

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
const LOG_BATCH_LINES = 1_000
let logBatch: { level: 'Info' | 'Warning' | 'Error'; text: string }[] = []
let logBatchSince = 0
const flushLogs = () => {
  if (logBatch.length === 0) return
  send({ t: 'logs', lines: logBatch })
  logBatch = []
}
// [ACT15] The interpreter runs only while this worker holds one of the host's CPU slots.
const turn = new CpuTurn(((workerData as { cpu?: CpuSlotsInit } | null)?.cpu ?? null))
// Loaded as the worker starts, so a warm worker runs its script without waiting for the WASM.
const quickjsReady = getQuickJS().then((q) => {
  send({ t: 'ready' })
  return q
})

const BOOTSTRAP = `
(function (h) {
  'use strict';
  class AbortError extends Error {
    constructor() { super('The activity was cancelled.'); this.name = 'AbortError'; this.code = 'cancelled'; }
  }
  const call = (op, args) => h.call(op, JSON.stringify(args)).then(
    (s) => (s === undefined ? undefined : JSON.parse(s)),
    (s) => { const d = JSON.parse(s); const e = new Error(d.message); e.code = d.code; throw e; },
  );
  const text = (v) => (typeof v === 'string' ? v : (() => { try { return JSON.stringify(v); } catch { return String(v); } })());
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
  globalThis.sleep = (ms) => h.sleep(Number(ms) || 0).then(() => { if (h.aborted()) throw new AbortError(); });
  globalThis.Mesh = Object.freeze({
    get: (path) => call('get', [path]),
    put: (path, draft) => call('put', [path, draft ?? {}]),
    patch: (path, patch) => call('patch', [path, patch ?? {}]),
    delete: (path) => call('delete', [path]),
    query: (q) => call('query', [q ?? {}]),
    waitFor: (path, fields, opts) => call('waitFor', [path, fields ?? {}, opts ?? {}]),
  });
})(globalThis.__weft_host);
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
  const deadline = Date.now() + m.limits.timeoutMs
  let limit: ScriptLimit | undefined
  const runtime: QuickJSRuntime = QuickJS.newRuntime()
  runtime.setMemoryLimit(m.limits.memoryMb * 1024 * 1024)
  runtime.setMaxStackSize(1024 * 1024)
  const pastDeadline = () => Date.now() >= deadline
  // Called regularly while the interpreter runs: a spinning script is stopped at its deadline,
  // and hands its CPU slot on after each time slice when another script waits for one.
  runtime.setInterruptHandler(() => {
    // A line logged before a long spin goes out without waiting for the spin to end.
    if (logBatch.length > 0 && performance.now() - logBatchSince >= LOG_BATCH_MS) flushLogs()
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
  const pending = new Map<number, QuickJSDeferredPromise>()
  const sleeps = new Set<{ timer: NodeJS.Timeout; deferred: QuickJSDeferredPromise }>()
  let nextId = 1
  let settled = false
  let finishRun: (r: FromWorker) => void = () => undefined
  const finished = new Promise<FromWorker>((resolve) => (finishRun = resolve))
  const pump = () => {
    if (settled) return
    const r = onCpu(() => runtime.executePendingJobs())
    if (r.error) r.error.dispose()
  }

  const endSleep = (s: { timer: NodeJS.Timeout; deferred: QuickJSDeferredPromise }) => {
    clearTimeout(s.timer)
    sleeps.delete(s)
    if (!settled && s.deferred.alive) {
      s.deferred.resolve()
      s.deferred.dispose()
    }
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
      const value = vm.newString(r.ok ? JSON.stringify(r.value ?? null) : JSON.stringify({ code: r.code, message: r.message }))
      if (r.ok) d.resolve(value)
      else d.reject(value)
      value.dispose()
      d.dispose()
      pump()
    },
  }

  const host = vm.newObject()
  const fn = (name: string, impl: (...args: QuickJSHandle[]) => QuickJSHandle | undefined) => {
    const f = vm.newFunction(name, impl)
    vm.setProp(host, name, f)
    f.dispose()
  }
  fn('log', (level, text) => {
    const l = vm.getString(level)
    if (logBatch.length === 0) logBatchSince = performance.now()
    logBatch.push({ level: l === 'Warning' || l === 'Error' ? l : 'Info', text: vm.getString(text).slice(0, 10_000) })
    if (logBatch.length >= LOG_BATCH_LINES || performance.now() - logBatchSince >= LOG_BATCH_MS) flushLogs()
    return undefined
  })
  fn('progress', (fraction, text) => {
    const f = vm.getNumber(fraction)
    const t = text && vm.typeof(text) === 'string' ? vm.getString(text) : undefined
    flushLogs() // lines logged before this progress stay before it
    send({ t: 'progress', fraction: Number.isFinite(f) ? Math.min(1, Math.max(0, f)) : 0, ...(t === undefined ? {} : { text: t }) })
    return undefined
  })
  fn('aborted', () => (aborted() ? vm.true : vm.false))
  fn('sleep', (ms) => {
    const deferred = vm.newPromise()
    const wait = Math.max(0, Math.min(vm.getNumber(ms) || 0, 2 ** 31 - 1))
    if (aborted()) {
      deferred.resolve()
      queueMicrotask(pump)
      const h = deferred.handle
      return h
    }
    const s = { timer: setTimeout(() => endSleep(s), wait), deferred }
    sleeps.add(s)
    return deferred.handle
  })
  fn('call', (op, args) => {
    const deferred = vm.newPromise()
    const id = nextId++
    pending.set(id, deferred)
    flushLogs()
    send({ t: 'mesh', id, op: vm.getString(op) as never, args: JSON.parse(vm.getString(args)) as never })
    return deferred.handle
  })
  vm.setProp(vm.global, '__weft_host', host)
  host.dispose()
  const inputs = vm.newString(JSON.stringify(m.inputs ?? {}))
  const parsed = vm.unwrapResult(vm.evalCode('(s) => Object.freeze(JSON.parse(s))'))
  const inputsValue = vm.unwrapResult(vm.callFunction(parsed, vm.undefined, inputs))
  vm.setProp(vm.global, 'Inputs', inputsValue)
  for (const h of [inputs, parsed, inputsValue]) h.dispose()
  vm.unwrapResult(vm.evalCode(BOOTSTRAP)).dispose()

  // The deadline also holds while the script waits (sleep, Mesh): no interpreter runs then.
  const deadlineTimer = setTimeout(() => {
    limit = 'SCRIPT_TIMEOUT_MS'
    finishRun({ t: 'done', ok: false, aborted: false, limit, message: `The script ran longer than SCRIPT_TIMEOUT_MS (${m.limits.timeoutMs} ms) and was stopped.` })
  }, m.limits.timeoutMs)

  const failure = (message: string): FromWorker => {
    if (limit === 'SCRIPT_TIMEOUT_MS') {
      return { t: 'done', ok: false, aborted: false, limit, message: `The script ran longer than SCRIPT_TIMEOUT_MS (${m.limits.timeoutMs} ms) and was stopped.` }
    }
    if (/out of memory/i.test(message)) {
      return { t: 'done', ok: false, aborted: false, limit: 'SCRIPT_MEMORY_MB', message: `The script used more than SCRIPT_MEMORY_MB (${m.limits.memoryMb} MB) and was stopped.` }
    }
    return { t: 'done', ok: false, aborted: aborted(), message }
  }

  // Compiled on the main thread (script-host.ts compileScript): the function wrapping the source.
  const code = m.source
  {
    const result = onCpu(() => vm.evalCode(`${code}\n__weft_run().then((v) => JSON.stringify(v === undefined ? null : v))`))
    if (result.error) {
      finishRun(failure(errorText(vm, result.error)))
      result.error.dispose()
    } else {
      const promise = result.value
      vm.resolvePromise(promise).then((r) => {
        if (r.error) {
          finishRun(failure(errorText(vm, r.error)))
          r.error.dispose()
        } else {
          const s = vm.getString(r.value)
          r.value.dispose()
          let value: unknown = null
          try {
            value = JSON.parse(s)
          } catch {
            value = null
          }
          finishRun({ t: 'done', ok: true, value: (value ?? null) as never })
        }
      }, (err: unknown) => finishRun(failure(String(err))))
      promise.dispose()
      pump()
    }
  }
  const outcome = await finished
  settled = true
  clearTimeout(deadlineTimer)
  for (const s of sleeps) clearTimeout(s.timer)
  flushLogs()
  send(outcome)
  // One run per worker: the main thread terminates it, nothing is disposed piecemeal (a runtime
  // with live handles cannot be freed cleanly, and the thread's memory goes with it anyway).
}

function errorText(vm: QuickJSContext, handle: QuickJSHandle): string {
  try {
    const e = vm.dump(handle) as unknown
    if (e && typeof e === 'object') {
      const o = e as { name?: string; message?: string }
      return [o.name, o.message].filter(Boolean).join(': ') || JSON.stringify(e)
    }
    return String(e)
  } catch {
    return 'The script failed.'
  }
}

