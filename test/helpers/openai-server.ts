import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'

/**
 * A real OpenAI-compatible HTTP server on loopback for the LLM agent's tests: `POST
 * /v1/chat/completions` with `stream: true` answers with server-sent events exactly as the
 * OpenAI API does — `chat.completion.chunk` objects whose `choices[0].delta` carries `content`
 * pieces or `tool_calls` deltas (the id and name first, then the arguments in pieces), a final
 * chunk with `finish_reason`, then `data: [DONE]`. What it answers is the test's `reply` for the
 * request body. `hold` keeps a stream open after its first chunks until `release()` or until the
 * client goes away (recorded in `aborted`).
 */

export interface ToolCallReply {
  id: string
  name: string
  args: unknown
}

export interface Reply {
  /** Text chunks, streamed in order. */
  text?: string[]
  toolCalls?: ToolCallReply[]
  /** Stream the text, then wait (an open stream) until released or the client goes away. */
  hold?: boolean
  /** Answer with this HTTP status and an OpenAI error body instead. */
  status?: number
}

export interface ChatRequest {
  model: string
  messages: Array<{ role: string; content?: unknown; tool_calls?: Array<{ id: string; function: { name: string; arguments: string } }>; tool_call_id?: string }>
  tools?: Array<{ type: string; function: { name: string; parameters: unknown } }>
  stream?: boolean
  max_tokens?: number
}

export interface FakeOpenAi {
  url: string
  /** Every request body, in order. */
  requests: ChatRequest[]
  /** How many streams ended because the client closed the connection first. */
  aborted: number
  /** Streams held open now. */
  holding: number
  /** Ends every held stream (its finish chunk and [DONE]). */
  release(): void
  /** The authorization headers seen. */
  auth: string[]
  close(): Promise<void>
}

function chunk(model: string, delta: object, finish: string | null = null): string {
  return `data: ${JSON.stringify({ id: 'chatcmpl-test', object: 'chat.completion.chunk', created: 1_700_000_000, model, system_fingerprint: null, choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }] })}\n\n`
}

async function body(req: IncomingMessage): Promise<string> {
  const parts: Buffer[] = []
  for await (const p of req) parts.push(p as Buffer)
  return Buffer.concat(parts).toString('utf8')
}

export async function startFakeOpenAi(reply: (req: ChatRequest) => Reply): Promise<FakeOpenAi> {
  const held = new Set<() => void>()
  const state = { requests: [] as ChatRequest[], aborted: 0, auth: [] as string[] }
  const server: Server = createServer((req: IncomingMessage, res: ServerResponse) => {
    void (async () => {
      if (req.method !== 'POST' || !req.url?.endsWith('/chat/completions')) {
        res.writeHead(404, { 'content-type': 'application/json' }).end(JSON.stringify({ error: { message: 'not found', type: 'invalid_request_error' } }))
        return
      }
      state.auth.push(String(req.headers.authorization ?? ''))
      const parsed = JSON.parse(await body(req)) as ChatRequest
      state.requests.push(parsed)
      const r = reply(parsed)
      if (r.status) {
        res.writeHead(r.status, { 'content-type': 'application/json' }).end(JSON.stringify({ error: { message: 'the test server refused', type: 'server_error', code: null } }))
        return
      }
      const model = parsed.model
      let finished = false
      res.on('close', () => {
        if (!finished) state.aborted++
      })
      res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive' })
      res.write(chunk(model, { role: 'assistant', content: '' }))
      for (const t of r.text ?? []) res.write(chunk(model, { content: t }))
      if (r.hold) {
        await new Promise<void>((resolve) => {
          const done = () => {
            held.delete(done)
            resolve()
          }
          held.add(done)
          res.on('close', done)
        })
        if (res.destroyed || res.writableEnded) return
      }
      ;(r.toolCalls ?? []).forEach((c, index) => {
        res.write(chunk(model, { tool_calls: [{ index, id: c.id, type: 'function', function: { name: c.name, arguments: '' } }] }))
        // The arguments arrive in pieces, as the real API sends them.
        const args = JSON.stringify(c.args)
        for (let i = 0; i < args.length; i += 7) res.write(chunk(model, { tool_calls: [{ index, function: { arguments: args.slice(i, i + 7) } }] }))
      })
      res.write(chunk(model, {}, r.toolCalls?.length ? 'tool_calls' : 'stop'))
      res.write('data: [DONE]\n\n')
      finished = true
      res.end()
    })().catch((err: unknown) => {
      if (!res.headersSent) res.writeHead(500).end(String(err))
      else res.end()
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as AddressInfo
  return {
    url: `http://127.0.0.1:${port}/v1`,
    get requests() {
      return state.requests
    },
    get aborted() {
      return state.aborted
    },
    get auth() {
      return state.auth
    },
    get holding() {
      return held.size
    },
    release() {
      for (const d of [...held]) d()
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const d of [...held]) d()
        server.closeAllConnections()
        server.close(() => resolve())
      }),
  }
}

/** The text of the last message of `role` in a request ('' when none). */
export function lastOf(req: ChatRequest, role: string): string {
  const m = [...req.messages].reverse().find((x) => x.role === role)
  if (!m) return ''
  return typeof m.content === 'string' ? m.content : JSON.stringify(m.content ?? '')
}
