import type { ServerResponse } from 'node:http'
import { WeftError } from '../../shared/index.js'
import type { Route } from '../http/index.js'
import type { ContextualService } from './contextual-service.js'

const OPERATIONS = ['next', 'ack', 'nack', 'extend', 'status', 'react', 'redrive', 'consumers', 'delete', 'mine'] as const
type Operation = (typeof OPERATIONS)[number]

const isOperation = (op: string): op is Operation => (OPERATIONS as readonly string[]).includes(op)

/** [CTX39] Bounds of the wake-up streams: per user, and how often one stream may wake. */
export const WAKEUP_BOUNDS = { streamsPerUser: 16, coalesceMs: 200, heartbeatMs: 25_000 } as const

/**
 * [CTX39] `GET /api/contextual/wakeups?consumerId=`: a server-sent event stream of payload-free
 * wake-ups for one's own consumer. Each `event: wake` says only "ask `next` again"; one comes at
 * once (so a reconnect always re-asks durable truth), then at most one per `coalesceMs`.
 */
function wakeupStream(service: ContextualService, open: Map<string, number>): Route['handler'] {
  return async (r) => {
    const principal = r.principal
    if (principal?.kind !== 'user') throw new WeftError('unauthorized', 'Sign in first.')
    const user = principal.userId
    if ((open.get(user) ?? 0) >= WAKEUP_BOUNDS.streamsPerUser) {
      throw new WeftError('rate_limited', `At most ${WAKEUP_BOUNDS.streamsPerUser} wake-up streams at once; close one first.`)
    }
    // The stream's slot is taken before anything is awaited: concurrent opens cannot all pass the
    // bound, and it is given back however the stream ends (refused, or closed, even mid-open).
    open.set(user, (open.get(user) ?? 0) + 1)
    let released = false
    const release = () => {
      if (released) return
      released = true
      const n = (open.get(user) ?? 1) - 1
      if (n > 0) open.set(user, n)
      else open.delete(user)
    }
    const res: ServerResponse = r.res
    let timer: ReturnType<typeof setTimeout> | null = null
    let owed = false
    const send = () => {
      timer = setTimeout(() => {
        timer = null
        if (owed) {
          owed = false
          send()
        }
      }, WAKEUP_BOUNDS.coalesceMs)
      res.write('event: wake\ndata: \n\n')
    }
    let unlisten: () => void
    try {
      unlisten = await service.listen(principal, { consumerId: r.query.get('consumerId') ?? '' }, () => {
        if (timer) owed = true
        else send()
      })
    } catch (err) {
      release()
      throw err
    }
    // The client left while the stream was being opened: nothing to listen for.
    if (res.destroyed || r.req.destroyed) {
      unlisten()
      release()
      return null
    }
    // [AUTH8] The stream ends with its session (a logout, the token's expiry), as a socket does.
    const ended = r.sessionEnd()
    if (ended.aborted) {
      unlisten()
      release()
      throw ended.reason
    }
    res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-store', 'x-accel-buffering': 'no' })
    send()
    const heartbeat = setInterval(() => res.write(': \n\n'), WAKEUP_BOUNDS.heartbeatMs)
    heartbeat.unref()
    let stopped = false
    const stop = () => {
      if (stopped) return
      stopped = true
      ended.removeEventListener('abort', end)
      unlisten()
      clearInterval(heartbeat)
      if (timer) clearTimeout(timer)
      release()
    }
    // Stopped before the end is written: no wake-up or heartbeat after it.
    const end = () => {
      stop()
      res.end()
    }
    ended.addEventListener('abort', end, { once: true })
    res.on('close', stop)
    return null
  }
}

/** [CTX30] `POST /api/contextual/{operation}`: JSON in, JSON out, the service's function per operation. */
export function contextualRoutes(service: ContextualService): Route[] {
  const open = new Map<string, number>()
  return [
    {
      method: 'POST',
      pattern: /^\/api\/contextual\/(?<op>[a-z]+)$/,
      async handler(r) {
        if (!r.principal) throw new WeftError('unauthorized', 'Sign in first.')
        const op = r.params.op ?? ''
        if (!isOperation(op)) {
          throw new WeftError('not_found', `No contextual operation ${JSON.stringify(op)}: use ${OPERATIONS.slice(0, -1).join(', ')} or ${OPERATIONS.at(-1)}.`)
        }
        if (op === 'next' || op === 'react') {
          // [CTX42] A long poll whose client went away stops waiting (and leases nothing for it);
          // [CTX52] so does the pull of a react asking for the next item (the reaction stands).
          // [AUTH8] So does one whose token is revoked or expires: 401, and nothing leased for it.
          const gone = new AbortController()
          const res: ServerResponse = r.res
          const onClose = () => {
            if (!res.writableFinished) gone.abort()
          }
          res.once('close', onClose)
          try {
            return { status: 200, body: await service[op](r.principal, await r.json(), AbortSignal.any([gone.signal, r.sessionEnd()])) }
          } finally {
            res.off('close', onClose)
          }
        }
        return { status: 200, body: await service[op](r.principal, await r.json()) }
      },
    },
    { method: 'GET', pattern: /^\/api\/contextual\/wakeups$/, handler: wakeupStream(service, open) },
  ]
}
