/**
 * Errors that cross a boundary carry a stable `code` (clients branch on it) and a message a
 * person can act on. HTTP status and WebSocket close codes are derived from the code, never
 * chosen ad hoc at the throw site.
 */
export const ERROR_CODES = {
  invalid_json: 400,
  invalid_patch: 400,
  invalid_content: 422,
  invalid_path: 400,
  invalid_request: 400,
  invalid_node_type: 422,
  unauthorized: 401,
  invalid_credentials: 401,
  forbidden: 403,
  forbidden_field: 403,
  not_found: 404,
  /** `PUT` with `If-None-Match: *` on a node that exists: RFC 9110 412 Precondition Failed. */
  already_exists: 412,
  email_taken: 409,
  conflict: 409,
  /** [MOVE1] A move the rules refuse (into its own subtree, Admin, a home, a reserved place). */
  invalid_move: 409,
  /** [MOVE3] The node is no longer here: it was moved; `to` says where (told only to a reader of it). */
  moved: 404,
  last_admin: 409,
  invalid_update: 400,
  /** [ACC12] A Yjs update under a client id another writer holds in that node: reload with a new id. */
  client_id_conflict: 409,
  payload_too_large: 413,
  unsupported_media_type: 415,
  /** [AUTH3] Too many failed logins: the answer carries `Retry-After`. */
  rate_limited: 429,
  protocol_error: 400,
  /** [CTX2] A ContextualSubscription that breaks a bound: each bound has its own code. */
  contextual_invalid_definition: 422,
  contextual_too_many_queries: 422,
  contextual_too_many_reactions: 422,
  contextual_too_many_rows: 422,
  contextual_too_many_consumers: 422,
  contextual_lease_out_of_range: 422,
  contextual_in_flight_out_of_range: 422,
  contextual_attempts_out_of_range: 422,
  /** [CTX58] A path template (a reaction's Target, a hydration's Get or Children) that can never be a path. */
  contextual_invalid_template: 422,
  /** [CTX58] A node type in a definition that is a misspelling of a known one (or no node type name at all). */
  contextual_unknown_node_type: 422,
  /** [CTX66] A re-drive of one event the consumer holds but that is not a dead letter (pending, leased, settled). */
  contextual_not_dead_letter: 409,
  /** [CTX12] The work item evidence (lease token, attempt) is not the current lease: a stale worker. */
  stale_lease: 409,
  /** [CTX25] A reaction the caller may not commit now; every reason gives the same answer. */
  reaction_denied: 403,
  /** [CTX22] A reaction's parameters do not fit its declared schema. */
  invalid_params: 422,
  /** [OPS11] `weft restore`: the file is damaged, truncated, foreign or of a newer format (CLI exit 3). */
  invalid_backup: 422,
  /** [OPS11] `weft restore`: a running server (or another restore) holds the database (CLI exit 4). */
  database_in_use: 409,
  internal: 500,
  unavailable: 503,
} as const

export type ErrorCode = keyof typeof ERROR_CODES

export class WeftError extends Error {
  readonly code: ErrorCode
  readonly details: unknown
  constructor(code: ErrorCode, message: string, details?: unknown) {
    super(message)
    this.name = 'WeftError'
    this.code = code
    this.details = details
  }
  get httpStatus(): number {
    return ERROR_CODES[this.code]
  }
  toJSON(): { error: { code: ErrorCode; message: string; to?: string } } {
    // [MOVE3] A `moved` refusal names the new place.
    const to = (this.details as { to?: unknown } | undefined)?.to
    return { error: typeof to === 'string' ? { code: this.code, message: this.message, to } : { code: this.code, message: this.message } }
  }
}

export function isWeftError(e: unknown): e is WeftError {
  return e instanceof WeftError
}

/** Invariant check: a failure here is a bug in Weft, not bad input. */
export function assert(condition: unknown, message = 'assertion failed'): asserts condition {
  if (!condition) throw new Error(`Invariant: ${message}`)
}

export function must<T>(value: T | null | undefined, message = 'value is missing'): T {
  if (value === null || value === undefined) throw new Error(`Invariant: ${message}`)
  return value
}

/**
 * [STO10] An error the database raised about text in the request (PostgreSQL: a NUL character or
 * a lone surrogate in a parameter, 22021 / 22P05 / 22P02), as the person's error it is, not a 500:
 * the safety net under the checks at the edges (a field a check missed).
 */
export function textRefusal(e: unknown): WeftError | null {
  const code = (e as { code?: unknown } | null)?.code
  if (code !== '22021' && code !== '22P05' && code !== '22P02') return null
  return new WeftError('invalid_request', 'The request holds text the database cannot store (a NUL character, or half of a character); remove it and try again.')
}

/** What a transport tells of any error: a WeftError as it is, a text refusal (textRefusal), else `internal` with `message`. */
export function asWeftError(e: unknown, message: string): WeftError {
  return isWeftError(e) ? e : (textRefusal(e) ?? new WeftError('internal', message))
}
