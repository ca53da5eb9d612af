import * as grpc from '@grpc/grpc-js'
import * as protoLoader from '@grpc/proto-loader'
import type { Logger } from 'pino'
import { WeftError, asWeftError, isWeftError, userPrincipal, type ErrorCode, type Principal } from '../../shared/index.js'
import type { Session, SessionWatch } from '../auth/index.js'
import type { ContextualService, WorkItem } from './contextual-service.js'
import { PROTO_FILE } from './proto-file.js'

/**
 * [CTX35] The contextual operations over gRPC (`proto/weft/contextual/v1/contextual.proto`, loaded
 * at run time): each method calls the same `ContextualService` function as HTTP, as the caller the
 * `authorization: Bearer` metadata names, and answers a Weft error with the gRPC status below (the
 * Weft code rides along in the trailing metadata `weft-code`).
 */

/** Weft's stable error codes as gRPC status codes (docs/API.md "gRPC"). */
export const GRPC_STATUS_OF: Readonly<Record<ErrorCode, grpc.status>> = {
  invalid_json: grpc.status.INVALID_ARGUMENT,
  invalid_patch: grpc.status.INVALID_ARGUMENT,
  invalid_content: grpc.status.INVALID_ARGUMENT,
  invalid_path: grpc.status.INVALID_ARGUMENT,
  invalid_request: grpc.status.INVALID_ARGUMENT,
  invalid_node_type: grpc.status.INVALID_ARGUMENT,
  invalid_params: grpc.status.INVALID_ARGUMENT,
  invalid_update: grpc.status.INVALID_ARGUMENT,
  protocol_error: grpc.status.INVALID_ARGUMENT,
  contextual_invalid_definition: grpc.status.FAILED_PRECONDITION,
  contextual_too_many_queries: grpc.status.FAILED_PRECONDITION,
  contextual_too_many_reactions: grpc.status.FAILED_PRECONDITION,
  contextual_too_many_rows: grpc.status.FAILED_PRECONDITION,
  contextual_too_many_consumers: grpc.status.RESOURCE_EXHAUSTED,
  contextual_lease_out_of_range: grpc.status.FAILED_PRECONDITION,
  contextual_in_flight_out_of_range: grpc.status.FAILED_PRECONDITION,
  contextual_attempts_out_of_range: grpc.status.FAILED_PRECONDITION,
  contextual_invalid_template: grpc.status.FAILED_PRECONDITION,
  contextual_unknown_node_type: grpc.status.FAILED_PRECONDITION,
  unauthorized: grpc.status.UNAUTHENTICATED,
  invalid_credentials: grpc.status.UNAUTHENTICATED,
  forbidden: grpc.status.PERMISSION_DENIED,
  forbidden_field: grpc.status.PERMISSION_DENIED,
  reaction_denied: grpc.status.PERMISSION_DENIED,
  not_found: grpc.status.NOT_FOUND,
  moved: grpc.status.NOT_FOUND,
  already_exists: grpc.status.ALREADY_EXISTS,
  email_taken: grpc.status.ALREADY_EXISTS,
  /** The evidence is not the current lease: retry from a fresh `Next` (gRPC's "retry at a higher level"). */
  stale_lease: grpc.status.ABORTED,
  conflict: grpc.status.ABORTED,
  contextual_not_dead_letter: grpc.status.FAILED_PRECONDITION,
  client_id_conflict: grpc.status.ABORTED,
  invalid_move: grpc.status.FAILED_PRECONDITION,
  last_admin: grpc.status.FAILED_PRECONDITION,
  unsupported_media_type: grpc.status.INVALID_ARGUMENT,
  payload_too_large: grpc.status.RESOURCE_EXHAUSTED,
  rate_limited: grpc.status.RESOURCE_EXHAUSTED,
  unavailable: grpc.status.UNAVAILABLE,
  invalid_backup: grpc.status.FAILED_PRECONDITION,
  database_in_use: grpc.status.FAILED_PRECONDITION,
  internal: grpc.status.INTERNAL,
}

/** What a request that does not decode as its message becomes (the handler answers INVALID_ARGUMENT). */
const MALFORMED = Symbol('malformed')
type Decoded = Record<string, unknown> | { [MALFORMED]: true }

