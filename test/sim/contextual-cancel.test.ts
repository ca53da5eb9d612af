import { afterEach, describe, expect, it, vi } from 'vitest'
import type { NodePath } from '../../shared/index.js'
import type { ContextualCall } from '../../sync-server/storage/index.js'
import { Harness, ME, SUB, seedMesh } from './contextual-harness.js'

/**
 * [CTX42][CTX43] A long poll's caller may go away at any moment of `next`, also while the lease is
 * being read: its abort event has then fired before the wait listens for it. Found with a cancel
 * sent to another instance (test/integration/mcp-cluster.pg.test.ts), which reaches the call a
 * moment later than a local one. On the virtual clock a lost abort waits forever.
 */
describe('[CTX43] a long poll cancelled while its lease is read', () => {
  let h: Harness | null = null
  afterEach(async () => {
    await h?.close()
    h = null
  })

  it('ends at once, takes nothing and leaves no waiter', async () => {
    h = await Harness.sqlite()
    await seedMesh(h)
    await h.service.next(ME, { subscription: SUB, consumer: 'w' })
    const caller = new AbortController()
    const storage = h.storage
    const real = storage.contextual.bind(storage)
    storage.contextual = async (call: ContextualCall) => {
      const result = await real(call)
      if (call.op === 'lease') caller.abort()
      return result
    }
    let answer: Awaited<ReturnType<Harness['service']['next']>> | null = null
    const polling = h.service.next(ME, { subscription: SUB, consumer: 'w', waitSeconds: 60 }, caller.signal).then((a) => (answer = a))
    await vi.waitFor(() => expect(answer).not.toBeNull(), { timeout: 10_000, interval: 5 })
    await polling
    expect(answer!.item).toBeNull()
    expect(caller.signal.aborted).toBe(true)
    expect(h.service.waiting).toBe(0)
    storage.contextual = real
    // Nothing was leased for it: the next pull gets the next event, first attempt.
    await h.nodes.put(ME, 'P/in/late' as NodePath, { nodeType: 'Document', content: {} })
    const got = await h.service.next(ME, { subscription: SUB, consumer: 'w' })
    expect(got.item).toMatchObject({ event: { path: 'P/in/late' }, attempt: 1 })
  })
})
