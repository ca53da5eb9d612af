import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { api, createDocument, createSpace, errorCode, expectStatus, freshDatabase, grantRole, signup, startTestServer, type ApiResponse, type TestServer, type TestUser } from '../helpers/index.js'
import { ctx, definition, putSubscription, type NextBody } from './contextual-helpers.js'

/**
 * [CTX56] [CTX63] An edited definition (even one limit) makes a new consumer under the same name
 * (its identity holds the definition hash, by the seed). A walk (stop 48, finding 2): the new one
 * started at the head (events before and after the edit never delivered), the Admin's overview lost
 * the old one and its dead letter, and re-driving it answered 404. Now the new consumer continues
 * from the old one's cursor with its pending events, the old one is listed stale with what it
 * holds, and an Admin re-drives (into the new consumer) and deletes it.
 */
const storages = [
  { name: 'SQLite', pg: false },
  { name: 'PostgreSQL', pg: true },
] as const

/** A pull, again on 503 `unavailable` (retryable: the context changed while it was read). */
async function pullOnce(c: ReturnType<typeof ctx>, sub: string, consumer: string): Promise<ApiResponse<NextBody & { error?: { code: string; message: string } }>> {
  for (let attempt = 1; ; attempt++) {
    const r = await c.next(sub, consumer)
    if (r.status !== 503 || attempt === 5) return r
  }
}

interface Overview {
  definitionHash: string
  consumers: Array<{ consumerId: string; name: string; current: boolean; pending: number; leased: number; dead: number; definitionHash: string }>
  stale: { consumers: number; pending: number; leased: number; dead: number }
}

