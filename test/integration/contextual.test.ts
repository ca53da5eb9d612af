import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { JsonObject } from '../../shared/index.js'
import { api, createSpace, errorCode, expectStatus, grantRole, signup, startTestServer, stockProvider, waitFor, type TestServer, type TestUser } from '../helpers/index.js'
import { abandonWhileWaiting, ctx, definition, pull, putSubscription, answeredThread, subscriptionWithConsumer } from './contextual-helpers.js'
import { createCode, run, terminal, waitForStatus } from './activities-helpers.js'

describe('contextual agent subscriptions (issue 19)', () => {
  let ts: TestServer
  let owner: TestUser
  let space = ''
  beforeAll(async () => {
    ts = await startTestServer()
    owner = await signup(ts.url)
    space = await createSpace(ts.url, owner.token)
  })
  afterAll(async () => ts.cleanup())

  /** A subscription `s{n}` over `in{n}` (made), its consumer made by a first pull of `token`'s caller. */
  const setup = (n: string, token = owner.token, overrides: JsonObject = {}) => subscriptionWithConsumer(ts.url, owner.token, space, n, token, overrides)

  it('[CTX1] [CTX4] a definition is compiled on write; its Hash is the content hash of the canonical definition', async () => {
    const a = expectStatus(await putSubscription(ts.url, owner.token, `${space}/subA`, definition(`${space}/inbox`)), 201).body as { content: { Hash: string } }
    expect(a.content.Hash).toMatch(/^[0-9a-f]{64}$/)
    // The same definition with its keys in another order has the same identity.
    const reordered = Object.fromEntries(Object.entries(definition(`${space}/inbox`)).reverse())
    const b = expectStatus(await putSubscription(ts.url, owner.token, `${space}/subB`, reordered), 201).body as { content: { Hash: string } }
    expect(b.content.Hash).toBe(a.content.Hash)
    // A caller cannot write the Hash.
    expect((await api(ts.url, owner.token).patchNode(`${space}/subA`, { Hash: 'x' })).status).toBe(403)
  })

  it('[CTX2] [CTX3] [CTX18] a definition that breaks a bound is refused with its named error, nothing written', async () => {
    const many = (n: number) => Object.fromEntries(Array.from({ length: n }, (_, i) => [`q${i}`, { Get: '{event.path}' }]))
    const reactions = (n: number) => Object.fromEntries(Array.from({ length: n }, (_, i) => [`r${i}`, { Command: 'delete', Target: '{event.path}' }]))
    const cases: Array<[object, string]> = [
      [{ Hydration: many(17) }, 'contextual_too_many_queries'],
      [{ Reactions: reactions(33) }, 'contextual_too_many_reactions'],
      [{ Hydration: { q: { Children: '{event.parent}', Limit: 101 } } }, 'contextual_too_many_rows'],
      [{ Limits: { LeaseSeconds: 4 } }, 'contextual_lease_out_of_range'],
      [{ Limits: { LeaseSeconds: 901 } }, 'contextual_lease_out_of_range'],
      [{ Limits: { MaxInFlight: 9 } }, 'contextual_in_flight_out_of_range'],
      [{ Limits: { MaxInFlight: 0 } }, 'contextual_in_flight_out_of_range'],
      [{ Limits: { MaxAttempts: 0 } }, 'contextual_attempts_out_of_range'],
      [{ Reactions: { r: { Command: 'create', Target: '{event.path}/x' } } }, 'contextual_invalid_definition'],
    ]
    for (const [override, code] of cases) {
      const r = await putSubscription(ts.url, owner.token, `${space}/bad`, definition(`${space}/inbox`, override as never))
      expect([r.status, errorCode(r)], JSON.stringify(override)).toEqual([422, code])
      expect((await api(ts.url, owner.token).getNode(`${space}/bad`)).status).toBe(404)
    }
    // 16 queries and 32 reactions are within bounds.
    expectStatus(await putSubscription(ts.url, owner.token, `${space}/edge`, definition(`${space}/inbox`, { Hydration: many(16), Reactions: reactions(32) })), 201)
  })

  it('[CTX5] [CTX6] [CTX7] [CTX15] [CTX16] [CTX17] [CTX19] [CTX29] next leases one matching event with a fresh hydration and the reactions the caller may run', async () => {
    const { sub, c, first } = await setup('7')
    expect(first.item).toBeNull()
    await api(ts.url, owner.token).putNode(`${space}/elsewhere`, 'Document', { a: 1 })
    await api(ts.url, owner.token).putNode(`${space}/in7/a`, 'Post', { not: 'a document' })
    await api(ts.url, owner.token).putNode(`${space}/in7/doc1`, 'Document', { Title: 'one' })
    const { consumerId, item } = await pull(ts.url, owner.token, sub)
    expect(consumerId).toBe(first.consumerId)
    expect(item.event).toMatchObject({ path: `${space}/in7/doc1`, kind: 'Created', eventId: String(item.event.version) })
    expect(item.attempt).toBe(1)
    expect(item.leaseToken).toMatch(/^[A-Za-z0-9_-]{16,}$/)
    expect(item.contextHead).toBeGreaterThanOrEqual(item.event.version)
    expect(item.incarnation).toBe(1)
    expect((item.hydration.source as { content: unknown }).content).toEqual({ Title: 'one' })
    expect((item.hydration.siblings as unknown[]).length).toBe(1)
    expect(item.reactions.map((r) => r.name).sort()).toEqual(['annotate', 'reply'])
    // In flight: one leased, a second pull finds nothing else.
    expect(expectStatus(await c.next(sub), 200).body.item).toBeNull()
    const st = expectStatus(await c.status(consumerId), 200).body
    expect(st).toMatchObject({ leased: 1, pending: 0, acked: 0, dead: 0 })
    expectStatus(await c.ack(consumerId, item), 200)
    expect(expectStatus(await c.status(consumerId), 200).body).toMatchObject({ leased: 0, acked: 1 })
  })

  it('[CTX20] [CTX21] [CTX23] [CTX27] [CTX32] react commits once; a repeat returns the persisted outcome; the token is opaque and sealed', async () => {
    const { sub, c } = await setup('21')
    await api(ts.url, owner.token).putNode(`${space}/in21/one`, 'Document', {})
    const { consumerId, item } = await pull(ts.url, owner.token, sub)
    const r1 = expectStatus(await c.react(item, 'reply', { Text: 'hello' }), 200).body
    expect(r1.outcome).toMatchObject({ status: 'committed', path: `${space}/in21/one/reply`, reaction: 'reply' })
    expect(r1.repeated).toBe(false)
    // [CTX32] The nested command's request id is derived, distinct from the root request's.
    expect(r1.outcome.childRequestId).toMatch(/^[0-9a-f]{32}$/)
    expect(r1.outcome.childRequestId).not.toBe(r1.outcome.rootRequestId)
    const reply = (await api(ts.url, owner.token).getNode(`${space}/in21/one/reply`)).body
    expect(reply.content).toEqual({ Text: 'hello' })
    const r2 = expectStatus(await c.react(item, 'reply', { Text: 'other text' }), 200).body
    // [CTX59] Other parameters than the committed ones: said, and not applied.
    expect(r2).toEqual({ outcome: r1.outcome, repeated: true, paramsDiffer: true, message: expect.stringContaining('yours were not applied') })
    expect(expectStatus(await c.react(item, 'reply', { Text: 'hello' }), 200).body).toEqual({ outcome: r1.outcome, repeated: true })
    expect((await api(ts.url, owner.token).getNode(`${space}/in21/one/reply`)).body.content).toEqual({ Text: 'hello' })
    // A token changed in one character is not a token.
    const tok = item.reactions.find((r) => r.name === 'reply')!.causationToken
    const flipped = tok.slice(0, 20) + (tok[20] === 'A' ? 'B' : 'A') + tok.slice(21)
    const bad = await c.reactToken(flipped, { Text: 'x' })
    expect([bad.status, errorCode(bad)]).toEqual([403, 'reaction_denied'])
    // Bad parameters: a named error, nothing committed.
    await api(ts.url, owner.token).putNode(`${space}/in21/second`, 'Document', {})
    const second = await pull(ts.url, owner.token, sub)
    const wrong = await c.react(second.item, 'reply', { Text: 42 })
    expect([wrong.status, errorCode(wrong)]).toEqual([422, 'invalid_params'])
    expect((await api(ts.url, owner.token).getNode(`${space}/in21/second/reply`)).status).toBe(404)
    expectStatus(await c.ack(consumerId, item), 200)
  })

  it('[CTX22] a declared business rejection is an outcome, persisted and repeated', async () => {
    const { sub, c } = await setup('22')
    await api(ts.url, owner.token).putNode(`${space}/in22/d`, 'Document', {})
    await api(ts.url, owner.token).putNode(`${space}/in22/d/reply`, 'Post', { Text: 'already here' })
    const { item } = await pull(ts.url, owner.token, sub)
    const r = expectStatus(await c.react(item, 'reply', { Text: 'x' }), 200).body
    expect(r.outcome).toMatchObject({ status: 'rejected', code: 'already_exists' })
    expect(expectStatus(await c.react(item, 'reply', { Text: 'x' }), 200).body).toEqual({ outcome: r.outcome, repeated: true })
  })

  it('[CTX47] react with ack over HTTP: a rejection is settled with its outcome; another user\'s token settles nothing; a bad ack flag is refused', async () => {
    const { sub, c, consumerId } = await setup('47')
    await api(ts.url, owner.token).putNode(`${space}/in47/d`, 'Document', {})
    await api(ts.url, owner.token).putNode(`${space}/in47/d/reply`, 'Post', { Text: 'already here' })
    const { item } = await pull(ts.url, owner.token, sub)
    const token = item.reactions.find((x) => x.name === 'reply')!.causationToken
    const a = api(ts.url, owner.token)
    expect(errorCode(await a.post('/api/contextual/react', { causationToken: token, params: { Text: 'x' }, ack: 'yes' }))).toBe('invalid_request')
    // Someone else holding the token (leaked): denied, and the owner's item stays leased.
    const other = await signup(ts.url)
    const stolen = await api(ts.url, other.token).post('/api/contextual/react', { causationToken: token, params: { Text: 'x' }, ack: true })
    expect([stolen.status, errorCode(stolen)]).toEqual([403, 'reaction_denied'])
    expect(expectStatus(await c.status(consumerId), 200).body).toMatchObject({ leased: 1, acked: 0 })
    const r = expectStatus(await a.post<{ outcome: Record<string, unknown>; repeated: boolean; acked: boolean }>('/api/contextual/react', { causationToken: token, params: { Text: 'x' }, ack: true }), 200).body
    expect(r).toMatchObject({ repeated: false, acked: true, outcome: { status: 'rejected', code: 'already_exists' } })
    expect(expectStatus(await c.status(consumerId), 200).body).toMatchObject({ leased: 0, acked: 1 })
    expect(expectStatus(await c.ack(consumerId, item), 409).body.error?.code).toBe('stale_lease')
    // Without ack the answer is as before: no `acked`.
    expect(expectStatus(await c.react(item, 'reply', { Text: 'x' }), 200).body).toEqual({ outcome: r.outcome, repeated: true })
  })

  it('[CTX21] the delete, request_activity_status and post_thread_message reactions each run their one command as the caller, once', async () => {
    const code = await createCode(ts.url, owner.token, `${space}/job40`, 'return 40 + 2')
    const draft = await run(ts.url, owner.token, code, { start: false })
    const thread = `${space}/thread40`
    expectStatus(await api(ts.url, owner.token).putNode(thread, 'Thread', { Agent: { Kind: 'builtin' } }), 201)
    // The run and the thread are the consumer's parameters: the targets resolve from them.
    const sub = `${space}/s40`
    const def = definition(`${space}/in40`, {
      Parameters: { Run: { Type: 'string', Required: true }, Thread: { Type: 'string', Required: true } },
      Reactions: {
        remove: { Command: 'delete', Target: '{event.path}' },
        start: { Command: 'request_activity_status', Target: '{param.Run}', Parameters: { Status: { Type: 'string', Required: true } } },
        tell: { Command: 'post_thread_message', Target: '{param.Thread}', Parameters: { Text: { Type: 'string', Required: true } } },
      },
    })
    expectStatus(await putSubscription(ts.url, owner.token, sub, def), 201)
    expectStatus(await api(ts.url, owner.token).putNode(`${space}/in40`, 'Document', {}), 201)
    const c = ctx(ts.url, owner.token)
    const params = { params: { Run: draft, Thread: thread } }
    expectStatus(await c.next(sub, 'w1', params), 200)
    await api(ts.url, owner.token).putNode(`${space}/in40/d`, 'Document', {})
    const got = expectStatus(await c.next(sub, 'w1', { ...params, waitSeconds: 10 }), 200).body
    const { consumerId, item } = got as { consumerId: string; item: NonNullable<typeof got.item> }
    expect(item).not.toBeNull()
    expect(item.reactions.map((r) => r.name).sort()).toEqual(['remove', 'start', 'tell'])

    // The run starts, started by the reaction's caller.
    const started = expectStatus(await c.react(item, 'start', { Status: 'Running' }), 200).body
    expect(started.outcome).toMatchObject({ status: 'committed', path: draft, reaction: 'start' })
    const done = await waitForStatus(ts.url, owner.token, draft, terminal)
    expect(done.content).toMatchObject({ Status: 'Succeeded', ReturnValue: 42, StartedBy: owner.userId })

    // One user message in the thread, by the caller, with the derived id; a repeat adds none.
    const told = expectStatus(await c.react(item, 'tell', { Text: 'from an agent' }), 200).body
    expect(told.outcome).toMatchObject({ status: 'committed', path: thread, reaction: 'tell' })
    expect(expectStatus(await c.react(item, 'tell', { Text: 'again' }), 200).body).toEqual({ outcome: told.outcome, repeated: true, paramsDiffer: true, message: expect.stringContaining('yours were not applied') })
    const messages = await answeredThread(ts.url, owner.token, thread)
    expect(messages).toHaveLength(2)
    const [cell, answer] = await Promise.all(messages.map(async (m) => (await api(ts.url, owner.token).getNode(m)).body))
    expect(cell!.content).toMatchObject({ Role: 'user', Author: owner.userId, Text: 'from an agent' })
    expect(answer!.content).toMatchObject({ Role: 'assistant', Text: 'You said: from an agent' })

    // The event's node is deleted; a repeat resolves the outcome and deletes nothing else.
    const removed = expectStatus(await c.react(item, 'remove'), 200).body
    expect(removed.outcome).toMatchObject({ status: 'committed', path: `${space}/in40/d`, reaction: 'remove' })
    expect((await api(ts.url, owner.token).getNode(`${space}/in40/d`)).status).toBe(404)
    expect(expectStatus(await c.react(item, 'remove'), 200).body).toEqual({ outcome: removed.outcome, repeated: true })
    expectStatus(await c.ack(consumerId, item), 200)
  })

  it('[CTX11] with no MaxAttempts, the tenth failure dead-letters', async () => {
    const { sub, c } = await setup('41', owner.token, { Limits: { LeaseSeconds: 30 } })
    await api(ts.url, owner.token).putNode(`${space}/in41/d`, 'Document', {})
    for (let attempt = 1; attempt <= 10; attempt++) {
      const a = await pull(ts.url, owner.token, sub)
      expect(a.item.attempt).toBe(attempt)
      const state = expectStatus(await c.nack(a.consumerId, a.item, 0, `failure ${attempt}`), 200).body.state
      expect(state).toBe(attempt < 10 ? 'pending' : 'dead')
    }
    expect(expectStatus(await c.next(sub), 200).body.item).toBeNull()
  })

  it('[CTX9] [CTX11] [CTX13] nack redelivers with the next attempt; the last failure dead-letters; an Admin re-drives', async () => {
    const { sub, c } = await setup('13', owner.token, { Limits: { MaxAttempts: 2 } })
    await api(ts.url, owner.token).putNode(`${space}/in13/d`, 'Document', {})
    const a1 = await pull(ts.url, owner.token, sub)
    expect(expectStatus(await c.nack(a1.consumerId, a1.item, 0, 'first failure'), 200).body.state).toBe('pending')
    const a2 = await pull(ts.url, owner.token, sub)
    expect(a2.item.event.eventId).toBe(a1.item.event.eventId)
    expect(a2.item.attempt).toBe(2)
    expect(a2.item.leaseToken).not.toBe(a1.item.leaseToken)
    expect(expectStatus(await c.nack(a2.consumerId, a2.item, 0, 'second failure'), 200).body.state).toBe('dead')
    const st = expectStatus(await c.status(a1.consumerId), 200).body as { dead: number; deadLetters: Array<{ lastError: string }> }
    expect(st.dead).toBe(1)
    expect(st.deadLetters[0]!.lastError).toBe('second failure')
    expect(expectStatus(await c.next(sub), 200).body.item).toBeNull()
    // A delay beyond the bound is refused.
    expect((await c.nack(a2.consumerId, a2.item, 901)).status).toBe(400)
    // Someone who is not an Admin of the subscription cannot re-drive: [CTX63] nor learn that the consumer exists.
    const other = await signup(ts.url)
    await grantRole(ts.url, owner.token, space, other.userId, 'Editor')
    expect((await ctx(ts.url, other.token).redrive(a1.consumerId)).status).toBe(404)
    expect(expectStatus(await c.redrive(a1.consumerId), 200).body.redriven).toBe(1)
    const again = await pull(ts.url, owner.token, sub)
    expect([again.item.event.eventId, again.item.attempt]).toEqual([a1.item.event.eventId, 1])
  })

  it('[CTX12] [CTX14] a stale worker (lease taken by a later attempt) cannot ack, nack, extend or react', async () => {
    const { sub, c } = await setup('12')
    await api(ts.url, owner.token).putNode(`${space}/in12/d`, 'Document', {})
    const old = await pull(ts.url, owner.token, sub)
    expectStatus(await c.extend(old.consumerId, old.item, 60), 200)
    // The lease moves on: the old worker nacks (as if it crashed and its lease expired), a new attempt takes it.
    expectStatus(await c.nack(old.consumerId, old.item, 0), 200)
    const fresh = await pull(ts.url, owner.token, sub)
    expect(fresh.item.attempt).toBe(2)
    for (const r of [await c.ack(old.consumerId, old.item), await c.nack(old.consumerId, old.item), await c.extend(old.consumerId, old.item)]) {
      expect([r.status, errorCode(r)]).toEqual([409, 'stale_lease'])
    }
    const reacted = await c.react(old.item, 'reply', { Text: 'stale' })
    expect([reacted.status, errorCode(reacted)]).toEqual([403, 'reaction_denied'])
    expect((await api(ts.url, owner.token).getNode(`${space}/in12/d/reply`)).status).toBe(404)
    // The current worker can.
    expectStatus(await c.react(fresh.item, 'reply', { Text: 'fresh' }), 200)
    expectStatus(await c.ack(fresh.consumerId, fresh.item), 200)
  })

  it('[CTX44] a worker sends the react and the ack of one item at once: the reaction commits, then the ack; the node\'s editors stay connected and in step', async () => {
    const prefix = `${space}/in44`
    const { sub, c } = await setup('44', owner.token, { Events: { NodeTypes: ['Document'], Kinds: ['Created'], PathPrefix: prefix } })
    for (let i = 0; i < 4; i++) {
      const path = `${prefix}/d${i}`
      expectStatus(await api(ts.url, owner.token).putNode(path, 'Document', {}), 201)
      const editor = stockProvider(ts.url, path, owner.token)
      try {
        await editor.synced()
        const { consumerId, item } = await pull(ts.url, owner.token, sub)
        // Before: the ack settled the lease between the reaction's checks and its commit, the
        // commit was refused, and the editor was thrown out with "internal" and kept a change never saved.
        const [reacted, acked] = await Promise.all([c.react(item, 'annotate', { Note: `n${i}` }), c.ack(consumerId, item)])
        expect(expectStatus(reacted, 200).body.outcome.status).toBe('committed')
        expectStatus(acked, 200)
        await waitFor(() => editor.json().Note === `n${i}`, { description: 'the editor sees the reaction' })
        // The editor types after it: saved beside the reaction's field.
        editor.content.set('Mine', i)
        await waitFor(async () => (await api(ts.url, owner.token).getNode(path)).body.content?.Mine === i, { description: 'the edit is saved' })
        expect((await api(ts.url, owner.token).getNode(path)).body.content).toEqual({ Note: `n${i}`, Mine: i })
        expect(editor.closes).toEqual([])
        expect(editor.denied).toEqual([])
      } finally {
        editor.destroy()
      }
    }
  })

  it('[CTX44] a reaction whose lease is settled through another server before its commit: denied, nothing saved; the editors are asked to reconnect, not told of an internal error', async () => {
    const prefix = `${space}/in45`
    const { sub, c } = await setup('45', owner.token, { Events: { NodeTypes: ['Document'], Kinds: ['Created'], PathPrefix: prefix } })
    const path = `${prefix}/d`
    expectStatus(await api(ts.url, owner.token).putNode(path, 'Document', {}), 201)
    const editor = stockProvider(ts.url, path, owner.token, undefined, { reconnect: false })
    const storage = ts.server.storage
    const original = storage.contextual.bind(storage)
    try {
      await editor.synced()
      const { consumerId, item } = await pull(ts.url, owner.token, sub)
      // Another server acks the lease right after this one's reaction read the lease truth.
      storage.contextual = async (call) => {
        const answer = await original(call)
        if (call.op === 'reactTruth') {
          const fence = { consumerId, eventId: item.event.eventId, token: item.leaseToken, attempt: item.attempt, now: Date.now() }
          expect(await original({ op: 'ack', fence, owner: owner.userId })).toBe(true)
        }
        return answer
      }
      const reacted = await c.react(item, 'annotate', { Note: 'never saved' })
      expect([reacted.status, errorCode(reacted)]).toEqual([403, 'reaction_denied'])
      storage.contextual = original
      expect((await api(ts.url, owner.token).getNode(path)).body.content).toEqual({})
      const closed = await waitFor(() => editor.closes[0], { description: 'the editor is asked to reconnect' })
      expect(closed.code).toBe(1012)
      expect(closed.reason).toMatch(/^stale_lease: /)
      // The node is served as saved.
      const again = stockProvider(ts.url, path, owner.token)
      try {
        await again.synced()
        expect(again.json()).toEqual({})
      } finally {
        again.destroy()
      }
    } finally {
      storage.contextual = original
      editor.destroy()
    }
  })

  it('[CTX15] [CTX25] a capability revoked between pull and react: denial, no commit', async () => {
    const worker = await signup(ts.url)
    const grant = await grantRole(ts.url, owner.token, space, worker.userId, 'Editor')
    const { sub, c } = await setup('25', worker.token)
    await api(ts.url, owner.token).putNode(`${space}/in25/d`, 'Document', {})
    const { item } = await pull(ts.url, worker.token, sub)
    expect(item.reactions.map((r) => r.name)).toContain('reply')
    await grantRole(ts.url, owner.token, space, worker.userId, 'Viewer')
    const r = await c.react(item, 'reply', { Text: 'after revoke' })
    expect([r.status, errorCode(r)]).toEqual([403, 'reaction_denied'])
    expect((await api(ts.url, owner.token).getNode(`${space}/in25/d/reply`)).status).toBe(404)
    // [CTX15] Redelivered: the view is recomputed under current access; the reaction is no longer offered.
    const { consumerId } = await c.next(sub).then((r) => r.body)
    expectStatus(await c.nack(consumerId, item, 0), 200)
    const again = await pull(ts.url, worker.token, sub)
    expect([again.item.attempt, again.item.reactions.map((x) => x.name)]).toEqual([2, []])
    expectStatus(await api(ts.url, owner.token).deleteNode(grant), 204)
  })

  it('[CTX25] a source row deleted or newly hidden between pull and react: the same denial, no commit', async () => {
    const worker = await signup(ts.url)
    await grantRole(ts.url, owner.token, space, worker.userId, 'Editor')
    await api(ts.url, owner.token).putNode(`${space}/notes`, 'Document', {})
    const { sub, c } = await setup('25b', worker.token, { Reactions: { note: { Command: 'create', Target: `${space}/notes/{event.name}`, NodeType: 'Post' } } })
    await api(ts.url, owner.token).putNode(`${space}/in25b/gone`, 'Document', {})
    await api(ts.url, owner.token).putNode(`${space}/in25b/hidden`, 'Document', {})
    const gone = await pull(ts.url, worker.token, sub)
    const hidden = await pull(ts.url, worker.token, sub)
    expect([gone.item.event.path, hidden.item.event.path]).toEqual([`${space}/in25b/gone`, `${space}/in25b/hidden`])
    expectStatus(await api(ts.url, owner.token).deleteNode(`${space}/in25b/gone`), 204)
    await grantRole(ts.url, owner.token, `${space}/in25b/hidden`, worker.userId, 'Viewer', true)
    const denials = [await c.react(gone.item, 'note'), await c.react(hidden.item, 'note')]
    for (const r of denials) expect([r.status, r.body.error?.message]).toEqual([403, denials[0]!.body.error?.message])
    expect(denials.map(errorCode)).toEqual(['reaction_denied', 'reaction_denied'])
    expect((await api(ts.url, owner.token).queryNodes({ parent: `${space}/notes` })).body.items).toEqual([])
  })

  it('[CTX5] [CTX8] events the caller cannot read are never delivered; another user cannot use someone else\'s consumer', async () => {
    const worker = await signup(ts.url)
    await grantRole(ts.url, owner.token, space, worker.userId, 'Viewer')
    const { sub, c, consumerId } = await setup('8', worker.token)
    await api(ts.url, owner.token).putNode(`${space}/in8/private`, 'Document', {})
    await grantRole(ts.url, owner.token, `${space}/in8/private`, worker.userId, 'Viewer', true)
    // The consumer skips what it cannot read (the private node was made after it).
    expect((await c.next(sub)).body.item).toBeNull()
    await api(ts.url, owner.token).putNode(`${space}/in8/private/x`, 'Document', {})
    await api(ts.url, owner.token).putNode(`${space}/in8/public`, 'Document', {})
    const { item } = await pull(ts.url, worker.token, sub)
    expect(item.event.path).toBe(`${space}/in8/public`)
    // A Viewer is offered no reaction it cannot run.
    expect(item.reactions).toEqual([])
    expect((await ctx(ts.url, owner.token).status(consumerId)).status).toBe(404)
    expect((await ctx(ts.url, owner.token).ack(consumerId, item)).status).toBe(404)
  })

  it('[CTX10] [CTX31] next long-polls: a commit while it waits wakes it with the new event', async () => {
    const { sub, c } = await setup('10')
    const waiting = c.next(sub, 'w1', { waitSeconds: 30 })
    await api(ts.url, owner.token).putNode(`${space}/in10/late`, 'Document', {})
    const got = expectStatus(await waiting, 200).body
    expect(got.item?.event.path).toBe(`${space}/in10/late`)
  })

  it('[CTX42] a long poll whose client disconnects stops waiting and leases nothing for it', async () => {
    const { sub, c } = await setup('42', owner.token, { Limits: { LeaseSeconds: 30, MaxInFlight: 1, MaxAttempts: 3 } })
    const svc = ts.server.contextual
    await abandonWhileWaiting(ts.url, owner.token, 'next', { subscription: sub, consumer: 'w1', waitSeconds: 60 }, () => svc.waiting)
    // The event that lands now goes to the next pull, first attempt: the abandoned poll took nothing.
    expectStatus(await api(ts.url, owner.token).putNode(`${space}/in42/late`, 'Document', {}), 201)
    const got = expectStatus(await c.next(sub, 'w1', { waitSeconds: 10 }), 200).body
    expect(got.item).toMatchObject({ event: { path: `${space}/in42/late` }, attempt: 1 })
  })

  it('[CTX30] bad input gets a stable code, never a 500', async () => {
    const a = api(ts.url, owner.token)
    for (const [op, body] of [
      ['next', { subscription: 'nope/none', consumer: 'w' }],
      ['next', { subscription: `${space}/s7`, consumer: 'bad name!' }],
      ['next', { subscription: `${space}/s7`, consumer: 'w', extra: 1 }],
      ['ack', { consumerId: 'x', eventId: '1', leaseToken: 't', attempt: 1 }],
      ['react', { causationToken: '!!!' }],
      ['react', {}],
      ['unknown', {}],
    ] as const) {
      const r = await a.post(`/api/contextual/${op}`, body)
      expect(r.status, `${op} ${JSON.stringify(body)}`).toBeGreaterThanOrEqual(400)
      expect(r.status).toBeLessThan(500)
      expect(errorCode(r)).toBeTruthy()
    }
    expect((await api(ts.url).post('/api/contextual/next', {})).status).toBe(401)
  })
})
