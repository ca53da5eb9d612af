import fc from 'fast-check'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { SYSTEM, type NodePath } from '../../shared/index.js'
import { createActivitiesEngine } from '../../sync-server/engines/activities/index.js'
import { subscriptionsEngine } from '../../sync-server/engines/subscriptions/index.js'
import { threadsEngine } from '../../sync-server/engines/threads/index.js'
import {
  api,
  createDocument,
  createGroup,
  createSpace,
  rawHttp,
  signup,
  startTestServer,
  uniqueEmail,
  type ApiResponse,
  type TestServer,
  type TestUser,
} from '../helpers/index.js'

/**
 * [ACC44] [ACC45] The three boundaries the last stop added, fed crafted input by an Admin (and by others):
 * `POST /api/spaces/{space}/invites`, `POST /api/groups/{group}/invites` and
 * `GET /api/admin/overview`. Wrong types, unknown roles, huge strings and lists, prototype keys,
 * paths in Japanese and emoji, encoded separators, other spaces' paths and nodes that are no
 * group: every refusal is a 4xx with a stable JSON code and a message, never a 5xx, and the change
 * log's head does not move (nothing written). Then a seeded run of random bodies
 * (`WEFT_FC_SEED`): no answer is a 5xx, and every refusal writes nothing. Found: an address of
 * 200,000 characters was taken, its subscription written, and then the Invitation refused for its
 * name's length (a 400 that left a Pending invite behind) ([ACC44]); a group invite took any number
 * of addresses, two writes each, in one request ([ACC45]).
 */
const SEED = process.env.WEFT_FC_SEED ? Number(process.env.WEFT_FC_SEED) : 20_261_207
const RUNS = Number(process.env.WEFT_CRAFTED_RUNS ?? 60)
const CODES = new Set(['invalid_json', 'invalid_request', 'invalid_path', 'payload_too_large', 'forbidden', 'unauthorized', 'not_found', 'conflict', 'method_not_allowed'])

let ts: TestServer
let admin: TestUser
let other: TestUser
let ops: TestUser
let space: string
let otherSpace: string
let group: string
let otherGroup: string

beforeAll(async () => {
  // No templates seeded: their code checks are written in the background after the start, and
  // with sign-ups quick ([AUTH9]) they landed during the tests' "nothing written" checks.
  ts = await startTestServer({ config: { engines: [subscriptionsEngine, createActivitiesEngine({ seedTemplates: false }), threadsEngine] } })
  admin = await signup(ts.url)
  other = await signup(ts.url)
  ops = await signup(ts.url)
  await ts.server.nodes.put(SYSTEM, `Admin/_Access/${ops.userId}_Access` as NodePath, { nodeType: 'AccessAssignment', content: { Subject: ops.userId, Role: 'Admin' } }, 'system')
  space = await createSpace(ts.url, admin.token)
  otherSpace = await createSpace(ts.url, other.token)
  group = await createGroup(ts.url, admin.token, `${space}/Team`)
  otherGroup = await createGroup(ts.url, other.token, `${otherSpace}/Team`)
  await createDocument(ts.url, admin.token, `${space}/doc`)
}, 120_000)
afterAll(() => ts?.cleanup())

const head = async () => (await ts.server.nodes.headVersion?.()) ?? 0

/** A refusal: a 4xx whose body names a stable code with a message, and nothing written. */
async function refused(what: string, send: () => Promise<ApiResponse<unknown>>, status?: number, code?: string): Promise<ApiResponse<unknown>> {
  const before = await head()
  const res = await send()
  const body = res.body as { error?: { code?: string; message?: string } }
  expect(res.status, `${what}: ${JSON.stringify(res.body).slice(0, 300)}`).toBeGreaterThanOrEqual(400)
  expect(res.status, what).toBeLessThan(500)
  if (status !== undefined) expect(res.status, `${what}: ${JSON.stringify(res.body).slice(0, 300)}`).toBe(status)
  expect(CODES.has(String(body?.error?.code)), `${what}: code ${body?.error?.code}`).toBe(true)
  if (code !== undefined) expect(body.error?.code, what).toBe(code)
  expect(typeof body.error?.message === 'string' && body.error.message.length > 0, what).toBe(true)
  expect(await head(), `${what}: nothing written`).toBe(before)
  return res
}

const post = (token: string, path: string, body: unknown) => api(ts.url, token).request('POST', path, { body })
const raw = (token: string, path: string, body: string) => rawHttp(ts.url, 'POST', path, { token, body })
const huge = 'x'.repeat(200_000)

