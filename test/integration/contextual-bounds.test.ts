import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { CONTEXTUAL_BOUNDS, type JsonObject } from '../../shared/index.js'
import { CONSUMERS_PER_USER, WAITING_PER_USER } from '../../sync-server/contextual/contextual-service.js'
import { api, createSpace, errorCode, expectStatus, freshDatabase, grantRole, signup, startTestServer, waitFor, type TestServer } from '../helpers/index.js'
import { ctx, ownedServer, putSubscription } from './contextual-helpers.js'

/**
 * Contextual subscriptions after an outside look (each found by a crafted request against a real
 * server): bounds on what one user can make the server hold and compute, the idempotency key per
 * consumer and principal, stale evidence after a re-drive, and what counts and dead letters tell.
 */
describe('contextual subscriptions: bounds and leaks found by review', () => {
  const env = ownedServer()
  const patchReaction = { annotate: { Command: 'patch', Target: '{event.path}', Parameters: { Note: { Type: 'string' } } } }
  let n = 0
  /** A fresh subscription in the owner's space over a fresh inbox. */
  async function subscription(extra: JsonObject = {}, token = env.owner.token, space = env.space): Promise<{ sub: string; inbox: string }> {
    const inbox = `${space}/in${++n}`
    expectStatus(await api(env.ts.url, token).putNode(inbox, 'Document', {}), 201)
    const sub = `${space}/sub${n}`
    expectStatus(
      await putSubscription(env.ts.url, token, sub, { Operation: `op${n}`, Events: { NodeTypes: ['Document'], Kinds: ['Created'], PathPrefix: inbox }, Reactions: patchReaction, Limits: { LeaseSeconds: 60 }, ...extra }),
      201,
    )
    return { sub, inbox }
  }

  it('[CTX3] a definition is bounded in size and in each reaction\'s parameters (its compile ran on every write, and one user\'s definitions filled the heap)', async () => {
    const many = Object.fromEntries(Array.from({ length: CONTEXTUAL_BOUNDS.maxParameters + 1 }, (_, i) => [`P${i}`, { Type: 'json' }]))
    const base = { Operation: 'big', Events: { NodeTypes: ['Document'], Kinds: ['Created'], PathPrefix: env.space } }
    const tooMany = await putSubscription(env.ts.url, env.owner.token, `${env.space}/big1`, { ...base, Reactions: { r: { Command: 'patch', Target: '{event.path}', Parameters: many } } })
    expect(errorCode(tooMany)).toBe('contextual_invalid_definition')
    // Every part within its own bound, the whole over 64 kB.
    const params = Object.fromEntries(Array.from({ length: CONTEXTUAL_BOUNDS.maxParameters }, (_, i) => [`P${i}${'x'.repeat(58)}`, { Type: 'string', MaxLength: 100 }]))
    const reactions = Object.fromEntries(Array.from({ length: 32 }, (_, i) => [`r${i}`, { Command: 'patch', Target: `{event.path}${'/x'.repeat(490)}`, Parameters: params }]))
    const huge = await putSubscription(env.ts.url, env.owner.token, `${env.space}/big2`, { ...base, Reactions: reactions })
    expect(errorCode(huge)).toBe('contextual_invalid_definition')
    expect(JSON.stringify(huge.body)).toContain('64 kB')
  })

  it('[CTX18] a work item whose context is over 2 MB is not delivered: a 422, the lease given back, a dead letter after the last attempt with the reason', async () => {
    const { sub, inbox } = await subscription({ Hydration: { all: { Children: '{event.parent}', Limit: 100 } }, Limits: { LeaseSeconds: 60, MaxAttempts: 2 } })
    const c = ctx(env.ts.url, env.owner.token)
    const id = expectStatus(await c.next(sub, 'w'), 200).body.consumerId
    for (let i = 0; i < 3; i++) expectStatus(await api(env.ts.url, env.owner.token).putNode(`${inbox}/big${i}`, 'Document', { Text: `${i}`.repeat(900_000) }), 201)
    const first = await c.next(sub, 'w', { waitSeconds: 5 })
    expect(errorCode(first)).toBe('contextual_too_many_rows')
    expect((await c.status(id)).body).toMatchObject({ leased: 0 })
    for (let i = 0; i < 6 && (await c.status(id)).body.dead === 0; i++) await c.next(sub, 'w')
    const status = expectStatus(await c.status(id), 200).body as { dead: number; deadLetters: { lastError: string }[] }
    expect(status.dead).toBeGreaterThan(0)
    expect(status.deadLetters[0]!.lastError).toContain('over 2 MB')
  })

  it('[CTX23] the idempotency key is per consumer and principal: another consumer\'s (or another person\'s) outcome neither answers nor blocks a reaction', async () => {
    const bob = await signup(env.ts.url)
    const bobSpace = await createSpace(env.ts.url, bob.token)
    await grantRole(env.ts.url, env.owner.token, env.space, bob.userId, 'Viewer')
    const out = `${env.space}/out${++n}`
    expectStatus(await api(env.ts.url, env.owner.token).putNode(out, 'Document', {}), 201)
    const { sub, inbox } = await subscription({
      Parameters: { Out: { Type: 'string', Required: true } },
      Reactions: { reply: { Command: 'create', Target: '{param.Out}/{event.name}-reply', NodeType: 'Document', Parameters: { Text: { Type: 'string' } } } },
    })
    const a = ctx(env.ts.url, env.owner.token)
    const b = ctx(env.ts.url, bob.token)
    for (const [c, consumer, Out] of [[a, 'wa', out], [a, 'wa', env.space], [b, 'wb', bobSpace]] as const) expectStatus(await c.next(sub, consumer, { params: { Out } }), 200)
    expectStatus(await api(env.ts.url, env.owner.token).putNode(`${inbox}/doc`, 'Document', {}), 201)
    const item = async (c: typeof a, consumer: string, Out: string) => (await c.next(sub, consumer, { params: { Out }, waitSeconds: 5 })).body.item!
    const ib = await item(b, 'wb', bobSpace)
    const ia = await item(a, 'wa', out)
    const ia2 = await item(a, 'wa', env.space)
    // Bob, a Viewer of the space, reacts first, in his own space.
    expect(expectStatus(await b.react(ib, 'reply', { Text: 'bob' }), 200).body.outcome.status).toBe('committed')
    for (const [it, Out] of [[ia, out], [ia2, env.space]] as const) {
      const r = expectStatus(await a.react(it, 'reply', { Text: 'ann' }), 200).body
      expect(r).toMatchObject({ repeated: false, outcome: { status: 'committed', path: `${Out}/doc-reply` } })
      expectStatus(await api(env.ts.url, env.owner.token).getNode(`${Out}/doc-reply`), 200)
    }
    // A repeat still resolves its own outcome.
    expect(expectStatus(await a.react(ia, 'reply', { Text: 'ann' }), 200).body).toMatchObject({ repeated: true, outcome: { path: `${out}/doc-reply` } })
  })

  it('[CTX24] a causation token of a dead-lettered attempt commits nothing after a re-drive (the attempt number repeats, the lease does not)', async () => {
    const { sub, inbox } = await subscription({ Limits: { LeaseSeconds: 60, MaxAttempts: 1 } })
    const c = ctx(env.ts.url, env.owner.token)
    const id = expectStatus(await c.next(sub, 'w'), 200).body.consumerId
    expectStatus(await api(env.ts.url, env.owner.token).putNode(`${inbox}/doc`, 'Document', { Note: 'before' }), 201)
    const old = (await c.next(sub, 'w', { waitSeconds: 5 })).body.item!
    expect(expectStatus(await c.nack(id, old, 0, 'boom'), 200).body.state).toBe('dead')
    expect(expectStatus(await c.redrive(id), 200).body.redriven).toBe(1)
    const fresh = (await c.next(sub, 'w', { waitSeconds: 5 })).body.item!
    expect(fresh.attempt).toBe(old.attempt)
    expect(errorCode(await c.react(old, 'annotate', { Note: 'stale' }))).toBe('reaction_denied')
    expect((await api(env.ts.url, env.owner.token).getNode(`${inbox}/doc`)).body.content).toEqual({ Note: 'before' })
    expect(expectStatus(await c.react(fresh, 'annotate', { Note: 'fresh' }), 200).body.outcome.status).toBe('committed')
  })

  it('[CTX8] a subscription over a place its consumer cannot read gives it nothing to count, nor its status page to an Admin who cannot read there', async () => {
    const mallory = await signup(env.ts.url)
    const mSpace = await createSpace(env.ts.url, mallory.token)
    // Mallory's subscription watches the owner's space, which she cannot read.
    const hidden = `${env.space}/hr${++n}`
    expectStatus(await api(env.ts.url, env.owner.token).putNode(hidden, 'Document', {}), 201)
    expectStatus(await putSubscription(env.ts.url, mallory.token, `${mSpace}/spy`, { Operation: 'spy', Events: { NodeTypes: ['Document'], Kinds: ['Created', 'Updated'], PathPrefix: hidden }, Reactions: patchReaction }), 201)
    const m = ctx(env.ts.url, mallory.token)
    expect(errorCode(await m.next(`${mSpace}/spy`, 'w'))).toBe('forbidden')
    expect(JSON.stringify((await m.next(`${mSpace}/spy`, 'w')).body)).not.toContain('skipped')

    // Carol (an Editor of the owner's space) reacts from her own inbox; the owner, Admin of the
    // subscription, cannot read Carol's space.
    const carol = await signup(env.ts.url)
    const cSpace = await createSpace(env.ts.url, carol.token)
    await grantRole(env.ts.url, env.owner.token, env.space, carol.userId, 'Editor')
    const sub = `${env.space}/shared${n}`
    expectStatus(await putSubscription(env.ts.url, env.owner.token, sub, { Operation: 'shared', Events: { NodeTypes: ['Document'], Kinds: ['Created'], PathPrefix: cSpace }, Reactions: patchReaction, Limits: { MaxAttempts: 1 } }), 201)
    const c = ctx(env.ts.url, carol.token)
    const id = expectStatus(await c.next(sub, 'carol'), 200).body.consumerId
    expectStatus(await api(env.ts.url, carol.token).putNode(`${cSpace}/secret-deal`, 'Document', {}), 201)
    const item = (await c.next(sub, 'carol', { waitSeconds: 5 })).body.item!
    await c.nack(id, item, 0, 'price 42M')
    const own = expectStatus(await c.status(id), 200).body as { deadLetters: unknown[] }
    expect(own.deadLetters).toHaveLength(1)
    const page = await api(env.ts.url, env.owner.token).post('/api/contextual/consumers', { subscription: sub })
    expect(errorCode(page)).toBe('forbidden')
    expect(JSON.stringify(page.body)).not.toContain('42M')
    // Once the owner may read there, the page lists Carol's consumer and its dead letter.
    await grantRole(env.ts.url, carol.token, cSpace, env.owner.userId, 'Viewer')
    const shown = expectStatus(await api(env.ts.url, env.owner.token).post<{ consumers: { deadLetters: unknown[] }[] }>('/api/contextual/consumers', { subscription: sub }), 200)
    expect(shown.body.consumers[0]!.deadLetters).toHaveLength(1)
  })

  it('[CTX11] a node that stands where a subscription stood does not inherit its consumers', async () => {
    const carol = await signup(env.ts.url)
    await grantRole(env.ts.url, env.owner.token, env.space, carol.userId, 'Editor')
    const { sub, inbox } = await subscription({ Limits: { MaxAttempts: 1 } })
    const c = ctx(env.ts.url, carol.token)
    const id = expectStatus(await c.next(sub, 'carol'), 200).body.consumerId
    expectStatus(await api(env.ts.url, env.owner.token).putNode(`${inbox}/doc`, 'Document', {}), 201)
    await c.nack(id, (await c.next(sub, 'carol', { waitSeconds: 5 })).body.item!, 0, 'card declined')
    expectStatus(await api(env.ts.url, env.owner.token).deleteNode(sub), 204)
    // Another definition at the same path.
    expectStatus(await putSubscription(env.ts.url, env.owner.token, sub, { Operation: 'other', Events: { NodeTypes: ['Document'], Kinds: ['Updated'], PathPrefix: inbox }, Reactions: patchReaction }), 201)
    const page = expectStatus(await api(env.ts.url, env.owner.token).post<{ consumers: unknown[] }>('/api/contextual/consumers', { subscription: sub }), 200)
    expect(page.body.consumers).toEqual([])
    expect(errorCode(await ctx(env.ts.url, env.owner.token).redrive(id))).toBe('not_found')
    expect(errorCode(await ctx(env.ts.url, env.owner.token).delete(id))).toBe('not_found')
    // Nor does a reader who is no Admin learn it exists (forbidden would tell; it was).
    const vic = await signup(env.ts.url)
    await grantRole(env.ts.url, env.owner.token, env.space, vic.userId, 'Viewer')
    expect(errorCode(await ctx(env.ts.url, vic.token).redrive(id))).toBe('not_found')
    expect(errorCode(await ctx(env.ts.url, vic.token).delete(id))).toBe('not_found')
    // Carol's own consumer is still hers to delete.
    expect(expectStatus(await c.delete(id), 200).body).toEqual({ deleted: true })
    // The same definition made again there by another Admin: the consumers made before it are not its.
    const dave = await signup(env.ts.url)
    await grantRole(env.ts.url, env.owner.token, env.space, dave.userId, 'Admin')
    const first = { Operation: 'same', Events: { NodeTypes: ['Document'], Kinds: ['Created'], PathPrefix: inbox }, Reactions: patchReaction, Limits: { LeaseSeconds: 60, MaxAttempts: 1 } }
    expectStatus(await api(env.ts.url, env.owner.token).deleteNode(sub), 204)
    expectStatus(await putSubscription(env.ts.url, env.owner.token, sub, first), 201)
    const carols = expectStatus(await c.next(sub, 'carol2'), 200).body.consumerId
    expectStatus(await api(env.ts.url, env.owner.token).deleteNode(sub), 204)
    expectStatus(await putSubscription(env.ts.url, dave.token, sub, first), 201)
    const davePage = expectStatus(await api(env.ts.url, dave.token).post<{ consumers: unknown[] }>('/api/contextual/consumers', { subscription: sub }), 200)
    expect(davePage.body.consumers).toEqual([])
    expect(errorCode(await ctx(env.ts.url, dave.token).redrive(carols))).toBe('not_found')
    expect(errorCode(await ctx(env.ts.url, dave.token).delete(carols))).toBe('not_found')
    // Carol still sees her own.
    expectStatus(await c.status(carols), 200)
    // A plain node there: no subscription at all.
    expectStatus(await api(env.ts.url, env.owner.token).deleteNode(sub), 204)
    expectStatus(await api(env.ts.url, env.owner.token).putNode(sub, 'Document', {}), 201)
    expect(errorCode(await api(env.ts.url, env.owner.token).post('/api/contextual/consumers', { subscription: sub }))).toBe('not_found')
  })

  it(`[CTX42] one user has at most ${WAITING_PER_USER} long polls waiting, on every transport together; another user's are not held up`, async () => {
    const { sub } = await subscription()
    const svc = env.ts.server.contextual
    const owner = { kind: 'user' as const, userId: env.owner.userId as never }
    const stop = new AbortController()
    const waiting = Array.from({ length: WAITING_PER_USER }, (_, i) => svc.next(owner, { subscription: sub, consumer: `lp${i}`, waitSeconds: 30 }, stop.signal))
    try {
      await expect.poll(async () => errorCode(await ctx(env.ts.url, env.owner.token).next(sub, 'one-more', { waitSeconds: 30 })), { timeout: 20_000 }).toBe('rate_limited')
      const other = await signup(env.ts.url)
      const theirs = await subscription({}, other.token, await createSpace(env.ts.url, other.token))
      expect(expectStatus(await ctx(env.ts.url, other.token).next(theirs.sub, 'w', { waitSeconds: 1 }), 200).body.item).toBeNull()
    } finally {
      stop.abort()
      await Promise.all(waiting)
    }
    expect(expectStatus(await ctx(env.ts.url, env.owner.token).next(sub, 'after', { waitSeconds: 1 }), 200).body.item).toBeNull()
  })

  it('request JSON nested thousands deep is a 400 on HTTP as on MCP, never a 500', async () => {
    const { sub } = await subscription()
    const deep = `${'{"a":'.repeat(5000)}1${'}'.repeat(5000)}`
    const post = (op: string, body: string) =>
      fetch(`${env.ts.url}/api/contextual/${op}`, { method: 'POST', headers: { authorization: `Bearer ${env.owner.token}`, 'content-type': 'application/json' }, body }).then(async (r) => ({ status: r.status, body: (await r.json()) as { error?: { code: string } } }))
    for (const [op, body] of [['next', `{"subscription":${JSON.stringify(sub)},"consumer":"w","params":${deep}}`], ['react', `{"causationToken":"x","params":${deep}}`]]) {
      const r = await post(op!, body!)
      expect([r.status, r.body.error?.code]).toEqual([400, 'invalid_request'])
    }
    expectStatus(await ctx(env.ts.url, env.owner.token).next(sub, 'w'), 200)
  })
})