const LOADER_OPTIONS: protoLoader.Options = { keepCase: false, longs: Number, enums: String, defaults: false, oneofs: false }

/** The service definition, with decoders that never throw into grpc-js (which would answer INTERNAL). */
export function loadContextualDefinition(): grpc.ServiceDefinition {
  const pkg = protoLoader.loadSync(PROTO_FILE, LOADER_OPTIONS)
  const def = pkg['weft.contextual.v1.Contextual'] as grpc.ServiceDefinition
  const out: Record<string, grpc.MethodDefinition<unknown, unknown>> = {}
  for (const [name, m] of Object.entries(def)) {
    out[name] = {
      ...m,
      requestDeserialize: (bytes: Buffer): Decoded => {
        try {
          return m.requestDeserialize(bytes) as Record<string, unknown>
        } catch {
          return { [MALFORMED]: true }
        }
      },
    }
  }
  return out as grpc.ServiceDefinition
}

function jsonField(text: unknown, what: string): unknown {
  if (text === undefined || text === '') return undefined
  try {
    return JSON.parse(String(text)) as unknown
  } catch (e) {
    throw new WeftError('invalid_json', `${what} is not valid JSON: ${(e as Error).message}`)
  }
}

/** A number field at 0 is "not given" (proto3 cannot tell them apart). */
const given = (n: unknown): unknown => (n === 0 ? undefined : n)

const fence = (r: Record<string, unknown>) => ({ consumerId: r.consumerId, eventId: r.eventId, leaseToken: r.leaseToken, attempt: r.attempt })

function workItem(item: WorkItem) {
  return {
    event: { ...item.event, nodeJson: JSON.stringify(item.event.node) },
    leaseToken: item.leaseToken,
    attempt: item.attempt,
    expiresAt: item.expiresAt,
    databaseId: item.databaseId,
    incarnation: item.incarnation,
    contextHead: item.contextHead,
    hydrationJson: JSON.stringify(item.hydration),
    reactions: item.reactions.map((r) => ({ ...r, parametersJson: JSON.stringify(r.parameters) })),
  }
}

/** The methods that may wait (a long poll): they end with their caller's session ([AUTH8]). */
const WAITS: ReadonlySet<string> = new Set(['next', 'react'])

type Method = (principal: Principal, request: Record<string, unknown>, cancelled: AbortSignal) => Promise<object>

/** Each method: the proto message to the service's request, the service's answer to the proto message. */
function methods(s: ContextualService): Record<string, Method> {
  return {
    next: async (p, r, cancelled) => {
      const out = await s.next(p, { subscription: r.subscription, consumer: r.consumer, params: jsonField(r.paramsJson, 'params_json'), waitSeconds: given(r.waitSeconds) }, cancelled)
      return { consumerId: out.consumerId, ...(out.item ? { item: workItem(out.item) } : {}) }
    },
    ack: (p, r) => s.ack(p, fence(r)),
    nack: (p, r) => s.nack(p, { ...fence(r), delaySeconds: given(r.delaySeconds), error: r.error === '' ? undefined : r.error }),
    extend: (p, r) => s.extend(p, { ...fence(r), seconds: given(r.seconds) }),
    status: async (p, r) => {
      const st = await s.status(p, { consumerId: r.consumerId })
      return { ...st, deadLetters: st.deadLetters.map((d) => ({ ...d, lastError: d.lastError ?? '', diedAt: d.diedAt ?? '' })) }
    },
    react: async (p, r, cancelled) => {
      const out = await s.react(
        p,
        { causationToken: r.causationToken, params: jsonField(r.paramsJson, 'params_json'), ...(r.ack ? { ack: true } : {}), ...(r.next ? { next: true } : {}), waitSeconds: given(r.waitSeconds) },
        cancelled,
      )
      return {
        repeated: out.repeated,
        acked: out.acked === true,
        // [CTX59] A repeat with other parameters than the committed ones.
        paramsDiffer: out.paramsDiffer === true,
        message: out.message ?? '',
        outcome: { ...out.outcome, version: out.outcome.version ?? 0 },
        // [CTX52] The next work item, as Next answers it; or why the pull after the reaction failed.
        ...(out.next ? { next: { consumerId: out.next.consumerId, ...(out.next.item ? { item: workItem(out.next.item) } : {}) } } : {}),
        ...(out.nextError ? { nextError: out.nextError } : {}),
      }
    },
    redrive: (p, r) => s.redrive(p, { consumerId: r.consumerId, ...(r.eventId !== undefined && r.eventId !== null ? { eventId: r.eventId } : {}) }),
    deleteConsumer: (p, r) => s.delete(p, { consumerId: r.consumerId }),
  }
}

