import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js'
import { must } from '../../shared/index.js'
import type { Route } from '../http/index.js'
import { buildMcpServer, type McpServerDeps } from './mcp-server.js'

const MCP = /^\/mcp\/?$/

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
        const server = buildMcpServer(principal, deps)
        const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true })
        r.res.on('close', () => {
          void transport.close()
          void server.close()
        })
        await server.connect(transport)
        await transport.handleRequest(r.req, r.res, body)
        return null
      },
    },
    { method: 'GET', pattern: MCP, handler: noStream },
    { method: 'DELETE', pattern: MCP, handler: noStream },
  ]
}
