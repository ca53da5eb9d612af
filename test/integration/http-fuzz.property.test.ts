import fc from 'fast-check'
import { afterAll, beforeAll, expect, it } from 'vitest'
import type { JsonObject } from '../../shared/index.js'
import { OPENAPI_DOCUMENT } from '../../sync-server/http/openapi.js'
import { api, createSpace, grantRole, signup, startTestServer, type TestServer, type TestUser } from '../helpers/index.js'

/**
 * [IN4] Every route of the OpenAPI document, fed seeded crafted input (path parameters, query
 * strings, bodies, content types, tokens), by a space's owner (in another space of hers), a Viewer,
 * an anonymous caller and a made-up token:
 *  - no answer is a 5xx: bad input is a 4xx with a stable error code and a message;
 *  - the server keeps serving (healthz, and the owner still reads her space);
 *  - none of them changes anything in a space where they may only read: its nodes, their
 *    children and its part of the change feed are as before.
 * The streaming routes (the MCP GET stream, the wake-up stream) are left out: they answer by
 * staying open.
 */

type Op = { method: string; template: string }

const STREAMING = new Set(['GET /mcp', 'GET /api/contextual/wakeups'])

function operations(): Op[] {
  const out: Op[] = []
  for (const [template, item] of Object.entries(OPENAPI_DOCUMENT.paths as Record<string, Record<string, unknown>>)) {
    for (const method of Object.keys(item)) {
      if (method === 'parameters') continue
      const m = method.toUpperCase()
      if (STREAMING.has(`${m} ${template}`)) continue
      out.push({ method: m, template })
    }
  }
  return out
}

/** A string an attacker would try: control characters, lone surrogates, traversal, long, non-Latin. */
const nasty = fc.oneof(
  fc.string({ maxLength: 40 }),
  fc.string({ unit: 'binary', maxLength: 40 }),
  fc.constantFrom('', '..', '.', '%2e%2e', '%2F', '\u0000', '\ud800', '日本語のメモ', '__proto__', 'constructor', '-1', '1e400', 'NaN', '9007199254740993', '0x10', ' ', 'a'.repeat(5000), '_Access', '_Activity', 'Admin', 'system'),
)

/** JSON values, deep and wide, with the keys prototype pollution would use. */
const crafted = fc.letrec((tie) => ({
  value: fc.oneof(
    { depthSize: 'small' },
    fc.jsonValue({ maxDepth: 3 }),
    nasty,
    fc.constantFrom(1e308, -0, Number.MAX_SAFE_INTEGER + 2, 2 ** 63, 0.1),
    fc.array(tie('value'), { maxLength: 4 }),
    fc.dictionary(fc.oneof(nasty, fc.constantFrom('__proto__', 'constructor', 'prototype', 'path', 'inputs', 'content', 'nodeType', 'since', 'limit', 'subscription', 'consumer', 'token', 'email', 'role', 'password')), tie('value'), { maxKeys: 5 }),
  ),
})).value

const deep = fc.integer({ min: 50, max: 5000 }).map((n) => '['.repeat(n) + ']'.repeat(n))

/** A body shaped like a node write (a known type, crafted content), so validation is reached, not only parsing. */
const shaped = fc.record(
  {
    nodeType: fc.constantFrom('Document', 'Code', 'Thread', 'ThreadMessage', 'AccessAssignment', 'Group', 'EventSubscription', 'ContextualSubscription', 'ActivityLog', 'User', 'Space', 'Partition', 'Invitation', 'NoSuchType'),
    name: nasty,
    content: fc.dictionary(fc.oneof(nasty, fc.constantFrom('Role', 'Subject', 'Denied', 'Source', 'Inputs', 'Status', 'RequestedStatus', 'Messages', 'TriggerType', 'ContinuationType', 'TargetPath', 'Events', 'Reactions', 'Queries', 'Limits', 'Agent', 'Text', 'Role', 'CreatedBy', 'StartedBy')), crafted, { maxKeys: 6 }),
    inputs: fc.dictionary(fc.constantFrom('Root', 'Bundle', 'Target', 'x'), crafted, { maxKeys: 2 }),
    to: nasty,
    email: fc.oneof(nasty, fc.constant('new.person@example.com')),
    role: fc.oneof(nasty, fc.constantFrom('Viewer', 'Editor', 'Admin')),
  },
  { requiredKeys: [] },
)