function bearer(metadata: grpc.Metadata): string | null {
  const h = metadata.get('authorization')[0]
  if (typeof h !== 'string' || !/^Bearer\s+/i.test(h)) return null
  return h.replace(/^Bearer\s+/i, '').trim()
}

export interface ContextualGrpcOptions {
  service: ContextualService
  authenticate(token: string | null): Promise<Session | null>
  /** [AUTH8] A call that may wait (Next, React) ends with its session: UNAUTHENTICATED, nothing leased for it. */
  watchSession?(session: Session): SessionWatch
  host: string
  /** 0: any free port. */
  port: number
  /** Largest request message accepted (MAX_PAYLOAD_BYTES); a larger one is RESOURCE_EXHAUSTED. */
  maxReceiveBytes: number
  log: Logger
  onRefused?(code: string): void
}

/** Largest answer sent: 16 hydration queries of at most 100 nodes, with room. */
const MAX_SEND_BYTES = 64 * 1024 * 1024

export interface ContextualGrpcServer {
  port: number
  close(): Promise<void>
}

export async function startContextualGrpc(opts: ContextualGrpcOptions): Promise<ContextualGrpcServer> {
  const server = new grpc.Server({
    'grpc.max_receive_message_length': opts.maxReceiveBytes,
    'grpc.max_send_message_length': MAX_SEND_BYTES,
    // A client that vanishes mid long poll is noticed.
    'grpc.keepalive_time_ms': 60_000,
  })
  const impl: grpc.UntypedServiceImplementation = {}
  for (const [name, method] of Object.entries(methods(opts.service))) {
    impl[name] = (call: grpc.ServerUnaryCall<Decoded, object>, callback: grpc.sendUnaryData<object>) => {
      // [CTX42] A call the client cancelled (or whose connection dropped) stops its long poll.
      const cancelled = new AbortController()
      call.once('cancelled', () => cancelled.abort())
      let watch: SessionWatch | undefined
      void (async () => {
        try {
          const request = call.request
          if (MALFORMED in request) throw new WeftError('invalid_request', `The ${name} request is not a valid weft.contextual.v1 message.`)
          const session = await opts.authenticate(bearer(call.metadata))
          if (!session) throw new WeftError('unauthorized', 'Sign in first: send the metadata authorization: Bearer <token>.')
          watch = WAITS.has(name) ? opts.watchSession?.(session) : undefined
          callback(null, await method(userPrincipal(session.userId), request, watch ? AbortSignal.any([cancelled.signal, watch.signal]) : cancelled.signal))
        } catch (e) {
          const err = asWeftError(e, 'Something went wrong on the server; nothing was applied.')
          if (!isWeftError(e)) opts.log.error({ err: e, method: name }, 'grpc call failed')
          opts.onRefused?.(err.code)
          const trailer = new grpc.Metadata()
          trailer.set('weft-code', err.code)
          callback({ code: GRPC_STATUS_OF[err.code], details: err.message, metadata: trailer })
        } finally {
          watch?.release()
        }
      })()
    }
  }
  server.addService(loadContextualDefinition(), impl)
  const port = await new Promise<number>((resolve, reject) => {
    const address = opts.host.includes(':') ? `[${opts.host}]:${opts.port}` : `${opts.host}:${opts.port}`
    server.bindAsync(address, grpc.ServerCredentials.createInsecure(), (err, bound) => (err ? reject(err) : resolve(bound)))
  })
  opts.log.info({ port }, 'grpc listening')
  let closing: Promise<void> | null = null
  return {
    port,
    close() {
      closing ??= new Promise<void>((resolve) => {
        // Calls in flight (a long poll) get a moment; then the rest are cut.
        const force = setTimeout(() => server.forceShutdown(), 2_000)
        force.unref()
        server.tryShutdown(() => {
          clearTimeout(force)
          resolve()
        })
      })
      return closing
    },
  }
}
