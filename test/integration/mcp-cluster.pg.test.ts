import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { MeshNode } from '../../shared/index.js'
import { api, createSpace, expectStatus, metricValue, signup, startInstances, waitFor, type Instances } from '../helpers/index.js'
import { ctx, definition, putSubscription, type NextBody } from './contextual-helpers.js'
import { must } from './mcp-helpers.js'

/**
 * [MCP5] Stateless behind a load balancer: two instances on one PostgreSQL (and Redis), and an
 * MCP client whose every POST goes to the next instance in turn (no stickiness). The agent loop
 * runs across both: no request depends on a session one instance holds.
 */
const METRICS = 'mcp-cluster-metrics'

/** The contextual long polls waiting on one instance (`/metrics`). */
const waitingPolls = (url: string): Promise<number> => metricValue(url, METRICS, 'weft_contextual_waiting_polls')

describe('MCP across instances (PostgreSQL, issue 19)', () => {
  let set: Instances
  beforeAll(async () => {
    set = await startInstances(2, { METRICS_TOKEN: METRICS })
  }, 240_000)
  afterAll(async () => set?.cleanup(), 60_000)

  it('[MCP5] an agent loop whose requests alternate between two instances: next → react → ack', { timeout: 180_000 }, async () => {
    const [a, b] = set.servers.map((s) => s.url) as [string, string]
    const owner = await signup(a)
    const space = await createSpace(a, owner.token)
    const sub = `${space}/sub`
    expectStatus(await putSubscription(a, owner.token, sub, definition(`${space}/inbox`)), 201)
    expectStatus(await api(a, owner.token).putNode(`${space}/inbox`, 'Document', {}), 201)

    // The round-robin "load balancer": every POST of the one client goes to the other instance.
    const hits = new Map<string, number>()
    let turn = 0
    const balanced: typeof fetch = (input, init) => {
      const base = [a, b][turn++ % 2]!
      hits.set(base, (hits.get(base) ?? 0) + 1)
      return fetch(new URL('/mcp', base), init)
    }
    const agent = new Client({ name: 'balanced', version: '1' })
    await agent.connect(new StreamableHTTPClientTransport(new URL('/mcp', a), { fetch: balanced, requestInit: { headers: { authorization: `Bearer ${owner.token}` } } }))

    const { consumerId } = await must<NextBody>(agent, 'weft_contextual_next', { subscription: sub, consumer: 'w1' })
    expectStatus(await api(b, owner.token).putNode(`${space}/inbox/t1`, 'Document', { Title: 'from b' }), 201)
    const { item } = await must<NextBody>(agent, 'weft_contextual_next', { subscription: sub, consumer: 'w1', waitSeconds: 20 })
    expect(item?.event.path).toBe(`${space}/inbox/t1`)
    const reply = item!.reactions.find((r) => r.name === 'reply')!
    const reacted = await must<{ outcome: { status: string }; repeated: boolean }>(agent, 'weft_contextual_react', { causationToken: reply.causationToken, params: { Text: 'done' } })
    expect(reacted).toMatchObject({ repeated: false, outcome: { status: 'committed' } })
    // The repeat lands on the other instance and resolves the same persisted outcome.
    expect((await must<{ repeated: boolean }>(agent, 'weft_contextual_react', { causationToken: reply.causationToken, params: { Text: 'done' } })).repeated).toBe(true)
    expect(await must(agent, 'weft_contextual_ack', { consumerId, eventId: item!.event.eventId, leaseToken: item!.leaseToken, attempt: item!.attempt })).toEqual({ ok: true, state: 'acked', repeated: false })
    expect(await must(agent, 'weft_contextual_status', { consumerId })).toMatchObject({ acked: 1, leased: 0 })
    expect((await must<MeshNode>(agent, 'weft_get', { path: `${space}/inbox/t1/reply` })).content).toEqual({ Text: 'done' })
    await agent.close()
    // Both instances answered several of the one client's requests.
    expect(hits.get(a)).toBeGreaterThanOrEqual(3)
    expect(hits.get(b)).toBeGreaterThanOrEqual(3)
  })

  it('[CTX43] a cancel that reaches the other instance ends the long poll the first is running; the next event goes to a live pull', { timeout: 180_000 }, async () => {
    const [a, b] = set.servers.map((s) => s.url) as [string, string]
    const owner = await signup(a)
    const space = await createSpace(a, owner.token)
    const sub = `${space}/polled`
    const inbox = `${space}/polled-in`
    expectStatus(await putSubscription(a, owner.token, sub, definition(inbox, { Limits: { LeaseSeconds: 30, MaxInFlight: 1, MaxAttempts: 3 } })), 201)
    expectStatus(await api(a, owner.token).putNode(inbox, 'Document', {}), 201)
    // Raw JSON-RPC, as a load balancer passes it: each POST to the instance named.
    const rpc = (base: string, body: object) =>
      fetch(new URL('/mcp', base), {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', authorization: `Bearer ${owner.token}` },
        body: JSON.stringify({ jsonrpc: '2.0', ...body }),
      })
    const next = (id: number, waitSeconds?: number) => ({ id, method: 'tools/call', params: { name: 'weft_contextual_next', arguments: { subscription: sub, consumer: 'w1', ...(waitSeconds ? { waitSeconds } : {}) } } })
    type Answer = { result: { structuredContent: NextBody } }
    expect(((await (await rpc(a, next(1))).json()) as Answer).result.structuredContent.item).toBeNull()

    // A 60 s long poll on a; its client's cancel lands on b (told again until the poll answers:
    // the first may come before a registered the call).
    let answered = false
    const polling = rpc(a, next(42, 60)).then(async (r) => {
      answered = true
      return (await r.json()) as Answer
    })
    const gaveUp = Date.now() + 40_000
    while (!answered && Date.now() < gaveUp) {
      expect((await rpc(b, { method: 'notifications/cancelled', params: { requestId: 42, reason: 'the model gave up' } })).status).toBe(202)
      await new Promise((r) => setTimeout(r, 300))
    }
    expect(answered, 'the poll on a ended by the cancel sent to b, long before its 60 s').toBe(true)
    expect((await polling).result.structuredContent.item).toBeNull()
    // The event that lands now goes to the next pull, first attempt: the cancelled call took nothing.
    expectStatus(await api(b, owner.token).putNode(`${inbox}/late`, 'Document', {}), 201)
    const got = ((await (await rpc(b, next(43, 20))).json()) as Answer).result.structuredContent
    expect(got.item).toMatchObject({ event: { path: `${inbox}/late` }, attempt: 1 })
  })

  it('[CTX48] a nack on one instance wakes the long poll of the same consumer waiting on the other (through Redis)', { timeout: 180_000 }, async () => {
    const [a, b] = set.servers.map((s) => s.url) as [string, string]
    const owner = await signup(a)
    const space = await createSpace(a, owner.token)
    const sub = `${space}/woken`
    const inbox = `${space}/woken-in`
    expectStatus(await putSubscription(a, owner.token, sub, definition(inbox, { Limits: { LeaseSeconds: 120, MaxInFlight: 2, MaxAttempts: 3 } })), 201)
    expectStatus(await api(a, owner.token).putNode(inbox, 'Document', {}), 201)
    const ctxOn = (base: string) => ctx(base, owner.token)
    const { consumerId } = expectStatus(await ctxOn(a).next(sub), 200).body
    expectStatus(await api(a, owner.token).putNode(`${inbox}/e`, 'Document', {}), 201)
    const first = expectStatus(await ctxOn(b).next(sub, 'w1', { waitSeconds: 20 }), 200).body.item!
    // A second worker's poll on a: not full, nothing pending, no commit coming; only the nack on b
    // (which makes the event due again) can end its wait before its 60 s.
    const polling = ctxOn(a).next(sub, 'w1', { waitSeconds: 60 })
    await waitFor(async () => (await waitingPolls(a)) === 1, { description: 'the poll on a waiting' })
    const nacked = Date.now()
    expectStatus(await ctxOn(b).nack(consumerId, first, 0, 'the model timed out'), 200)
    const got = expectStatus(await polling, 200).body.item
    expect(got).toMatchObject({ event: { eventId: first.event.eventId }, attempt: 2 })
    // Which mechanism ended the wait, not how fast: unwoken, the poll looks again only when its 60 s
    // run out (and then leases the item all the same); woken, it answers at once (milliseconds).
    expect(Date.now() - nacked, 'answered by the wake-up, not at the end of its 60 s wait').toBeLessThan(30_000)
    expect(await waitingPolls(a)).toBe(0)
  })
})
