import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { SYSTEM, type NodePath } from '../../shared/index.js'
import { api, createSpace, expectStatus, freshDatabase, signup, startTestServer, type TestServer, type TestUser } from '../helpers/index.js'
import { ctx, definition, putSubscription } from './contextual-helpers.js'

/**
 * [CTX10] A consumer far behind the change log (found by an outside look, stop 42): a pull scanned
 * at most 4,000 changes, then answered "nothing" with its event further on, and a long poll slept
 * its whole wait; under a steady load elsewhere a worker never caught up. On both storages.
 */
for (const backend of ['sqlite', 'postgres'] as const) {
  describe(`a consumer 4,500 changes behind (${backend})`, () => {
    let ts: TestServer
    let owner: TestUser
    let space: string
    let drop: (() => Promise<void>) | null = null
    beforeAll(async () => {
      const db = backend === 'postgres' ? await freshDatabase('weft_ctxcatch_') : null
      drop = db?.drop ?? null
      ts = await startTestServer(db ? { config: { databaseUrl: db.url } } : {})
      owner = await signup(ts.url)
      space = await createSpace(ts.url, owner.token)
    })
    afterAll(async () => {
      await ts.cleanup()
      await drop?.()
    })

    it('a pull that does not wait reads on to its event and leases it', async () => {
      const sub = `${space}/sG`
      expectStatus(await putSubscription(ts.url, owner.token, sub, definition(`${space}/inG`)), 201)
      expectStatus(await api(ts.url, owner.token).putNode(`${space}/inG`, 'Document', {}), 201)
      const c = ctx(ts.url, owner.token)
      const { consumerId } = expectStatus(await c.next(sub), 200).body
      // The rest of the database is busy while the worker is away (another space).
      const other = await createSpace(ts.url, owner.token)
      for (let i = 0; i < 4_500; i += 50) {
        await Promise.all(Array.from({ length: 50 }, (_, j) => ts.server.nodes.put(SYSTEM, `${other}/n${i + j}` as NodePath, { nodeType: 'Document', content: {} })))
      }
      expectStatus(await api(ts.url, owner.token).putNode(`${space}/inG/work`, 'Document', {}), 201)
      expect(expectStatus(await c.status(consumerId), 200).body.lag).toBeGreaterThan(4_000)
      const pulled = expectStatus(await c.next(sub, 'w1', { waitSeconds: 0 }), 200).body
      expect(pulled.item?.event.path).toBe(`${space}/inG/work`)
    })
  })
}
