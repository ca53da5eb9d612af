import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { PROTOCOL_VERSION } from '../../shared/index.js'
import { api, createDocument, createSpace, errorCode, expectStatus, signup, startTestServer, type TestServer, type TestUser } from '../helpers/index.js'

/** [CREATE1] [CREATE2] `PUT` with `If-None-Match: *` only creates; [CFG1] `GET /api/config`. */
describe('create-only PUT and server config', () => {
  let ts: TestServer
  let alice: TestUser
  let space: string

  beforeAll(async () => {
    ts = await startTestServer({ config: { maxPayloadBytes: 200_000 } })
    alice = await signup(ts.url)
    space = await createSpace(ts.url, alice.token)
  })
  afterAll(() => ts.cleanup())

  const putOnly = (token: string, path: string, content: object, ifNoneMatch = '*') =>
    api(ts.url, token).request('PUT', `/api/nodes/${path}`, { body: { nodeType: 'Document', content }, headers: { 'if-none-match': ifNoneMatch } })

  it('[CREATE1] creates when the path is free: 201 with the node', async () => {
    const res = expectStatus(await putOnly(alice.token, `${space}/fresh`, { Title: 'Meeting notes' }), 201)
    expect(res.body).toMatchObject({ path: `${space}/fresh`, content: { Title: 'Meeting notes' } })
  })

  it('[CREATE1] a node already there: 412 already_exists, and nothing changes (content, version, feed)', async () => {
    const http = api(ts.url, alice.token)
    const path = await createDocument(ts.url, alice.token, `${space}/taken`, { Title: 'Meeting notes', Agenda: 'keep me' })
    const before = expectStatus(await http.getNode(path), 200).body
    const lastVersion = await ts.server.storage.lastVersion()
    const res = await putOnly(alice.token, path, { Title: 'Other notes' })
    expect(res.status).toBe(412)
    expect(errorCode(res)).toBe('already_exists')
    expect((res.body as { error: { message: string } }).error.message).toContain(path)
    expect(expectStatus(await http.getNode(path), 200).body).toEqual(before)
    // No change to this node was recorded (a fresh server's engines may write others meanwhile).
    expect((await ts.server.storage.changesSince(lastVersion, 1000)).filter((c) => c.path === path)).toEqual([])
    // Without the header a PUT still replaces (the contract's create-or-replace).
    expect(expectStatus(await http.putNode(path, 'Document', { Title: 'Replaced' }), 200).body.content).toEqual({ Title: 'Replaced' })
  })

  it('[CREATE1] two create-only PUTs racing for one path: one 201, one 412', async () => {
    const path = `${space}/race`
    const results = await Promise.all([putOnly(alice.token, path, { By: 1 }), putOnly(alice.token, path, { By: 2 })])
    expect(results.map((r) => r.status).sort()).toEqual([201, 412])
    const winner = results.find((r) => r.status === 201)!.body as { content: unknown }
    expect(expectStatus(await api(ts.url, alice.token).getNode(path), 200).body.content).toEqual(winner.content)
  })

  it('[CREATE2] If-None-Match other than `*` is invalid_request and changes nothing', async () => {
    const path = await createDocument(ts.url, alice.token, `${space}/etag`, { A: 1 })
    for (const value of ['"abc"', 'W/"x"', '*, "a"']) {
      const res = await putOnly(alice.token, path, { A: 2 }, value)
      expect(res.status, value).toBe(400)
      expect(errorCode(res), value).toBe('invalid_request')
    }
    expect(expectStatus(await api(ts.url, alice.token).getNode(path), 200).body.content).toEqual({ A: 1 })
    // Not even a free path is created by a request it could not honour.
    expect((await putOnly(alice.token, `${space}/etag-free`, {}, '"abc"')).status).toBe(400)
    expect((await api(ts.url, alice.token).getNode(`${space}/etag-free`)).status).toBe(404)
  })

  it('[CREATE1] someone who cannot read the node learns nothing from a create-only PUT: 403, as for a plain PUT', async () => {
    const bob = await signup(ts.url)
    const path = await createDocument(ts.url, alice.token, `${space}/secret`, { A: 1 })
    const res = await putOnly(bob.token, path, {})
    expect(res.status).toBe(403)
    expect(errorCode(res)).toBe('forbidden')
    expect(expectStatus(await api(ts.url, alice.token).getNode(path), 200).body.content).toEqual({ A: 1 })
  })

  it('[CFG1] GET /api/config needs no sign-in and gives the limits the server enforces', async () => {
    const res = expectStatus(await api(ts.url).get<Record<string, unknown>>('/api/config'), 200)
    expect(res.body).toMatchObject({ maxPayloadBytes: 200_000, maxJsonDepth: 64, protocolVersion: PROTOCOL_VERSION })
    expect(res.body.login).toEqual({ freeFailuresPerAccount: 5, freeFailuresPerAddress: 20, lockoutBaseMs: 1000, lockoutMaxMs: 900_000 })
    // The advertised payload limit is the one enforced.
    const big = await api(ts.url, alice.token).putNode(`${space}/big`, 'Document', { Text: 'x'.repeat(200_001) })
    expect(big.status).toBe(413)
    expect(errorCode(big)).toBe('payload_too_large')
  })

  it('[DOCS1] GET /api/openapi.json serves the OpenAPI 3.1 document without sign-in', async () => {
    const res = expectStatus(await api(ts.url).get<{ openapi: string; paths: Record<string, unknown> }>('/api/openapi.json'), 200)
    expect(res.body.openapi).toBe('3.1.0')
    expect(Object.keys(res.body.paths)).toContain('/api/changes')
  })
})