describe('contextual subscriptions on PostgreSQL: numbers as a worker sends them', () => {
  let ts: TestServer
  let db: Awaited<ReturnType<typeof freshDatabase>>
  beforeAll(async () => {
    db = await freshDatabase('weft_ctxbounds_')
    ts = await startTestServer({ config: { databaseUrl: db.url } })
  })
  afterAll(async () => {
    await ts.cleanup()
    await db.drop()
  })

  it('[CTX13] a nack with a fractional delay (jittered backoff) is taken, as on SQLite', async () => {
    const owner = await signup(ts.url)
    const space = await createSpace(ts.url, owner.token)
    expectStatus(await api(ts.url, owner.token).putNode(`${space}/in`, 'Document', {}), 201)
    const sub = `${space}/sub`
    expectStatus(await putSubscription(ts.url, owner.token, sub, { Operation: 'jitter', Events: { NodeTypes: ['Document'], Kinds: ['Created'], PathPrefix: `${space}/in` }, Reactions: { noop: { Command: 'patch', Target: '{event.path}' } } }), 201)
    const c = ctx(ts.url, owner.token)
    const id = expectStatus(await c.next(sub, 'w'), 200).body.consumerId
    expectStatus(await api(ts.url, owner.token).putNode(`${space}/in/doc`, 'Document', {}), 201)
    const item = (await c.next(sub, 'w', { waitSeconds: 5 })).body.item!
    expect(expectStatus(await c.nack(id, item, 2.7134, 'retry'), 200).body.state).toBe('pending')
  })
})