describe.each(storages)('[CTX56] consumers of an edited definition ($name)', ({ pg }) => {
  let ts: TestServer
  let db: Awaited<ReturnType<typeof freshDatabase>> | null = null
  let ann: TestUser
  let bob: TestUser
  let vic: TestUser
  let space = ''
  beforeAll(async () => {
    db = pg ? await freshDatabase('weft_ctx_stale_') : null
    ts = await startTestServer({ config: db ? { databaseUrl: db.url } : {} })
    ann = await signup(ts.url)
    bob = await signup(ts.url)
    vic = await signup(ts.url)
    space = await createSpace(ts.url, ann.token)
    await grantRole(ts.url, ann.token, space, bob.userId, 'Editor')
    await grantRole(ts.url, ann.token, space, vic.userId, 'Viewer')
  })
  afterAll(async () => {
    await ts.cleanup()
    await db?.drop()
  })

  it('the new consumer continues where the old one was; the old one is listed stale; an Admin re-drives and deletes it; others are told not found alike', async () => {
    const sub = `${space}/triage`
    const prefix = `${space}/in`
    const limits = { LeaseSeconds: 30, MaxInFlight: 1, MaxAttempts: 1 }
    expectStatus(await putSubscription(ts.url, ann.token, sub, definition(prefix, { Limits: limits })), 201)
    await createDocument(ts.url, ann.token, prefix, {})
    const b = ctx(ts.url, bob.token)
    const old = expectStatus(await pullOnce(b, sub, 'bob-worker'), 200).body.consumerId
    for (const n of ['e0', 'e1', 'e2']) await createDocument(ts.url, ann.token, `${prefix}/${n}`, {})
    // e0 leased (its nack makes it a dead letter: one attempt), e1 and e2 ingested and pending.
    const first = expectStatus(await pullOnce(b, sub, 'bob-worker'), 200).body.item!
    expect(first.event.path).toBe(`${prefix}/e0`)
    expect(expectStatus(await b.nack(old, first), 200).body.state).toBe('dead')
    // Bob (an Editor) changes one limit: another definition, so another consumer under his name.
    expectStatus(await api(ts.url, bob.token).patchNode(sub, { Limits: { ...limits, MaxAttempts: 2 } }), 200)
    await createDocument(ts.url, ann.token, `${prefix}/e3`, {})
    const got: string[] = []
    let fresh = ''
    for (;;) {
      const r = expectStatus(await pullOnce(b, sub, 'bob-worker'), 200).body
      fresh = r.consumerId
      if (!r.item) break
      got.push(r.item.event.path.slice(prefix.length + 1))
      expectStatus(await b.ack(fresh, r.item), 200)
    }
    expect(fresh).not.toBe(old)
    // Nothing skipped: the pending events carried over, then what came after the edit.
    expect(got).toEqual(['e1', 'e2', 'e3'])

    const overview = async (token: string) => expectStatus(await api(ts.url, token).post<Overview>('/api/contextual/consumers', { subscription: sub }), 200).body
    const seen = await overview(ann.token)
    const stale = seen.consumers.find((c) => c.consumerId === old)
    expect(stale).toMatchObject({ current: false, dead: 1, pending: 0, name: 'bob-worker' })
    expect(stale!.definitionHash).not.toBe(seen.definitionHash)
    expect(seen.consumers.find((c) => c.consumerId === fresh)).toMatchObject({ current: true, dead: 0, definitionHash: seen.definitionHash })
    expect(seen.stale).toEqual({ consumers: 1, pending: 0, leased: 0, dead: 1 })
    // Bob's own status of the old one says it is stale.
    expect(expectStatus(await b.status(old), 200).body).toMatchObject({ current: false, dead: 1 })

    // Someone who is neither its owner nor an Admin: the same 404 for every operation, nothing changed.
    const v = ctx(ts.url, vic.token)
    const refusals = [await v.status(old), await v.delete(old), await v.redrive(old), await v.status(fresh), await v.delete(fresh)]
    for (const r of refusals) expect([r.status, errorCode(r)]).toEqual([404, 'not_found'])
    expect(new Set(refusals.map((r) => r.body.error?.message.replace(old, 'ID').replace(fresh, 'ID'))).size).toBe(1)
    // The owner may not re-drive (an Admin's act), by name.
    expect(errorCode(await b.redrive(old))).toBe('forbidden')
    expect((await overview(ann.token)).stale.dead).toBe(1)

    // The Admin re-drives the stale consumer's dead letter: Bob's current consumer gets it.
    expect(expectStatus(await ctx(ts.url, ann.token).redrive(old), 200).body).toEqual({ redriven: 1 })
    const again = expectStatus(await pullOnce(b, sub, 'bob-worker'), 200).body
    expect([again.consumerId, again.item?.event.path]).toEqual([fresh, `${prefix}/e0`])
    expectStatus(await b.ack(fresh, again.item!), 200)
    expect((await overview(ann.token)).stale).toEqual({ consumers: 1, pending: 0, leased: 0, dead: 0 })
    expectStatus(await ctx(ts.url, ann.token).delete(old), 200)
    const after = await overview(ann.token)
    expect(after.consumers.map((c) => c.consumerId)).toEqual([fresh])
    expect(after.stale.consumers).toBe(0)
  })

  it('what the edited definition no longer asks for stays with the old consumer; a leased event too', async () => {
    const sub = `${space}/types`
    const prefix = `${space}/tin`
    const limits = { LeaseSeconds: 30, MaxInFlight: 1, MaxAttempts: 3 }
    const def = (types: string[]) => definition(prefix, { Events: { NodeTypes: types, Kinds: ['Created'], PathPrefix: prefix }, Limits: limits })
    expectStatus(await putSubscription(ts.url, ann.token, sub, def(['Document', 'Post'])), 201)
    await createDocument(ts.url, ann.token, prefix, {})
    const b = ctx(ts.url, bob.token)
    const old = expectStatus(await pullOnce(b, sub, 'w'), 200).body.consumerId
    await createDocument(ts.url, ann.token, `${prefix}/d0`, {})
    expectStatus(await api(ts.url, ann.token).putNode(`${prefix}/p1`, 'Post', { Text: 'x' }), 201)
    await createDocument(ts.url, ann.token, `${prefix}/d2`, {})
    // d0 leased (and left so); p1 and d2 pending.
    expect(expectStatus(await pullOnce(b, sub, 'w'), 200).body.item?.event.path).toBe(`${prefix}/d0`)
    expectStatus(await api(ts.url, bob.token).patchNode(sub, { Events: { NodeTypes: ['Document'], Kinds: ['Created'], PathPrefix: prefix } }), 200)
    const first = expectStatus(await pullOnce(b, sub, 'w'), 200).body
    expect(first.consumerId).not.toBe(old)
    expect(first.item?.event.path).toBe(`${prefix}/d2`)
    expectStatus(await b.ack(first.consumerId, first.item!), 200)
    expect(expectStatus(await pullOnce(b, sub, 'w'), 200).body.item).toBeNull()
    const seen = expectStatus(await api(ts.url, ann.token).post<Overview>('/api/contextual/consumers', { subscription: sub }), 200).body
    expect(seen.stale).toEqual({ consumers: 1, pending: 1, leased: 1, dead: 0 })
  })
})
