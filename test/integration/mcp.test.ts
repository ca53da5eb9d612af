import { spawn } from 'node:child_process'
import path from 'node:path'
import type { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import type { MeshNode } from '../../shared/index.js'
import { api, createSpace, errorCode, expectStatus, grantRole, signup, startTestServer, waitFor, type TestServer, type TestUser } from '../helpers/index.js'
import { definition, putSubscription, type Item, type NextBody } from './contextual-helpers.js'
import { callTool, connect, connectHttp, connectStdio, must, type McpTransportKind } from './mcp-helpers.js'
import { TOOL_NAMES } from '../../sync-server/mcp/index.js'

/** The contract's tools: the five contextual operations, extend, and the mesh tools for agents. */
const EXPECTED_TOOLS = [
  'weft_contextual_ack',
  'weft_contextual_extend',
  'weft_contextual_mine',
  'weft_contextual_nack',
  'weft_contextual_next',
  'weft_contextual_react',
  'weft_contextual_status',
  'weft_get',
  'weft_patch',
  'weft_query',
  'weft_run',
]

/** How long spawning `bin/weft mcp` may take (node + tsx compile on a loaded machine). */
const SPAWN_MS = 180_000

const fence = (consumerId: string, item: Item) => ({ consumerId, eventId: item.event.eventId, leaseToken: item.leaseToken, attempt: item.attempt })

let ts: TestServer
let owner: TestUser
let viewer: TestUser
let space = ''

beforeAll(async () => {
  ts = await startTestServer()
  owner = await signup(ts.url)
  viewer = await signup(ts.url)
  space = await createSpace(ts.url, owner.token)
  await grantRole(ts.url, owner.token, space, viewer.userId, 'Viewer')
})
afterAll(async () => ts.cleanup())

describe.each<McpTransportKind>(['http', 'stdio'])('MCP over %s (issue 19)', (kind) => {
  let agent: Client
  let viewerAgent: Client
  // Spawning `weft mcp` (node with tsx) is slow on a loaded machine: its own generous bound.
  beforeAll(async () => {
    agent = await connect(kind, ts.url, owner.token)
    viewerAgent = await connect(kind, ts.url, viewer.token)
  }, SPAWN_MS)
  afterAll(async () => {
    await agent.close()
    await viewerAgent.close()
  })

  /** A subscription over a fresh inbox, and the consumer `w1` made by a first pull. */
  async function subscription(n: string) {
    const sub = `${space}/${kind}-s${n}`
    const inbox = `${space}/${kind}-in${n}`
    expectStatus(await putSubscription(ts.url, owner.token, sub, definition(inbox)), 201)
    expectStatus(await api(ts.url, owner.token).putNode(inbox, 'Document', {}), 201)
    const first = await must<NextBody>(agent, 'weft_contextual_next', { subscription: sub, consumer: 'w1' })
    expect(first.item).toBeNull()
    return { sub, inbox, consumerId: first.consumerId }
  }

  it('[MCP1] lists the contract tools, underscore names only, each with an input schema', async () => {
    const { tools } = await agent.listTools()
    expect(tools.map((t) => t.name).sort()).toEqual(EXPECTED_TOOLS)
    expect([...TOOL_NAMES].sort()).toEqual(EXPECTED_TOOLS)
    for (const t of tools) {
      expect(t.name).toMatch(/^[a-z]+(_[a-z]+)+$/)
      expect(t.description?.length).toBeGreaterThan(20)
      expect(t.inputSchema.type).toBe('object')
      expect(Object.keys(t.inputSchema.properties ?? {}).length).toBeGreaterThan(0)
    }
    const next = tools.find((t) => t.name === 'weft_contextual_next')!
    expect(next.inputSchema.required).toEqual(['subscription', 'consumer'])
  })

  it('[MCP2] an agent loop: next (long poll) → react → ack, end to end through the tools', async () => {
    const { sub, inbox, consumerId } = await subscription('loop')
    // The long poll is woken by the commit: the pull is asked first, the event written after.
    const pulling = must<NextBody>(agent, 'weft_contextual_next', { subscription: sub, consumer: 'w1', waitSeconds: 30 })
    expectStatus(await api(ts.url, owner.token).putNode(`${inbox}/ticket`, 'Document', { Title: 'printer on fire' }), 201)
    const { item } = await pulling
    expect(item).not.toBeNull()
    expect(item!.event).toMatchObject({ path: `${inbox}/ticket`, kind: 'Created' })
    expect((item!.hydration.source as MeshNode).content).toEqual({ Title: 'printer on fire' })
    // The "model" picks an offered reaction and fills its declared parameters.
    const reply = item!.reactions.find((r) => r.name === 'reply')!
    const reacted = await must<{ outcome: { status: string; path: string }; repeated: boolean }>(agent, 'weft_contextual_react', {
      causationToken: reply.causationToken,
      params: { Text: 'Put it out first.' },
    })
    expect(reacted).toMatchObject({ repeated: false, outcome: { status: 'committed', path: `${inbox}/ticket/reply` } })
    // The effect is durable (read back through the mesh tool), then the item is acknowledged.
    expect((await must<MeshNode>(agent, 'weft_get', { path: `${inbox}/ticket/reply` })).content).toEqual({ Text: 'Put it out first.' })
    expect(await must(agent, 'weft_contextual_ack', fence(consumerId, item!))).toEqual({ ok: true, state: 'acked', repeated: false })
    // [CTX60] The same ack again (its answer lost): settled, said so.
    expect(await must(agent, 'weft_contextual_ack', fence(consumerId, item!))).toEqual({ ok: true, state: 'acked', repeated: true })
    expect(await must(agent, 'weft_contextual_status', { consumerId })).toMatchObject({ acked: 1, leased: 0, pending: 0 })
    // A repeat of the reaction after the ack resolves the persisted outcome: nothing new. [CTX59]
    // Its other parameters were not applied, and the answer says so.
    const again = await must<{ repeated: boolean; paramsDiffer?: boolean; message?: string }>(agent, 'weft_contextual_react', { causationToken: reply.causationToken, params: { Text: 'other' } })
    expect(again).toMatchObject({ repeated: true, paramsDiffer: true, message: expect.stringContaining('yours were not applied') })
    // [CTX62] A required argument left out is named as required.
    expect(await callTool(agent, 'weft_contextual_react', { params: { Text: 'x' } })).toMatchObject({ ok: false, code: 'invalid_request', message: 'The arguments of weft_contextual_react are invalid: causationToken is required.' })
    expect(await callTool(agent, 'weft_contextual_ack', { consumerId, eventId: item!.event.eventId, attempt: 1 })).toMatchObject({ ok: false, code: 'invalid_request', message: expect.stringContaining('leaseToken is required') })
    // The same work through HTTP sees the same state.
    expect(expectStatus(await api(ts.url, owner.token).post('/api/contextual/status', { consumerId }), 200).body).toMatchObject({ acked: 1 })
  })

  it('[MCP2] [CTX47] an agent settles the item with its reaction: next → react with ack, two tool calls', async () => {
    const { sub, inbox, consumerId } = await subscription('settle')
    expectStatus(await api(ts.url, owner.token).putNode(`${inbox}/t`, 'Document', { Title: 'one call' }), 201)
    const { item } = await must<NextBody>(agent, 'weft_contextual_next', { subscription: sub, consumer: 'w1', waitSeconds: 10 })
    const reply = item!.reactions.find((r) => r.name === 'reply')!
    const reacted = await must<{ repeated: boolean; acked: boolean }>(agent, 'weft_contextual_react', { causationToken: reply.causationToken, params: { Text: 'done' }, ack: true })
    expect(reacted).toMatchObject({ repeated: false, acked: true })
    expect(await must(agent, 'weft_contextual_status', { consumerId })).toMatchObject({ acked: 1, leased: 0 })
    expect(await callTool(agent, 'weft_contextual_ack', fence(consumerId, item!))).toMatchObject({ ok: false, code: 'stale_lease' })
  })

  it('[MCP2] [CTX52] an agent\'s loop is one tool call per item: react with ack and next brings the next work item', async () => {
    const { sub, inbox, consumerId } = await subscription('one-call')
    for (const t of ['t1', 't2']) expectStatus(await api(ts.url, owner.token).putNode(`${inbox}/${t}`, 'Document', { Title: t }), 201)
    let { item } = await must<NextBody>(agent, 'weft_contextual_next', { subscription: sub, consumer: 'w1', waitSeconds: 10 })
    const answered: string[] = []
    while (item) {
      const reply = item.reactions.find((r) => r.name === 'reply')!
      const r = await must<{ acked: boolean; next: NextBody }>(agent, 'weft_contextual_react', { causationToken: reply.causationToken, params: { Text: `re ${item.event.path}` }, ack: true, next: true })
      expect(r.acked).toBe(true)
      expect(r.next.consumerId).toBe(consumerId)
      answered.push(item.event.path)
      item = r.next.item
    }
    expect(answered).toEqual([`${inbox}/t1`, `${inbox}/t2`])
    expect((await must<MeshNode>(agent, 'weft_get', { path: `${inbox}/t2/reply` })).content).toEqual({ Text: `re ${inbox}/t2` })
    expect(await must(agent, 'weft_contextual_status', { consumerId })).toMatchObject({ acked: 2, leased: 0, pending: 0 })
    // next without ack: the tool's error, nothing committed.
    expectStatus(await api(ts.url, owner.token).putNode(`${inbox}/t3`, 'Document', {}), 201)
    const third = (await must<NextBody>(agent, 'weft_contextual_next', { subscription: sub, consumer: 'w1', waitSeconds: 10 })).item!
    const refused = await callTool(agent, 'weft_contextual_react', { causationToken: third.reactions.find((r) => r.name === 'reply')!.causationToken, params: { Text: 'x' }, next: true })
    expect(refused).toMatchObject({ ok: false, code: 'invalid_request' })
    expect((await api(ts.url, owner.token).getNode(`${inbox}/t3/reply`)).status).toBe(404)
  })

  it('[MCP2] a stale worker is fenced: its ack after the item was given back and re-leased is stale_lease', async () => {
    const { sub, inbox, consumerId } = await subscription('stale')
    expectStatus(await api(ts.url, owner.token).putNode(`${inbox}/a`, 'Document', {}), 201)
    const first = (await must<NextBody>(agent, 'weft_contextual_next', { subscription: sub, consumer: 'w1', waitSeconds: 10 })).item!
    expect(await must(agent, 'weft_contextual_extend', { ...fence(consumerId, first), seconds: 60 })).toHaveProperty('expiresAt')
    expect(await must(agent, 'weft_contextual_nack', { ...fence(consumerId, first), delaySeconds: 0, error: 'model timed out' })).toEqual({ state: 'pending' })
    const second = (await must<NextBody>(agent, 'weft_contextual_next', { subscription: sub, consumer: 'w1', waitSeconds: 10 })).item!
    expect(second.event.eventId).toBe(first.event.eventId)
    expect(second.attempt).toBe(2)
    // The first worker wakes up late with its old evidence.
    const stale = await callTool(agent, 'weft_contextual_ack', fence(consumerId, first))
    expect(stale).toMatchObject({ ok: false, code: 'stale_lease' })
    const staleReact = await callTool(agent, 'weft_contextual_react', { causationToken: first.reactions.find((r) => r.name === 'reply')!.causationToken, params: { Text: 'late' } })
    expect(staleReact).toMatchObject({ ok: false, code: 'reaction_denied' })
    expect((await api(ts.url, owner.token).getNode(`${inbox}/a/reply`)).status).toBe(404)
    expect(await must(agent, 'weft_contextual_ack', fence(consumerId, second))).toEqual({ ok: true, state: 'acked', repeated: false })
  })

  it("[MCP3] a Viewer's weft_patch is refused with the code HTTP gives; their reads work; nothing changes", async () => {
    const doc = `${space}/${kind}-viewed`
    expectStatus(await api(ts.url, owner.token).putNode(doc, 'Document', { Title: 'keep' }), 201)
    expect((await must<MeshNode>(viewerAgent, 'weft_get', { path: doc })).content).toEqual({ Title: 'keep' })
    const viaHttp = await api(ts.url, viewer.token).patchNode(doc, { Title: 'changed' })
    const viaMcp = await callTool(viewerAgent, 'weft_patch', { path: doc, patch: { Title: 'changed' } })
    expect(viaHttp.status).toBe(403)
    expect(viaMcp).toMatchObject({ ok: false, code: errorCode(viaHttp) })
    expect(['forbidden', 'forbidden_field']).toContain(errorCode(viaHttp))
    expect((await api(ts.url, owner.token).getNode(doc)).body.content).toEqual({ Title: 'keep' })
    // The owner's patch through the tool is applied.
    expect((await must<MeshNode>(agent, 'weft_patch', { path: doc, patch: { Title: `changed by ${kind}`, Extra: 1 } })).content).toEqual({ Title: `changed by ${kind}`, Extra: 1 })
    const found = await must<{ items: MeshNode[] }>(viewerAgent, 'weft_query', { parent: space, nodeType: 'Document', where: { Title: `changed by ${kind}` } })
    expect(found.items.map((n) => n.path)).toEqual([doc])
    // A stranger's agent reads nothing of the space.
    const stranger = await signup(ts.url)
    const strangerAgent = await connectHttp(ts.url, stranger.token)
    expect(await callTool(strangerAgent, 'weft_get', { path: doc })).toMatchObject({ ok: false, code: errorCode(await api(ts.url, stranger.token).getNode(doc)) })
    expect((await must<{ items: MeshNode[] }>(strangerAgent, 'weft_query', { parent: space })).items).toEqual([])
    await strangerAgent.close()
  })

  it('[MCP3] a member named __proto__ is a field like any other: weft_patch writes and removes it as HTTP does', async () => {
    const doc = `${space}/${kind}-proto`
    expectStatus(await api(ts.url, owner.token).putNode(doc, 'Document', JSON.parse('{"__proto__":"kept","A":1}')), 201)
    expect((await api(ts.url, owner.token).getNode(doc)).body.content).toEqual(JSON.parse('{"__proto__":"kept","A":1}'))
    const patched = await must<MeshNode>(agent, 'weft_patch', { path: doc, patch: JSON.parse('{"__proto__":"by mcp"}') })
    expect(Object.getOwnPropertyDescriptor(patched.content, '__proto__')?.value).toBe('by mcp')
    expect(Object.getPrototypeOf(patched.content)).toBe(Object.prototype)
    await must<MeshNode>(agent, 'weft_patch', { path: doc, patch: JSON.parse('{"__proto__":null}') })
    expect((await api(ts.url, owner.token).getNode(doc)).body.content).toEqual({ A: 1 })
  })

  it('[MCP4] crafted arguments give a tool error with a Weft code, and the server keeps serving', async () => {
    const doc = `${space}/${kind}-crafted`
    expectStatus(await api(ts.url, owner.token).putNode(doc, 'Document', { Title: 'intact' }), 201)
    // As deep as the client's own JSON.stringify goes; deeper still is sent raw below.
    let deep: unknown = 1
    for (let i = 0; i < 2_000; i++) deep = { d: deep }
    let justTooDeep: unknown = 1
    for (let i = 0; i < 65; i++) justTooDeep = { d: justTooDeep }
    const cases: Array<[string, unknown, string]> = [
      ['weft_get', { path: 42 }, 'invalid_request'],
      ['weft_get', {}, 'invalid_request'],
      ['weft_get', { path: doc, extra: true }, 'invalid_request'],
      ['weft_get', { path: 'x'.repeat(200_000) }, 'invalid_request'],
      ['weft_get', { path: '../etc/passwd' }, 'invalid_path'],
      ['weft_patch', { path: doc, patch: 'not an object' }, 'invalid_request'],
      ['weft_patch', { path: doc, patch: deep }, 'invalid_request'],
      ['weft_patch', { path: doc, patch: justTooDeep }, 'invalid_patch'],
      ['weft_query', { limit: -1 }, 'invalid_request'],
      ['weft_query', { limit: 1.5 }, 'invalid_request'],
      ['weft_query', { parent: space, where: { Title: ['x'] } }, 'invalid_request'],
      ['weft_contextual_next', { subscription: doc, consumer: 'has space' }, 'invalid_request'],
      ['weft_contextual_next', { subscription: doc, consumer: 'w1', waitSeconds: 1e9 }, 'invalid_request'],
      ['weft_contextual_ack', { consumerId: 'c', eventId: 'e', leaseToken: 't', attempt: '1' }, 'invalid_request'],
      ['weft_contextual_nack', { consumerId: 'c', eventId: 'e', leaseToken: 't', attempt: 1, error: 'e'.repeat(100_000) }, 'invalid_request'],
      ['weft_contextual_react', { causationToken: 'forged.token' }, 'reaction_denied'],
      ['weft_contextual_status', { consumerId: 'nobody' }, 'not_found'],
      ['weft_run', { path: doc }, 'invalid_request'],
      ['weft_does_not_exist', {}, 'not_found'],
    ]
    for (const [tool, args, code] of cases) {
      const out = await callTool(agent, tool, args)
      expect(out, `${tool} ${JSON.stringify(args).slice(0, 80)}`).toMatchObject({ ok: false, code })
    }
    expect((await api(ts.url, owner.token).getNode(doc)).body.content).toEqual({ Title: 'intact' })
    expect((await must<MeshNode>(agent, 'weft_get', { path: doc })).content).toEqual({ Title: 'intact' })
    expectStatus(await api(ts.url).get('/healthz'), 200)
  })

  it('[MCP9] weft_query takes any integer limit from 1, and answers as GET /api/nodes does (a huge limit is capped, not refused)', async () => {
    for (const limit of [1, 1e21, Number.MAX_VALUE]) {
      const http = await api(ts.url, owner.token).request<{ items: MeshNode[] }>('GET', `/api/nodes?parent=${encodeURIComponent(space)}&limit=${encodeURIComponent(String(limit))}`)
      const mcp = await callTool<{ items: MeshNode[] }>(agent, 'weft_query', { parent: space, limit })
      expect(http.status).toBe(200)
      expect({ limit, ok: mcp.ok, paths: mcp.ok ? mcp.value.items.map((n) => n.path) : mcp }).toEqual({ limit, ok: true, paths: http.body.items.map((n) => n.path) })
    }
  })

  it('[MCP2] weft_run starts a run of a Code node as the caller; the activity runs', async () => {
    const code = `${space}/${kind}-tool`
    expectStatus(await api(ts.url, owner.token).putNode(code, 'Code', { Language: 'javascript', Source: 'return 6 * 7', IsExecutable: true }), 201)
    const { path: run } = await must<{ path: string }>(agent, 'weft_run', { path: code })
    const done = await waitFor(
      async () => {
        const n = await must<MeshNode>(agent, 'weft_get', { path: run })
        return n.content.Status === 'Succeeded' ? n : null
      },
      { timeoutMs: 60_000, description: `${run} Succeeded` },
    )
    expect(done.content).toMatchObject({ ReturnValue: 42, StartedBy: owner.userId, CodePath: code })
    // Someone who cannot read the Code node gets the refusal the HTTP route gives, and no run.
    const stranger = await signup(ts.url)
    const strangerAgent = await connectHttp(ts.url, stranger.token)
    const viaHttp = await api(ts.url, stranger.token).post(`/api/nodes/${code}/run`, {})
    expect(viaHttp.status).toBeGreaterThanOrEqual(403)
    expect(await callTool(strangerAgent, 'weft_run', { path: code })).toMatchObject({ ok: false, code: errorCode(viaHttp) })
    await strangerAgent.close()
  }, 120_000)
})

describe('MCP over Streamable HTTP: auth and statelessness', () => {
  const rpc = (token: string | null, body: unknown, headers: Record<string, string> = {}) =>
    fetch(new URL('/mcp', ts.url), {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...(token ? { authorization: `Bearer ${token}` } : {}), ...headers },
      body: typeof body === 'string' ? body : JSON.stringify(body),
    })

  it('[MCP5] no token or an invalid token is 401 with the unauthorized code; the SDK client cannot connect', async () => {
    for (const token of [null, 'not-a-token']) {
      const res = await rpc(token, { jsonrpc: '2.0', id: 1, method: 'tools/list' })
      expect(res.status).toBe(401)
      expect(((await res.json()) as { error: { code: string } }).error.code).toBe('unauthorized')
    }
    await expect(connectHttp(ts.url)).rejects.toThrow(/401|unauthorized|Sign in/i)
    await expect(connectHttp(ts.url, 'not-a-token')).rejects.toThrow(/401|unauthorized|Sign in/i)
  })

  it('[MCP5] stateless: no session id, a tools/call without initialize is answered, GET and DELETE are 405', async () => {
    const init = await rpc(owner.token, {
      jsonrpc: '2.0',
      id: 1,
      method: 'initialize',
      params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
    })
    expect(init.status).toBe(200)
    expect(init.headers.get('mcp-session-id')).toBeNull()
    // Another request, as if a load balancer sent it to another instance: it needs no session.
    const call = await rpc(owner.token, { jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'weft_get', arguments: { path: space } } })
    expect(call.status).toBe(200)
    const body = (await call.json()) as { result: { structuredContent: { path: string } } }
    expect(body.result.structuredContent.path).toBe(space)
    for (const method of ['GET', 'DELETE']) {
      const res = await fetch(new URL('/mcp', ts.url), { method, headers: { authorization: `Bearer ${owner.token}` } })
      expect(res.status).toBe(405)
      expect(res.headers.get('allow')).toBe('POST')
    }
  })

  it('[MCP8] tools/call whose arguments are no object (a string, an array, null, a number) is an invalid_request tool error, not a JSON-RPC error', async () => {
    const outcomes: unknown[] = []
    for (const args of ['x', [1], null, 7]) {
      const res = await rpc(owner.token, { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'weft_get', arguments: args } })
      const body = (await res.json()) as { result?: { isError?: boolean; structuredContent?: { error?: { code?: string } } }; error?: { code: number } }
      outcomes.push(body.error ? { jsonRpcError: body.error.code } : { isError: body.result?.isError, code: body.result?.structuredContent?.error?.code })
    }
    expect(outcomes).toEqual(Array(4).fill({ isError: true, code: 'invalid_request' }))
    // Null reads as no arguments: a tool that needs none answers.
    const res = await rpc(owner.token, { jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'weft_query', arguments: null } })
    expect(((await res.json()) as { result: { isError?: boolean } }).result.isError).toBeUndefined()
  })

  it('[MCP4] a body over the limit or not JSON is refused over HTTP with its code, and the server keeps serving', async () => {
    const big = await rpc(owner.token, { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'weft_get', arguments: { path: 'x'.repeat(2 * 1024 * 1024) } } })
    expect(big.status).toBe(413)
    expect(((await big.json()) as { error: { code: string } }).error.code).toBe('payload_too_large')
    const bad = await rpc(owner.token, '{"jsonrpc":')
    expect(bad.status).toBe(400)
    expect(((await bad.json()) as { error: { code: string } }).error.code).toBe('invalid_json')
    // Arguments 150,000 levels deep (under the body limit), written by hand (no JSON.stringify goes that deep).
    const deep = `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"weft_patch","arguments":{"path":"${space}","patch":${'{"d":'.repeat(150_000)}1${'}'.repeat(150_000)}}}}`
    const deepRes = await rpc(owner.token, deep)
    expect(deepRes.status).toBe(200)
    const deepBody = (await deepRes.json()) as { result: { isError: boolean; structuredContent: { error: { code: string } } } }
    expect(deepBody.result).toMatchObject({ isError: true, structuredContent: { error: { code: 'invalid_request' } } })
    const notRpc = await rpc(owner.token, { hello: 'world' })
    expect(notRpc.status).toBeGreaterThanOrEqual(400)
    expect(notRpc.status).toBeLessThan(500)
    const ok = await rpc(owner.token, { jsonrpc: '2.0', id: 3, method: 'tools/list' })
    expect(ok.status).toBe(200)
  })
})

