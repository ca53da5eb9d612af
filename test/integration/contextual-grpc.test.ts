import * as grpc from '@grpc/grpc-js'
import fc from 'fast-check'
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import type { JsonObject } from '../../shared/index.js'
import { api, createSpace, expectStatus, signup, startTestServer, type TestServer, type TestUser } from '../helpers/index.js'
import { definition, putSubscription } from './contextual-helpers.js'
import { call, ok, stub, type ContextualStub, type Obj } from './contextual-grpc-helpers.js'

/** Raw bytes to a method, bypassing the message codec (a crafted client). */
function raw(s: grpc.Client, method: string, bytes: Buffer, token: string): Promise<grpc.status> {
  const md = new grpc.Metadata()
  md.set('authorization', `Bearer ${token}`)
  return new Promise((resolve) => {
    s.makeUnaryRequest(`/weft.contextual.v1.Contextual/${method}`, (b: Buffer) => b, (b: Buffer) => b, bytes, md, (err) => resolve(err ? err.code : grpc.status.OK))
  })
}

describe('[CTX35] contextual subscriptions over gRPC', () => {
  let ts: TestServer
  let owner: TestUser
  let space = ''
  let client: ContextualStub
  beforeAll(async () => {
    ts = await startTestServer({ config: { grpcPort: 0, maxPayloadBytes: 64 * 1024 } })
    owner = await signup(ts.url)
    space = await createSpace(ts.url, owner.token)
    client = stub(ts.server.grpcPort!)
  })
  afterAll(async () => {
    client?.close()
    await ts.cleanup()
  })

  async function setup(n: string, overrides: Obj = {}) {
    const sub = `${space}/s${n}`
    const prefix = `${space}/in${n}`
    expectStatus(await putSubscription(ts.url, owner.token, sub, definition(prefix, overrides as JsonObject)), 201)
    expectStatus(await api(ts.url, owner.token).putNode(prefix, 'Document', {}), 201)
    const first = await ok(call(client, 'next', { subscription: sub, consumer: 'g1' }, owner.token))
    return { sub, prefix, consumerId: first.consumerId as string }
  }

  const fenceOf = (consumerId: string, item: Obj) => ({ consumerId, eventId: (item.event as Obj).eventId, leaseToken: item.leaseToken, attempt: item.attempt })

  it('[CTX35] next → react → ack end to end through a stock client; status and the node agree', async () => {
    const { sub, consumerId } = await setup('1')
    expectStatus(await api(ts.url, owner.token).putNode(`${space}/in1/d`, 'Document', { Title: 'g' }), 201)
    const pulled = await ok(call(client, 'next', { subscription: sub, consumer: 'g1', waitSeconds: 10 }, owner.token))
    expect(pulled.consumerId).toBe(consumerId)
    const item = pulled.item as Obj
    expect((item.event as Obj).path).toBe(`${space}/in1/d`)
    expect(JSON.parse((item.event as Obj).nodeJson as string)).toMatchObject({ content: { Title: 'g' } })
    expect(JSON.parse(item.hydrationJson as string).source.content).toEqual({ Title: 'g' })
    const reply = (item.reactions as Obj[]).find((r) => r.name === 'reply')!
    const reacted = await ok(call(client, 'react', { causationToken: reply.causationToken, paramsJson: JSON.stringify({ Text: 'over grpc' }) }, owner.token))
    expect(reacted).toMatchObject({ repeated: false, outcome: { status: 'committed', reaction: 'reply' } })
    expect((reacted.outcome as Obj).version).toBeGreaterThan(0)
    expect(expectStatus(await api(ts.url, owner.token).getNode(`${space}/in1/d/reply`), 200).body).toMatchObject({ content: { Text: 'over grpc' } })
    // A repeat resolves the persisted outcome.
    // [CTX59] With other parameters: said so, in the response's own fields.
    expect(await ok(call(client, 'react', { causationToken: reply.causationToken, paramsJson: JSON.stringify({ Text: 'again' }) }, owner.token))).toMatchObject({
      repeated: true, paramsDiffer: true, message: expect.stringContaining('yours were not applied'),
    })
    expect(await ok(call(client, 'extend', fenceOf(consumerId, item), owner.token))).toHaveProperty('expiresAt')
    expect(await ok(call(client, 'ack', fenceOf(consumerId, item), owner.token))).toEqual({ ok: true, state: 'acked', repeated: false })
    // [CTX60] The same ack again.
    expect(await ok(call(client, 'ack', fenceOf(consumerId, item), owner.token))).toEqual({ ok: true, state: 'acked', repeated: true })
    const st = await ok(call(client, 'status', { consumerId }, owner.token))
    expect(st).toMatchObject({ consumerId, subscription: sub, name: 'g1', acked: 1, leased: 0, pending: 0, current: true })
    // The same consumer over HTTP: one service, one truth.
    const http = expectStatus(await api(ts.url, owner.token).post<Obj>('/api/contextual/status', { consumerId }), 200).body
    expect(http).toMatchObject({ acked: 1, cursor: st.cursor })
  })

  it('[CTX47] react with ack settles the item in the reaction\'s transaction; a later ack is stale', async () => {
    const { sub, consumerId } = await setup('47')
    expectStatus(await api(ts.url, owner.token).putNode(`${space}/in47/d`, 'Document', {}), 201)
    const item = (await ok(call(client, 'next', { subscription: sub, consumer: 'g1', waitSeconds: 10 }, owner.token))).item as Obj
    const reply = (item.reactions as Obj[]).find((r) => r.name === 'reply')!
    const reacted = await ok(call(client, 'react', { causationToken: reply.causationToken, paramsJson: JSON.stringify({ Text: 'and done' }), ack: true }, owner.token))
    expect(reacted).toMatchObject({ repeated: false, acked: true, outcome: { status: 'committed' } })
    expect(await ok(call(client, 'status', { consumerId }, owner.token))).toMatchObject({ acked: 1, leased: 0 })
    expect(await call(client, 'ack', fenceOf(consumerId, item), owner.token)).toMatchObject({ ok: false, weftCode: 'stale_lease' })
    // Without ack, acked is proto3's default.
    expect(await ok(call(client, 'react', { causationToken: reply.causationToken, paramsJson: '{"Text":"again"}' }, owner.token))).toMatchObject({ repeated: true, acked: false })
  })

  it('[CTX52] react with ack and next settles the item and answers the next one, as Next does; next without ack is INVALID_ARGUMENT', async () => {
    // Created events only: the reactions' patches are no events of it.
    const { sub, consumerId } = await setup('52', { Events: { NodeTypes: ['Document'], Kinds: ['Created'], PathPrefix: `${space}/in52` } })
    for (const d of ['a', 'b']) expectStatus(await api(ts.url, owner.token).putNode(`${space}/in52/${d}`, 'Document', {}), 201)
    const first = (await ok(call(client, 'next', { subscription: sub, consumer: 'g1', waitSeconds: 10 }, owner.token))).item as Obj
    const annotate = (item: Obj) => (item.reactions as Obj[]).find((r) => r.name === 'annotate')!.causationToken
    const refused = await call(client, 'react', { causationToken: annotate(first), paramsJson: '{"Note":"x"}', next: true }, owner.token)
    expect(refused).toMatchObject({ ok: false, code: grpc.status.INVALID_ARGUMENT, weftCode: 'invalid_request' })
    const r1 = await ok(call(client, 'react', { causationToken: annotate(first), paramsJson: '{"Note":"one"}', ack: true, next: true }, owner.token))
    expect(r1).toMatchObject({ repeated: false, acked: true, next: { consumerId } })
    const second = (r1.next as Obj).item as Obj
    expect((second.event as Obj).path).toBe(`${space}/in52/b`)
    const r2 = await ok(call(client, 'react', { causationToken: annotate(second), paramsJson: '{"Note":"two"}', ack: true, next: true }, owner.token))
    // No item: the field is absent, as in NextResponse.
    expect(r2).toMatchObject({ acked: true, next: { consumerId, item: null } })
    expect(r2.nextError).toBeNull()
    expect(await ok(call(client, 'status', { consumerId }, owner.token))).toMatchObject({ acked: 2, leased: 0, pending: 0 })
  })

  it('[CTX35] [CTX12] a stale worker is fenced: ABORTED with weft-code stale_lease; its reaction PERMISSION_DENIED', async () => {
    const { sub, consumerId } = await setup('2')
    expectStatus(await api(ts.url, owner.token).putNode(`${space}/in2/d`, 'Document', {}), 201)
    const old = (await ok(call(client, 'next', { subscription: sub, consumer: 'g1', waitSeconds: 10 }, owner.token))).item as Obj
    expect(await ok(call(client, 'nack', { ...fenceOf(consumerId, old), error: 'try again' }, owner.token))).toEqual({ state: 'pending' })
    const fresh = (await ok(call(client, 'next', { subscription: sub, consumer: 'g1', waitSeconds: 10 }, owner.token))).item as Obj
    expect(fresh.attempt).toBe(2)
    for (const m of ['ack', 'nack', 'extend'] as const) {
      expect(await call(client, m, fenceOf(consumerId, old), owner.token)).toMatchObject({ ok: false, code: grpc.status.ABORTED, weftCode: 'stale_lease' })
    }
    const token = (old.reactions as Obj[]).find((r) => r.name === 'reply')!.causationToken
    expect(await call(client, 'react', { causationToken: token, paramsJson: '{"Text":"stale"}' }, owner.token)).toMatchObject({ ok: false, code: grpc.status.PERMISSION_DENIED, weftCode: 'reaction_denied' })
    expect((await api(ts.url, owner.token).getNode(`${space}/in2/d/reply`)).status).toBe(404)
    expect(await ok(call(client, 'ack', fenceOf(consumerId, fresh), owner.token))).toEqual({ ok: true, state: 'acked', repeated: false })
  })

  it('[CTX42] a long poll the client cancels stops waiting on the server', async () => {
    const { sub } = await setup('42')
    const md = new grpc.Metadata()
    md.set('authorization', `Bearer ${owner.token}`)
    const ended = new Promise<grpc.status>((resolve) => {
      const polling = client.next({ subscription: sub, consumer: 'g1', waitSeconds: 60 }, md, (err) => resolve(err ? err.code : grpc.status.OK))
      void vi.waitFor(() => expect(ts.server.contextual.waiting).toBe(1), { timeout: 60_000, interval: 20 }).then(() => polling.cancel())
    })
    expect(await ended).toBe(grpc.status.CANCELLED)
    // Released once the server sees the cancel, long before the poll's own 60 s.
    await vi.waitFor(() => expect(ts.server.contextual.waiting).toBe(0), { timeout: 30_000, interval: 20 })
  })

  it('[CTX52] a React whose pull the client cancels while it waits: the reaction stands, the wait ends', async () => {
    const { sub, consumerId } = await setup('52c', { Events: { NodeTypes: ['Document'], Kinds: ['Created'], PathPrefix: `${space}/in52c` } })
    expectStatus(await api(ts.url, owner.token).putNode(`${space}/in52c/d`, 'Document', {}), 201)
    const item = (await ok(call(client, 'next', { subscription: sub, consumer: 'g1', waitSeconds: 10 }, owner.token))).item as Obj
    const token = (item.reactions as Obj[]).find((r) => r.name === 'annotate')!.causationToken
    const md = new grpc.Metadata()
    md.set('authorization', `Bearer ${owner.token}`)
    const ended = new Promise<grpc.status>((resolve) => {
      const reacting = client.react({ causationToken: token, paramsJson: '{"Note":"kept"}', ack: true, next: true, waitSeconds: 60 }, md, (err) => resolve(err ? err.code : grpc.status.OK))
      void vi.waitFor(() => expect(ts.server.contextual.waiting).toBe(1), { timeout: 60_000, interval: 20 }).then(() => reacting.cancel())
    })
    expect(await ended).toBe(grpc.status.CANCELLED)
    await vi.waitFor(() => expect(ts.server.contextual.waiting).toBe(0), { timeout: 30_000, interval: 20 })
    expect((await api(ts.url, owner.token).getNode(`${space}/in52c/d`)).body.content).toEqual({ Note: 'kept' })
    expect(await ok(call(client, 'status', { consumerId }, owner.token))).toMatchObject({ acked: 1, leased: 0 })
  })

  it('[CTX35] no token or a bad token is UNAUTHENTICATED; another user sees NOT_FOUND, not the consumer', async () => {
    const { consumerId } = await setup('3')
    expect(await call(client, 'status', { consumerId }, null)).toMatchObject({ ok: false, code: grpc.status.UNAUTHENTICATED, weftCode: 'unauthorized' })
    expect(await call(client, 'status', { consumerId }, 'not-a-token')).toMatchObject({ ok: false, code: grpc.status.UNAUTHENTICATED })
    const other = await signup(ts.url)
    expect(await call(client, 'status', { consumerId }, other.token)).toMatchObject({ ok: false, code: grpc.status.NOT_FOUND, weftCode: 'not_found' })
    expect(await call(client, 'redrive', { consumerId }, other.token)).toMatchObject({ ok: false, code: grpc.status.NOT_FOUND })
    // [CTX46] Nor can they delete it; its owner can, and then it is gone.
    expect(await call(client, 'deleteConsumer', { consumerId }, other.token)).toMatchObject({ ok: false, code: grpc.status.NOT_FOUND, weftCode: 'not_found' })
    expect(await ok(call(client, 'deleteConsumer', { consumerId }, owner.token))).toEqual({ deleted: true })
    expect(await call(client, 'status', { consumerId }, owner.token)).toMatchObject({ ok: false, code: grpc.status.NOT_FOUND })
  })

  it('[CTX35] crafted input is INVALID_ARGUMENT, an oversized message RESOURCE_EXHAUSTED; the server keeps serving', async () => {
    const { sub, consumerId } = await setup('4')
    const bad: Array<[keyof ContextualStub & string, Obj]> = [
      ['next', { subscription: sub, consumer: 'has space' }],
      ['next', { subscription: sub, consumer: 'g1', paramsJson: '{not json' }],
      ['next', { subscription: sub, consumer: 'g1', paramsJson: '[1,2]' }],
      ['next', { subscription: sub, consumer: 'g1', waitSeconds: 61 }],
      ['next', { consumer: 'g1' }],
      ['ack', { consumerId }],
      ['nack', { consumerId, eventId: '1', leaseToken: 'x', attempt: 1, delaySeconds: 10_000 }],
      ['react', { causationToken: 'A'.repeat(5000) }],
      ['status', { consumerId: 'x'.repeat(101) }],
    ]
    for (const [m, req] of bad) {
      expect(await call(client, m, req, owner.token), `${m} ${JSON.stringify(req).slice(0, 80)}`).toMatchObject({ ok: false, code: grpc.status.INVALID_ARGUMENT })
    }
    // Bytes that are no protobuf message at all (a truncated length-delimited field).
    expect(await raw(client, 'Ack', Buffer.from([0x0a, 0x7f, 0x41]), owner.token)).toBe(grpc.status.INVALID_ARGUMENT)
    // Over MAX_PAYLOAD_BYTES (64 KiB here): grpc-js refuses the message before decoding it.
    expect(await call(client, 'react', { causationToken: 'x', paramsJson: JSON.stringify({ Text: 'y'.repeat(70 * 1024) }) }, owner.token)).toMatchObject({ ok: false, code: grpc.status.RESOURCE_EXHAUSTED })
    expect(await ok(call(client, 'status', { consumerId }, owner.token))).toMatchObject({ consumerId })
  })

  it('[CTX35] seeded property: any bytes to any method get a definite non-INTERNAL answer, and the server keeps serving', async () => {
    const { consumerId } = await setup('5')
    const methods = ['Next', 'Ack', 'Nack', 'Extend', 'Status', 'React', 'Redrive', 'DeleteConsumer']
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(...methods), fc.uint8Array({ maxLength: 300 }), async (method, bytes) => {
        const code = await raw(client, method, Buffer.from(bytes), owner.token)
        expect([grpc.status.INTERNAL, grpc.status.UNKNOWN, grpc.status.OK]).not.toContain(code)
      }),
      { seed: 35, numRuns: 60 },
    )
    expect(await ok(call(client, 'status', { consumerId }, owner.token))).toMatchObject({ consumerId })
  })
})
