import type { z } from 'zod'
import {
  ConsumerRequest,
  RedriveRequest,
  ExtendRequest,
  FenceRequest,
  MineRequest,
  NackRequest,
  NextRequest,
  ReactRequest,
  type ContextualStatus,
  type MyConsumers,
  type NextResult,
  SubscriptionRequest,
  type ReactResult,
  type AckResult,
  type SubscriptionConsumers,
  fenceOf,
  type WorkItem,
} from './contextual-api.js'
import { CONTEXTUAL_BOUNDS } from './contextual.js'
import { ERROR_CODES, type ErrorCode } from './errors.js'
import { cutText, toStorableText } from './storable-text.js'

/**
 * [CTX40] A typed client of the contextual operations over HTTP (`POST /api/contextual/{op}`), for
 * Node ≥ 20 and browsers (global `fetch`). Input is checked with the server's own schemas before it
 * is sent; every failure is a `ContextualClientError` with a stable `code`.
 *
 *   const c = createContextualClient({ baseUrl: 'http://localhost:8787', token })
 *   for await (const { consumerId, item } of c.items({ subscription, consumer: 'w1' }, { signal })) {
 *     await c.react(item.reactions[0]!.causationToken, { Text: 'done' })
 *     await c.ack(fenceOf(consumerId, item))
 *   }
 */

/** Where the request never got an answer from Weft (connection refused, reset, aborted). */
export type ContextualClientCode = ErrorCode | 'network' | 'aborted'

export class ContextualClientError extends Error {
  readonly code: ContextualClientCode
  /** The HTTP status (0 when there was no answer). */
  readonly status: number
  constructor(code: ContextualClientCode, message: string, status: number) {
    super(message)
    this.name = 'ContextualClientError'
    this.code = code
    this.status = status
  }
}

export function isContextualClientError(e: unknown): e is ContextualClientError {
  return e instanceof ContextualClientError
}

export interface ContextualClientOptions {
  /** The server, e.g. `http://localhost:8787` (a trailing slash is fine). */
  baseUrl: string
  token: string
  /** Default: the global fetch. */
  fetch?: typeof fetch
  /** How long a call other than a long poll may take before it fails with `network` (default 30 s). */
  timeoutMs?: number
}

export interface CallOptions {
  signal?: AbortSignal
}

/** Options of the loops (`items`, `work`). */
export interface LoopOptions extends CallOptions {
  /**
   * Told of each transient failure the loop retries (`network`, `unavailable`, `rate_limited`,
   * `internal`), with the pause before the next try: a worker's place to log a server in trouble.
   */
  onRetry?: (error: ContextualClientError, pauseMs: number) => void
}