describe('weft mcp (stdio through the CLI)', () => {
  const WEFT_BIN = path.resolve(import.meta.dirname, '../../bin/weft')

  it('[MCP6] an invalid token: the agent is told unauthorized at initialize', async () => {
    await expect(connectStdio(ts.url, 'not-a-token')).rejects.toThrow(/unauthorized/)
  }, SPAWN_MS)

  it('[MCP6] without WEFT_URL and WEFT_TOKEN it exits 2 and says what to set', async () => {
    const child = spawn(WEFT_BIN, ['mcp'], { env: { PATH: process.env.PATH ?? '' }, stdio: ['pipe', 'pipe', 'pipe'] })
    let err = ''
    child.stderr.on('data', (d: Buffer) => (err += d.toString()))
    const code = await new Promise<number | null>((resolve) => child.on('exit', resolve))
    expect(code).toBe(2)
    expect(err).toMatch(/WEFT_URL.*WEFT_TOKEN/)
  }, SPAWN_MS)
})

describe('[CTX43] an MCP long poll ends when its caller goes away', () => {
  /** A subscription over a fresh inbox (one item in flight at most), its consumer made by a first pull. */
  async function pollable(agent: Client, n: string) {
    const sub = `${space}/gone-s${n}`
    const inbox = `${space}/gone-in${n}`
    expectStatus(await putSubscription(ts.url, owner.token, sub, definition(inbox, { Limits: { LeaseSeconds: 30, MaxInFlight: 1, MaxAttempts: 3 } })), 201)
    expectStatus(await api(ts.url, owner.token).putNode(inbox, 'Document', {}), 201)
    expect((await must<NextBody>(agent, 'weft_contextual_next', { subscription: sub, consumer: 'w1' })).item).toBeNull()
    return { sub, inbox }
  }
  const waiting = () => ts.server.contextual.waiting

  it('[CTX43] a tools/call the client cancels (notifications/cancelled) stops waiting; the next event goes to a live pull', async () => {
    const agent = await connectHttp(ts.url, owner.token)
    try {
      const { sub, inbox } = await pollable(agent, 'cancel')
      const stop = new AbortController()
      const polling = agent.callTool({ name: 'weft_contextual_next', arguments: { subscription: sub, consumer: 'w1', waitSeconds: 60 } }, undefined, { signal: stop.signal }).catch((e: unknown) => e)
      await vi.waitFor(() => expect(waiting()).toBe(1), { timeout: 60_000, interval: 20 })
      stop.abort('the model gave up')
      expect(await polling).toBeInstanceOf(Error)
      // Released once the server reads the cancel (its own POST), long before the poll's own 60 s.
      await vi.waitFor(() => expect(waiting()).toBe(0), { timeout: 30_000, interval: 20 })
      // The event that lands now goes to the next pull, first attempt: the cancelled call took nothing.
      expectStatus(await api(ts.url, owner.token).putNode(`${inbox}/late`, 'Document', {}), 201)
      const got = await must<NextBody>(agent, 'weft_contextual_next', { subscription: sub, consumer: 'w1', waitSeconds: 10 })
      expect(got.item).toMatchObject({ event: { path: `${inbox}/late` }, attempt: 1 })
    } finally {
      await agent.close()
    }
  })

  it('[CTX43] [CTX52] a react with next whose pull the client cancels: the reaction stands, the wait ends, the pull took nothing', async () => {
    const agent = await connectHttp(ts.url, owner.token)
    try {
      const { sub, inbox } = await pollable(agent, 'react-next')
      expectStatus(await api(ts.url, owner.token).putNode(`${inbox}/d`, 'Document', {}), 201)
      const { item } = await must<NextBody>(agent, 'weft_contextual_next', { subscription: sub, consumer: 'w1', waitSeconds: 10 })
      const reply = item!.reactions.find((r) => r.name === 'reply')!
      const stop = new AbortController()
      const reacting = agent
        .callTool({ name: 'weft_contextual_react', arguments: { causationToken: reply.causationToken, params: { Text: 'kept' }, ack: true, next: true, waitSeconds: 60 } }, undefined, { signal: stop.signal })
        .catch((e: unknown) => e)
      await vi.waitFor(() => expect(waiting()).toBe(1), { timeout: 60_000, interval: 20 })
      stop.abort('the model gave up')
      expect(await reacting).toBeInstanceOf(Error)
      await vi.waitFor(() => expect(waiting()).toBe(0), { timeout: 30_000, interval: 20 })
      expect((await api(ts.url, owner.token).getNode(`${inbox}/d/reply`)).body.content).toEqual({ Text: 'kept' })
      expectStatus(await api(ts.url, owner.token).putNode(`${inbox}/late`, 'Document', {}), 201)
      const got = await must<NextBody>(agent, 'weft_contextual_next', { subscription: sub, consumer: 'w1', waitSeconds: 10 })
      expect(got.item).toMatchObject({ event: { path: `${inbox}/late` }, attempt: 1 })
    } finally {
      await agent.close()
    }
  })

  it('[CTX43] a cancel from another caller with the same request id leaves the call waiting', async () => {
    const agent = await connectHttp(ts.url, owner.token)
    try {
      const { sub, inbox } = await pollable(agent, 'other')
      const polling = must<NextBody>(agent, 'weft_contextual_next', { subscription: sub, consumer: 'w1', waitSeconds: 60 })
      await vi.waitFor(() => expect(waiting()).toBe(1), { timeout: 60_000, interval: 20 })
      // The viewer names every id the owner's client may have used: none of them is the viewer's call.
      for (let requestId = 0; requestId < 10; requestId++) {
        const res = await fetch(new URL('/mcp', ts.url), {
          method: 'POST',
          headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', authorization: `Bearer ${viewer.token}` },
          body: JSON.stringify({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId } }),
        })
        expect(res.status).toBe(202)
      }
      expect(waiting()).toBe(1)
      expectStatus(await api(ts.url, owner.token).putNode(`${inbox}/woken`, 'Document', {}), 201)
      expect((await polling).item).toMatchObject({ event: { path: `${inbox}/woken` }, attempt: 1 })
    } finally {
      await agent.close()
    }
  })

  it('[CTX43] a long poll whose client closes its transport stops waiting and leases nothing for it', async () => {
    const agent = await connectHttp(ts.url, owner.token)
    const { sub, inbox } = await pollable(agent, 'closed')
    const polling = agent.callTool({ name: 'weft_contextual_next', arguments: { subscription: sub, consumer: 'w1', waitSeconds: 60 } }).catch((e: unknown) => e)
    await vi.waitFor(() => expect(waiting()).toBe(1), { timeout: 60_000, interval: 20 })
    await agent.close()
    expect(await polling).toBeInstanceOf(Error)
    await vi.waitFor(() => expect(waiting()).toBe(0), { timeout: 30_000, interval: 20 })
    const live = await connectHttp(ts.url, owner.token)
    try {
      expectStatus(await api(ts.url, owner.token).putNode(`${inbox}/late`, 'Document', {}), 201)
      const got = await must<NextBody>(live, 'weft_contextual_next', { subscription: sub, consumer: 'w1', waitSeconds: 10 })
      expect(got.item).toMatchObject({ event: { path: `${inbox}/late` }, attempt: 1 })
    } finally {
      await live.close()
    }
  })
})
