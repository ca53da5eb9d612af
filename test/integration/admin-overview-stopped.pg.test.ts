import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { SYSTEM, type NodePath } from '../../shared/index.js'
import { api, createDocument, createSpace, expectStatus, freshDatabase, signup, startTestServer, type TestServer, type TestUser } from '../helpers/index.js'
import { ctx, definition, pull, putSubscription } from './contextual-helpers.js'

interface Lagging { subscriptionPath: string; waiting: number }
const lagging = async (url: string, token: string): Promise<Lagging[]> => expectStatus(await api(url, token).get<{ laggingConsumers: Lagging[] }>('/api/admin/overview'), 200).body.laggingConsumers

/**
 * [OPS14] On both backends: a consumer whose worker stopped pulling, with changes of its events
 * after its cursor (never ingested), is listed as lagging with how many wait; changes that are
 * none of its events leave it idle; once pulled they are counted as pending, each once.
 */
for (const backend of ['sqlite', 'postgres'] as const) {
  describe(`[OPS14] a stopped worker on the operator's page (${backend})`, () => {
    let ts: TestServer
    let ops: TestUser
    let owner: TestUser
    let space = ''
    let drop: (() => Promise<void>) | null = null
    beforeAll(async () => {
      const db = backend === 'postgres' ? await freshDatabase('weft_opsstop_') : null
      drop = db?.drop ?? null
      ts = await startTestServer(db ? { config: { databaseUrl: db.url } } : {})
      ops = await signup(ts.url)
      owner = await signup(ts.url)
      await ts.server.nodes.put(SYSTEM, `Admin/_Access/${ops.userId}_Access` as NodePath, { nodeType: 'AccessAssignment', content: { Subject: ops.userId, Role: 'Admin' } }, 'system')
      space = await createSpace(ts.url, owner.token)
    })
    afterAll(async () => {
      await ts?.cleanup()
      await drop?.()
    })

    it('[OPS14] listed with its unread events counted; idle when none are its events; gone once its worker takes them', async () => {
      const sub = `${space}/sub`
      const prefix = `${space}/inbox`
      expectStatus(await putSubscription(ts.url, owner.token, sub, definition(prefix)), 201)
      await createDocument(ts.url, owner.token, prefix, {})
      expect(expectStatus(await ctx(ts.url, owner.token).next(sub, 'w'), 200).body.item).toBeNull()
      await createDocument(ts.url, owner.token, `${space}/elsewhere`, {})
      expect((await lagging(ts.url, ops.token)).find((l) => l.subscriptionPath === sub)).toBeUndefined()
      for (const n of ['a', 'b', 'c']) await createDocument(ts.url, owner.token, `${prefix}/${n}`, {})
      expect((await lagging(ts.url, ops.token)).find((l) => l.subscriptionPath === sub)).toMatchObject({ waiting: 3 })
      // One pull leases the first: the two after it are pending now, counted once each.
      const got = await pull(ts.url, owner.token, sub, 'w')
      expect((await lagging(ts.url, ops.token)).find((l) => l.subscriptionPath === sub)).toMatchObject({ waiting: 2 })
      expectStatus(await ctx(ts.url, owner.token).ack(got.consumerId, got.item), 200)
      for (let i = 0; i < 2; i++) {
        const next = await pull(ts.url, owner.token, sub, 'w')
        expectStatus(await ctx(ts.url, owner.token).ack(next.consumerId, next.item), 200)
      }
      expect((await lagging(ts.url, ops.token)).find((l) => l.subscriptionPath === sub)).toBeUndefined()
    })
  })
}
