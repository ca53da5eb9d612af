import type { IncomingMessage, ServerResponse } from 'node:http'
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js'
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js'
import { CallToolRequestSchema, CancelledNotificationSchema, type CallToolResult, type RequestId } from '@modelcontextprotocol/sdk/types.js'
import { z } from 'zod'
import { AjvJsonSchemaValidator } from '@modelcontextprotocol/sdk/validation/ajv'
import type { Logger } from 'pino'
import { WeftError, isWeftError, textRefusal, type Principal } from '../../shared/index.js'
import { TOOLS, type McpDeps, type WeftTool } from './tools.js'

export interface McpServerDeps extends McpDeps {
  log: Logger
  /** [CTX43] The other instances of a deployment (the cluster's bus), when there are any. */
  peers?: McpPeers
}

/**
 * [CTX43] Behind a load balancer a client's `notifications/cancelled` may reach another instance
 * than the one running its call: each cancel is told to the others, which end the call if it is
 * theirs. `caller` is the caller's user id (or `system`).
 */
export interface McpPeers {
  publishCancel(caller: string, id: string | number): void
  onCancel(handler: (caller: string, id: string | number) => void): void
}

const INSTRUCTIONS =
  'Weft is a mesh of typed nodes. Every tool acts as you, with your rights. Contextual work: ' +
  'weft_contextual_next → inspect the event, hydration and offered reactions → weft_contextual_react ' +
  '(or your own idempotent work) → weft_contextual_ack; weft_contextual_nack to retry later. ' +
  'When the reaction is all an item asks for, weft_contextual_react with ack: true and next: true settles it and returns the next item: one call per item. ' +
  'weft_contextual_mine lists your own consumers (their consumerIds, for weft_contextual_status). ' +
  'A refused call is a tool error whose JSON says { error: { code, message } }.'

/**
 * One JSON Schema validator for every per-request server: the SDK makes an Ajv instance per
 * server otherwise (most of a server's construction time), and uses it only to check what a
 * client answers to an elicitation, which these tools never ask for.
 */
let sharedValidator: AjvJsonSchemaValidator | null = null

/**
 * [CTX43] The tool calls in flight on this instance, by caller and JSON-RPC id. The endpoint is
 * stateless, so a client's `notifications/cancelled` arrives in a POST of its own, to a new server
 * that never saw the call: it finds the call here. A caller reaches only its own calls; two clients
 * of one caller with the same id in flight are both ended (the other's long poll answers early with
 * no item: nothing is leased to it or lost, it pulls again).
 */
class CallsInFlight {
  private readonly calls = new Map<string, Set<AbortController>>()

  constructor(private readonly peers?: McpPeers) {
    peers?.onCancel((caller, id) => this.cancelHere(caller, id))
  }

  private static callerOf(principal: Principal): string {
    return principal.kind === 'user' ? principal.userId : 'system'
  }

  private static key(caller: string, id: RequestId): string {
    return `${caller}\u0000${typeof id}:${id}`
  }

  /** A signal that ends when `closed` does (the SDK's: the connection closed) or a cancel names the call. */
  track(principal: Principal, id: RequestId, closed: AbortSignal): { signal: AbortSignal; done(): void } {
    const key = CallsInFlight.key(CallsInFlight.callerOf(principal), id)
    const cancel = new AbortController()
    let set = this.calls.get(key)
    if (!set) this.calls.set(key, (set = new Set()))
    set.add(cancel)
    return {
      signal: AbortSignal.any([closed, cancel.signal]),
      done: () => {
        set.delete(cancel)
        if (!set.size && this.calls.get(key) === set) this.calls.delete(key)
      },
    }
  }

  /** The caller's call `id`, here and on the other instances (any of them may be running it). */
  cancel(principal: Principal, id: RequestId): void {
    const caller = CallsInFlight.callerOf(principal)
    this.cancelHere(caller, id)
    this.peers?.publishCancel(caller, id)
  }

  private cancelHere(caller: string, id: RequestId): void {
    for (const c of this.calls.get(CallsInFlight.key(caller, id)) ?? []) c.abort()
  }
}

/** One registry per server (its routes' deps): calls of one server are never cancelled through another. */
const inFlight = new WeakMap<McpServerDeps, CallsInFlight>()

const neverEnds = (): AbortSignal => new AbortController().signal

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

/** Where a tools/call request keeps its arguments as sent, past the SDK's own check (below). */
const SENT_ARGUMENTS = Symbol('sent arguments')

const isPlainObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v)

/**
 * [MCP8] tools/call as Weft reads it: the SDK's schema with `arguments` anything. The SDK's own
 * (an object or absent) refused a string, an array or null before any Weft code ran, and the
 * caller got JSON-RPC -32603 with zod's dump where [MCP4] promises an `invalid_request` tool
 * error. The SDK's server still checks every tools/call against its own schema before the
 * handler, so the arguments as sent ride aside and that check sees none when they are no object;
 * parseArguments then refuses them with its code (null reads as no arguments, `{}`).
 */
const WeftCallToolRequestSchema = CallToolRequestSchema.extend({
  params: CallToolRequestSchema.shape.params
    .extend({ arguments: z.unknown() })
    .transform((p) => ({ ...p, arguments: isPlainObject(p.arguments) ? p.arguments : undefined, [SENT_ARGUMENTS]: p.arguments })),
})

