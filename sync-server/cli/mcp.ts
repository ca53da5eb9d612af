/**
 * `weft mcp`: the MCP tools over stdio for an agent that spawns a process.
 *
 * It is a relay, not a second server: each JSON-RPC message read on stdin is POSTed to the
 * running server's stateless `/mcp` endpoint with `Authorization: Bearer $WEFT_TOKEN`, and each
 * answer is written to stdout. So a stdio agent gets exactly the tools, checks, bounds and error
 * codes of the HTTP endpoint — one service path — and this process holds no state but the
 * protocol version the server agreed at `initialize`.
 */
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js'
import { isJSONRPCRequest, isJSONRPCResultResponse, type JSONRPCMessage, type RequestId } from '@modelcontextprotocol/sdk/types.js'

export const usage = 'weft mcp                  the MCP tools over stdio, relayed to WEFT_URL/mcp as WEFT_TOKEN'

/** JSON-RPC's implementation-defined server error: the relay could not get an answer from Weft. */
const UPSTREAM_ERROR = -32000

/** A refusal of the HTTP request itself (401, 413, ...): its status and Weft's `{ error }` body. */
class UpstreamError extends Error {
  constructor(
    readonly status: number,
    readonly body: unknown,
  ) {
    const e = (body as { error?: { code?: unknown; message?: unknown } } | null)?.error
    super(typeof e?.code === 'string' ? `${e.code}: ${String(e.message)}` : `HTTP ${status}`)
  }
}

/** `${WEFT_URL}/mcp`, keeping a path prefix the server may sit under behind a proxy. */
function mcpEndpoint(base: string): URL {
  return new URL('mcp', base.endsWith('/') ? base : `${base}/`)
}

export interface RelayOptions {
  /** The server's base URL (WEFT_URL), e.g. http://localhost:8787. */
  url: string
  token: string
  stdin?: NodeJS.ReadableStream & { on: NodeJS.ReadableStream['on'] }
  stdout?: NodeJS.WritableStream
  log?: (line: string) => void
}

/**
 * [MCP6] Relays stdio MCP to `${url}/mcp` until stdin ends. A request the server refuses at
 * the HTTP level (an invalid token: 401) is answered on stdio with a JSON-RPC error carrying
 * the HTTP status and Weft's error body, so the agent sees why.
 */
export async function relayStdio(opts: RelayOptions): Promise<void> {
  const log = opts.log ?? ((line: string) => process.stderr.write(`weft mcp: ${line}\n`))
  const endpoint = mcpEndpoint(opts.url)
  const upstream = new StreamableHTTPClientTransport(endpoint, {
    requestInit: { headers: { authorization: `Bearer ${opts.token}` } },
    // The transport reports a refused POST as text; read Weft's JSON error body instead.
    fetch: async (input, init) => {
      const res = await fetch(input, init)
      if (res.ok || init?.method !== 'POST') return res
      const text = await res.text()
      let body: unknown = text
      try {
        body = JSON.parse(text)
      } catch {
        // not JSON: keep the text
      }
      throw new UpstreamError(res.status, body)
    },
  })
  const stdin = opts.stdin ?? process.stdin
  const local = new StdioServerTransport(stdin as never, (opts.stdout ?? process.stdout) as never)
  const initializing = new Set<RequestId>()

  const refuse = (msg: JSONRPCMessage, err: unknown) => {
    if (!isJSONRPCRequest(msg)) {
      log(`a notification was not delivered: ${err instanceof Error ? err.message : String(err)}`)
      return
    }
    const data = err instanceof UpstreamError ? { status: err.status, ...(typeof err.body === 'object' && err.body ? err.body : { body: err.body }) } : undefined
    void local.send({ jsonrpc: '2.0', id: msg.id, error: { code: UPSTREAM_ERROR, message: err instanceof Error ? err.message : String(err), ...(data ? { data } : {}) } })
  }
  local.onmessage = (msg) => {
    if (isJSONRPCRequest(msg) && msg.method === 'initialize') initializing.add(msg.id)
    upstream.send(msg).catch((err: unknown) => refuse(msg, err))
  }
  upstream.onmessage = (msg) => {
    // Later POSTs carry the agreed version in MCP-Protocol-Version, as the SDK client does.
    if (isJSONRPCResultResponse(msg) && initializing.delete(msg.id)) {
      const version = (msg.result as { protocolVersion?: unknown }).protocolVersion
      if (typeof version === 'string') upstream.setProtocolVersion(version)
    }
    void local.send(msg)
  }
  upstream.onerror = (err) => log(err.message)
  local.onerror = (err) => log(err.message)

  await upstream.start()
  await local.start()
  await new Promise<void>((resolve) => {
    stdin.once('end', resolve)
    stdin.once('close', resolve)
  })
  await local.close()
  await upstream.close()
}

export async function run(args: readonly string[]): Promise<number> {
  if (args.includes('--help') || args.includes('-h')) {
    process.stdout.write(`usage: ${usage}\n\nEnvironment: WEFT_URL (the server, e.g. http://localhost:8787), WEFT_TOKEN (a session token from POST /api/auth/login).\n`)
    return 0
  }
  if (args.length > 0) {
    process.stderr.write(`weft mcp takes no arguments (got ${args.join(' ')}); set WEFT_URL and WEFT_TOKEN.\n`)
    return 2
  }
  const url = process.env.WEFT_URL
  const token = process.env.WEFT_TOKEN
  if (!url || !token) {
    process.stderr.write('weft mcp: set WEFT_URL (e.g. http://localhost:8787) and WEFT_TOKEN (from POST /api/auth/login).\n')
    return 2
  }
  try {
    mcpEndpoint(url)
  } catch {
    process.stderr.write(`weft mcp: WEFT_URL ${JSON.stringify(url)} is not a URL.\n`)
    return 2
  }
  await relayStdio({ url, token })
  return 0
}
