import type { Client } from '@modelcontextprotocol/sdk/client/index.js'
import fc from 'fast-check'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { SYSTEM, type JsonObject, type MeshNode, type NodePath } from '../../shared/index.js'
import { api, createSpace, expectStatus, grantRole, nodeUrlPath, signup, startTestServer, waitFor, type ApiResponse, type TestServer, type TestUser } from '../helpers/index.js'
import { terminal } from './activities-helpers.js'
import { definition, putSubscription } from './contextual-helpers.js'
import { callTool, connectHttp, connectStdio, type Outcome } from './mcp-helpers.js'

/**
 * [MCP7] Tools and HTTP are one service path: for random principals (owner, Admin, Editor,
 * Commenter, Viewer, a stranger, an Editor Denied on a subtree) and random operations (read,
 * query, patch, run, and the contextual next / ack / status / react) on random places (readable,
 * hidden, Denied, missing, malformed), the tool call and the equivalent HTTP call give the same
 * outcome: both succeed with the same value, or both are refused with the same code.
 *
 * Deterministic per seed; `WEFT_FC_SEED` replays one, `WEFT_MCP_RUNS` sets the number of cases.
 */
const RUNS = Number(process.env.WEFT_MCP_RUNS ?? 60)
const SEED = process.env.WEFT_FC_SEED ? Number(process.env.WEFT_FC_SEED) : 20_261_203

const WHO = ['owner', 'admin', 'editor', 'commenter', 'viewer', 'stranger', 'deniedEditor'] as const
type Who = (typeof WHO)[number]
const PLACES = ['space', 'doc', 'vault', 'vaultDoc', 'missing', 'malformed', 'otherSpace', 'code', 'sub'] as const
type Place = (typeof PLACES)[number]

let ts: TestServer
const users = {} as Record<Who, TestUser>
/** Each principal's MCP client over HTTP; two of them also over stdio (the relay). */
const clients = {} as Record<Who, { http: Client; stdio?: Client }>
const places = {} as Record<Place, string>
let ownerConsumer = ''

type Op =
  | { kind: 'get'; place: Place }
  | { kind: 'query'; place: Place; nodeType?: string }
  | { kind: 'patch'; place: Place; patch: JsonObject }
  | { kind: 'run'; place: Place }
  | { kind: 'next'; place: Place; consumer: string }
  | { kind: 'status'; own: boolean }
  | { kind: 'ack'; attempt: number }
  | { kind: 'react'; token: string }

const opArb: fc.Arbitrary<Op> = fc.oneof(
  fc.record({ kind: fc.constant('get' as const), place: fc.constantFrom(...PLACES) }),
  fc.record({ kind: fc.constant('query' as const), place: fc.constantFrom(...PLACES), nodeType: fc.option(fc.constantFrom('Document', 'Code'), { nil: undefined }) }),
  fc.record({
    kind: fc.constant('patch' as const),
    place: fc.constantFrom(...PLACES),
    patch: fc.oneof(
      fc.record({ Title: fc.oneof(fc.string({ maxLength: 20 }), fc.constant(null)) }),
      fc.record({ Note: fc.integer() }),
      fc.record({ Status: fc.constant('Done'), Count: fc.nat(5) }),
    ) as fc.Arbitrary<JsonObject>,
  }),
  fc.record({ kind: fc.constant('run' as const), place: fc.constantFrom('code', 'doc', 'missing', 'vault') as fc.Arbitrary<Place> }),
  fc.record({ kind: fc.constant('next' as const), place: fc.constantFrom('sub', 'doc', 'missing', 'vault') as fc.Arbitrary<Place>, consumer: fc.constantFrom('w1', 'agent-2', 'bad name') }),
  fc.record({ kind: fc.constant('status' as const), own: fc.boolean() }),
  fc.record({ kind: fc.constant('ack' as const), attempt: fc.integer({ min: -1, max: 3 }) }),
  fc.record({ kind: fc.constant('react' as const), token: fc.constantFrom('', 'x.y', 'A'.repeat(5000)) }),
)

/** The tool call and the HTTP request of one operation. */
function requests(op: Op): { tool: string; args: JsonObject; http: (a: ReturnType<typeof api>) => Promise<ApiResponse<unknown>> } {
  const at = (p: Place) => places[p]
  switch (op.kind) {
    case 'get':
      return { tool: 'weft_get', args: { path: at(op.place) }, http: (a) => a.getNode(at(op.place)) }
    case 'query':
      return {
        tool: 'weft_query',
        args: { parent: at(op.place), ...(op.nodeType ? { nodeType: op.nodeType } : {}) },
        http: (a) => a.queryNodes({ parent: at(op.place), ...(op.nodeType ? { nodeType: op.nodeType } : {}) }),
      }
    case 'patch':
      return { tool: 'weft_patch', args: { path: at(op.place), patch: op.patch }, http: (a) => a.patchNode(at(op.place), op.patch) }
    case 'run':
      return { tool: 'weft_run', args: { path: at(op.place) }, http: (a) => a.post(`/api/nodes/${nodeUrlPath(at(op.place))}/run`, {}) }
    case 'next': {
      const body = { subscription: at(op.place), consumer: op.consumer }
      return { tool: 'weft_contextual_next', args: body, http: (a) => a.post('/api/contextual/next', body) }
    }
    case 'status': {
      const body = { consumerId: op.own ? ownerConsumer : 'f'.repeat(32) }
      return { tool: 'weft_contextual_status', args: body, http: (a) => a.post('/api/contextual/status', body) }
    }
    case 'ack': {
      const body = { consumerId: ownerConsumer, eventId: '1', leaseToken: 'forged-token', attempt: op.attempt }
      return { tool: 'weft_contextual_ack', args: body, http: (a) => a.post('/api/contextual/ack', body) }
    }
    case 'react': {
      const body = { causationToken: op.token, params: {} }
      return { tool: 'weft_contextual_react', args: body, http: (a) => a.post('/api/contextual/react', body) }
    }
    default:
      return op satisfies never
  }
}

