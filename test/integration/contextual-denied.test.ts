import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { api, createDocument, createSpace, expectStatus, freshDatabase, grantRole, signup, startTestServer, type TestServer, type TestUser } from '../helpers/index.js'
import { ctx, definition, nextRetrying, putSubscription } from './contextual-helpers.js'

/**
 * [CTX8] A consumer's events are what its owner may read: a change in a subtree the owner is
 * Denied is never delivered and counted nowhere. The pull skipped it, but `status` counted it as
 * pending until then, so Dave learned how many changes happened where he may not look, and when
 * (an outside look, stop 43).
 */
const storages = [
  { name: 'SQLite', pg: false },
  { name: 'PostgreSQL', pg: true },
] as const

describe.each(storages)('[CTX8] a Denied subtree under the prefix ($name)', ({ pg }) => {
  let ts: TestServer
  let db: Awaited<ReturnType<typeof freshDatabase>> | null = null
  let alice: TestUser
  let dave: TestUser
  let space = ''
  beforeAll(async () => {
    db = pg ? await freshDatabase('weft_ctx_denied_') : null
    ts = await startTestServer({ config: db ? { databaseUrl: db.url } : {} })
    alice = await signup(ts.url)
    dave = await signup(ts.url)
    space = await createSpace(ts.url, alice.token)
    await createDocument(ts.url, alice.token, `${space}/secret`, {})
    await grantRole(ts.url, alice.token, space, dave.userId, 'Viewer')
    await grantRole(ts.url, alice.token, `${space}/secret`, dave.userId, 'Viewer', true)
  })
  afterAll(async () => {
    await ts.cleanup()
    await db?.drop()
  })

  it('changes there are neither delivered nor counted; once the Denied goes, later ones are', async () => {
    const sub = `${space}/triage`
    expectStatus(await putSubscription(ts.url, alice.token, sub, definition(space)), 201)
    const c = ctx(ts.url, dave.token)
    const consumerId = expectStatus(await nextRetrying(c, sub, 'w1'), 200).body.consumerId
    // One change he may read, then five where he may not (the pull that leases the first stops there).
    await createDocument(ts.url, alice.token, `${space}/secret-not`, { T: 1 })
    for (let i = 0; i < 5; i++) await createDocument(ts.url, alice.token, `${space}/secret/x${i}`, { T: i })
    const got = expectStatus(await nextRetrying(c, sub, 'w1'), 200).body
    expect(got.item?.event.path).toBe(`${space}/secret-not`)
    expect(expectStatus(await c.status(consumerId), 200).body).toMatchObject({ pending: 0, leased: 1, dead: 0 })
    expectStatus(await c.ack(consumerId, got.item!), 200)
    // Dave may read the subtree again: what changes there from now on is his to see.
    expectStatus(await api(ts.url, alice.token).deleteNode(`${space}/secret/_Access/${dave.userId}_Access`), 204)
    await createDocument(ts.url, alice.token, `${space}/secret/after`, { T: 1 })
    const later = expectStatus(await nextRetrying(c, sub, 'w1'), 200).body
    expect(later.item?.event.path).toBe(`${space}/secret/after`)
    expect(expectStatus(await c.status(consumerId), 200).body).toMatchObject({ pending: 0, leased: 1, acked: 1 })
  })
  it('[CTX54] changes made there while the Denied stood are not delivered after it goes, even when no pull read them before ([FEED5])', async () => {
    await createDocument(ts.url, alice.token, `${space}/vault`, {})
    await grantRole(ts.url, alice.token, `${space}/vault`, dave.userId, 'Viewer', true)
    const sub = `${space}/vault-triage`
    expectStatus(await putSubscription(ts.url, alice.token, sub, definition(space)), 201)
    const c = ctx(ts.url, dave.token)
    const consumerId = expectStatus(await nextRetrying(c, sub, 'w2'), 200).body.consumerId
    // Made while Dave was Denied there, and no pull of his looked at them before the Denied went.
    for (let i = 0; i < 3; i++) await createDocument(ts.url, alice.token, `${space}/vault/old${i}`, { T: i })
    expectStatus(await api(ts.url, alice.token).deleteNode(`${space}/vault/_Access/${dave.userId}_Access`), 204)
    await createDocument(ts.url, alice.token, `${space}/vault/new`, { T: 1 })
    const got = expectStatus(await nextRetrying(c, sub, 'w2'), 200).body
    expect(got.item?.event.path).toBe(`${space}/vault/new`)
    expect(expectStatus(await c.status(consumerId), 200).body).toMatchObject({ pending: 0, leased: 1, dead: 0 })
    expectStatus(await c.ack(consumerId, got.item!), 200)
    expect(expectStatus(await nextRetrying(c, sub, 'w2'), 200).body.item ?? null).toBeNull()
  })

  it('[FEED8] a Denied set and lifted again: changes made before it are delivered, those made while it stood are not (a walk lost every earlier event)', async () => {
    await createDocument(ts.url, alice.token, `${space}/desk`, {})
    const sub = `${space}/desk-triage`
    expectStatus(await putSubscription(ts.url, alice.token, sub, definition(space)), 201)
    const c = ctx(ts.url, dave.token)
    const consumerId = expectStatus(await nextRetrying(c, sub, 'w3'), 200).body.consumerId
    // Made while Dave could read there, not pulled yet.
    await createDocument(ts.url, alice.token, `${space}/desk/before`, { T: 1 })
    await grantRole(ts.url, alice.token, `${space}/desk`, dave.userId, 'Viewer', true)
    await createDocument(ts.url, alice.token, `${space}/desk/during`, { T: 2 })
    expectStatus(await api(ts.url, alice.token).patchNode(`${space}/desk/_Access/${dave.userId}_Access`, { Denied: false }), 200)
    await createDocument(ts.url, alice.token, `${space}/desk/after`, { T: 3 })
    const seen: string[] = []
    for (;;) {
      const got = expectStatus(await nextRetrying(c, sub, 'w3'), 200).body
      if (!got.item) break
      seen.push(got.item.event.path)
      expectStatus(await c.ack(consumerId, got.item), 200)
    }
    expect(seen.filter((p) => p.startsWith(`${space}/desk/`) && !p.includes('/_Access/'))).toEqual([`${space}/desk/before`, `${space}/desk/after`])
  })
})