describe('[CTX46] consumers per account are bounded, and deleted by their owner or an Admin', () => {
  const env = ownedServer()

  async function subscription(n: string) {
    const inbox = `${env.space}/cin${n}`
    expectStatus(await api(env.ts.url, env.owner.token).putNode(inbox, 'Document', {}), 201)
    const sub = `${env.space}/csub${n}`
    expectStatus(
      await putSubscription(env.ts.url, env.owner.token, sub, {
        Operation: `c${n}`,
        Events: { NodeTypes: ['Document'], Kinds: ['Created'], PathPrefix: inbox },
        Reactions: { annotate: { Command: 'patch', Target: '{event.path}', Parameters: { Note: { Type: 'string' } } } },
        Limits: { LeaseSeconds: 60, MaxInFlight: 2 },
      }),
      201,
    )
    return { sub, inbox }
  }

  it('[CTX46] the 1,001st consumer of one account is refused with what to do; the existing ones keep working; a deleted one makes room', async () => {
    const { sub } = await subscription('1')
    const bob = await signup(env.ts.url)
    await grantRole(env.ts.url, env.owner.token, env.space, bob.userId, 'Viewer')
    const svc = env.ts.server.contextual
    const principal = { kind: 'user', userId: bob.userId } as Parameters<typeof svc.next>[0]
    const ids: string[] = []
    for (let i = 0; i < CONSUMERS_PER_USER; i++) ids.push((await svc.next(principal, { subscription: sub, consumer: `w${i}` })).consumerId)
    expect(new Set(ids).size).toBe(CONSUMERS_PER_USER)
    const b = ctx(env.ts.url, bob.token)
    const refused = await b.next(sub, 'one-more')
    expect([refused.status, errorCode(refused)]).toEqual([422, 'contextual_too_many_consumers'])
    expect(JSON.stringify(refused.body)).toContain('delete one you no longer use')
    // Others are not bound by Bob's consumers; Bob's existing consumers still pull.
    expectStatus(await ctx(env.ts.url, env.owner.token).next(sub, 'owners-own'), 200)
    expect(expectStatus(await b.next(sub, 'w7'), 200).body.consumerId).toBe(ids[7])
    expect(expectStatus(await b.delete(ids[3]!), 200).body).toEqual({ deleted: true })
    expectStatus(await b.next(sub, 'one-more'), 200)
    expect(errorCode(await b.next(sub, 'and-another'))).toBe('contextual_too_many_consumers')
  })

  it('[CTX49] mine lists your consumers over every subscription, a page at a time, marking those whose subscription is gone, changed or hidden; deleting one frees its place', async () => {
    const kept = await subscription('49a')
    const gone = await subscription('49b')
    const changed = await subscription('49c')
    const carol = await signup(env.ts.url)
    const grant = await grantRole(env.ts.url, env.owner.token, env.space, carol.userId, 'Viewer')
    const c = ctx(env.ts.url, carol.token)
    const idOf = async (sub: string, name: string) => expectStatus(await c.next(sub, name), 200).body.consumerId
    const ids = { kept: await idOf(kept.sub, 'k'), gone: await idOf(gone.sub, 'g'), changed: await idOf(changed.sub, 'c') }
    // The owner's own consumer is not Carol's to see.
    await ctx(env.ts.url, env.owner.token).next(kept.sub, 'owners')
    expectStatus(await api(env.ts.url, env.owner.token).deleteNode(gone.sub), 204)
    expectStatus(await api(env.ts.url, env.owner.token).patchNode(changed.sub, { Operation: 'c49c_v2' }), 200)
    const mine = async (body: JsonObject) => expectStatus(await api(env.ts.url, carol.token).post<{ consumers: Array<{ consumerId: string; subscription: string; current: boolean }>; total: number; next: string | null }>('/api/contextual/mine', body), 200).body
    const all = await mine({})
    expect(all.total).toBe(3)
    expect(all.next).toBeNull()
    expect(Object.fromEntries(all.consumers.map((x) => [x.consumerId, [x.subscription, x.current]]))).toEqual({
      [ids.kept]: [kept.sub, true],
      [ids.gone]: [gone.sub, false],
      [ids.changed]: [changed.sub, false],
    })
    // A page at a time, in id order, each page after the last id of the one before; no empty last page.
    const seen: string[] = []
    let after: string | null = ''
    let pages = 0
    while (after !== null) {
      const page = await mine({ after, limit: 1 })
      pages++
      expect(page.consumers.length).toBe(1)
      seen.push(...page.consumers.map((x) => x.consumerId))
      after = page.next
    }
    expect(pages).toBe(3)
    expect(seen).toEqual([...all.consumers.map((x) => x.consumerId)].sort())
    // The kept subscription moved: its consumer is the same one when pulled at the new path, and
    // current there (not reported dead at the old path).
    const moved = `${env.space}/csub49a-moved`
    expectStatus(await api(env.ts.url, env.owner.token).post(`/api/nodes/${kept.sub}/move`, { to: moved }), 200)
    expect((await mine({})).consumers.find((x) => x.consumerId === ids.kept)).toMatchObject({ subscription: kept.sub, current: false })
    expect(await idOf(moved, 'k')).toBe(ids.kept)
    expect((await mine({})).consumers.find((x) => x.consumerId === ids.kept)).toMatchObject({ subscription: moved, current: true })
    // Hidden from her: no longer current.
    expectStatus(await api(env.ts.url, env.owner.token).deleteNode(grant), 204)
    expect((await mine({})).consumers.every((x) => !x.current)).toBe(true)
    expect(expectStatus(await c.delete(ids.gone), 200).body).toEqual({ deleted: true })
    expect((await mine({})).total).toBe(2)
    for (const bad of [{ limit: 0 }, { limit: 101 }, { after: 'x'.repeat(101) }, { extra: 1 }]) expect(errorCode(await api(env.ts.url, carol.token).post('/api/contextual/mine', bad))).toBe('invalid_request')
    expect((await api(env.ts.url).post('/api/contextual/mine', {})).status).toBe(401)
  })

  it("[CTX46] delete: its leases end at once, its outcomes stay; another's consumer only by an Admin of the subscription; nobody else learns it exists", async () => {
    const { sub, inbox } = await subscription('2')
    const editor = await signup(env.ts.url)
    const viewer = await signup(env.ts.url)
    const stranger = await signup(env.ts.url)
    await grantRole(env.ts.url, env.owner.token, env.space, editor.userId, 'Editor')
    await grantRole(env.ts.url, env.owner.token, env.space, viewer.userId, 'Viewer')
    const e = ctx(env.ts.url, editor.token)
    const consumerId = expectStatus(await e.next(sub, 'mine'), 200).body.consumerId
    expectStatus(await api(env.ts.url, env.owner.token).putNode(`${inbox}/a`, 'Document', {}), 201)
    expectStatus(await api(env.ts.url, env.owner.token).putNode(`${inbox}/b`, 'Document', {}), 201)
    const a = expectStatus(await e.next(sub, 'mine'), 200).body.item!
    const b = expectStatus(await e.next(sub, 'mine'), 200).body.item!
    const reacted = expectStatus(await e.react(a, 'annotate', { Note: 'before' }), 200).body

    // Someone who cannot read the subscription: not found, as for a consumer that never was.
    expect([(await ctx(env.ts.url, stranger.token).delete(consumerId)).status, errorCode(await ctx(env.ts.url, stranger.token).delete(consumerId))]).toEqual([404, 'not_found'])
    expect(errorCode(await ctx(env.ts.url, stranger.token).delete('no-such-consumer'))).toBe('not_found')
    // [CTX63] A reader of it who is not its Admin: not found too, as its status answers them (a
    // refusal by name told that the consumer exists).
    expect(errorCode(await ctx(env.ts.url, viewer.token).delete(consumerId))).toBe('not_found')
    expect(expectStatus(await e.status(consumerId), 200).body.leased).toBe(2)

    // The Admin deletes the editor's consumer.
    expect(expectStatus(await ctx(env.ts.url, env.owner.token).delete(consumerId), 200).body).toEqual({ deleted: true })
    expect(errorCode(await e.status(consumerId))).toBe('not_found')
    // The held leases are void: no ack, nack or extend; no new reaction; the outcome already made stays.
    expect(errorCode(await e.ack(consumerId, b))).toBe('not_found')
    expect(errorCode(await e.nack(consumerId, b))).toBe('not_found')
    expect(errorCode(await e.extend(consumerId, b))).toBe('not_found')
    expect(errorCode(await e.react(b, 'annotate', { Note: 'after' }))).toBe('reaction_denied')
    expect((await api(env.ts.url, env.owner.token).getNode(`${inbox}/b`)).body.content).toEqual({})
    expect(expectStatus(await e.react(a, 'annotate', { Note: 'before' }), 200).body).toEqual({ outcome: reacted.outcome, repeated: true })
    expect(errorCode(await ctx(env.ts.url, env.owner.token).delete(consumerId))).toBe('not_found')

    // A consumer deleted between its read and its counts: status is not_found, the page leaves it out (a 500 before).
    const brief = expectStatus(await e.next(sub, 'brief'), 200).body.consumerId
    const storage = env.ts.server.storage
    const original = storage.contextual.bind(storage)
    storage.contextual = async (call) => {
      if (call.op === 'status' && call.consumerId === brief) await original({ op: 'deleteConsumer', id: brief })
      return original(call)
    }
    try {
      expect(errorCode(await e.status(brief))).toBe('not_found')
      const mine = expectStatus(await e.next(sub, 'brief'), 200).body.consumerId
      const page = expectStatus(await api(env.ts.url, editor.token).post<{ consumers: { consumerId: string }[] }>('/api/contextual/consumers', { subscription: sub }), 200)
      expect(page.body.consumers.map((x) => x.consumerId)).not.toContain(mine)
    } finally {
      storage.contextual = original
    }

    // A long poll waiting on a consumer the Admin deletes ends with not_found; it does not make it again.
    const other = expectStatus(await e.next(sub, 'polling'), 200).body.consumerId
    const svc = env.ts.server.contextual
    const before = svc.waiting
    const polling = e.next(sub, 'polling', { waitSeconds: 30 })
    await waitFor(() => svc.waiting === before + 1, { description: 'the long poll waits' })
    expectStatus(await ctx(env.ts.url, env.owner.token).delete(other), 200)
    const ended = await polling
    expect([ended.status, errorCode(ended)]).toEqual([404, 'not_found'])
    expect(errorCode(await e.status(other))).toBe('not_found')

    // Pulling under the name again makes it again, at the head: only new events come.
    const again = expectStatus(await e.next(sub, 'mine'), 200).body
    expect(again).toEqual({ consumerId, item: null })
    expectStatus(await api(env.ts.url, env.owner.token).putNode(`${inbox}/c`, 'Document', {}), 201)
    expect(expectStatus(await e.next(sub, 'mine'), 200).body.item).toMatchObject({ event: { path: `${inbox}/c` }, attempt: 1 })
  })
})