const rawBody = fc.oneof(
  shaped.map((v) => ({ type: 'application/json', text: JSON.stringify(v) })),
  crafted.filter((v) => typeof v === 'object' && v !== null && !Array.isArray(v)).map((v) => ({ type: 'application/merge-patch+json', text: JSON.stringify(v) })),
  crafted.map((v) => ({ type: 'application/json', text: JSON.stringify(v) ?? 'null' })),
  nasty.map((s) => ({ type: 'application/json', text: s })),
  deep.map((s) => ({ type: 'application/json', text: s })),
  crafted.map((v) => ({ type: 'text/plain', text: JSON.stringify(v) ?? '' })),
  fc.constant({ type: 'application/json', text: '{"a":' }),
  fc.constant(null),
)

let ts: TestServer
let owner: TestUser
let viewer: TestUser
let space: string
const protectedPaths: string[] = []

beforeAll(async () => {
  ts = await startTestServer()
  owner = await signup(ts.url)
  viewer = await signup(ts.url)
  space = await createSpace(ts.url, owner.token)
  await grantRole(ts.url, owner.token, space, viewer.userId, 'Viewer')
  const a = api(ts.url, owner.token)
  for (const [p, type, content] of [
    [`${space}/Doc`, 'Document', { Body: 'kept', Tags: ['a'] }],
    [`${space}/Doc/Child`, 'Document', { Body: 'child' }],
    [`${space}/n-memo`, 'Document', { Body: '日本語のメモ' }],
    [`${space}/Talk`, 'Thread', { Agent: { Kind: 'builtin' } }],
  ] as Array<[string, string, JsonObject]>) {
    const res = await a.putNode(p, type, content)
    expect(res.status, p).toBe(201)
    protectedPaths.push(p)
  }
  protectedPaths.push(space)
})
afterAll(() => ts?.cleanup())

/** The owner's view of the protected space: every node's type and content, and each one's children. */
async function snapshot(): Promise<string> {
  const a = api(ts.url, owner.token)
  const out: unknown[] = []
  for (const p of protectedPaths) {
    const node = await a.getNode(p)
    const kids = await a.queryNodes({ parent: p })
    out.push([p, node.status, node.body.nodeType, node.body.content, (kids.body.items ?? []).map((k) => k.path).sort()])
  }
  return JSON.stringify(out)
}

async function feedHead(): Promise<number> {
  let since = 0
  for (;;) {
    const res = await api(ts.url, owner.token).get<{ next: number }>(`/api/changes?since=${since}`)
    expect(res.status).toBe(200)
    if (res.body.next === since) return since
    since = res.body.next
  }
}

/** Changes to the protected space after `since`, as its owner reads them. */
async function protectedChanges(since: number): Promise<unknown[]> {
  const out: unknown[] = []
  for (;;) {
    const res = await api(ts.url, owner.token).get<{ items: { path: string }[]; next: number }>(`/api/changes?since=${since}`)
    expect(res.status).toBe(200)
    out.push(...res.body.items.filter((c) => c.path === space || c.path.startsWith(`${space}/`)))
    if (res.body.next === since) return out
    since = res.body.next
  }
}

/**
 * Percent-encodes like encodeURIComponent, and a lone surrogate as the bytes an attacker would
 * send for it (WTF-8: not UTF-8, which the server must refuse, not choke on).
 */
function pct(s: string): string {
  return s.replace(/[\s\S]/gu, (ch) => {
    if (ch.length === 1 && /[\ud800-\udfff]/.test(ch)) {
      const c = ch.charCodeAt(0)
      return [0xe0 | (c >> 12), 0x80 | ((c >> 6) & 0x3f), 0x80 | (c & 0x3f)].map((b) => `%${b.toString(16).toUpperCase()}`).join('')
    }
    return encodeURIComponent(ch)
  })
}

function fill(template: string, values: string[]): string {
  let i = 0
  return template.replace(/\{[^}]+\}/g, () => {
    const v = values[i++ % values.length] ?? ''
    // A node path parameter keeps its slashes; anything else is one encoded segment.
    return v.includes('/') ? v.split('/').map(pct).join('/') : pct(v)
  })
}

