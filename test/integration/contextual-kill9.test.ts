import { afterAll, describe, expect, it } from 'vitest'
import { api, createSpace, expectStatus, makeTempDir, removeDir, signup, spawnServer, type SpawnedServer } from '../helpers/index.js'
import { ctx, definition, pull, putSubscription } from './contextual-helpers.js'

/**
 * [CTX27] [CTX9] kill -9 between react and ack: the reaction committed, its response may be lost
 * and the ack never came. After the restart the lease runs out, the event is redelivered (the next
 * attempt), and the reaction resolves to the same persisted outcome: no second commit.
 */
describe('[CTX27] [CTX33] kill -9 between react and ack', () => {
  let dir = ''
  const children: SpawnedServer[] = []
  afterAll(async () => {
    for (const c of children) await c.kill('SIGKILL')
    if (dir) await removeDir(dir)
  })

  it('redelivery after the restart, and react returns the same outcome without a duplicate', { timeout: 120_000 }, async () => {
    dir = await makeTempDir('weft-ctx-kill9-')
    const first = await spawnServer({ dataDir: dir, startTimeoutMs: 60_000 })
    children.push(first)
    const user = await signup(first.url)
    const space = await createSpace(first.url, user.token)
    const sub = `${space}/sub`
    expectStatus(await putSubscription(first.url, user.token, sub, definition(`${space}/inbox`, { Limits: { LeaseSeconds: 5 } })), 201)
    expectStatus(await api(first.url, user.token).putNode(`${space}/inbox`, 'Document', {}), 201)
    expectStatus(await ctx(first.url, user.token).next(sub), 200)
    expectStatus(await api(first.url, user.token).putNode(`${space}/inbox/m1`, 'Document', { Title: 'help' }), 201)
    const before = await pull(first.url, user.token, sub)
    const r1 = expectStatus(await ctx(first.url, user.token).react(before.item, 'reply', { Text: 'on it' }), 200).body
    expect(r1).toMatchObject({ repeated: false, outcome: { status: 'committed', path: `${space}/inbox/m1/reply` } })
    await first.kill('SIGKILL')

    const second = await spawnServer({ dataDir: dir, startTimeoutMs: 60_000 })
    children.push(second)
    const c = ctx(second.url, user.token)
    // The lease of attempt 1 expires; the long poll wakes for it.
    const again = await pull(second.url, user.token, sub)
    expect(again.consumerId).toBe(before.consumerId)
    expect([again.item.event.eventId, again.item.attempt]).toEqual([before.item.event.eventId, 2])
    const r2 = expectStatus(await c.react(again.item, 'reply', { Text: 'on it' }), 200).body
    expect(r2).toEqual({ outcome: r1.outcome, repeated: true })
    // The old token resolves the same outcome too; neither commits anything ([CTX59]: other
    // parameters are said not applied).
    expect(expectStatus(await c.react(before.item, 'reply', { Text: 'third' }), 200).body).toMatchObject({ outcome: r1.outcome, repeated: true, paramsDiffer: true })
    const replies = (await api(second.url, user.token).queryNodes({ parent: `${space}/inbox/m1` })).body.items
    expect(replies.map((n) => [n.path, n.content])).toEqual([[`${space}/inbox/m1/reply`, { Text: 'on it' }]])
    expectStatus(await c.ack(again.consumerId, again.item), 200)
    expect(expectStatus(await c.status(again.consumerId), 200).body).toMatchObject({ acked: 1, leased: 0, pending: 0 })
    // The stale attempt cannot ack after the fact.
    expect((await c.ack(before.consumerId, before.item)).status).toBe(409)
  })
})
