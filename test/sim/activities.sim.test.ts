import { afterEach, describe, expect, it } from 'vitest'
import { SYSTEM, type NodePath } from '../../shared/index.js'
import { SimMesh } from './mesh.js'
import { forEachSeed, seeds } from './rng.js'
import { RECONCILE_MS, activities, activitiesOnSim, alice, codeNode, isTerminal, lines, runAs, until } from './activities-mesh.js'

/**
 * The activities engine on the deterministic mesh (issue 17): virtual time, a feed that drops,
 * delays and reorders, crashes. No sleeps, no timing asserts: every wait is for an event (a node
 * reaching a state, the engine going idle), every delay is virtual.
 */

let mesh: SimMesh | null = null
afterEach(async () => {
  await mesh?.close()
  mesh = null
})

describe('[KIT1] activities on a lossy feed: every run requested ends, once', () => {
  // A sweep of seeds, each starting script threads: room for a loaded machine (and WEFT_SIM_SEEDS).
  it('drops, delays and reorders: gap replay and the reconciler start every requested run exactly once', { timeout: 180_000 }, async () => {
    await forEachSeed('activities lossy feed', seeds(4), async (seed) => {
      mesh = await SimMesh.open({ seed, faults: { drop: 0.3, delay: 0.3, maxDelayMs: 200 }, engines: [activitiesOnSim] })
      const m = mesh
      const code = await codeNode(m.nodes, 'add', 'Log.info("ran"); return Inputs.n ?? 7')
      const started: NodePath[] = []
      const drafts: NodePath[] = []
      for (let i = 0; i < 6; i++) {
        if (m.rng.next() < 0.5) started.push(await runAs(m.nodes, code))
        else {
          const draft = await runAs(m.nodes, code, false)
          drafts.push(draft)
          // The owner starts it later, over the node API (the write rule records StartedBy).
          if (m.rng.next() < 0.5) {
            await m.nodes.patch(alice, draft, { RequestedStatus: 'Running' })
            started.push(draft)
          }
        }
        await m.clock.advance(m.rng.int(0, 100))
      }
      // Delayed events arrive; whatever the feed lost the next reconcile finds.
      await m.clock.advance(RECONCILE_MS)
      await activities(m).engine.settled()
      for (const p of started) {
        const n = await m.nodes.get(SYSTEM, p)
        expect(n?.content.Status, `${p} (seed ${seed})`).toBe('Succeeded')
        expect(n?.content.ReturnValue).toBe(7)
        expect(lines(n).filter((l) => l.Text === 'ran')).toHaveLength(1)
      }
      for (const p of drafts.filter((d) => !started.includes(d))) expect((await m.nodes.get(SYSTEM, p))?.content.Status).toBeUndefined()
      const steps = m.counts.events
      await m.close()
      mesh = null
      return steps
    })
  })
})

describe('[KIT2][ACT9] a crash mid-run: the restarted engine fails the orphan once, naming the restart', () => {
  // A sweep of seeds, each starting script threads: room for a loaded machine (and WEFT_SIM_SEEDS).
  it('kill -9 while a script runs; boot finds it Running with no run and writes exactly one Error line', { timeout: 180_000 }, async () => {
    await forEachSeed('activities crash', seeds(2, 7000), async (seed) => {
      mesh = await SimMesh.open({ seed, faults: { drop: 0.2, delay: 0.2, maxDelayMs: 50 }, engines: [activitiesOnSim] })
      const m = mesh
      const code = await codeNode(m.nodes, 'long', 'Log.info("started"); for (;;) await sleep(20)')
      const path = await runAs(m.nodes, code)
      activities(m).engine.watch(path)
      await until(m.nodes, path, (n) => lines(n).some((l) => l.Text === 'started'))
      await m.crash()
      const after = await m.nodes.get(SYSTEM, path)
      expect(after?.content.Status).toBe('Failed')
      const errors = lines(after).filter((l) => l.Level === 'Error')
      expect(errors).toHaveLength(1)
      expect(errors[0]!.Text).toContain('restarted')
      // Later passes and a second crash change nothing.
      await m.clock.advance(RECONCILE_MS * 2)
      await m.crash()
      await activities(m).engine.settled()
      expect(lines(await m.nodes.get(SYSTEM, path))).toEqual(lines(after))
      const steps = m.counts.events
      await m.close()
      mesh = null
      return steps
    })
  })
})

