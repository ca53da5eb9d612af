import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { api, createDocument, createSpace, errorCode, expectStatus, freshDatabase, grantRole, signup, startTestServer, type TestServer, type TestUser } from '../helpers/index.js'
import type { ContextualCall } from '../../sync-server/storage/index.js'
import { ctx, definition, pull, putSubscription, type Item } from './contextual-helpers.js'

/**
 * [CTX59] [CTX60] [CTX61] Repeats a worker (or an LLM) makes, found by a walk (stop 48, findings 7,
 * 14 and 3): a react repeated with other parameters answered committed with nothing said (its
 * parameters silently not applied); an ack repeated because its answer was lost answered
 * stale_lease (success and loss looked alike); a reaction's own patch came back as the next event
 * with nothing marking it as the reaction's echo.
 */
const storages = [
  { name: 'SQLite', pg: false },
  { name: 'PostgreSQL', pg: true },
] as const

describe.each(storages)('repeats and echoes ($name)', ({ pg }) => {
  let ts: TestServer
  let db: Awaited<ReturnType<typeof freshDatabase>> | null = null
  let owner: TestUser
  let viewer: TestUser
  let space = ''
  beforeAll(async () => {
    db = pg ? await freshDatabase('weft_ctx_repeat_') : null
    ts = await startTestServer({ config: db ? { databaseUrl: db.url } : {} })
    owner = await signup(ts.url)
    viewer = await signup(ts.url)
    space = await createSpace(ts.url, owner.token)
    await grantRole(ts.url, owner.token, space, viewer.userId, 'Viewer')
  })
  afterAll(async () => {
    await ts.cleanup()
    await db?.drop()
  })

  it('[CTX59] a repeated react with other parameters says so (paramsDiffer and a message) and applies nothing; with the same ones it does not', async () => {
    const sub = `${space}/p`
    expectStatus(await putSubscription(ts.url, owner.token, sub, definition(`${space}/pin`)), 201)
    await createDocument(ts.url, owner.token, `${space}/pin`, {})
    const c = ctx(ts.url, owner.token)
    expectStatus(await c.next(sub), 200)
    await createDocument(ts.url, owner.token, `${space}/pin/a`, {})
    const { item: it1 } = await pull(ts.url, owner.token, sub)
    const first = expectStatus(await c.react(it1, 'annotate', { Note: 'first' }), 200).body
    expect(first).toMatchObject({ repeated: false })
    expect(first).not.toHaveProperty('paramsDiffer')
    const changed = expectStatus(await c.react(it1, 'annotate', { Note: 'CHANGED' }), 200).body as Record<string, unknown>
    expect(changed).toEqual({
      outcome: first.outcome, repeated: true, paramsDiffer: true,
      message: "This event's reaction was already committed with other parameters; yours were not applied (the outcome returned is the committed one).",
    })
    expect(expectStatus(await api(ts.url, owner.token).getNode(`${space}/pin/a`), 200).body.content).toMatchObject({ Note: 'first' })
    // The same parameters (in another key order, were there several): a plain repeat.
    expect(expectStatus(await c.react(it1, 'annotate', { Note: 'first' }), 200).body).toEqual({ outcome: first.outcome, repeated: true })
    // Crafted: parameters that are no object, or nest too deep: refused by code, never a 500.
    const tok = it1.reactions.find((r) => r.name === 'annotate')!.causationToken
    for (const params of ['x', [1], null]) {
      const r = await api(ts.url, owner.token).post('/api/contextual/react', { causationToken: tok, params })
      expect([r.status, errorCode(r)]).toEqual([400, 'invalid_request'])
    }
    // Someone else repeating it with the token: denied, the outcome not told.
    const other = await api(ts.url, viewer.token).post('/api/contextual/react', { causationToken: tok, params: { Note: 'x' } })
    expect([other.status, errorCode(other)]).toEqual([403, 'reaction_denied'])
  })

  it('[CTX60] the same ack again is told it is settled (repeated); another token or attempt stays stale_lease; another user is not found', async () => {
    const sub = `${space}/a`
    expectStatus(await putSubscription(ts.url, owner.token, sub, definition(`${space}/ain`)), 201)
    await createDocument(ts.url, owner.token, `${space}/ain`, {})
    const c = ctx(ts.url, owner.token)
    expectStatus(await c.next(sub), 200)
    await createDocument(ts.url, owner.token, `${space}/ain/a`, {})
    const { consumerId, item: it1 } = await pull(ts.url, owner.token, sub)
    expect(expectStatus(await c.ack(consumerId, it1), 200).body).toEqual({ ok: true, state: 'acked', repeated: false })
    expect(expectStatus(await c.ack(consumerId, it1), 200).body).toEqual({ ok: true, state: 'acked', repeated: true })
    for (const forged of [{ ...it1, leaseToken: `${it1.leaseToken.slice(0, -1)}x` }, { ...it1, attempt: it1.attempt + 1 }]) {
      const r = await c.ack(consumerId, forged)
      expect([r.status, errorCode(r)]).toEqual([409, 'stale_lease'])
    }
    // [CTX62] A required field left out is named.
    const missing = await api(ts.url, owner.token).post<{ error: { code: string; message: string } }>('/api/contextual/ack', { consumerId, eventId: it1.event.eventId, attempt: it1.attempt })
    expect([missing.status, missing.body.error]).toEqual([400, { code: 'invalid_request', message: 'The ack request is invalid: leaseToken is required.' }])
    const v = await ctx(ts.url, viewer.token).ack(consumerId, it1)
    expect([v.status, errorCode(v)]).toEqual([404, 'not_found'])
    expect(expectStatus(await c.status(consumerId), 200).body).toMatchObject({ acked: 1, pending: 0, leased: 0 })
  })

  it('[CTX61] [CTX70] an event committed by a reaction carries causedBy (subscription, consumer, reaction, event), read with the lease: an agent skips its own echo', async () => {
    const sub = `${space}/e`
    const prefix = `${space}/ein`
    expectStatus(await putSubscription(ts.url, owner.token, sub, definition(prefix)), 201)
    await createDocument(ts.url, owner.token, prefix, {})
    const c = ctx(ts.url, owner.token)
    expectStatus(await c.next(sub, 'echo'), 200)
    await createDocument(ts.url, owner.token, `${prefix}/a`, {})
    const { consumerId, item: created } = await pull(ts.url, owner.token, sub, 'echo')
    expect(created.event).not.toHaveProperty('causedBy')
    const r = expectStatus(await c.react(created, 'annotate', { Note: 'seen' }, { ack: true }), 200).body
    expect(r.acked).toBe(true)
    // The reaction's patch is an Updated event of this subscription: marked as the echo it is.
    // [CTX70] Its causation record read by the lease, on both storages: the pull makes no other call.
    const storage = ts.server.storage
    const original = storage.contextual.bind(storage)
    const ops: string[] = []
    storage.contextual = (call: ContextualCall) => {
      ops.push(call.op)
      return original(call)
    }
    let echo: Item
    try {
      echo = (await pull(ts.url, owner.token, sub, 'echo')).item
    } finally {
      storage.contextual = original
    }
    expect(new Set(ops)).toEqual(new Set(['lease']))
    expect(echo.event).toMatchObject({ path: `${prefix}/a`, kind: 'Updated' })
    expect((echo.event as { causedBy?: unknown }).causedBy).toEqual({
      subscription: sub, consumerId, consumerName: 'echo', reaction: 'annotate', eventId: created.event.eventId, rootRequestId: r.outcome.rootRequestId,
    })
    expectStatus(await c.ack(consumerId, echo), 200)
    // A person's edit after it: no causedBy.
    expectStatus(await api(ts.url, owner.token).patchNode(`${prefix}/a`, { Note: 'by hand' }), 200)
    const { item: manual } = await pull(ts.url, owner.token, sub, 'echo')
    expect(manual.event).not.toHaveProperty('causedBy')
  })
})
