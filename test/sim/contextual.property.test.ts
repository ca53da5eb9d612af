import { afterEach, describe, expect, it } from 'vitest'
import { ME, SUB, Harness, attempt, fenceOf, leaseInterleavings, log, outcomeAloneOnce, outcomesInOneBatch, reactSettles, seedMesh, staleAttachmentRefused, withHarness } from './contextual-harness.js'
import { ContextualService } from '../../sync-server/contextual/index.js'
import type { CommitAttachment, NodeApi } from '../../sync-server/nodes/index.js'
import type { NodePath } from '../../shared/index.js'
import { forEachSeed, seeds } from './rng.js'

let h: Harness | null = null
afterEach(async () => {
  await h?.close()
  h = null
})

/** The mesh seeded, consumer `c` made, and two events (P/in/a, P/in/b) leased to it. */
async function twoLeased(h: Harness) {
  await seedMesh(h)
  const s = h.service
  const { consumerId } = await s.next(ME, { subscription: SUB, consumer: 'c' })
  await h.nodes.put(ME, 'P/in/a' as NodePath, { nodeType: 'Document', content: {} })
  await h.nodes.put(ME, 'P/in/b' as NodePath, { nodeType: 'Document', content: {} })
  const a = (await s.next(ME, { subscription: SUB, consumer: 'c' })).item!
  const b = (await s.next(ME, { subscription: SUB, consumer: 'c' })).item!
  return { s, consumerId, a, b }
}

/**
 * [CTX34] Seeded interleavings of pulls, reactions (some racing), acks, nacks, extends, the clock
 * moving past leases, and crashes between operations, on SQLite. Invariants: each event's reaction
 * is committed at most once, and committed iff its outcome says so (the mutation and the outcome
 * are one transaction); no ack, nack or extend succeeds with evidence that is not the current
 * lease; an acked event is never leased again; a reaction asked to settle its item ([CTX47]) settles
 * it exactly when it commits, or on a repeat under the lease its token was sealed for.
 * (contextual.pg.test.ts: the same on PostgreSQL.)
 */
