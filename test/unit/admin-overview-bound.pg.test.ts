import { describe, expect, it } from 'vitest'
import { SYSTEM, type NodePath } from '../../shared/index.js'
import { api, createDocument, createSpace, expectStatus } from '../helpers/index.js'
import { operatorServer } from '../helpers/operator-server.js'
import { ctx, definition, putSubscription } from '../integration/contextual-helpers.js'

/**
 * [OPS14] The overview's documented bound, on SQLite and PostgreSQL: a stopped worker's consumer
 * is counted from one page of 500 change records after its cursor, so its event within them is
 * listed and one past them is not (its status page tells its changes since the last pull); its
 * worker back, the pull reads on past the page. Beside the seeded property of the list
 * (`admin-overview-lagging.property.pg.test.ts`), which stays far inside the bound.
 */
for (const backend of ['sqlite', 'postgres'] as const) {
  describe(`[OPS14] the lagging list's bound (${backend})`, () => {
    const env = operatorServer(backend, 'weft_opsbound_')
    const lagging = async () => expectStatus(await api(env.ts.url, env.ops.token).get<{ laggingConsumers: { consumerId: string; waiting: number }[] }>('/api/admin/overview'), 200).body.laggingConsumers

    it('[OPS14] the documented bound: a stopped worker\'s event within the 500 change records after its cursor is counted, one past them is not (its status page tells it)', async () => {
      const { ts, owner } = env
      const space = await createSpace(ts.url, owner.token, `LagBound${backend}`)
      const c = ctx(ts.url, owner.token)
      const consumerOver = async (name: string) => {
        const sub = `${space}/${name}`
        expectStatus(await putSubscription(ts.url, owner.token, sub, definition(`${space}/${name}-in`)), 201)
        await createDocument(ts.url, owner.token, `${space}/${name}-in`, {})
        const first = expectStatus(await c.next(sub, 'w'), 200).body
        expect(first.item).toBeNull()
        return { sub, consumerId: first.consumerId }
      }
      // Changes that are none of its events, then one that is: a margin of 10 records either side of
      // the page's end, for writes the server may make of its own meanwhile.
      const filler = async (count: number, tag: string) => {
        for (let i = 0; i < count; i++) await ts.server.nodes.put(SYSTEM, `${space}/${tag}${i}` as NodePath, { nodeType: 'Document', content: {} }, 'system')
      }
      const near = await consumerOver('near')
      await filler(490, 'a')
      await createDocument(ts.url, owner.token, `${space}/near-in/x`, {})
      expect((await lagging()).find((l) => l.consumerId === near.consumerId)).toMatchObject({ waiting: 1 })
      expectStatus(await c.delete(near.consumerId), 200)
      const far = await consumerOver('far')
      await filler(510, 'b')
      await createDocument(ts.url, owner.token, `${space}/far-in/x`, {})
      expect((await lagging()).find((l) => l.consumerId === far.consumerId)).toBeUndefined()
      // Its worker back, its pull reads on past the page and hands the event out.
      const got = expectStatus(await c.next(far.sub, 'w'), 200).body
      expect(got.item?.event.path).toBe(`${space}/far-in/x`)
    })

  })
}