function httpOutcome(r: ApiResponse<unknown>): Outcome<unknown> {
  expect(r.status, JSON.stringify(r.body)).toBeLessThan(500)
  if (r.status < 300) return { ok: true, value: r.body }
  return { ok: false, code: (r.body as { error: { code: string } }).error.code, message: '' }
}

/** What must agree: the value of a read; of a write (made twice), the content; of a run, that it ran. */
function comparable(op: Op, o: Outcome<unknown>): unknown {
  if (!o.ok) return { refused: o.code }
  if (op.kind === 'patch') return { content: (o.value as MeshNode).content }
  if (op.kind === 'run') return { ran: typeof (o.value as { path?: unknown }).path === 'string' }
  // The head of the change log moves with every commit anywhere (an engine's too).
  if (op.kind === 'status') return { value: { ...(o.value as object), headVersion: undefined, lag: undefined } }
  return { value: o.value }
}

/** Both runs finish before the next case, so no engine write lands between a case's two reads. */
async function settleRuns(...outcomes: Outcome<unknown>[]): Promise<void> {
  for (const o of outcomes) {
    if (!o.ok) continue
    const path = (o.value as { path: string }).path
    await waitFor(async () => terminal((await ts.server.nodes.get(SYSTEM, path as NodePath))?.content.Status), { timeoutMs: 30_000, description: `${path} finished` })
  }
}

beforeAll(async () => {
  ts = await startTestServer()
  for (const who of WHO) users[who] = await signup(ts.url)
  const owner = users.owner.token
  const space = await createSpace(ts.url, owner)
  const otherSpace = await createSpace(ts.url, users.stranger.token)
  for (const [who, role] of [['admin', 'Admin'], ['editor', 'Editor'], ['commenter', 'Commenter'], ['viewer', 'Viewer'], ['deniedEditor', 'Editor']] as const) {
    await grantRole(ts.url, owner, space, users[who].userId, role)
  }
  expectStatus(await api(ts.url, owner).putNode(`${space}/vault`, 'Document', { Title: 'vault' }), 201)
  expectStatus(await api(ts.url, owner).putNode(`${space}/vault/secret`, 'Document', { Title: 'secret' }), 201)
  await grantRole(ts.url, owner, `${space}/vault`, users.deniedEditor.userId, 'Viewer', true)
  expectStatus(await api(ts.url, owner).putNode(`${space}/doc`, 'Document', { Title: 'doc' }), 201)
  expectStatus(await api(ts.url, owner).putNode(`${space}/code`, 'Code', { Language: 'javascript', Source: 'return 1', IsExecutable: true }), 201)
  expectStatus(await putSubscription(ts.url, owner, `${space}/sub`, definition(`${space}/quiet`)), 201)
  Object.assign(places, {
    space,
    doc: `${space}/doc`,
    vault: `${space}/vault`,
    vaultDoc: `${space}/vault/secret`,
    missing: `${space}/missing`,
    malformed: `${space}/bad segment!`,
    otherSpace,
    code: `${space}/code`,
    sub: `${space}/sub`,
  })
  ownerConsumer = (expectStatus(await api(ts.url, owner).post<{ consumerId: string }>('/api/contextual/next', { subscription: places.sub, consumer: 'w1' }), 200).body).consumerId
  for (const who of WHO) clients[who] = { http: await connectHttp(ts.url, users[who].token) }
  clients.viewer.stdio = await connectStdio(ts.url, users.viewer.token)
  clients.deniedEditor.stdio = await connectStdio(ts.url, users.deniedEditor.token)
}, 300_000)

afterAll(async () => {
  for (const c of Object.values(clients)) {
    await c.http.close()
    await c.stdio?.close()
  }
  await ts.cleanup()
})

describe('MCP and HTTP give the same outcome (issue 19)', () => {
  it('[MCP7] for random principals and operations, a tool call and its HTTP call agree', async () => {
    const seen = { ok: 0, refused: new Set<string>(), stdio: 0 }
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(...WHO), opArb, fc.boolean(), async (who, op, viaStdio) => {
        const { tool, args, http } = requests(op)
        const client = viaStdio && clients[who].stdio ? clients[who].stdio : clients[who].http
        if (client === clients[who].stdio) seen.stdio++
        // The tool first, then HTTP: a read sees the same state; a write is made twice (a merge
        // patch is idempotent), so its outcome and resulting content must match.
        const viaMcp = await callTool(client, tool, args)
        const viaHttp = httpOutcome(await http(api(ts.url, users[who].token)))
        if (op.kind === 'run') await settleRuns(viaMcp, viaHttp)
        expect(comparable(op, viaMcp), `${who} ${JSON.stringify(op).slice(0, 200)}`).toEqual(comparable(op, viaHttp))
        if (viaMcp.ok) seen.ok++
        else seen.refused.add(viaMcp.code)
      }),
      { numRuns: RUNS, seed: SEED, endOnFailure: true },
    )
    // The generator reached both sides: successes, and refusals of several kinds, over both transports.
    expect(seen.ok).toBeGreaterThan(0)
    expect(seen.refused.size).toBeGreaterThanOrEqual(4)
    expect(seen.stdio).toBeGreaterThan(0)
  }, 300_000)
})