export interface ContextualClient {
  /** Leases at most one event; with `waitSeconds` it waits that long for one (a long poll, ≤ 60 s). */
  next(req: z.input<typeof NextRequest>, opts?: CallOptions): Promise<NextResult>
  ack(fence: FenceRequest, opts?: CallOptions): Promise<AckResult>
  nack(req: z.input<typeof NackRequest>, opts?: CallOptions): Promise<{ state: 'pending' | 'dead' }>
  extend(req: z.input<typeof ExtendRequest>, opts?: CallOptions): Promise<{ expiresAt: string }>
  status(consumerId: string, opts?: CallOptions): Promise<ContextualStatus>
  /**
   * With `{ ack: true }` the item is settled in the reaction's own transaction ([CTX47]): `acked`
   * says whether it is. With `{ ack: true, next: true }` the consumer's next item is pulled in the
   * same call ([CTX52]), waiting up to `waitSeconds`: `next` (or `nextError`) in the answer.
   */
  react(causationToken: string, params?: Record<string, unknown>, opts?: CallOptions & { ack?: boolean; next?: boolean; waitSeconds?: number }): Promise<ReactResult>
  /** [CTX11] Every dead letter of the consumer back to pending; [CTX66] with `eventId`, only that one. */
  redrive(consumerId: string, opts?: CallOptions & { eventId?: string }): Promise<{ redriven: number }>
  /** Deletes a consumer and its events: yours, or any of a subscription you are an Admin of ([CTX46]). */
  delete(consumerId: string, opts?: CallOptions): Promise<{ deleted: true }>
  /** A subscription's consumers with their status: yours, or all for an Admin of it ([CTX38]). */
  consumers(subscription: string, opts?: CallOptions): Promise<SubscriptionConsumers>
  /** [CTX49] A page of your consumers over every subscription, each marked whether its subscription still holds its definition. */
  mine(req?: z.input<typeof MineRequest>, opts?: CallOptions): Promise<MyConsumers>
  /**
   * Long-polls `next` until `signal` aborts, yielding each leased item. Transient failures
   * (`network`, `unavailable`, `rate_limited`, `internal`) are retried with a capped backoff, an
   * item too large to deliver is pulled past; any other error ends the loop. With `waitSeconds: 0`
   * an empty answer is followed by a 1 s pause.
   */
  items(req: Omit<z.input<typeof NextRequest>, 'waitSeconds'> & { waitSeconds?: number }, opts?: LoopOptions): AsyncGenerator<{ consumerId: string; item: WorkItem }>
  /**
   * [CTX52] A worker: pulls items and settles each as `handle` decides, until `signal` aborts
   * (then resolves with what it did). A reaction goes with `ack` and `next` (one request per item);
   * an ack or a nack is followed by a pull. A handler that throws nacks its item with the error;
   * an answer it cannot carry out, a reaction that is not offered, or whose parameters are
   * refused, nacks it with the reason, and so does a reaction refused as `reaction_denied`
   * (redelivered with fresh tokens); a settle finding the item no longer leased to you
   * (`stale_lease`) is counted `lost`. Transient failures are retried as in `items` (a reaction's
   * retry resolves its outcome, never commits twice); any other error ends the loop (rejects). A
   * decision made before the stop is carried out and counted (settles tried 10 s past it).
   */
  work(
    req: Omit<z.input<typeof NextRequest>, 'waitSeconds'> & { waitSeconds?: number },
    handle: (item: WorkItem, consumerId: string) => WorkDecision | Promise<WorkDecision>,
    opts?: LoopOptions,
  ): Promise<WorkSummary>
}

/**
 * [CTX52] What a worker's handler decides for one item: run one of its offered reactions (by
 * name) with these parameters; ack it (your own work is durable); or nack it (retried after
 * `delaySeconds`, a dead letter after its last attempt, `error` kept as the reason).
 */
export type WorkDecision = { react: string; params?: Record<string, unknown> } | { ack: true } | { nack: true; delaySeconds?: number; error?: string }

/** What `work` did before it stopped. */
export interface WorkSummary {
  reacted: number
  acked: number
  nacked: number
  /** Items no longer leased to this worker when it settled them (expired, taken, settled elsewhere). */
  lost: number
}

const isCode = (c: unknown): c is ErrorCode => typeof c === 'string' && Object.hasOwn(ERROR_CODES, c)

function check<T>(schema: z.ZodType<T>, raw: unknown, what: string): T {
  const r = schema.safeParse(raw)
  if (r.success) return r.data
  const issue = r.error.issues[0]
  const where = issue && issue.path.length ? ` at ${issue.path.join('.')}` : ''
  throw new ContextualClientError('invalid_request', `${what} is invalid${where}: ${issue?.message ?? 'invalid'}.`, 0)
}

/** Aborts when either signal does, or after `ms`. */
function deadline(ms: number, outer: AbortSignal | undefined): { signal: AbortSignal; done(): void } {
  const ctl = new AbortController()
  const timer = setTimeout(() => ctl.abort(new ContextualClientError('network', `No answer within ${Math.round(ms / 1000)} s.`, 0)), ms)
  const onOuter = () => ctl.abort(outer?.reason)
  if (outer?.aborted) onOuter()
  else outer?.addEventListener('abort', onOuter, { once: true })
  return {
    signal: ctl.signal,
    done: () => {
      clearTimeout(timer)
      outer?.removeEventListener('abort', onOuter)
    },
  }
}