describe('[KIT3][ACT9][ACT5] recover, sweep and cancel racing on one run append exactly one line', () => {
  // A sweep of seeds, each starting script threads: room for a loaded machine (and WEFT_SIM_SEEDS).
  it('an orphaned Running activity with a cancel requested: every racer claims, one wins, one line', { timeout: 180_000 }, async () => {
    await forEachSeed('activities orphan race', seeds(8, 9100), async (seed) => {
      mesh = await SimMesh.open({ seed, faults: { drop: 0.2, delay: 0.3, maxDelayMs: 20 }, engines: [activitiesOnSim] })
      const m = mesh
      const code = await codeNode(m.nodes, 'noop', 'return 1')
      // What a dead process leaves: Running, no run anywhere.
      const path = `S/_Activity/orphan-${seed}` as NodePath
      await m.nodes.create(SYSTEM, path, {
        nodeType: 'ActivityLog',
        name: 'orphan',
        content: { Category: 'Script', CodePath: code, Source: 'return 1', Messages: [], CreatedBy: 'alice', StartedBy: 'alice', RequestedStatus: 'Running', Status: 'Running' },
      })
      const engine = activities(m).engine
      const racers = [
        () => engine.reconcileNow(),
        () => engine.reconcileNow(),
        () => engine.cancel(path),
        () => m.nodes.patch(SYSTEM, path, { RequestedStatus: 'Cancelled' }).then(() => engine.cancel(path)),
        () => m.clock.advance(RECONCILE_MS),
      ]
      const order = m.rng.shuffle(racers)
      await Promise.all(order.map(async (race, i) => {
        for (let k = m.rng.int(0, i * 2); k > 0; k--) await Promise.resolve()
        await race()
      }))
      await m.clock.advance(RECONCILE_MS)
      await engine.settled()
      const n = await m.nodes.get(SYSTEM, path)
      expect(isTerminal(n?.content.Status), `seed ${seed}`).toBe(true)
      expect(lines(n), `seed ${seed}`).toHaveLength(1)
      // A crash and its recovery pass find nothing left to do.
      await m.crash()
      expect(lines(await m.nodes.get(SYSTEM, path))).toHaveLength(1)
      const steps = m.counts.events + order.length
      await m.close()
      mesh = null
      return steps
    })
  })
})

describe('[ACT9] a sweep has nothing to do for a cancelled draft', () => {
  it('cancelled drafts are not read whole nor claimed again by any pass (their number only grows)', { timeout: 60_000 }, async () => {
    mesh = await SimMesh.open({ seed: 9, engines: [activitiesOnSim] })
    const m = mesh
    const code = await codeNode(m.nodes, 'never', 'return 1')
    const drafts: NodePath[] = []
    for (let i = 0; i < 10; i++) {
      const d = await runAs(m.nodes, code, false)
      await m.nodes.patch(alice, d, { RequestedStatus: 'Cancelled' })
      drafts.push(d)
    }
    await activities(m).engine.settled()
    let claims = 0
    const tap = m.committed$.subscribe((c) => {
      if (drafts.includes(c.path)) claims++
    })
    let reads = 0
    const get = m.nodes.get.bind(m.nodes)
    m.nodes.get = async (p, path) => {
      if (drafts.includes(path)) reads++
      return get(p, path)
    }
    for (let pass = 0; pass < 3; pass++) {
      await m.clock.advance(RECONCILE_MS)
      await activities(m).engine.idle()
    }
    m.nodes.get = get
    tap.unsubscribe()
    expect({ claims, reads }).toEqual({ claims: 0, reads: 0 })
    for (const d of drafts) expect((await m.nodes.get(SYSTEM, d))?.content.Status).toBeUndefined()
  })
})
