import fc from 'fast-check'
import { getEventListeners } from 'node:events'
import { describe, expect, it, vi } from 'vitest'
import { createContextualClient, fenceOf, isContextualClientError, type ContextualClientError, type WorkDecision, type WorkItem } from '../../shared/index.js'
import { api, expectStatus, signup } from '../helpers/index.js'
import { definition, ownedServer, putSubscription } from './contextual-helpers.js'

async function failure(p: Promise<unknown>): Promise<ContextualClientError> {
  try {
    await p
  } catch (e) {
    if (isContextualClientError(e)) return e
    throw e
  }
  throw new Error('expected a ContextualClientError')
}

/** Weft's answer refusing a call with `code` (what a busy or failing server, or a refused call, sends back). */
function refusal(status: number, code: string, message = code): Promise<Response> {
  return Promise.resolve(new Response(JSON.stringify({ error: { code, message } }), { status }))
}

describe('[CTX40] the typed contextual client (shared/contextual-client.ts) against a real server', () => {
  const env = ownedServer()

  /** The owner's client, its calls going through `through` (which may answer in the server's place). */
  function ownerVia(through: typeof fetch) {
    return createContextualClient({ baseUrl: env.ts.url, token: env.owner.token, fetch: through })
  }

  async function setup(n: string, overrides: Parameters<typeof definition>[1] = {}) {
    const sub = `${env.space}/s${n}`
    const prefix = `${env.space}/in${n}`
    expectStatus(await putSubscription(env.ts.url, env.owner.token, sub, definition(prefix, overrides)), 201)
    expectStatus(await api(env.ts.url, env.owner.token).putNode(prefix, 'Document', {}), 201)
    const c = createContextualClient({ baseUrl: `${env.ts.url}/`, token: env.owner.token })
    const { consumerId } = await c.next({ subscription: sub, consumer: 'c1' })
    return { sub, prefix, c, consumerId }
  }

  /** The times of the first three pulls a loop (`work` or `items`) makes, each answered by `answer`; stopped at the third. */
  async function pullTimes(loop: 'work' | 'items', req: { subscription: string; consumer: string; waitSeconds: number }, answer: typeof fetch): Promise<number[]> {
    const at: number[] = []
    const stop = new AbortController()
    const c = ownerVia((url, init) => {
      if (String(url).endsWith('/next')) at.push(performance.now())
      if (at.length === 3) stop.abort()
      return answer(url, init)
    })
    if (loop === 'work') expect(await c.work(req, () => ({ ack: true }), { signal: stop.signal })).toEqual({ reacted: 0, acked: 0, nacked: 0, lost: 0 })
    else for await (const _ of c.items(req, { signal: stop.signal })) expect.unreachable()
    expect(at).toHaveLength(3)
    return at
  }

  it('[CTX40] a long poll waiting before the event arrives gets it; react and ack through typed calls', async () => {
    const { sub, prefix, c, consumerId } = await setup('1')
    const polling = c.next({ subscription: sub, consumer: 'c1', waitSeconds: 30 })
    expectStatus(await api(env.ts.url, env.owner.token).putNode(`${prefix}/d`, 'Document', { Title: 'x' }), 201)
    const { item } = await polling
    expect(item?.event.path).toBe(`${prefix}/d`)
    const reply = item!.reactions.find((r) => r.name === 'reply')!
    const out = await c.react(reply.causationToken, { Text: 'typed' })
    expect(out.outcome.status).toBe('committed')
    expect(out.repeated).toBe(false)
    expect(await c.extend({ ...fenceOf(consumerId, item!), seconds: 30 })).toHaveProperty('expiresAt')
    expect(await c.ack(fenceOf(consumerId, item!))).toEqual({ ok: true, state: 'acked', repeated: false })
    const st = await c.status(consumerId)
    expect([st.acked, st.leased, st.lag]).toEqual([1, 0, st.headVersion - st.cursor])
    expect((await api(env.ts.url, env.owner.token).getNode(`${prefix}/d/reply`)).status).toBe(200)
  })

  it('[CTX47] the typed client reacts and settles in one call', async () => {
    const { sub, prefix, c, consumerId } = await setup('47')
    expectStatus(await api(env.ts.url, env.owner.token).putNode(`${prefix}/d`, 'Document', {}), 201)
    const { item } = await c.next({ subscription: sub, consumer: 'c1', waitSeconds: 10 })
    const out = await c.react(item!.reactions.find((r) => r.name === 'reply')!.causationToken, { Text: 'typed' }, { ack: true })
    expect([out.outcome.status, out.repeated, out.acked]).toEqual(['committed', false, true])
    expect((await c.status(consumerId)).acked).toBe(1)
    // [CTX49] And lists its consumers wherever they are.
    expect((await c.mine()).consumers.find((x) => x.consumerId === consumerId)).toMatchObject({ subscription: sub, current: true })
  })

  it('[CTX52] the typed client reacts, settles and takes the next item in one call; the long poll of that pull gets its own time', async () => {
    const { sub, prefix, c, consumerId } = await setup('52')
    expectStatus(await api(env.ts.url, env.owner.token).putNode(`${prefix}/d`, 'Document', {}), 201)
    const { item } = await c.next({ subscription: sub, consumer: 'c1', waitSeconds: 10 })
    const reply = item!.reactions.find((r) => r.name === 'reply')!
    // The client's ordinary allowance (1 ms) is far shorter than any call; the pull's wait is added
    // to it, as for next: the call is still open while the server's pull waits for an event.
    const short = createContextualClient({ baseUrl: env.ts.url, token: env.owner.token, timeoutMs: 1 })
    const answer = short.react(reply.causationToken, { Text: 'typed' }, { ack: true, next: true, waitSeconds: 30 })
    await vi.waitFor(() => expect(env.ts.server.contextual.waiting).toBe(1), { timeout: 60_000, interval: 20 })
    expectStatus(await api(env.ts.url, env.owner.token).putNode(`${prefix}/e`, 'Document', {}), 201)
    const out = await answer
    expect([out.outcome.status, out.acked]).toEqual(['committed', true])
    expect(out.next?.consumerId).toBe(consumerId)
    // The reply the reaction made is a Post (not an event); the next Document is.
    expect(out.next?.item?.event.path).toBe(`${prefix}/e`)
    expect(await failure(c.react(reply.causationToken, {}, { next: true }))).toMatchObject({ code: 'invalid_request', status: 0 })
  })

  it('[CTX52] work(): each item settled as the handler decides (a reaction with its next pull in one request, an ack, a nack, a throw, a reaction not offered), until the signal stops it', async () => {
    const { sub, prefix, consumerId } = await setup('52w')
    const sent: { op: string; body: Record<string, unknown> }[] = []
    const c = ownerVia((url, init) => {
      sent.push({ op: String(url).split('/').pop()!, body: JSON.parse(String(init?.body ?? '{}')) as Record<string, unknown> })
      return fetch(url, init)
    })
    for (const d of ['react', 'ack', 'later', 'boom', 'nope', 'nothing']) expectStatus(await api(env.ts.url, env.owner.token).putNode(`${prefix}/${d}`, 'Document', {}), 201)
    const stop = new AbortController()
    const seen: string[] = []
    const working = c.work(
      { subscription: sub, consumer: 'c1', waitSeconds: 1 },
      (item) => {
        const name = item.event.path.split('/').pop()!
        seen.push(name)
        if (name === 'react') return { react: 'reply', params: { Text: 'by work' } }
        if (name === 'ack') return { ack: true }
        if (name === 'later') return { nack: true, delaySeconds: 600, error: 'later, please' }
        if (name === 'nope') return { react: 'nope' }
        // A JavaScript handler that answers nothing usable: nacked with what it should answer.
        if (name === 'nothing') return undefined as unknown as WorkDecision
        throw new Error('boom')
      },
      { signal: stop.signal },
    )
    // Three attempts each for the throw, the reaction not offered and the answer of nothing, then dead letters.
    await vi.waitFor(async () => expect(await c.status(consumerId)).toMatchObject({ acked: 2, dead: 3, pending: 1, leased: 0 }), { timeout: 60_000, interval: 100 })
    stop.abort()
    expect(await working).toEqual({ reacted: 1, acked: 1, nacked: 10, lost: 0 })
    expect(seen.filter((x) => x === 'boom')).toHaveLength(3)
    expect(seen.filter((x) => x === 'react' || x === 'ack' || x === 'later')).toEqual(['react', 'ack', 'later'])
    expect((await api(env.ts.url, env.owner.token).getNode(`${prefix}/react/reply`)).body.content).toEqual({ Text: 'by work' })
    const errors = Object.fromEntries((await c.status(consumerId)).deadLetters.map((d) => [d.path.split('/').pop(), d.lastError]))
    expect(errors.boom).toBe('boom')
    expect(errors.nope).toContain('Reaction nope is not offered')
    expect(errors.nothing).toContain('it returns { react: name, params }')
    // The reaction settled its item and asked for the next in the same request: no ack for it.
    const reacts = sent.filter((x) => x.op === 'react')
    expect(reacts).toHaveLength(1)
    expect(reacts[0]!.body).toMatchObject({ ack: true, next: true })
    expect(sent.filter((x) => x.op === 'ack')).toHaveLength(1)
  })

  it('[CTX52] work(): a reaction whose answer was lost is sent again and resolves its outcome (one commit); an item settled elsewhere meanwhile is counted lost', async () => {
    const { sub, prefix, consumerId } = await setup('52x')
    let lose = true
    const c = ownerVia(async (url, init) => {
      const res = await fetch(url, init)
      // The first reaction reaches the server; its answer does not come back.
      if (lose && String(url).endsWith('/react')) {
        lose = false
        // The item its pull leased would come back when its lease ends (30 s): handed back now.
        const { next } = (await res.json()) as { next?: { consumerId: string; item: WorkItem | null } }
        if (next?.item) await createContextualClient({ baseUrl: env.ts.url, token: env.owner.token }).nack({ ...fenceOf(next.consumerId, next.item), delaySeconds: 0 })
        throw new TypeError('socket hang up')
      }
      return res
    })
    expectStatus(await api(env.ts.url, env.owner.token).putNode(`${prefix}/once`, 'Document', {}), 201)
    expectStatus(await api(env.ts.url, env.owner.token).putNode(`${prefix}/elsewhere`, 'Document', {}), 201)
    const stop = new AbortController()
    const working = c.work(
      { subscription: sub, consumer: 'c1', waitSeconds: 1 },
      async (item, id) => {
        if (item.event.path.endsWith('/once')) return { react: 'reply', params: { Text: 'once' } }
        // Settled by another hand before the worker's own settle (handed back, pulled again under a
        // new lease token, acked there: a repeat of the worker's own fence would answer `repeated`,
        // [CTX60]); the worker is told to stop meanwhile, and still carries out and counts the
        // settle it was answered.
        const other = createContextualClient({ baseUrl: env.ts.url, token: env.owner.token })
        await other.nack({ ...fenceOf(id, item), delaySeconds: 0 })
        const again = await other.next({ subscription: sub, consumer: 'c1' })
        expect(again.item?.event.eventId).toBe(item.event.eventId)
        await other.ack(fenceOf(again.consumerId, again.item!))
        stop.abort()
        return { ack: true }
      },
      { signal: stop.signal },
    )
    expect(await working).toEqual({ reacted: 1, acked: 0, nacked: 0, lost: 1 })
    expect(await c.status(consumerId)).toMatchObject({ acked: 2, leased: 0, pending: 0 })
    expect((await api(env.ts.url, env.owner.token).getNode(`${prefix}/once/reply`)).body.content).toEqual({ Text: 'once' })
  })

  it('[CTX52] work(): a stop while a reaction is in flight still carries it out and counts it, and so does a stop during the wait of the pull it came with', async () => {
    const { sub, prefix, consumerId } = await setup('52s')
    const stop = new AbortController()
    const c = createContextualClient({
      baseUrl: env.ts.url,
      token: env.owner.token,
      // The stop lands as the reaction with its pull goes out: that request is cut before it is sent.
      fetch: (url, init) => {
        if (String(url).endsWith('/react') && String(init?.body).includes('"next":true')) stop.abort()
        return fetch(url, init)
      },
    })
    expectStatus(await api(env.ts.url, env.owner.token).putNode(`${prefix}/one`, 'Document', {}), 201)
    const summary = await c.work({ subscription: sub, consumer: 'c1', waitSeconds: 30 }, () => ({ react: 'reply', params: { Text: 'decided' } }), { signal: stop.signal })
    expect(summary).toEqual({ reacted: 1, acked: 0, nacked: 0, lost: 0 })
    expect((await api(env.ts.url, env.owner.token).getNode(`${prefix}/one/reply`)).body.content).toEqual({ Text: 'decided' })
    expect(await c.status(consumerId)).toMatchObject({ acked: 1, leased: 0, pending: 0 })

    // The reaction commits, and its pull waits for a next item: stopped there, the reaction is counted.
    const later = new AbortController()
    expectStatus(await api(env.ts.url, env.owner.token).putNode(`${prefix}/two`, 'Document', {}), 201)
    const working = createContextualClient({ baseUrl: env.ts.url, token: env.owner.token }).work(
      { subscription: sub, consumer: 'c1', waitSeconds: 30 },
      () => ({ react: 'reply', params: { Text: 'then waits' } }),
      { signal: later.signal },
    )
    await vi.waitFor(async () => expect(await c.status(consumerId)).toMatchObject({ acked: 2, leased: 0 }), { timeout: 60_000, interval: 50 })
    await vi.waitFor(() => expect(env.ts.server.contextual.waiting).toBe(1), { timeout: 60_000, interval: 20 })
    later.abort()
    expect(await working).toEqual({ reacted: 1, acked: 0, nacked: 0, lost: 0 })
  })

  it('[CTX52] work(): a nack the server would refuse, or parameters that are not JSON, nack the item with the reason instead of ending the worker', async () => {
    const { sub, prefix, consumerId } = await setup('52n')
    for (const d of ['delay', 'error', 'bigint']) expectStatus(await api(env.ts.url, env.owner.token).putNode(`${prefix}/${d}`, 'Document', {}), 201)
    const stop = new AbortController()
    const c = createContextualClient({ baseUrl: env.ts.url, token: env.owner.token })
    const working = c.work(
      { subscription: sub, consumer: 'c1', waitSeconds: 1 },
      (item) => {
        const name = item.event.path.split('/').pop()!
        if (name === 'delay') return { nack: true, delaySeconds: 3600 }
        if (name === 'error') return { nack: true, error: 42 } as unknown as WorkDecision
        return { react: 'reply', params: { Text: 'x', n: 1n } }
      },
      { signal: stop.signal },
    )
    await vi.waitFor(async () => expect(await c.status(consumerId)).toMatchObject({ dead: 3, pending: 0, leased: 0 }), { timeout: 60_000, interval: 100 })
    stop.abort()
    expect(await working).toEqual({ reacted: 0, acked: 0, nacked: 9, lost: 0 })
    const errors = Object.fromEntries((await c.status(consumerId)).deadLetters.map((d) => [d.path.split('/').pop(), d.lastError]))
    expect(errors.delay).toContain("a nack's delaySeconds is a number from 0 to 900")
    expect(errors.error).toContain("a nack's error is a string")
    expect(errors.bigint).toContain('cannot be sent as JSON')
    expect((await api(env.ts.url, env.owner.token).getNode(`${prefix}/bigint/reply`)).status).toBe(404)
  })

  it('[CTX52] work(): a reaction denied while the item is still leased hands the item back with the reason (redelivered, then reacted), not counted lost', async () => {
    const { sub, prefix, consumerId } = await setup('52d')
    let deny = true
    const c = ownerVia((url, init) => {
      // The server's answer when a grant changed between the pull and the reaction.
      if (deny && String(url).endsWith('/react')) {
        deny = false
        return refusal(403, 'reaction_denied', 'The reaction is not authorized.')
      }
      return fetch(url, init)
    })
    expectStatus(await api(env.ts.url, env.owner.token).putNode(`${prefix}/one`, 'Document', {}), 201)
    const stop = new AbortController()
    const attempts: number[] = []
    const working = c.work(
      { subscription: sub, consumer: 'c1', waitSeconds: 1 },
      (item) => {
        attempts.push(item.attempt)
        return { react: 'reply', params: { Text: `attempt ${item.attempt}` } }
      },
      { signal: stop.signal },
    )
    await vi.waitFor(async () => expect(await c.status(consumerId)).toMatchObject({ acked: 1, leased: 0, pending: 0 }), { timeout: 60_000, interval: 100 })
    stop.abort()
    expect(await working).toEqual({ reacted: 1, acked: 0, nacked: 1, lost: 0 })
    expect(attempts).toEqual([1, 2])
    expect((await api(env.ts.url, env.owner.token).getNode(`${prefix}/one/reply`)).body.content).toEqual({ Text: 'attempt 2' })
  })

  it('[CTX52] work() goes on past an item too large to deliver, a long-poll bound reached and a passing server failure (each retried or pulled past)', async () => {
    const { sub, prefix, consumerId } = await setup('52t')
    // The answers a busy or failing server gives, once each, in front of the real one.
    const injected: Record<string, [number, string][]> = { next: [[422, 'contextual_too_many_rows'], [429, 'rate_limited']], ack: [[500, 'internal']] }
    const c = ownerVia((url, init) => {
      const once = injected[String(url).split('/').pop()!]?.shift()
      if (once) return refusal(once[0], once[1])
      return fetch(url, init)
    })
    expectStatus(await api(env.ts.url, env.owner.token).putNode(`${prefix}/one`, 'Document', {}), 201)
    const stop = new AbortController()
    const retries: string[] = []
    const onRetry = (e: ContextualClientError, pauseMs: number) => {
      retries.push(`${e.code} ${pauseMs}`)
      throw new Error('a listener that fails is not the loop\'s failure')
    }
    const working = c.work({ subscription: sub, consumer: 'c1', waitSeconds: 1 }, () => ({ ack: true }), { signal: stop.signal, onRetry })
    await vi.waitFor(async () => expect(await c.status(consumerId)).toMatchObject({ acked: 1, leased: 0, pending: 0 }), { timeout: 60_000, interval: 100 })
    stop.abort()
    expect(await working).toEqual({ reacted: 0, acked: 1, nacked: 0, lost: 0 })
    expect(Object.values(injected).flat()).toEqual([])
    // The worker is told of each transient failure it retried (the too-large item is not one).
    expect(retries).toEqual(['rate_limited 250', 'internal 250'])
  })

  it('[CTX52] work() and items() pull past an item too large to deliver after a pause that grows while the answer repeats', async () => {
    for (const loop of ['work', 'items'] as const) {
      // A server that answers every pull so (a definition whose bound no item fits, say).
      const at = await pullTimes(loop, { subscription: `${env.space}/any`, consumer: 'c1', waitSeconds: 1 }, () => refusal(422, 'contextual_too_many_rows', 'too large'))
      // Lower bounds only: each pause is at least what it is, on any machine.
      expect([at[1]! - at[0]! >= 900, at[2]! - at[1]! >= 1900], loop).toEqual([true, true])
    }
  })

  it('[CTX52] work(): told to stop, a settle the server never answers is given up after the grace period, not after the call timeout', async () => {
    const { sub, prefix } = await setup('52h')
    expectStatus(await api(env.ts.url, env.owner.token).putNode(`${prefix}/one`, 'Document', {}), 201)
    const stop = new AbortController()
    const calls: string[] = []
    const c = createContextualClient({
      baseUrl: env.ts.url,
      token: env.owner.token,
      // Ten minutes per call: only the grace period (10 s) can end the hung settles.
      timeoutMs: 600_000,
      fetch: (url, init) => {
        const op = String(url).split('/').pop()!
        calls.push(op)
        if (op === 'next') return fetch(url, init)
        // Past the pull, the server hangs: no answer until the caller gives up.
        return new Promise<Response>((_, reject) => init?.signal?.addEventListener('abort', () => reject(new Error('aborted')), { once: true }))
      },
    })
    const summary = await c.work(
      { subscription: sub, consumer: 'c1', waitSeconds: 1 },
      () => {
        stop.abort()
        return { react: 'reply', params: { Text: 'never answered' } }
      },
      { signal: stop.signal },
    )
    expect(summary).toEqual({ reacted: 0, acked: 0, nacked: 0, lost: 0 })
    // The reaction went alone (the stop came first), once: no second send after the grace ran out.
    expect(calls).toEqual(['next', 'react'])
  }, 120_000)

  it('[CTX52] work() lets go of the caller\'s signal when it ends: a supervisor restarting it on one signal piles up no listeners', async () => {
    const stop = new AbortController()
    const c = ownerVia(() => refusal(403, 'forbidden', 'no'))
    for (let i = 0; i < 3; i++) expect(await failure(c.work({ subscription: `${env.space}/any`, consumer: 'c1' }, () => ({ ack: true }), { signal: stop.signal }))).toMatchObject({ code: 'forbidden' })
    expect(getEventListeners(stop.signal, 'abort')).toHaveLength(0)
  })

  it('[CTX52] work() and items() with waitSeconds 0 pause after an empty pull instead of asking again at once', async () => {
    const { sub } = await setup('52z')
    for (const loop of ['work', 'items'] as const) {
      const at = await pullTimes(loop, { subscription: sub, consumer: 'c1', waitSeconds: 0 }, (url, init) => fetch(url, init))
      // A lower bound only: the pause is at least what it is, on any machine.
      expect(at[2]! - at[1]!, loop).toBeGreaterThanOrEqual(900)
    }
  })

  it('[CTX40] failures are ContextualClientErrors with the stable code: stale_lease, unauthorized, not_found, forbidden', async () => {
    const { sub, prefix, c, consumerId } = await setup('2')
    expectStatus(await api(env.ts.url, env.owner.token).putNode(`${prefix}/d`, 'Document', {}), 201)
    const { item } = await c.next({ subscription: sub, consumer: 'c1', waitSeconds: 10 })
    expect(await c.nack({ ...fenceOf(consumerId, item!), error: 'later' })).toEqual({ state: 'pending' })
    expect(await failure(c.ack(fenceOf(consumerId, item!)))).toMatchObject({ code: 'stale_lease', status: 409 })
    const anon = createContextualClient({ baseUrl: env.ts.url, token: 'nope' })
    expect(await failure(anon.status(consumerId))).toMatchObject({ code: 'unauthorized', status: 401 })
    const other = createContextualClient({ baseUrl: env.ts.url, token: (await signup(env.ts.url)).token })
    expect(await failure(other.status(consumerId))).toMatchObject({ code: 'not_found', status: 404 })
    expect(await failure(other.next({ subscription: sub, consumer: 'c1' }))).toMatchObject({ code: 'forbidden' })
    expect(await failure(c.react('A'.repeat(200)))).toMatchObject({ code: 'reaction_denied', status: 403 })
    // [CTX46] delete: not another's; the owner's, once.
    expect(await failure(other.delete(consumerId))).toMatchObject({ code: 'not_found', status: 404 })
    expect(await c.delete(consumerId)).toEqual({ deleted: true })
    expect(await failure(c.status(consumerId))).toMatchObject({ code: 'not_found', status: 404 })
    expect(await failure(c.delete(consumerId))).toMatchObject({ code: 'not_found', status: 404 })
  })

  it('[CTX40] an aborted long poll ends with code aborted; a server that is not there is network; items() stops on abort', async () => {
    const { sub, prefix, c } = await setup('3')
    const ctl = new AbortController()
    const polling = failure(c.next({ subscription: sub, consumer: 'c1', waitSeconds: 60 }, { signal: ctl.signal }))
    ctl.abort()
    expect((await polling).code).toBe('aborted')
    const gone = createContextualClient({ baseUrl: 'http://127.0.0.1:1', token: env.owner.token })
    expect(await failure(gone.status('x'))).toMatchObject({ code: 'network', status: 0 })
    // The iterator yields items as they come and ends when its signal aborts.
    const stop = new AbortController()
    const seen: string[] = []
    const loop = (async () => {
      for await (const { consumerId, item } of c.items({ subscription: sub, consumer: 'c1', waitSeconds: 30 }, { signal: stop.signal })) {
      seen.push(item.event.path)
      await c.ack(fenceOf(consumerId, item))
      if (seen.length === 2) stop.abort()
      }
    })()
    await api(env.ts.url, env.owner.token).putNode(`${prefix}/a`, 'Document', {})
    await api(env.ts.url, env.owner.token).putNode(`${prefix}/b`, 'Document', {})
    await loop
    expect(seen).toEqual([`${prefix}/a`, `${prefix}/b`])
  })

  it('[CTX40] seeded property: the client refuses locally exactly the inputs the server refuses as invalid_request', async () => {
    const { consumerId } = await setup('4')
    let sent = 0
    const c = ownerVia((...a) => {
      sent++
      return fetch(...a)
    })
    const field = fc.oneof(fc.string({ maxLength: 120 }), fc.integer({ min: -3, max: 200 }), fc.double(), fc.constant(undefined), fc.constant(null), fc.boolean())
    await fc.assert(
      fc.asyncProperty(fc.record({ eventId: field, leaseToken: field, attempt: field, delaySeconds: field, error: field }, { requiredKeys: [] }), async (raw) => {
        const body = { consumerId, ...raw }
        const server = await api(env.ts.url, env.owner.token).post<{ error?: { code: string } }>('/api/contextual/nack', body)
        const before = sent
        const local = await c.nack(body as never).then(
          () => null,
          (e: ContextualClientError) => e,
        )
        const serverInvalid = server.status === 400
        expect(local !== null && local.status === 0).toBe(serverInvalid)
        if (serverInvalid) expect(sent).toBe(before)
      }),
      { seed: 40, numRuns: 50 },
    )
  })
})