/** [MCP4] The arguments as the tool's schema reads them, or the `invalid_request` that says what is wrong. */
function parseArguments(tool: WeftTool, raw: unknown, maxDepth: number): Record<string, unknown> {
  // The patch or params inside the arguments may nest to MAX_JSON_DEPTH (their own check says so
  // with their own code, as on HTTP); anything deeper is refused before any other reading of it.
  if (nestsDeeperThan(raw, maxDepth + 4)) throw new WeftError('invalid_request', `The arguments of ${tool.name} nest deeper than ${maxDepth + 4} levels.`)
  const r = tool.input.safeParse(raw ?? {})
  if (r.success) return r.data as Record<string, unknown>
  const issue = r.error.issues[0]
  // [CTX62] A required argument left out is named as such (zod says "expected string, received undefined").
  if (issue && issue.code === 'invalid_type' && issue.path.length > 0 && valueAt(raw, issue.path) === undefined) {
    throw new WeftError('invalid_request', `The arguments of ${tool.name} are invalid: ${issue.path.join('.')} is required.`)
  }
  const where = issue && issue.path.length ? ` at ${issue.path.join('.')}` : ''
  throw new WeftError('invalid_request', `The arguments of ${tool.name} are invalid${where}: ${issue?.message ?? 'invalid'}.`)
}

/** The value at `path` inside `raw` (undefined when any step is missing). */
function valueAt(raw: unknown, path: readonly PropertyKey[]): unknown {
  let v: unknown = raw
  for (const k of path) {
    if (v === null || typeof v !== 'object' || !Object.prototype.hasOwnProperty.call(v, k)) return undefined
    v = (v as Record<PropertyKey, unknown>)[k]
  }
  return v
}

/**
 * [MCP2] The MCP server of one caller: every tool runs as `principal`, through the services the
 * HTTP routes use. Built per request by the Streamable HTTP route (stateless, so any instance
 * answers any request) — building one costs a few objects and no I/O.
 */
export function buildMcpServer(principal: Principal, deps: McpServerDeps, sessionEnd: () => AbortSignal = neverEnds): McpServer {
  sharedValidator ??= new AjvJsonSchemaValidator()
  const server = new McpServer({ name: 'weft', version: '1' }, { capabilities: { tools: {} }, instructions: INSTRUCTIONS, jsonSchemaValidator: sharedValidator })
  const byName = new Map<string, { tool: WeftTool; call: (args: Record<string, unknown>, signal: AbortSignal) => Promise<CallToolResult> }>()
  for (const tool of TOOLS) {
    const call = async (args: Record<string, unknown>, signal: AbortSignal) => toolResult(await tool.run(principal, args, deps, signal))
    server.registerTool(tool.name, { title: tool.title, description: tool.description, inputSchema: tool.input, annotations: tool.annotations }, (args, extra) => call(args, extra.signal))
    byName.set(tool.name, { tool, call })
  }
  let calls = inFlight.get(deps)
  if (!calls) inFlight.set(deps, (calls = new CallsInFlight(deps.peers)))
  // [CTX43] A cancelled call ends its long poll: its waiter is released and nothing more is leased
  // for it. The call still answers its own POST (the client has stopped listening), so no request
  // is left open. The SDK's own handler would look only in this per-request server.
  server.server.setNotificationHandler(CancelledNotificationSchema, (n) => {
    if (n.params.requestId !== undefined) calls.cancel(principal, n.params.requestId)
  })
  // The SDK answers arguments its schema refuses with a bare message; Weft's callers branch on a
  // code. So calls come through here: the tool's schema (the one tools/list shows), then the
  // registered callback, every refusal a tool error with its code.
  server.server.setRequestHandler(WeftCallToolRequestSchema, async (request, extra) => {
    const entry = byName.get(request.params.name)
    if (!entry) return toolError(new WeftError('not_found', `No tool ${JSON.stringify(request.params.name.slice(0, 100))}: list the tools first.`))
    const { tool, call } = entry
    // [CTX43] The call ends early when the client cancels it or its connection (the transport) closes;
    // [AUTH8] and when its token is revoked or expires (a long poll then answers `unauthorized`).
    const flight = calls.track(principal, extra.requestId, AbortSignal.any([extra.signal, sessionEnd()]))
    try {
      return await call(parseArguments(tool, request.params[SENT_ARGUMENTS], deps.maxJsonDepth), flight.signal)
    } catch (err) {
      if (isWeftError(err)) return toolError(err)
      const refused = textRefusal(err)
      if (refused) return toolError(refused)
      deps.log.error({ err, tool: tool.name }, 'mcp tool failed')
      return toolError(new WeftError('internal', 'Something went wrong on the server; the change was not applied.'))
    } finally {
      flight.done()
    }
  })
  return server
}

/**
 * [MCP5] Answers one `/mcp` POST: a server for the caller and a stateless transport (no session
 * id), both closed when the response is. `body` is the JSON the HTTP server read under its limit;
 * `sessionEnd` the request's RouteRequest.sessionEnd ([AUTH8]).
 */
export async function answerMcpRequest(principal: Principal, deps: McpServerDeps, req: IncomingMessage, res: ServerResponse, body: unknown, sessionEnd?: () => AbortSignal): Promise<void> {
  const server = buildMcpServer(principal, deps, sessionEnd)
  const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true })
  res.on('close', () => {
    void transport.close()
    void server.close()
  })
  await server.connect(transport)
  await transport.handleRequest(req, res, body)
}
