import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { SETTLED_RETENTION_MS } from '../../sync-server/contextual/index.js'
import { api, createSpace, expectStatus, freshDatabase, grantRole, signup, startTestServer, type TestServer } from '../helpers/index.js'
import { ctx, putSubscription } from './contextual-helpers.js'

/**
 * [CTX45] The rows of settled events (acked, or skipped as unreadable) are deleted a day after they
 * were settled, on a real server over each storage: nothing else is touched, the status still counts
 * the acked ones, no deleted event is delivered again, and a repeated reaction still finds its outcome.
 */
async function settledRowsSwept(ts: TestServer): Promise<void> {
  const owner = await signup(ts.url)
  const bob = await signup(ts.url)
  const space = await createSpace(ts.url, owner.token)
  await grantRole(ts.url, owner.token, space, bob.userId, 'Editor')
  const prefix = `${space}/in`
  const o = api(ts.url, owner.token)
  expectStatus(await o.putNode(prefix, 'Document', {}), 201)
  expectStatus(await o.putNode(`${prefix}/secret`, 'Document', {}), 201)
  await grantRole(ts.url, owner.token, `${prefix}/secret`, bob.userId, 'Viewer', true)
  const sub = `${space}/sweep`
  expectStatus(
    await putSubscription(ts.url, owner.token, sub, {
      Operation: 'sweep',
      Events: { NodeTypes: ['Document'], Kinds: ['Created'], PathPrefix: prefix },
      Reactions: { annotate: { Command: 'patch', Target: '{event.path}', Parameters: { Note: { Type: 'string' } } } },
      Limits: { LeaseSeconds: 60, MaxInFlight: 8, MaxAttempts: 1 },
    }),
    201,
  )
  const b = ctx(ts.url, bob.token)
  const consumerId = expectStatus(await b.next(sub, 'w'), 200).body.consumerId
  for (const name of ['a', 'b', 'c']) expectStatus(await o.putNode(`${prefix}/${name}`, 'Document', {}), 201)
  expectStatus(await o.putNode(`${prefix}/secret/h`, 'Document', {}), 201)
  for (const name of ['d', 'e']) expectStatus(await o.putNode(`${prefix}/${name}`, 'Document', {}), 201)

  const pulled = new Map<string, NonNullable<Awaited<ReturnType<typeof b.next>>['body']['item']>>()
  for (let i = 0; i < 5; i++) {
    const item = expectStatus(await b.next(sub, 'w'), 200).body.item!
    pulled.set(item.event.path.slice(prefix.length + 1), item)
  }
  // The hidden one was skipped on the way, never delivered.
  expect([...pulled.keys()].sort()).toEqual(['a', 'b', 'c', 'd', 'e'])
  const reacted = expectStatus(await b.react(pulled.get('a')!, 'annotate', { Note: 'seen' }), 200).body
  for (const name of ['a', 'b', 'c']) expectStatus(await b.ack(consumerId, pulled.get(name)!), 200)
  expect(expectStatus(await b.nack(consumerId, pulled.get('d')!, 0, 'broken'), 200).body.state).toBe('dead')
  const counts = (s: Record<string, unknown>) => ({ pending: s.pending, leased: s.leased, acked: s.acked, dead: s.dead })
  const before = counts(expectStatus(await b.status(consumerId), 200).body)
  expect(before).toEqual({ pending: 0, leased: 1, acked: 3, dead: 1 })

  const svc = ts.server.contextual
  // Settled just now: kept.
  expect(await svc.prune(Date.now())).toBe(0)
  // A day later: the three acked and the skipped one, nothing else; once.
  expect(await svc.prune(Date.now() + SETTLED_RETENTION_MS + 60_000)).toBe(4)
  expect(await svc.prune(Date.now() + SETTLED_RETENTION_MS + 60_000)).toBe(0)
  expect(counts(expectStatus(await b.status(consumerId), 200).body)).toEqual(before)

  // The repeat of a reaction whose event row is gone resolves its outcome; nothing is written again.
  const again = expectStatus(await b.react(pulled.get('a')!, 'annotate', { Note: 'seen' }), 200).body
  expect(again).toEqual({ outcome: reacted.outcome, repeated: true })
  // No deleted event comes back; the held lease still settles; new events come once, first attempt.
  expect(expectStatus(await b.next(sub, 'w'), 200).body.item).toBeNull()
  expectStatus(await b.ack(consumerId, pulled.get('e')!), 200)
  expectStatus(await o.putNode(`${prefix}/f`, 'Document', {}), 201)
  expect(expectStatus(await b.next(sub, 'w'), 200).body.item).toMatchObject({ event: { path: `${prefix}/f` }, attempt: 1 })
  expect(expectStatus(await b.next(sub, 'w'), 200).body.item).toBeNull()
  // The dead letter was kept: re-driven by the Admin, it is delivered again.
  expect(expectStatus(await ctx(ts.url, owner.token).redrive(consumerId), 200).body.redriven).toBe(1)
  expect(expectStatus(await b.next(sub, 'w'), 200).body.item).toMatchObject({ event: { path: `${prefix}/d` }, attempt: 1 })
  expect(counts(expectStatus(await b.status(consumerId), 200).body)).toEqual({ pending: 0, leased: 2, acked: 4, dead: 0 })
}

describe('[CTX45] settled events are swept (SQLite)', () => {
  let ts: TestServer
  beforeAll(async () => {
    ts = await startTestServer()
  })
  afterAll(async () => ts.cleanup())

  it('[CTX45] a day after they were settled, acked and skipped events are deleted; counts, outcomes and delivery are unchanged', async () => {
    await settledRowsSwept(ts)
  })
})

describe('[CTX45] settled events are swept (PostgreSQL)', () => {
  let ts: TestServer
  let db: Awaited<ReturnType<typeof freshDatabase>>
  beforeAll(async () => {
    db = await freshDatabase('weft_ctxprune_')
    ts = await startTestServer({ config: { databaseUrl: db.url } })
  })
  afterAll(async () => {
    await ts.cleanup()
    await db.drop()
  })

  it('[CTX45] the same on PostgreSQL', async () => {
    await settledRowsSwept(ts)
  })
})
