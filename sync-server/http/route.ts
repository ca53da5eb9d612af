import type { IncomingMessage, ServerResponse } from 'node:http'
import type { Principal } from '../../shared/index.js'

export interface RouteRequest {
  req: IncomingMessage
  res: ServerResponse
  /** Named groups from the route pattern. */
  params: Record<string, string>
  query: URLSearchParams
  /** The authenticated caller; routes with `auth: false` may see null. */
  principal: Principal | null
  /**
   * [AUTH8] Aborted, its reason a WeftError `unauthorized`, when the caller's token is revoked or
   * expires while the request runs: what a request that waits (a long poll) or streams stops on.
   * Never aborted without a caller.
   */
  sessionEnd(): AbortSignal
  /** Parses the body as JSON within the size limit; throws invalid_json / payload_too_large. */
  json(): Promise<unknown>
}

export interface RouteResult {
  status: number
  body?: unknown
  headers?: Record<string, string>
}

export interface Route {
  method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE'
  /** Matched against the URL pathname, e.g. /^\/api\/spaces\/(?<space>[^/]+)\/invites$/ */
  pattern: RegExp
  /** Default true: a missing or invalid token answers 401 before the handler runs. */
  auth?: boolean
  /** null: the handler answered on `res` itself (a stream, or the MCP transport writing its own response). */
  handler(request: RouteRequest): Promise<RouteResult | null>
}
