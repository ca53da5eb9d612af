import path from 'node:path'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js'
import { expect } from 'vitest'

export type McpTransportKind = 'http' | 'stdio'

const WEFT_BIN = path.resolve(import.meta.dirname, '../../bin/weft')

/** The SDK's own client on Streamable HTTP at `${url}/mcp`, with the token as a Bearer header. */
export async function connectHttp(url: string, token?: string): Promise<Client> {
  const client = new Client({ name: 'weft-test', version: '1' })
  const headers: Record<string, string> = token === undefined ? {} : { authorization: `Bearer ${token}` }
  await client.connect(new StreamableHTTPClientTransport(new URL('/mcp', url), { requestInit: { headers } }))
  return client
}

/** The SDK's own client spawning `weft mcp` (WEFT_URL, WEFT_TOKEN), as an agent host would. */
export async function connectStdio(url: string, token: string): Promise<Client> {
  const client = new Client({ name: 'weft-test', version: '1' })
  const env: Record<string, string> = { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', WEFT_URL: url, WEFT_TOKEN: token }
  await client.connect(new StdioClientTransport({ command: WEFT_BIN, args: ['mcp'], env, stderr: 'pipe' }))
  return client
}

export function connect(kind: McpTransportKind, url: string, token: string): Promise<Client> {
  return kind === 'http' ? connectHttp(url, token) : connectStdio(url, token)
}

export type Outcome<T = Record<string, unknown>> = { ok: true; value: T } | { ok: false; code: string; message: string }

/** One tool call, read as Weft's outcome: the structured value, or the error code of a tool error. */
export async function callTool<T = Record<string, unknown>>(client: Client, name: string, args: unknown): Promise<Outcome<T>> {
  const r = (await client.callTool({ name, arguments: args as Record<string, unknown> })) as CallToolResult
  const text = r.content.find((c) => c.type === 'text')?.text ?? ''
  if (r.isError) {
    const parsed = JSON.parse(text) as { error: { code: string; message: string } }
    expect(r.structuredContent).toEqual(parsed)
    return { ok: false, code: parsed.error.code, message: parsed.error.message }
  }
  expect(JSON.parse(text)).toEqual(r.structuredContent)
  return { ok: true, value: r.structuredContent as T }
}

/** A successful call's value (throws with the error otherwise). */
export async function must<T = Record<string, unknown>>(client: Client, name: string, args: unknown): Promise<T> {
  const o = await callTool<T>(client, name, args)
  if (!o.ok) throw new Error(`${name} refused: ${o.code}: ${o.message}`)
  return o.value
}
