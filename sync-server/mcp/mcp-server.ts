import type { IncomingMessage, ServerResponse } from 'node:http'
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js'
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js'
import { CallToolRequestSchema, type CallToolResult } from '@modelcontextprotocol/sdk/types.js'
import { AjvJsonSchemaValidator } from '@modelcontextprotocol/sdk/validation/ajv'
import type { Logger } from 'pino'
import { WeftError, isWeftError, type Principal } from '../../shared/index.js'
import { TOOLS, type McpDeps, type WeftTool } from './tools.js'

export interface McpServerDeps extends McpDeps {
  log: Logger
}

const INSTRUCTIONS =
  'Weft is a mesh of typed nodes. Every tool acts as you, with your rights. Contextual work: ' +
  'weft_contextual_next → inspect the event, hydration and offered reactions → weft_contextual_react ' +
  '(or your own idempotent work) → weft_contextual_ack; weft_contextual_nack to retry later. ' +
  'A refused call is a tool error whose JSON says { error: { code, message } }.'

/**
 * One JSON Schema validator for every per-request server: the SDK makes an Ajv instance per
 * server otherwise (most of a server's construction time), and uses it only to check what a
 * client answers to an elicitation, which these tools never ask for.
 */
let sharedValidator: AjvJsonSchemaValidator | null = null

/** The answer of a tool: the value as JSON text, and as structured content. */
function toolResult(value: object): CallToolResult {
  return { content: [{ type: 'text', text: JSON.stringify(value) }], structuredContent: value as Record<string, unknown> }
}

/** [MCP3] A refusal: an MCP tool error carrying the stable Weft code, as HTTP's error body does. */
export function toolError(err: WeftError): CallToolResult {
  const body = err.toJSON()
  return { isError: true, content: [{ type: 'text', text: JSON.stringify(body) }], structuredContent: body }
}

/**
 * How deep `value` nests, counting up to `limit + 1` and no further (iterative: a crafted
 * argument a hundred thousand levels deep costs one pass and no stack).
 */
function nestsDeeperThan(value: unknown, limit: number): boolean {
  const stack: Array<[unknown, number]> = [[value, 0]]
  while (stack.length) {
    const [v, depth] = stack.pop()!
    if (v === null || typeof v !== 'object') continue
    if (depth >= limit) return true
    for (const child of Array.isArray(v) ? v : Object.values(v)) if (child !== null && typeof child === 'object') stack.push([child, depth + 1])
  }
  return false
}

/** [MCP4] The arguments as the tool's schema reads them, or the `invalid_request` that says what is wrong. */
function parseArguments(tool: WeftTool, raw: unknown, maxDepth: number): Record<string, unknown> {
  // The patch or params inside the arguments may nest to MAX_JSON_DEPTH (their own check says so
  // with their own code, as on HTTP); anything deeper is refused before any other reading of it.
  if (nestsDeeperThan(raw, maxDepth + 4)) throw new WeftError('invalid_request', `The arguments of ${tool.name} nest deeper than ${maxDepth + 4} levels.`)
  const r = tool.input.safeParse(raw ?? {})
  if (r.success) return r.data as Record<string, unknown>
  const issue = r.error.issues[0]
  const where = issue && issue.path.length ? ` at ${issue.path.join('.')}` : ''
  throw new WeftError('invalid_request', `The arguments of ${tool.name} are invalid${where}: ${issue?.message ?? 'invalid'}.`)
}

/**
 * [MCP2] The MCP server of one caller: every tool runs as `principal`, through the services the
 * HTTP routes use. Built per request by the Streamable HTTP route (stateless, so any instance
 * answers any request) — building one costs a few objects and no I/O.
 */
export function buildMcpServer(principal: Principal, deps: McpServerDeps): McpServer {
  sharedValidator ??= new AjvJsonSchemaValidator()
  const server = new McpServer({ name: 'weft', version: '1' }, { capabilities: { tools: {} }, instructions: INSTRUCTIONS, jsonSchemaValidator: sharedValidator })
  const byName = new Map<string, { tool: WeftTool; call: (args: Record<string, unknown>) => Promise<CallToolResult> }>()
  for (const tool of TOOLS) {
    const call = async (args: Record<string, unknown>) => toolResult(await tool.run(principal, args, deps))
    server.registerTool(tool.name, { title: tool.title, description: tool.description, inputSchema: tool.input, annotations: tool.annotations }, call)
    byName.set(tool.name, { tool, call })
  }
  // The SDK answers arguments its schema refuses with a bare message; Weft's callers branch on a
  // code. So calls come through here: the tool's schema (the one tools/list shows), then the
  // registered callback, every refusal a tool error with its code.
  server.server.setRequestHandler(CallToolRequestSchema, async (request) => {
    const entry = byName.get(request.params.name)
    if (!entry) return toolError(new WeftError('not_found', `No tool ${JSON.stringify(request.params.name.slice(0, 100))}: list the tools first.`))
    const { tool, call } = entry
    try {
      return await call(parseArguments(tool, request.params.arguments, deps.maxJsonDepth))
    } catch (err) {
      if (isWeftError(err)) return toolError(err)
      deps.log.error({ err, tool: tool.name }, 'mcp tool failed')
      return toolError(new WeftError('internal', 'Something went wrong on the server; the change was not applied.'))
    }
  })
  return server
}

/**
 * [MCP5] Answers one `/mcp` POST: a server for the caller and a stateless transport (no session
 * id), both closed when the response is. `body` is the JSON the HTTP server read under its limit.
 */
export async function answerMcpRequest(principal: Principal, deps: McpServerDeps, req: IncomingMessage, res: ServerResponse, body: unknown): Promise<void> {
  const server = buildMcpServer(principal, deps)
  const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true })
  res.on('close', () => {
    void transport.close()
    void server.close()
  })
  await server.connect(transport)
  await transport.handleRequest(req, res, body)
}