/**
 * [CTX52] work() with junk from its handler (found by an outside look, stop 42): each used to end
 * the worker with a TypeError, the item leased until its lease ran out; a handler that never
 * answered held work() for ever after the stop.
 */
describe('[CTX52] work() whatever its handler does', () => {
  const env = ownedServer()

  async function setup(n: string) {
    const sub = `${env.space}/s${n}`
    const prefix = `${env.space}/in${n}`
    expectStatus(await putSubscription(env.ts.url, env.owner.token, sub, definition(prefix)), 201)
    expectStatus(await api(env.ts.url, env.owner.token).putNode(prefix, 'Document', {}), 201)
    const c = createContextualClient({ baseUrl: env.ts.url, token: env.owner.token })
    const { consumerId } = await c.next({ subscription: sub, consumer: 'c1' })
    expectStatus(await api(env.ts.url, env.owner.token).putNode(`${prefix}/d`, 'Document', {}), 201)
    return { sub, c, consumerId }
  }

  const junk: Record<string, () => WorkDecision> = {
    'a nack whose delaySeconds is a BigInt': () => ({ nack: true, delaySeconds: 1n }) as unknown as WorkDecision,
    'a cyclic object': () => {
      const d: Record<string, unknown> = {}
      d.self = d
      return d as unknown as WorkDecision
    },
    'a throw of an object with no prototype': () => {
      throw Object.create(null)
    },
    'a throw of an Error whose message is a number': () => {
      const e = new Error('x')
      ;(e as unknown as { message: unknown }).message = 42
      throw e
    },
    'a nack whose error holds a NUL and half an emoji': () => ({ nack: true, error: 'bad\u0000reason \ud83d' }),
  }

  for (const [what, handle] of Object.entries(junk)) {
    it(`${what}: the item is nacked with a storable reason, and the worker goes on`, async () => {
      const { sub, c, consumerId } = await setup(what.replace(/[^a-z]/gi, '').slice(0, 24))
      const stop = new AbortController()
      const out = await c.work({ subscription: sub, consumer: 'c1', waitSeconds: 1 }, () => {
        stop.abort()
        return handle()
      }, { signal: stop.signal })
      expect(out).toEqual({ reacted: 0, acked: 0, nacked: 1, lost: 0 })
      const status = await c.status(consumerId)
      expect(status.leased).toBe(0)
    })
  }

  it('a handler that never answers: the stop ends work(), the item left to its lease', async () => {
    const { sub, c, consumerId } = await setup('hang')
    const stop = new AbortController()
    let called!: () => void
    const asked = new Promise<void>((r) => (called = r))
    const working = c.work({ subscription: sub, consumer: 'c1', waitSeconds: 1 }, () => {
      called()
      return new Promise<WorkDecision>(() => undefined)
    }, { signal: stop.signal })
    await asked
    stop.abort()
    expect(await working).toEqual({ reacted: 0, acked: 0, nacked: 0, lost: 0 })
    expect((await c.status(consumerId)).leased).toBe(1)
  })
})
