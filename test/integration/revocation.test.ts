import * as grpc from '@grpc/grpc-js'
import * as protoLoader from '@grpc/proto-loader'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { WeftError, parseUserId, userPrincipal } from '../../shared/index.js'
import { PROTO_FILE } from '../../sync-server/contextual/index.js'
import type { ContextualCall } from '../../sync-server/storage/index.js'
import { api, createSpace, errorCode, expectStatus, grantRole, login, signup, startTestServer, waitFor, type TestServer, type TestUser } from '../helpers/index.js'
import { ctx, definition, putSubscription, type NextBody } from './contextual-helpers.js'
import { callTool, connectHttp } from './mcp-helpers.js'

/**
 * [AUTH8] A session ends with its token on every transport that waits: a long poll (HTTP, MCP,
 * gRPC) and a wake-up stream stop when their token is revoked (logout), as sockets do ([AUTH2]).
 * [CTX53] A pull ended while its item was leased gives the lease back. (An outside look found a
 * `next` that went on after its logout and handed out a node written after it, over HTTP and MCP,
 * and a wake-up stream that kept streaming to the signed-out client.)
 */

let ts: TestServer
let alice: TestUser
let space: string
beforeAll(async () => {
  ts = await startTestServer({ config: { grpcPort: 0 } })
  alice = await signup(ts.url)
  space = await createSpace(ts.url, alice.token)
})
afterAll(() => ts.cleanup())

/** An Editor of Alice's space, with a consumer `consumer` of a subscription over `{space}/in{n}` (its first pull made). */
async function workerOf(n: string, consumer = 'w1') {
  const user = await signup(ts.url)
  await grantRole(ts.url, alice.token, space, user.userId, 'Editor')
  const sub = `${space}/s${n}`
  const prefix = `${space}/in${n}`
  expectStatus(await putSubscription(ts.url, alice.token, sub, definition(prefix)), 201)
  expectStatus(await api(ts.url, alice.token).putNode(prefix, 'Document', {}), 201)
  const first = expectStatus(await ctx(ts.url, user.token).next(sub, consumer), 200).body
  return { user, sub, prefix, consumerId: first.consumerId }
}

const waiting = () => ts.server.contextual.waiting
const logout = async (user: TestUser) => expectStatus(await api(ts.url, user.token).request('POST', '/api/auth/logout'), 204)

/** What the consumer `consumer` of `sub` pulls now, as `user` signed in again. */
async function pullAfterSigningIn(user: TestUser, sub: string, consumer = 'w1'): Promise<NextBody> {
  const again = await login(ts.url, user.email, user.password)
  return expectStatus(await ctx(ts.url, again.token).next(sub, consumer), 200).body
}

describe('[AUTH8] a long poll ends with its session', () => {
  it('[AUTH8] HTTP: a next waiting when its token is revoked answers 401 unauthorized, and a node written after the logout is not handed to it', async () => {
    const { user, sub, prefix } = await workerOf('http')
    const poll = ctx(ts.url, user.token).next(sub, 'w1', { waitSeconds: 60 })
    await waitFor(() => waiting() === 1, { description: 'the poll waits' })
    await logout(user)
    expectStatus(await api(ts.url, alice.token).putNode(`${prefix}/after-logout`, 'Document', { Title: 'written after the logout' }), 201)
    const r = await poll
    expect({ status: r.status, code: errorCode(r) }).toEqual({ status: 401, code: 'unauthorized' })
    expect(waiting()).toBe(0)
    // The node is there for the consumer's next pull, signed in again.
    expect((await pullAfterSigningIn(user, sub)).item?.event.path).toBe(`${prefix}/after-logout`)
  }, 120_000)

  it('[AUTH8] MCP: weft_contextual_next waiting when its token is revoked is the tool error unauthorized', async () => {
    const { user, sub, prefix } = await workerOf('mcp', 'm1')
    const client = await connectHttp(ts.url, user.token)
    try {
      const poll = callTool<NextBody>(client, 'weft_contextual_next', { subscription: sub, consumer: 'm1', waitSeconds: 60 })
      await waitFor(() => waiting() === 1, { description: 'the tool call waits' })
      await logout(user)
      expectStatus(await api(ts.url, alice.token).putNode(`${prefix}/after-logout`, 'Document', {}), 201)
      expect(await poll).toMatchObject({ ok: false, code: 'unauthorized' })
      expect(waiting()).toBe(0)
    } finally {
      await client.close().catch(() => undefined)
    }
    expect((await pullAfterSigningIn(user, sub, 'm1')).item?.event.path).toBe(`${prefix}/after-logout`)
  }, 120_000)

  it('[AUTH8] gRPC: a Next waiting when its token is revoked is UNAUTHENTICATED (weft-code unauthorized)', async () => {
    const { user, sub, prefix } = await workerOf('grpc', 'g1')
    const pkg = grpc.loadPackageDefinition(protoLoader.loadSync(PROTO_FILE, { keepCase: false, longs: Number, defaults: true })) as unknown as {
      weft: { contextual: { v1: { Contextual: new (address: string, creds: grpc.ChannelCredentials) => grpc.Client } } }
    }
    const client = new pkg.weft.contextual.v1.Contextual(`127.0.0.1:${ts.server.grpcPort}`, grpc.credentials.createInsecure())
    try {
      const md = new grpc.Metadata()
      md.set('authorization', `Bearer ${user.token}`)
      const next = (client as unknown as Record<string, (req: object, md: grpc.Metadata, cb: (err: grpc.ServiceError | null, res: { item?: unknown }) => void) => void>).next!.bind(client)
      const poll = new Promise<{ code: grpc.status; weftCode: unknown } | { item: unknown }>((resolve) => {
        next({ subscription: sub, consumer: 'g1', waitSeconds: 60 }, md, (err, res) => resolve(err ? { code: err.code, weftCode: err.metadata.get('weft-code')[0] } : { item: res.item ?? null }))
      })
      await waitFor(() => waiting() === 1, { description: 'the gRPC call waits' })
      await logout(user)
      expectStatus(await api(ts.url, alice.token).putNode(`${prefix}/after-logout`, 'Document', {}), 201)
      expect(await poll).toEqual({ code: grpc.status.UNAUTHENTICATED, weftCode: 'unauthorized' })
      expect(waiting()).toBe(0)
    } finally {
      client.close()
    }
  }, 120_000)
})