describe('[ACC44] crafted input to the invite and overview boundaries', () => {
  it('space invites: wrong types, unknown roles, huge strings, crafted paths, other spaces: a stable 4xx, nothing written', async () => {
    const at = `/api/spaces/${space}/invites`
    const email = uniqueEmail('crafted')
    await refused('not JSON', () => raw(admin.token, at, '{"email":'), 400, 'invalid_json')
    for (const body of [null, [], 'a@b.example', 42, {}, { email: 42 }, { email: null }, { email: [email] }, { email: { $ne: '' } }]) {
      await refused(`body ${JSON.stringify(body)}`, () => post(admin.token, at, body), 400, 'invalid_request')
    }
    for (const role of ['Owner', 'admin', 'ADMIN', '', 3, null, ['Admin'], 'Admin\u0000', 'Denied']) {
      await refused(`role ${JSON.stringify(role)}`, () => post(admin.token, at, { email, role }), 400, 'invalid_request')
    }
    for (const pin of ['yes', 1, null]) await refused(`pin ${JSON.stringify(pin)}`, () => post(admin.token, at, { email, pin }), 400, 'invalid_request')
    for (const bad of ['not an email', `${huge}@example.com`, 'a@b.example\nBcc: x@y.example', 'a@b.example\u0000', '@b.example', 'a@', ' ', `${email},${uniqueEmail()}`]) {
      await refused(`email ${JSON.stringify(bad).slice(0, 60)}`, () => post(admin.token, at, { email: bad }), undefined)
    }
    // Paths: Japanese and emoji, encoded separators and traversal, a 5,000-character segment, none of them a space.
    for (const p of ['%E3%82%B9%E3%83%9A%E3%83%BC%E3%82%B9', '%F0%9F%9A%80', `${space}%2Fdoc`, '..%2F..', '%00', 'a'.repeat(5000), '_Access', '%20']) {
      await refused(`space ${p.slice(0, 40)}`, () => raw(admin.token, `/api/spaces/${p}/invites`, JSON.stringify({ email })))
    }
    // Another's space, one that does not exist, a child path: refused as the caller is no Admin there.
    await refused('another space', () => post(admin.token, `/api/spaces/${otherSpace}/invites`, { email }), 403, 'forbidden')
    await refused('no such space', () => post(admin.token, '/api/spaces/NoSuchSpace9/invites', { email }), 403, 'forbidden')
    await refused('a child path', () => post(admin.token, `/api/spaces/${space}/doc/invites`, { email }), 404)
    await refused('no session', () => api(ts.url).request('POST', at, { body: { email } }), 401, 'unauthorized')
    await refused('a made-up token', () => api(ts.url, 'made-up').request('POST', at, { body: { email } }), 401, 'unauthorized')
    // A prototype key neither pollutes nor raises the role: the invite is the default Editor's.
    const proto = await raw(admin.token, at, `{"email":"${email}","__proto__":{"role":"Admin"},"constructor":{"prototype":{"role":"Admin"}}}`)
    expect(proto.status).toBe(201)
    const sub = await ts.server.nodes.get(SYSTEM, `Admin/EventSubscription/${(proto.body as { subscriptionId: string }).subscriptionId}` as NodePath)
    expect(sub?.content.Role).toBe('Editor')
    expect(({} as Record<string, unknown>).role).toBeUndefined()
  })

  it('group invites: wrong types, unknown roles, huge lists, nodes that are no group, crafted paths: a stable 4xx, nothing written', async () => {
    const at = `/api/groups/${group}/invites`
    const email = uniqueEmail('gcrafted')
    await refused('not JSON', () => raw(admin.token, at, '[{'), 400, 'invalid_json')
    for (const body of [null, [], 42, {}, { emails: [] }, { emails: '' }, { emails: ' ,;\n' }, { emails: 42 }, { emails: [42] }, { emails: [null] }, { email: 42 }, { emails: { a: email } }]) {
      await refused(`body ${JSON.stringify(body)}`, () => post(admin.token, at, body), 400, 'invalid_request')
    }
    for (const role of ['Owner', 'viewer', '', 7, ['Viewer'], 'Denied']) {
      await refused(`role ${JSON.stringify(role)}`, () => post(admin.token, at, { emails: [email], role }), 400, 'invalid_request')
    }
    // One bad address among good ones refuses them all, before any is written.
    await refused('a bad address among good ones', () => post(admin.token, at, { emails: [email, uniqueEmail(), 'not an email'] }), 400, 'invalid_request')
    await refused('a huge address', () => post(admin.token, at, { emails: `${email}, ${huge}@example.com` }))
    // [ACC45] A list longer than a person pastes is refused whole, not written address by address.
    const many = Array.from({ length: 501 }, (_, i) => `bulk${i}-${email}`)
    await refused('501 addresses', () => post(admin.token, at, { emails: many }), 400, 'invalid_request')
    await refused('501 addresses pasted', () => post(admin.token, at, { emails: many.join('\n') }), 400, 'invalid_request')
    // Paths: not a group (the space, a document, the group's access folder), another's group, crafted segments.
    await refused('a document', () => post(admin.token, `/api/groups/${space}/doc/invites`, { email }), 404, 'not_found')
    await refused('the space', () => post(admin.token, `/api/groups/${space}/invites`, { email }), 404, 'not_found')
    await refused('a missing group', () => post(admin.token, `/api/groups/${space}/Nope/invites`, { email }), 404, 'not_found')
    await refused('another space\'s group', () => post(admin.token, `/api/groups/${otherGroup}/invites`, { email }), 403, 'forbidden')
    for (const p of [`${space}/%E3%83%81%E3%83%BC%E3%83%A0`, `${space}/%F0%9F%91%A5`, `${space}%2FTeam`, `${space}/../${otherSpace}/Team`, `${space}/Team/%00`, `${space}/${'b'.repeat(5000)}`]) {
      await refused(`group ${p.slice(0, 50)}`, () => raw(admin.token, `/api/groups/${p}/invites`, JSON.stringify({ email })))
    }
    await refused('no session', () => api(ts.url).request('POST', at, { body: { email } }), 401, 'unauthorized')
    const member = await signup(ts.url)
    await ts.server.nodes.put(SYSTEM, `${group}/${member.userId}_Membership` as NodePath, { nodeType: 'Membership', content: {} }, 'system')
    await ts.server.nodes.put(SYSTEM, `${group}/_Access/${member.userId}_Access` as NodePath, { nodeType: 'AccessAssignment', content: { Subject: member.userId, Role: 'Editor' } }, 'system')
    await refused('a member who is no Admin', () => post(member.token, at, { emails: [email, member.email], role: 'Admin' }), 403, 'forbidden')
  })

  it('the overview: anyone but an operator gets a stable refusal; crafted queries and methods never a 5xx', async () => {
    await refused('no session', () => api(ts.url).get('/api/admin/overview'), 401, 'unauthorized')
    await refused('a made-up token', () => api(ts.url, 'x'.repeat(5000)).get('/api/admin/overview'), 401, 'unauthorized')
    await refused('an Admin of a space', () => api(ts.url, admin.token).get('/api/admin/overview'), 403, 'forbidden')
    await refused('crafted query, no operator', () => api(ts.url, admin.token).get(`/api/admin/overview?limit=${'9'.repeat(400)}&as=system&%E3%81%82=%F0%9F%9A%80`), 403, 'forbidden')
    const ok = await api(ts.url, ops.token).get<{ laggingConsumers: unknown[] }>(`/api/admin/overview?limit=-1&since=${'9'.repeat(400)}&%E3%81%82=%F0%9F%9A%80`)
    expect(ok.status).toBe(200)
    expect(Array.isArray(ok.body.laggingConsumers)).toBe(true)
    for (const method of ['POST', 'PUT', 'DELETE', 'PATCH']) {
      await refused(`${method} by an operator`, () => api(ts.url, ops.token).request(method, '/api/admin/overview', { body: { laggingConsumers: [] } }))
    }
  })

  it('random bodies to both invite routes (seeded): never a 5xx, and a refusal writes nothing', async () => {
    const value = fc.oneof(fc.string(), fc.string({ unit: "grapheme", maxLength: 40 }), fc.integer(), fc.boolean(), fc.constant(null), fc.array(fc.string(), { maxLength: 4 }), fc.constantFrom('Viewer', 'Admin', 'Owner', `${uniqueEmail()}`, 'ユーザー@例え.jp', '😀@x.example'))
    const body = fc.oneof(
      fc.record({ email: value, role: value, pin: value, emails: value }, { requiredKeys: [] }),
      fc.jsonValue(),
    )
    const route = fc.constantFrom(`/api/spaces/${space}/invites`, `/api/groups/${group}/invites`, `/api/spaces/${otherSpace}/invites`, `/api/groups/${otherGroup}/invites`)
    await fc.assert(
      fc.asyncProperty(route, body, async (r, b) => {
        const before = await head()
        const res = await post(admin.token, r, b)
        expect(res.status, `${r} ${JSON.stringify(b)}: ${JSON.stringify(res.body)}`).toBeLessThan(500)
        if (res.status >= 400) {
          expect(CODES.has(String((res.body as { error?: { code?: string } }).error?.code)), JSON.stringify(res.body)).toBe(true)
          expect(await head(), `${r} ${JSON.stringify(b)}: nothing written`).toBe(before)
        }
      }),
      { seed: SEED, numRuns: RUNS, endOnFailure: true },
    )
  })
})