/**
 * [CTX52] Why a handler's answer is not one `work` can carry out (a JavaScript handler may answer
 * anything), or null when it is.
 */
function decisionFault(d: unknown): string | null {
  const shape = 'it returns { react: name, params }, { ack: true } or { nack: true, delaySeconds?, error? }'
  if (typeof d !== 'object' || d === null) return shape
  const x = d as Record<string, unknown>
  if ('react' in x) {
    return typeof x.react === 'string' && (x.params === undefined || (typeof x.params === 'object' && x.params !== null && !Array.isArray(x.params))) ? null : shape
  }
  if (x.ack === true) return null
  if (x.nack !== true) return shape
  const max = CONTEXTUAL_BOUNDS.maxNackDelaySeconds
  if (x.delaySeconds !== undefined && !(typeof x.delaySeconds === 'number' && x.delaySeconds >= 0 && x.delaySeconds <= max)) return `a nack's delaySeconds is a number from 0 to ${max}`
  if (x.error !== undefined && typeof x.error !== 'string') return "a nack's error is a string"
  return null
}

const sleep = (ms: number, signal: AbortSignal | undefined) =>
  new Promise<void>((resolve) => {
    const t = setTimeout(done, ms)
    function done() {
      clearTimeout(t)
      signal?.removeEventListener('abort', done)
      resolve()
    }
    signal?.addEventListener('abort', done, { once: true })
  })

/** Failures a repeat of the same call may get past: no answer, the server busy or failing for now. */
const TRANSIENT: ReadonlySet<ContextualClientCode> = new Set<ContextualClientCode>(['network', 'unavailable', 'rate_limited', 'internal'])

/**
 * `call`, tried again with a capped backoff while it fails transiently (TRANSIENT) and `signal`
 * has not aborted; any other failure is thrown at once. Every contextual call may be repeated: a
 * lease operation is fenced, and a reaction's repeat resolves its outcome.
 */
async function retried<T>(call: () => Promise<T>, signal: AbortSignal | undefined, onRetry?: LoopOptions['onRetry']): Promise<T> {
  for (let backoff = 0; ; ) {
    try {
      return await call()
    } catch (e) {
      if (!isContextualClientError(e) || !TRANSIENT.has(e.code) || signal?.aborted) throw e
      backoff = Math.min(30_000, backoff ? backoff * 2 : 250)
      try {
        onRetry?.(e, backoff)
      } catch {
        // A listener's failure is not the loop's.
      }
      await sleep(backoff, signal)
      if (signal?.aborted) throw e
    }
  }
}

/** How long a worker told to stop still tries to carry out a decision it made (a settle, a reaction). */
const SETTLE_GRACE_MS = 10_000

/** What a handler threw or answered, in words whatever it is (a BigInt, a cycle, an object with no prototype). */
function described(v: unknown, thrown: boolean): string {
  if (thrown && v instanceof Error && typeof v.message === 'string') return v.message
  try {
    const json = thrown ? undefined : JSON.stringify(v)
    return json ?? String(v)
  } catch {
    return Object.prototype.toString.call(v)
  }
}

/**
 * Resolves with `p`; once `signal` aborts, `p` has `graceMs` more to answer (a decision made at the
 * stop is still carried out), then this resolves with `stopped` and `p` goes on unheeded.
 */