describe('[CTX53] a pull ended while its item is leased gives the lease back', () => {
  /** Runs `next` as `user` through the service, ending `signal` (with `reason`) once the lease statement has leased an event. */
  async function pullEndedAfterLease(user: TestUser, sub: string, reason?: unknown) {
    const storage = ts.server.storage
    const original = storage.contextual
    const ended = new AbortController()
    storage.contextual = async (call: ContextualCall) => {
      const out = await original.call(storage, call)
      if (call.op === 'lease' && (out as { kind: string }).kind === 'leased') ended.abort(reason)
      return out
    }
    try {
      return await ts.server.contextual.next(userPrincipal(parseUserId(user.userId)), { subscription: sub, consumer: 'w1' }, ended.signal).then(
        (value) => ({ value }),
        (error: unknown) => ({ error }),
      )
    } finally {
      storage.contextual = original
    }
  }

  it('[CTX53] [AUTH8] the session ended: unauthorized, and the item is due again with its attempt unspent', async () => {
    const { user, sub, prefix } = await workerOf('lease-session')
    expectStatus(await api(ts.url, alice.token).putNode(`${prefix}/a`, 'Document', {}), 201)
    const out = await pullEndedAfterLease(user, sub, new WeftError('unauthorized', 'Signed out: this token was revoked; sign in again.'))
    expect(out).toMatchObject({ error: { code: 'unauthorized' } })
    const again = (await pullAfterSigningIn(user, sub)).item
    expect({ path: again?.event.path, attempt: again?.attempt }).toEqual({ path: `${prefix}/a`, attempt: 1 })
  })

  it('[CTX53] the caller gone: no item, and the item is due again with its attempt unspent', async () => {
    const { user, sub, prefix } = await workerOf('lease-gone')
    expectStatus(await api(ts.url, alice.token).putNode(`${prefix}/a`, 'Document', {}), 201)
    const out = await pullEndedAfterLease(user, sub)
    expect(out).toMatchObject({ value: { item: null } })
    const again = expectStatus(await ctx(ts.url, user.token).next(sub, 'w1'), 200).body.item
    expect({ path: again?.event.path, attempt: again?.attempt }).toEqual({ path: `${prefix}/a`, attempt: 1 })
  })
})

describe('[AUTH8] a wake-up stream ends with its session', () => {
  it('[AUTH8] GET /api/contextual/wakeups ends when its token is revoked, and tells the signed-out client nothing more', async () => {
    const { user, prefix, consumerId } = await workerOf('wakeups')
    const gone = new AbortController()
    try {
      const res = await fetch(`${ts.url}/api/contextual/wakeups?consumerId=${consumerId}`, { headers: { authorization: `Bearer ${user.token}` }, signal: gone.signal })
      expect(res.status).toBe(200)
      const reader = res.body!.getReader()
      expect(new TextDecoder().decode((await reader.read()).value)).toContain('event: wake')
      await logout(user)
      expectStatus(await api(ts.url, alice.token).putNode(`${prefix}/after-logout`, 'Document', {}), 201)
      // The stream ends, and nothing came after the logout (a stream left open wakes for the node).
      let after = ''
      for (let r = await reader.read(); !r.done && !after.includes('event: wake'); r = await reader.read()) after += new TextDecoder().decode(r.value)
      expect(after).not.toContain('event: wake')
    } finally {
      gone.abort()
    }
  }, 120_000)
})