it('[IN4] crafted input on every route by the owner, a Viewer, an anonymous caller and a made-up token: never a 5xx, always a stable code, the server serves on, the read-only space unchanged', async () => {
  const ops = operations()
  expect(ops.length).toBeGreaterThan(30)
  // The owner's own requests go to a space of hers the test does not watch (she may change it);
  // everyone else's go anywhere, the watched space first.
  const scratch = await createSpace(ts.url, owner.token)
  expect((await api(ts.url, owner.token).putNode(`${scratch}/Doc`, 'Document', { Body: 'scratch' })).status).toBe(201)
  const pathValue = fc.oneof(
    { arbitrary: fc.constantFrom(...protectedPaths, `${space}/_Access`, `${space}/Missing`, `${viewer.userId}`, 'Admin/Operations/ExportJson'), weight: 3 },
    nasty,
    fc.array(nasty, { minLength: 1, maxLength: 3 }).map((xs) => [space, ...xs].join('/')),
  )
  const ownPathValue = fc.oneof(
    fc.constantFrom(scratch, `${scratch}/Doc`, `${scratch}/New`),
    fc.array(nasty.filter((x) => !['..', '.', '%2e%2e', '%2F', ''].includes(x) && !x.includes('/')), { minLength: 1, maxLength: 3 }).map((xs) => [scratch, ...xs].join('/')),
  )
  const request = fc.record({
    op: fc.constantFrom(...ops),
    params: fc.array(pathValue, { minLength: 1, maxLength: 2 }),
    ownParams: fc.array(ownPathValue, { minLength: 1, maxLength: 2 }),
    query: fc.dictionary(fc.constantFrom('since', 'limit', 'parent', 'after', 'q', 'nodeType', 'where', 'where[Body]', 'wait', 'x'), nasty, { maxKeys: 3 }),
    body: rawBody,
    who: fc.oneof({ arbitrary: fc.constant('viewer' as const), weight: 6 }, { arbitrary: fc.constant('owner' as const), weight: 4 }, fc.constant('anonymous' as const), fc.constant('made-up' as const)),
    ifNoneMatch: fc.option(fc.constantFrom('*', '"x"', ''), { nil: undefined }),
  })
  const before = await snapshot()
  const head = await feedHead()
  const seen = new Map<string, number>()
  await fc.assert(
    fc.asyncProperty(request, async (r) => {
      // Signing out ends a token: the owner and the Viewer keep theirs for the rest of the run.
      const who = r.op.template === '/api/auth/logout' && (r.who === 'owner' || r.who === 'viewer') ? 'made-up' : r.who
      const url = `${ts.url}${fill(r.op.template, who === 'owner' ? r.ownParams : r.params)}${Object.keys(r.query).length ? `?${new URLSearchParams(r.query)}` : ''}`
      const headers: Record<string, string> = {}
      if (who === 'viewer') headers.authorization = `Bearer ${viewer.token}`
      if (who === 'owner') headers.authorization = `Bearer ${owner.token}`
      if (who === 'made-up') headers.authorization = 'Bearer wft_made_up_token_0000000000'
      if (r.op.template === '/mcp') headers.accept = 'application/json, text/event-stream'
      if (r.ifNoneMatch !== undefined) headers['if-none-match'] = r.ifNoneMatch
      const init: RequestInit = { method: r.op.method, headers }
      if (r.body && r.op.method !== 'GET') {
        headers['content-type'] = r.body.type
        init.body = r.body.text
      }
      let res: Response
      try {
        res = await fetch(url, init)
      } catch (e) {
        // fetch itself refuses some URLs (a lone surrogate in the path): nothing reached the server.
        if (e instanceof TypeError && !String((e as { cause?: unknown }).cause ?? '').includes('ECONN')) return
        throw e
      }
      const text = await res.text()
      const where = `${r.op.method} ${url.slice(0, 300)} as ${who} → ${res.status} ${text.slice(0, 300)}`
      expect(res.status, where).toBeLessThan(500)
      seen.set(`${res.status}`, (seen.get(`${res.status}`) ?? 0) + 1)
      if (res.status >= 400 && r.op.template !== '/mcp') {
        const body = JSON.parse(text) as { error?: { code?: unknown; message?: unknown } }
        expect(body.error?.code, where).toMatch(/^[a-z_]+$/)
        expect(typeof body.error?.message === 'string' && body.error.message.length > 0, where).toBe(true)
      }
    }),
    { seed: Number(process.env.HTTP_FUZZ_SEED ?? 20261207), numRuns: Number(process.env.HTTP_FUZZ_RUNS ?? 600), endOnFailure: true },
  )
  if (process.env.HTTP_FUZZ_VERBOSE) console.log([...seen.entries()])
  // The crafted requests were answered, not all refused at the door for one reason.
  expect([...seen.keys()].length).toBeGreaterThan(3)
  expect((await fetch(`${ts.url}/healthz`)).status).toBe(200)
  expect(await snapshot()).toBe(before)
  expect(await protectedChanges(head)).toEqual([])
}, 240_000)