describe('[CTX34] contextual leases under seeded interleavings (SQLite)', () => {
  it('reactions commit at most once; no stale evidence is ever accepted', { timeout: 300_000 }, async () => {
    await forEachSeed('contextual leases', seeds(6, 1900), (seed) => withHarness(() => Harness.sqlite(), (h) => leaseInterleavings(h, seed)))
  })

  it('[CTX47] a reaction asked to settle its item commits and settles it in one transaction, and only under its own lease', async () => {
    await withHarness(() => Harness.sqlite(), reactSettles)
  })

  it('[CTX45] the sweep runs on its own every 10 minutes: a day and a sweep after an ack, the row is gone and still counted', async () => {
    h = await Harness.sqlite()
    const { s, consumerId, a, b } = await twoLeased(h)
    await s.ack(ME, fenceOf({ consumerId, item: a }))
    await s.ack(ME, fenceOf({ consumerId, item: b }))
    await h.clock.advance(24 * 3600_000 + 11 * 60_000)
    // Already swept by the service's own timer: nothing left for a sweep now.
    expect(await s.prune(h.clock.now())).toBe(0)
    expect((await s.status(ME, { consumerId })).acked).toBe(2)
  })

  it('[CTX28] an expired causation token never authorizes a new commit, even while the lease is held; it still resolves a prior outcome', async () => {
    h = await Harness.sqlite()
    const { s, consumerId, a, b } = await twoLeased(h)
    expect((await s.react(ME, { causationToken: a.reactions[0]!.causationToken, params: { Note: 'in time' } })).repeated).toBe(false)
    // Keep both leases alive past the token's life (900 s) with heartbeats.
    for (let t = 0; t < 4; t++) {
      for (const item of [a, b]) await s.extend(ME, { ...fenceOf({ consumerId, item }), seconds: 300 })
      await h.clock.advance(290_000)
    }
    expect(await attempt(() => s.react(ME, { causationToken: b.reactions[0]!.causationToken, params: { Note: 'too late' } }))).toEqual({ ok: false, code: 'reaction_denied' })
    expect((await h.nodes.get(ME, 'P/in/b' as NodePath))?.content).toEqual({})
    const repeat = await s.react(ME, { causationToken: a.reactions[0]!.causationToken, params: { Note: 'again' } })
    expect([repeat.repeated, repeat.outcome.status]).toEqual([true, 'committed'])
  })

  it('[CTX44] a reaction starts only with a second of its lease left; with less it is denied and nothing commits', async () => {
    h = await Harness.sqlite()
    const { s, consumerId, a, b } = await twoLeased(h)
    // seedMesh's leases run 5 s: 900 ms left on both.
    await h.clock.advance(4_100)
    expect(await attempt(() => s.react(ME, { causationToken: a.reactions[0]!.causationToken, params: { Note: 'late' } }))).toEqual({ ok: false, code: 'reaction_denied' })
    expect((await h.nodes.get(ME, 'P/in/a' as NodePath))?.content).toEqual({})
    // A heartbeat first, and it commits.
    await s.extend(ME, fenceOf({ consumerId, item: b }))
    expect((await s.react(ME, { causationToken: b.reactions[0]!.causationToken, params: { Note: 'extended' } })).outcome.status).toBe('committed')
    expect((await h.nodes.get(ME, 'P/in/b' as NodePath))?.content).toEqual({ Note: 'extended' })
  })

  it('[CTX44] while a reaction of an item runs, its ack waits and lands after the commit; a heartbeat does not wait', async () => {
    h = await Harness.sqlite()
    await seedMesh(h, 60)
    let release!: () => void
    const gate = new Promise<void>((resolve) => (release = resolve))
    let entered!: () => void
    const inCommand = new Promise<void>((resolve) => (entered = resolve))
    const base = h.nodes
    // The reaction's command waits at the gate, after every check and before its write.
    const nodes = new Proxy(base, {
      get(target, key) {
        if (key === 'attaching') {
          return (holder: CommitAttachment): NodeApi => {
            const inner = target.attaching(holder)
            return { ...inner, patch: async (...args: Parameters<NodeApi['patch']>) => (entered(), await gate, inner.patch(...args)) }
          }
        }
        const v = Reflect.get(target, key, target) as unknown
        return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v
      },
    })
    const s = new ContextualService({ nodes, access: h.access, storage: h.storage, log, clock: h.clock })
    s.start()
    try {
      const { consumerId } = await s.next(ME, { subscription: SUB, consumer: 'c' })
      await h.nodes.put(ME, 'P/in/a' as NodePath, { nodeType: 'Document', content: {} })
      const item = (await s.next(ME, { subscription: SUB, consumer: 'c' })).item!
      const reacting = s.react(ME, { causationToken: item.reactions[0]!.causationToken, params: { Note: 'held' } })
      await inCommand
      let acked = false
      const ack = s.ack(ME, fenceOf({ consumerId, item })).then((r) => ((acked = true), r))
      await s.extend(ME, fenceOf({ consumerId, item }))
      expect(acked).toBe(false)
      release()
      expect((await reacting).outcome.status).toBe('committed')
      expect(await ack).toEqual({ ok: true, state: 'acked', repeated: false })
      expect((await h.nodes.get(ME, 'P/in/a' as NodePath))?.content).toEqual({ Note: 'held' })
    } finally {
      release()
      s.stop()
    }
  })

  it('[CTX26] a commit carrying an outcome with stale lease evidence is refused whole', async () => {
    h = await Harness.sqlite()
    await seedMesh(h)
    await staleAttachmentRefused(h)
  })

  it('[CTX26] commits carrying outcomes in one batch: each verdict its own, an outcome only with its commit', async () => {
    h = await Harness.sqlite()
    await seedMesh(h)
    await outcomesInOneBatch(h)
  })

  it('[CTX22] an outcome with no commit is recorded once, only under the held lease', async () => {
    h = await Harness.sqlite()
    await seedMesh(h)
    await outcomeAloneOnce(h)
  })
})
