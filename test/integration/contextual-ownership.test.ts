import { describe, expect, it } from 'vitest'
import { api, createSpace, errorCode, expectStatus, grantRole, signup } from '../helpers/index.js'
import { ctx, definition, ownedServer, pull, putSubscription } from './contextual-helpers.js'

/**
 * [CTX11] [CTX38] [CTX46] [CTX49] Whose a consumer is: its id holds the definition, not the path, so
 * a copy of the definition elsewhere is the same identity. Found by an outside look (stop 42): a
 * Viewer pulled her consumer through a copy in a space of her own, became "Admin" of it and
 * re-drove its dead letters, and the subscription's Admin could no longer see or delete it.
 */
describe('a consumer stays with the subscription it was made at while that node is there', () => {
  const env = ownedServer()

  it("a Viewer's pull through a copy of the definition is refused by name; she cannot re-drive; the Admin still sees, re-drives and deletes it", async () => {
    const { ts, owner, space } = env
    const viewer = await signup(ts.url)
    await grantRole(ts.url, owner.token, space, viewer.userId, 'Viewer')
    const def = definition(`${space}/inA`, { Limits: { LeaseSeconds: 30, MaxInFlight: 1, MaxAttempts: 1 } })
    expectStatus(await putSubscription(ts.url, owner.token, `${space}/sA`, def), 201)
    expectStatus(await api(ts.url, owner.token).putNode(`${space}/inA`, 'Document', {}), 201)
    const c = ctx(ts.url, viewer.token)
    const first = expectStatus(await c.next(`${space}/sA`), 200).body
    expectStatus(await api(ts.url, owner.token).putNode(`${space}/inA/poison`, 'Document', {}), 201)
    const { consumerId, item } = await pull(ts.url, viewer.token, `${space}/sA`)
    expect(consumerId).toBe(first.consumerId)
    expect(expectStatus(await c.nack(consumerId, item), 200).body.state).toBe('dead')
    expect(errorCode(await c.redrive(consumerId))).toBe('forbidden')
    const mine = await createSpace(ts.url, viewer.token)
    expectStatus(await putSubscription(ts.url, viewer.token, `${mine}/copy`, def), 201)
    const via = await c.next(`${mine}/copy`)
    expect(via.status).toBe(409)
    expect(errorCode(via)).toBe('conflict')
    expect(errorCode(await c.redrive(consumerId))).toBe('forbidden')
    // Under another name, the copy is hers: a consumer of her own subscription.
    expect(expectStatus(await c.next(`${mine}/copy`, 'w2'), 200).body.consumerId).not.toBe(consumerId)
    const listed = async () => expectStatus(await api(ts.url, owner.token).post<{ consumers: { consumerId: string }[] }>('/api/contextual/consumers', { subscription: `${space}/sA` }), 200).body.consumers.map((x) => x.consumerId)
    expect(await listed()).toContain(consumerId)
    const admin = ctx(ts.url, owner.token)
    expect(expectStatus(await admin.redrive(consumerId), 200).body).toEqual({ redriven: 1 })
    expectStatus(await admin.delete(consumerId), 200)
  })

  it('a subscription node moved elsewhere: its consumer follows it there (the node is no longer at its old path)', async () => {
    const { ts, owner, space } = env
    const def = definition(`${space}/inM`)
    expectStatus(await putSubscription(ts.url, owner.token, `${space}/sM`, def), 201)
    const c = ctx(ts.url, owner.token)
    const { consumerId } = expectStatus(await c.next(`${space}/sM`), 200).body
    expectStatus(await api(ts.url, owner.token).post(`/api/nodes/${space}/sM/move`, { to: `${space}/sM2` }), 200)
    expect(expectStatus(await c.next(`${space}/sM2`), 200).body.consumerId).toBe(consumerId)
  })
})