function untilStopped<T>(p: Promise<T>, signal: AbortSignal | undefined, graceMs: number, stopped: symbol): Promise<T | symbol> {
  if (!signal) return p
  return new Promise<T | symbol>((resolve, reject) => {
    let timer: ReturnType<typeof setTimeout> | undefined
    const onAbort = () => {
      timer = setTimeout(() => resolve(stopped), graceMs)
    }
    const done = () => {
      signal.removeEventListener('abort', onAbort)
      clearTimeout(timer)
    }
    if (signal.aborted) onAbort()
    else signal.addEventListener('abort', onAbort, { once: true })
    p.then(
      (v) => {
        done()
        resolve(v)
      },
      (e: unknown) => {
        done()
        reject(e)
      },
    )
  })
}
const STOPPED = Symbol('stopped')

/** A signal that aborts `ms` after `outer` does (never, without one); `dispose` lets go of `outer`. */
function graceAfter(outer: AbortSignal | undefined, ms: number): { signal: AbortSignal | undefined; dispose(): void } {
  if (!outer) return { signal: undefined, dispose: () => undefined }
  const ctl = new AbortController()
  const later = () => setTimeout(() => ctl.abort(), ms).unref?.()
  if (outer.aborted) later()
  else outer.addEventListener('abort', later, { once: true })
  return { signal: ctl.signal, dispose: () => outer.removeEventListener('abort', later) }
}

/** Pause after an empty answer to a pull that did not wait, so a loop with `waitSeconds: 0` does not spin. */
const EMPTY_PULL_PAUSE_MS = 1000

