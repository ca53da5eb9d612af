import { describe, expect, it } from 'vitest'
import type { JsonObject } from '../../shared/index.js'
import { api, errorCode, expectStatus, signup, waitFor, type ApiResponse } from '../helpers/index.js'
import { abandonWhileWaiting, ctx, ownedServer, pull, putSubscription, type Item, type NextBody } from './contextual-helpers.js'

type Reacted = { outcome: Record<string, unknown>; repeated: boolean; acked?: boolean; next?: NextBody; nextError?: { code: string; message: string } }

/**
 * [CTX52] `react` with `ack: true, next: true`: the reaction, the settle and the pull of the
 * consumer's next work item in one call (JetStream's AckNext): a worker's (or an LLM agent's)
 * loop is one call per item.
 */
describe('[CTX52] react, settle and take the next item in one call', () => {
  const env = ownedServer()
  let n = 0
  /** A subscription over a fresh inbox (Created events only: the reactions' patches are not events), its consumer made. */
  async function subscription(extra: JsonObject = {}, params?: JsonObject) {
    const inbox = `${env.space}/next${++n}`
    expectStatus(await api(env.ts.url, env.owner.token).putNode(inbox, 'Document', {}), 201)
    const sub = `${env.space}/nextsub${n}`
    expectStatus(
      await putSubscription(env.ts.url, env.owner.token, sub, {
        Operation: `loop${n}`,
        Events: { NodeTypes: ['Document'], Kinds: ['Created'], PathPrefix: inbox },
        Reactions: { annotate: { Command: 'patch', Target: '{event.path}', Parameters: { Note: { Type: 'string' } } } },
        Limits: { LeaseSeconds: 60, MaxInFlight: 1, MaxAttempts: 3 },
        ...extra,
      }),
      201,
    )
    const c = ctx(env.ts.url, env.owner.token)
    const consumerId = expectStatus(await c.next(sub, 'w', params ? { params } : {}), 200).body.consumerId
    return { sub, inbox, c, consumerId }
  }
  const reactNext = (c: ReturnType<typeof ctx>, item: Item, note: string, extra: JsonObject = {}) =>
    c.react(item, 'annotate', { Note: note }, { ack: true, next: true, ...extra }) as Promise<ApiResponse<Reacted>>

  it('each call commits its reaction, settles its item and brings the next: a loop of one call per item drains the consumer, every effect once', async () => {
    const { sub, inbox, c, consumerId } = await subscription()
    const docs = ['a', 'b', 'c', 'd']
    for (const d of docs) expectStatus(await api(env.ts.url, env.owner.token).putNode(`${inbox}/${d}`, 'Document', {}), 201)
    let item: Item | null = (await pull(env.ts.url, env.owner.token, sub, 'w')).item
    const seen: string[] = []
    while (item) {
      seen.push(item.event.path)
      const r: Reacted = expectStatus(await reactNext(c, item, `seen ${item.event.path}`), 200).body
      expect(r).toMatchObject({ repeated: false, acked: true, outcome: { status: 'committed', path: item.event.path } })
      expect(r.nextError).toBeUndefined()
      expect(r.next!.consumerId).toBe(consumerId)
      item = r.next!.item
    }
    expect(seen).toEqual(docs.map((d) => `${inbox}/${d}`))
    for (const d of docs) expect((await api(env.ts.url, env.owner.token).getNode(`${inbox}/${d}`)).body.content).toEqual({ Note: `seen ${inbox}/${d}` })
    expect(expectStatus(await c.status(consumerId), 200).body).toMatchObject({ acked: docs.length, leased: 0, pending: 0, dead: 0 })
  })

  it('a repeat of the call resolves the outcome and pulls again: the item it brought before is still leased to this worker, so nothing more comes until it is settled', async () => {
    const { sub, inbox, c, consumerId } = await subscription()
    for (const d of ['a', 'b']) expectStatus(await api(env.ts.url, env.owner.token).putNode(`${inbox}/${d}`, 'Document', {}), 201)
    const { item } = await pull(env.ts.url, env.owner.token, sub, 'w')
    const first = expectStatus(await reactNext(c, item, 'once'), 200).body
    expect(first.next!.item!.event.path).toBe(`${inbox}/b`)
    // The answer was lost; the worker sends the same call again.
    const again = expectStatus(await reactNext(c, item, 'other text'), 200).body
    expect(again).toMatchObject({ repeated: true, acked: true, outcome: first.outcome, next: { consumerId, item: null } })
    expect((await api(env.ts.url, env.owner.token).getNode(`${inbox}/a`)).body.content).toEqual({ Note: 'once' })
    // The item the first answer brought is settled by its own call.
    const last = expectStatus(await reactNext(c, first.next!.item!, 'b done'), 200).body
    expect(last).toMatchObject({ acked: true, next: { item: null } })
    expect(expectStatus(await c.status(consumerId), 200).body).toMatchObject({ acked: 2, leased: 0, pending: 0 })
  })

  it('the pull waits up to waitSeconds: an event committed while it waits comes in the answer', async () => {
    const { sub, inbox, c } = await subscription()
    expectStatus(await api(env.ts.url, env.owner.token).putNode(`${inbox}/first`, 'Document', {}), 201)
    const { item } = await pull(env.ts.url, env.owner.token, sub, 'w')
    const answer = reactNext(c, item, 'waiting', { waitSeconds: 30 })
    // The reaction is durable, then the next event is written: the call is still waiting for it.
    await waitFor(async () => (await api(env.ts.url, env.owner.token).getNode(`${inbox}/first`)).body.content?.Note === 'waiting', { description: 'the reaction committed' })
    expectStatus(await api(env.ts.url, env.owner.token).putNode(`${inbox}/later`, 'Document', {}), 201)
    const r = expectStatus(await answer, 200).body
    expect(r.next!.item!.event.path).toBe(`${inbox}/later`)
  })

  it('next without ack, or waitSeconds without next or past 60, is refused before anything commits; the item stays leased', async () => {
    const { sub, inbox, c, consumerId } = await subscription()
    expectStatus(await api(env.ts.url, env.owner.token).putNode(`${inbox}/d`, 'Document', {}), 201)
    const { item } = await pull(env.ts.url, env.owner.token, sub, 'w')
    for (const extra of [{ ack: false, next: true }, { next: true }, { ack: true, waitSeconds: 5 }, { ack: true, next: true, waitSeconds: 61 }, { ack: true, next: 'yes' }] as JsonObject[]) {
      const r = await c.react(item, 'annotate', { Note: 'never' }, extra)
      expect([r.status, errorCode(r)], JSON.stringify(extra)).toEqual([400, 'invalid_request'])
    }
    expect((await api(env.ts.url, env.owner.token).getNode(`${inbox}/d`)).body.content).toEqual({})
    expect(expectStatus(await c.status(consumerId), 200).body).toMatchObject({ leased: 1, acked: 0 })
    expect(expectStatus(await reactNext(c, item, 'now'), 200).body).toMatchObject({ acked: true, next: { item: null } })
  })

  it('a pull that fails after the reaction: the reaction stands and is settled, nextError says why, and the item it could not bring goes back', async () => {
    // The next item's context is over 2 MB ([CTX18]): its pull fails, and it goes back.
    const { sub, inbox, c, consumerId } = await subscription({ Hydration: { all: { Children: '{event.parent}', Limit: 100 } } })
    expectStatus(await api(env.ts.url, env.owner.token).putNode(`${inbox}/small`, 'Document', {}), 201)
    const { item } = await pull(env.ts.url, env.owner.token, sub, 'w')
    for (let i = 0; i < 3; i++) expectStatus(await api(env.ts.url, env.owner.token).putNode(`${inbox}/big${i}`, 'Document', { Text: `${i}`.repeat(900_000) }), 201)
    const r = expectStatus(await reactNext(c, item, 'kept'), 200).body
    expect(r).toMatchObject({ repeated: false, acked: true, outcome: { status: 'committed' } })
    expect(r.next).toBeUndefined()
    expect(r.nextError).toMatchObject({ code: 'contextual_too_many_rows' })
    expect(r.nextError!.message).toContain('2 MB')
    expect((await api(env.ts.url, env.owner.token).getNode(`${inbox}/small`)).body.content).toEqual({ Note: 'kept' })
    expect(expectStatus(await c.status(consumerId), 200).body).toMatchObject({ acked: 1, leased: 0, pending: 3 })
  })

  it('the pull is of the item\'s own consumer, its parameters with it', async () => {
    const { sub, inbox, c, consumerId: laned } = await subscription({ Parameters: { Lane: { Type: 'string', Required: true } } }, { Lane: 'x' })
    for (const d of ['a', 'b']) expectStatus(await api(env.ts.url, env.owner.token).putNode(`${inbox}/${d}`, 'Document', {}), 201)
    const first = expectStatus(await c.next(sub, 'w', { params: { Lane: 'x' }, waitSeconds: 10 }), 200).body
    expect(first.consumerId).toBe(laned)
    const r = expectStatus(await reactNext(c, first.item!, 'a'), 200).body
    expect(r.next).toMatchObject({ consumerId: laned, item: { event: { path: `${inbox}/b` } } })
  })

  it('a storage failure in the pull answers the reaction with nextError internal, not a 500: the reaction is saved and settled', async () => {
    const { sub, inbox, c, consumerId } = await subscription()
    expectStatus(await api(env.ts.url, env.owner.token).putNode(`${inbox}/d`, 'Document', {}), 201)
    const { item } = await pull(env.ts.url, env.owner.token, sub, 'w')
    const svc = env.ts.server.contextual as unknown as { call: (c: { op: string }) => Promise<unknown> }
    const call = svc.call
    svc.call = (x) => (x.op === 'lease' ? Promise.reject(new Error('Connection terminated unexpectedly')) : call.call(svc, x))
    try {
      const r = expectStatus(await reactNext(c, item, 'saved'), 200).body
      expect(r).toMatchObject({ acked: true, outcome: { status: 'committed' }, nextError: { code: 'internal' } })
      expect(r.nextError!.message).toContain('pull with next')
    } finally {
      svc.call = call
    }
    expect((await api(env.ts.url, env.owner.token).getNode(`${inbox}/d`)).body.content).toEqual({ Note: 'saved' })
    expect(expectStatus(await c.status(consumerId), 200).body).toMatchObject({ acked: 1, leased: 0 })
  })

  it('a client gone while the pull waits: the reaction stands and is settled, the wait ends, and the pull leased nothing for it', async () => {
    const { sub, inbox, c, consumerId } = await subscription()
    expectStatus(await api(env.ts.url, env.owner.token).putNode(`${inbox}/d`, 'Document', {}), 201)
    const { item } = await pull(env.ts.url, env.owner.token, sub, 'w')
    const svc = env.ts.server.contextual
    await abandonWhileWaiting(env.ts.url, env.owner.token, 'react', { causationToken: item.reactions[0]!.causationToken, params: { Note: 'kept' }, ack: true, next: true, waitSeconds: 60 }, () => svc.waiting)
    expect((await api(env.ts.url, env.owner.token).getNode(`${inbox}/d`)).body.content).toEqual({ Note: 'kept' })
    expectStatus(await api(env.ts.url, env.owner.token).putNode(`${inbox}/late`, 'Document', {}), 201)
    const got = expectStatus(await c.next(sub, 'w', { waitSeconds: 10 }), 200).body
    expect(got.item).toMatchObject({ event: { path: `${inbox}/late` }, attempt: 1 })
    expect(expectStatus(await c.status(consumerId), 200).body).toMatchObject({ acked: 1, leased: 1 })
  })

  it('another user cannot use the call to pull from the worker\'s consumer: their token is denied before anything', async () => {
    const { sub, inbox, c } = await subscription()
    expectStatus(await api(env.ts.url, env.owner.token).putNode(`${inbox}/d`, 'Document', {}), 201)
    const { item } = await pull(env.ts.url, env.owner.token, sub, 'w')
    const mallory = await signup(env.ts.url)
    const r = await ctx(env.ts.url, mallory.token).react(item, 'annotate', { Note: 'x' }, { ack: true, next: true })
    expect([r.status, errorCode(r)]).toEqual([403, 'reaction_denied'])
    expect((r.body as Reacted).next).toBeUndefined()
    expect(expectStatus(await reactNext(c, item, 'mine'), 200).body).toMatchObject({ acked: true })
  })
})
