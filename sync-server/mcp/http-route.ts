import { must } from '../../shared/index.js'
import type { Route } from '../http/index.js'
import type * as McpServerModule from './mcp-server.js'
import type { McpServerDeps } from './mcp-server.js'

const MCP = /^\/mcp\/?$/

/**
 * The MCP SDK is loaded on the first `/mcp` request, not at boot: building its protocol schemas
 * takes a few hundred milliseconds on an idle core (seconds on a loaded one), which every server
 * start and restart would pay whether or not an agent ever connects.
 */
let loading: Promise<typeof McpServerModule> | null = null
export const loadMcpServer = () => (loading ??= import('./mcp-server.js'))

/**
 * [MCP5] Streamable HTTP at `/mcp`, stateless: each POST gets a new server and transport for its
 * caller (the Bearer token, checked by the HTTP server before this runs: 401 without one), so no
 * session lives in memory and any instance behind a load balancer answers any request. Answers are
 * plain JSON (`enableJsonResponse`): a stateless server has no stream to resume, and a long poll
 * of `weft_contextual_next` is one request. The body is read under the HTTP body limit.
 */
export function mcpRoutes(deps: McpServerDeps): Route[] {
  const noStream = async () => ({
    status: 405,
    headers: { allow: 'POST' },
    body: { error: { code: 'invalid_request', message: 'This MCP endpoint is stateless: POST JSON-RPC messages; there is no session stream to GET or DELETE.' } },
  })
  return [
    {
      method: 'POST',
      pattern: MCP,
      async handler(r) {
        const principal = must(r.principal, 'route requires auth')
        const body = await r.json()
        await (await loadMcpServer()).answerMcpRequest(principal, deps, r.req, r.res, body, r.sessionEnd)
        return null
      },
    },
    { method: 'GET', pattern: MCP, handler: noStream },
    { method: 'DELETE', pattern: MCP, handler: noStream },
  ]
}
