import { filter, firstValueFrom } from 'rxjs'
import { afterEach, describe, expect, it } from 'vitest'
import { SUBSCRIPTIONS_PARENT, SYSTEM, type MeshNode, type NodePath } from '../../shared/index.js'
import { createSubscriptionsEngine, type SubscriptionsEngine } from '../../sync-server/engines/subscriptions/engine.js'
import type { ContinuationHandler } from '../../sync-server/engines/subscriptions/continuation-registry.js'
import { SimMesh, type SimEngineFactory } from './mesh.js'
import { forEachSeed, seeds } from './rng.js'

/**
 * The subscriptions runner on the mesh: its retry state lives on the subscription ([KIT6]), so a
 * crash between two attempts neither forgets the count nor retries early.
 */

let calls = 0
const flaky: ContinuationHandler = async () => {
  calls++
  throw new Error('transient')
}

const subscriptionsOnSim: SimEngineFactory = (ctx, deps) =>
  createSubscriptionsEngine({ modules: [{ name: 'sim', continuations: { SimFlaky: flaky } }], changes$: () => deps.changes$, reconcileIntervalMs: null, clock: deps.clock })(ctx)

let mesh: SimMesh | null = null
afterEach(async () => {
  await mesh?.close()
  mesh = null
})

describe('[KIT6] subscription retries: attempts and the next retry on the node, across a crash', () => {
  it('a continuation failing every time is tried maxAttempts times in all, whatever crashes come between', async () => {
    await forEachSeed('subscription retries', seeds(2, 4400), async (seed) => {
      calls = 0
      mesh = await SimMesh.open({ seed, faults: { drop: 0.2, delay: 0.2, maxDelayMs: 20 }, engines: [subscriptionsOnSim] })
      const m = mesh
      const path = `${SUBSCRIPTIONS_PARENT}/flaky-${seed}` as NodePath
      const noted = (n: number) => firstValueFrom(m.nodes.node$(path).pipe(filter((x): x is MeshNode => x !== null && (x.content.Attempts === n || x.content.Status === 'Failed'))))
      await m.nodes.put(SYSTEM, path, {
        nodeType: 'EventSubscription',
        name: 'flaky',
        content: { Id: `flaky-${seed}`, TriggerType: 'Timer', FireAt: new Date(m.clock.now() - 1_000).toISOString(), ContinuationType: 'SimFlaky', Status: 'Pending' },
      })
      // FireAt is past: the firing waits only for the clock's next turn.
      const firstNoted = noted(1)
      await m.clock.advance(0)
      const first = await firstNoted
      expect(first.content.Attempts).toBe(1)
      expect(Date.parse(first.content.NextRetryAt as string)).toBe(m.clock.now() + 400)
      // A crash after the first failure: the count and the time come back from the node. Not a
      // millisecond early: 399 ms on, nothing has run.
      await m.crash()
      await m.clock.advance(399)
      expect(calls).toBe(1)
      const secondNoted = noted(2)
      await m.clock.advance(1)
      const second = await secondNoted
      expect(calls).toBe(2)
      // (Seeded) a crash after the second failure too; the third attempt is 800 ms after it.
      if (second.content.Status !== 'Failed' && m.rng.next() < 0.5) await m.crash()
      const failed = firstValueFrom(m.nodes.node$(path).pipe(filter((x): x is MeshNode => x?.content.Status === 'Failed')))
      await m.clock.advance(800)
      const done = await failed
      expect(done.content.LastError).toContain('after 3 attempts')
      expect(calls).toBe(3)
      const steps = m.counts.events + m.counts.crashes
      await m.close()
      mesh = null
      return steps
    })
  })
})

const timersOnSim: SimEngineFactory = (ctx, deps) => createSubscriptionsEngine({ changes$: () => deps.changes$, reconcileIntervalMs: null, warmAheadMs: 1_500, clock: deps.clock })(ctx)

describe('[KIT10][SUB-R4b] a Timer subscription on the engine clock', () => {
  it('is loaded with what it touches exactly warmAheadMs before FireAt, still Pending, and fires at FireAt, not a millisecond early', async () => {
    mesh = await SimMesh.open({ seed: 1, engines: [timersOnSim] })
    const m = mesh
    const space = 'S' as NodePath
    await m.nodes.put(SYSTEM, space, { nodeType: 'Space', name: 'S', content: {} })
    const fireAt = m.clock.now() + 3_000
    const path = `${SUBSCRIPTIONS_PARENT}/warm` as NodePath
    await m.nodes.put(SYSTEM, path, {
      nodeType: 'EventSubscription',
      name: 'warm',
      content: { Id: 'warm', Status: 'Pending', TriggerType: 'Timer', FireAt: new Date(fireAt).toISOString(), SubjectId: 'trial', ContinuationType: 'GrantSpaceAccess', TargetPath: space, Role: 'Viewer' },
    })
    // A restart: nothing is loaded, the runner's boot reads subscriptions without loading their docs.
    await m.crash()
    const runner = m.engine<SubscriptionsEngine>('subscriptions').runner
    const nodes = m.nodes as typeof m.nodes & { isLoaded(p: NodePath): boolean }
    const grant = `${space}/_Access/trial_Access` as NodePath
    await m.clock.advance(1_499)
    await runner.idle()
    expect([nodes.isLoaded(path), nodes.isLoaded(grant), nodes.isLoaded(space)]).toEqual([false, false, false])
    await m.clock.advance(1)
    await runner.idle()
    // GrantSpaceAccess touches the space and the assignment it will create: loaded ahead too.
    expect([nodes.isLoaded(path), nodes.isLoaded(grant), nodes.isLoaded(space)]).toEqual([true, true, true])
    expect((await m.nodes.get(SYSTEM, path))?.content.Status).toBe('Pending')
    await m.clock.advance(1_499)
    await runner.idle()
    expect((await m.nodes.get(SYSTEM, path))?.content.Status).toBe('Pending')
    expect(await m.nodes.get(SYSTEM, grant)).toBeNull()
    const fired = firstValueFrom(m.nodes.node$(path).pipe(filter((x): x is MeshNode => x?.content.Status === 'Fired')))
    await m.clock.advance(1)
    expect((await fired).content.FiredAt).toBe(new Date(fireAt).toISOString())
    expect((await m.nodes.get(SYSTEM, grant))?.content.Role).toBe('Viewer')
  })
})
