import { afterEach, describe, expect, it } from 'vitest'
import { SYSTEM, type NodePath } from '../../shared/index.js'
import { createActivitiesEngine } from '../../sync-server/engines/activities/index.js'
import { SimMesh, type SimEngineFactory } from './mesh.js'
import { activities, activitiesOnSim, alice, codeNode, isTerminal, lines, runAs, until } from './activities-mesh.js'

/**
 * [KIT10] The activity engine's timers on the engine's clock, on the deterministic mesh: the log
 * flush throttle, the watchdog, the cancel grace. Each is driven by `clock.advance`, never by a
 * sleep, and asserted exactly at its boundary (a millisecond before, nothing; at it, the effect):
 * what used to be wall-clock figures inside functional tests ("Cancelled within 1 s") is either
 * an event here or a figure of `npm run bench`. Script threads still run on wall time (the
 * sandbox's own deadline); every wait on them is for an event.
 */

let mesh: SimMesh | null = null
afterEach(async () => {
  await mesh?.close()
  mesh = null
})

const texts = (n: Parameters<typeof lines>[0]) => lines(n).map((l) => l.Text)

describe('[KIT10][ACT5] cancel on the engine clock', () => {
  it('a cooperative script sees Ct and ends Cancelled with no time passing on the clock', async () => {
    mesh = await SimMesh.open({ seed: 1, engines: [activitiesOnSim] })
    const m = mesh
    const code = await codeNode(m.nodes, 'long', 'Log.info("started"); try { for (;;) await sleep(20) } catch (e) { Log.info("saw cancel " + Ct.aborted); throw e }')
    const path = await runAs(m.nodes, code)
    await until(m.nodes, path, (n) => texts(n).includes('started'))
    const at = m.clock.now()
    // The owner asks (RequestedStatus is theirs to write); the feed tells the engine.
    await m.nodes.patch(alice, path, { RequestedStatus: 'Cancelled' })
    const done = await until(m.nodes, path, (n) => isTerminal(n.content.Status))
    expect(done.content.Status).toBe('Cancelled')
    expect(texts(done)).toContain('saw cancel true')
    // Not the grace timer: it never fired (the clock did not move), the script stopped itself.
    expect(m.clock.now()).toBe(at)
    expect(texts(done).join('\n')).not.toContain('SCRIPT_CANCEL_GRACE_MS')
  })

  it('a script that ignores the cancel is terminated exactly SCRIPT_CANCEL_GRACE_MS later, naming it', async () => {
    mesh = await SimMesh.open({ seed: 2, engines: [activitiesOnSim] })
    const m = mesh
    const code = await codeNode(m.nodes, 'stubborn', 'Log.info("spinning"); for (;;) {}')
    const path = await runAs(m.nodes, code)
    await until(m.nodes, path, (n) => texts(n).includes('spinning'))
    await m.nodes.patch(alice, path, { RequestedStatus: 'Cancelled' })
    // The engine has passed the cancel to the script (the grace timer is armed on the clock).
    await activities(m).engine.idle()
    await m.clock.advance(299)
    expect((await m.nodes.get(SYSTEM, path))?.content.Status).toBe('Running')
    const ended = until(m.nodes, path, (n) => isTerminal(n.content.Status))
    await m.clock.advance(1)
    const done = await ended
    expect(done.content.Status).toBe('Cancelled')
    expect(texts(done).join('\n')).toContain('SCRIPT_CANCEL_GRACE_MS (300 ms)')
  })
})

/** The sim's engine with a 60 s watchdog. */
const watchdogOnSim: SimEngineFactory = (ctx, deps) =>
  createActivitiesEngine({ clock: deps.clock, changes$: deps.changes$, seedTemplates: false, timeoutMs: 10_000, memoryMb: 16, watchdogMs: 60_000, spares: 1, cpuSlots: 0, reconcileIntervalMs: null })(ctx)

describe('[KIT10][ACT9] the watchdog on the engine clock', () => {
  it('a run with no message or progress for ACTIVITY_WATCHDOG_MS ends Failed naming it, not a second sooner', async () => {
    mesh = await SimMesh.open({ seed: 3, engines: [watchdogOnSim] })
    const m = mesh
    // One line, a Mesh call (answered: the script is alive), then a silent wait.
    const code = await codeNode(m.nodes, 'wedged', 'Log.info("working"); await Mesh.put("S/alive", { nodeType: "Document", content: {} }); for (;;) await sleep(1000)')
    const path = await runAs(m.nodes, code)
    await until(m.nodes, path, (n) => texts(n).includes('working'))
    await until(m.nodes, 'S/alive' as NodePath, () => true)
    // Checked once a second of the clock (watchdogMs / 4, at most 1 s): 59 s of silence is fine.
    await m.clock.advance(59_000)
    expect((await m.nodes.get(SYSTEM, path))?.content.Status).toBe('Running')
    const ended = until(m.nodes, path, (n) => isTerminal(n.content.Status))
    await m.clock.advance(1_000)
    const done = await ended
    expect(done.content.Status).toBe('Failed')
    expect(String(done.content.Error)).toContain('ACTIVITY_WATCHDOG_MS (60000 ms)')
    expect(lines(done).filter((l) => l.Level === 'Error')).toHaveLength(1)
  })
})

describe('[KIT10][ACT12] the log flush throttle on the engine clock', () => {
  it('a line after a quiet spell goes out at once; lines within ACTIVITY_FLUSH_MS wait for the clock and go out as one append', async () => {
    mesh = await SimMesh.open({ seed: 4, engines: [activitiesOnSim] })
    const m = mesh
    const code = await codeNode(
      m.nodes,
      'throttled',
      'Log.info("a"); await Mesh.get("S"); Log.info("b"); Log.warn("c"); await Mesh.put("S/marker", { nodeType: "Document", content: {} }); for (;;) await sleep(1000)',
    )
    // Every append the engine makes for the run: the lines each carries.
    const appends: string[][] = []
    let path = '' as NodePath
    const service = m.nodes as unknown as { append: (...a: unknown[]) => Promise<unknown> }
    const append = service.append.bind(service)
    service.append = (principal, at, field, items, ...rest) => {
      if (at === path) appends.push((items as { Text: string }[]).map((l) => l.Text))
      return append(principal, at, field, items, ...rest)
    }
    path = await runAs(m.nodes, code)
    await until(m.nodes, path, (n) => texts(n).includes('a'))
    // The marker is written after "b" and "c" reached the engine (the worker sends its lines
    // before a Mesh call, in order): they wait for the throttle's window on the clock.
    await until(m.nodes, 'S/marker' as NodePath, () => true)
    expect(texts(await m.nodes.get(SYSTEM, path))).toEqual(['a'])
    await m.clock.advance(19)
    expect(texts(await m.nodes.get(SYSTEM, path))).toEqual(['a'])
    const flushed = until(m.nodes, path, (n) => texts(n).includes('c'))
    await m.clock.advance(1)
    expect(texts(await flushed)).toEqual(['a', 'b', 'c'])
    expect(appends).toEqual([['a'], ['b', 'c']])
    // The run is cancelled to end it (Cancelled ranks above the Warning line, which is kept).
    await m.nodes.patch(alice, path, { RequestedStatus: 'Cancelled' })
    expect((await until(m.nodes, path, (n) => isTerminal(n.content.Status))).content.Status).toBe('Cancelled')
  })
})