export function createContextualClient(options: ContextualClientOptions): ContextualClient {
  const base = options.baseUrl.replace(/\/+$/, '')
  const doFetch = options.fetch ?? ((...a: Parameters<typeof fetch>) => fetch(...a))
  const timeoutMs = options.timeoutMs ?? 30_000

  async function post<T>(op: string, body: unknown, opts: CallOptions | undefined, waitSeconds = 0): Promise<T> {
    // A long poll is given its wait plus the ordinary allowance.
    let payload: string
    try {
      payload = JSON.stringify(body)
    } catch (e) {
      // A BigInt or a cycle in the parameters: the caller's to fix, not the network's.
      throw new ContextualClientError('invalid_request', `The ${op} request cannot be sent as JSON: ${(e as Error).message}.`, 0)
    }
    const d = deadline(timeoutMs + waitSeconds * 1000, opts?.signal)
    let res: Response
    try {
      res = await doFetch(`${base}/api/contextual/${op}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${options.token}` },
        body: payload,
        signal: d.signal,
      })
    } catch (e) {
      d.done()
      if (opts?.signal?.aborted) throw new ContextualClientError('aborted', 'The call was aborted.', 0)
      if (isContextualClientError(d.signal.reason)) throw d.signal.reason
      throw new ContextualClientError('network', `No answer from ${base}: ${(e as Error).message}`, 0)
    }
    try {
      const text = await res.text()
      let json: unknown = null
      try {
        json = text ? JSON.parse(text) : null
      } catch {
        // not JSON: a proxy's page, say
      }
      if (res.ok) return json as T
      const err = (json as { error?: { code?: unknown; message?: unknown } } | null)?.error
      const code: ContextualClientCode = isCode(err?.code) ? err.code : res.status >= 500 ? 'unavailable' : 'invalid_request'
      throw new ContextualClientError(code, typeof err?.message === 'string' ? err.message : `HTTP ${res.status}`, res.status)
    } catch (e) {
      if (isContextualClientError(e)) throw e
      if (opts?.signal?.aborted) throw new ContextualClientError('aborted', 'The call was aborted.', 0)
      throw new ContextualClientError('network', `The answer from ${base} broke off: ${(e as Error).message}`, 0)
    } finally {
      d.done()
    }
  }

  /**
   * One pull of a loop: transient failures retried (see retried); an item whose context is over
   * the bound ([CTX18]: the server handed it back) pulled past after a pause that grows while it
   * keeps happening, so nothing spins on it.
   */
  async function pulled(req: Omit<z.input<typeof NextRequest>, 'waitSeconds'>, waitSeconds: number, opts: LoopOptions | undefined): Promise<NextResult> {
    for (let backoff = 0; ; ) {
      try {
        return await retried(() => client.next({ ...req, waitSeconds }, { signal: opts?.signal }), opts?.signal, opts?.onRetry)
      } catch (e) {
        if (!isContextualClientError(e) || e.code !== 'contextual_too_many_rows' || opts?.signal?.aborted) throw e
        backoff = Math.min(30_000, backoff ? backoff * 2 : EMPTY_PULL_PAUSE_MS)
        await sleep(backoff, opts?.signal)
      }
    }
  }

  const client: ContextualClient = {
    // async: a refused input is a rejected promise like every other failure.
    async next(req, opts) {
      const body = check(NextRequest, req, 'The next request')
      return post('next', body, opts, body.waitSeconds ?? 0)
    },
    ack: async (fence, opts) => post('ack', check(FenceRequest, fence, 'The ack request'), opts),
    nack: async (req, opts) => post('nack', check(NackRequest, req, 'The nack request'), opts),
    extend: async (req, opts) => post('extend', check(ExtendRequest, req, 'The extend request'), opts),
    status: async (consumerId, opts) => post('status', check(ConsumerRequest, { consumerId }, 'The status request'), opts),
    async react(causationToken, params, opts) {
      const body = check(
        ReactRequest,
        {
          causationToken,
          ...(params ? { params } : {}),
          ...(opts?.ack ? { ack: true } : {}),
          ...(opts?.next ? { next: true } : {}),
          ...(opts?.waitSeconds !== undefined ? { waitSeconds: opts.waitSeconds } : {}),
        },
        'The react request',
      )
      return post('react', body, opts, body.waitSeconds ?? 0)
    },
    redrive: async (consumerId, opts) => post('redrive', check(RedriveRequest, { consumerId, ...(opts?.eventId !== undefined ? { eventId: opts.eventId } : {}) }, 'The redrive request'), opts),
    delete: async (consumerId, opts) => post('delete', check(ConsumerRequest, { consumerId }, 'The delete request'), opts),
    consumers: async (subscription, opts) => post('consumers', check(SubscriptionRequest, { subscription }, 'The consumers request'), opts),
    mine: async (req, opts) => post('mine', check(MineRequest, req ?? {}, 'The mine request'), opts),
    // items() and work() pull through `pulled`, above.
    async *items(req, opts) {
      const waitSeconds = req.waitSeconds ?? CONTEXTUAL_BOUNDS.maxWaitSeconds
      while (!opts?.signal?.aborted) {
        let got: NextResult
        try {
          got = await pulled(req, waitSeconds, opts)
        } catch (e) {
          if (opts?.signal?.aborted || (isContextualClientError(e) && e.code === 'aborted')) return
          throw e
        }
        if (got.item) yield { consumerId: got.consumerId, item: got.item }
        else if (waitSeconds < 1) await sleep(EMPTY_PULL_PAUSE_MS, opts?.signal)
      }
    },
    async work(req, handle, opts) {
      const waitSeconds = req.waitSeconds ?? CONTEXTUAL_BOUNDS.maxWaitSeconds
      const done: WorkSummary = { reacted: 0, acked: 0, nacked: 0, lost: 0 }
      const aborted = () => opts?.signal?.aborted === true
      // A decision made is carried out when the worker is told to stop meanwhile: its calls go on
      // (each may be repeated: see retried) for a grace period past the stop, and no longer.
      const grace = graceAfter(opts?.signal, SETTLE_GRACE_MS)
      const carriedOut = <T>(call: (o: CallOptions) => Promise<T>): Promise<T> => retried(() => call({ signal: grace.signal }), grace.signal, opts?.onRetry)
      // A settle carried out and counted; one that finds its item no longer leased here, counted lost.
      const settle = async (counted: 'acked' | 'nacked', call: (o: CallOptions) => Promise<unknown>) => {
        try {
          await carriedOut(call)
          done[counted]++
        } catch (e) {
          if (!isContextualClientError(e) || e.code !== 'stale_lease') throw e
          done.lost++
        }
      }
      const nack = (consumerId: string, item: WorkItem, error: string, delaySeconds?: number) =>
        settle('nacked', (o) => client.nack({ ...fenceOf(consumerId, item), error: cutText(toStorableText(error), 2000), ...(delaySeconds !== undefined ? { delaySeconds } : {}) }, o))
      // A reaction with its settle and the next pull; cut by the stop (going out, or in the pull's
      // wait), sent again alone: its repeat resolves the outcome, it never commits twice.
      const reacting = async (token: string, params: Record<string, unknown> | undefined): Promise<ReactResult> => {
        const alone = () => carriedOut((o) => client.react(token, params, { ...o, ack: true }))
        if (aborted()) return alone()
        try {
          return await retried(() => client.react(token, params, { signal: opts?.signal, ack: true, next: true, waitSeconds }), opts?.signal, opts?.onRetry)
        } catch (e) {
          if (aborted() && isContextualClientError(e) && (e.code === 'aborted' || TRANSIENT.has(e.code))) return alone()
          throw e
        }
      }
      let held: NextResult | null = null
      // The last pull found nothing: a pull that does not wait pauses before the next one.
      let idle = false
      try {
        while (!aborted()) {
          try {
            if (!held?.item) {
              if (idle && waitSeconds < 1) await sleep(EMPTY_PULL_PAUSE_MS, opts?.signal)
              if (aborted()) break
              held = await pulled(req, waitSeconds, opts)
              idle = !held.item
              continue
            }
            const { consumerId, item } = held
            held = null
            let decision: WorkDecision
            try {
              // A handler still busy 10 s after the stop is left to itself: its item's lease runs
              // out and it is redelivered (work() used to wait for it for ever).
              const answered = await untilStopped(Promise.resolve().then(() => handle(item, consumerId)), opts?.signal, SETTLE_GRACE_MS, STOPPED)
              if (answered === STOPPED) break
              decision = answered as WorkDecision
            } catch (e) {
              await nack(consumerId, item, described(e, true))
              continue
            }
            const fault = decisionFault(decision)
            if (fault) {
              await nack(consumerId, item, `The worker's handler answered ${described(decision, false)}: ${fault}.`)
              continue
            }
            if ('react' in decision) {
              const offered = item.reactions.find((r) => r.name === decision.react)
              if (!offered) {
                await nack(consumerId, item, `Reaction ${decision.react} is not offered for this item (offered: ${item.reactions.map((r) => r.name).join(', ') || 'none'}).`)
                continue
              }
              let out: ReactResult
              try {
                out = await reacting(offered.causationToken, decision.params)
              } catch (e) {
                // Parameters refused (or not JSON); or a reaction denied, not necessarily lost: the
                // token lapsed, the lease nearly out, a grant changed. Handed back with the reason
                // (redelivered with fresh tokens; lost if it is not leased to this worker any more).
                if (!isContextualClientError(e) || (e.code !== 'invalid_params' && e.code !== 'invalid_request' && e.code !== 'reaction_denied')) throw e
                await nack(consumerId, item, e.message)
                continue
              }
              done.reacted++
              // A failed pull (nextError) is taken up by the pull at the loop's top.
              held = out.next ?? null
              idle = out.next !== undefined && !out.next.item
            } else if ('ack' in decision) {
              await settle('acked', (o) => client.ack(fenceOf(consumerId, item), o))
            } else {
              await nack(consumerId, item, decision.error ?? 'nacked by the worker', decision.delaySeconds)
            }
          } catch (e) {
            if (aborted() || (isContextualClientError(e) && e.code === 'aborted')) break
            throw e
          }
        }
      } finally {
        grace.dispose()
      }
      return done
    },
  }
  return client
}
