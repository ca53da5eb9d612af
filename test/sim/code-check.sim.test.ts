import fc from 'fast-check'
import pino from 'pino'
import { afterEach, describe, expect, it } from 'vitest'
import { SYSTEM, type MeshNode, type NodePath } from '../../shared/index.js'
import { checkPathOf, checkSource, reRequestInterrupted, sourceHash, type ActivitiesEngine } from '../../sync-server/engines/activities/index.js'
import { createActivitiesEngine } from '../../sync-server/engines/activities/index.js'
import { SimMesh, type SimEngineFactory } from './mesh.js'
import { codeNode, until } from './activities-mesh.js'
import { forEachSeed, seeds } from './rng.js'

/**
 * [ACT16][KIT10] The Code check on the deterministic mesh: its debounce is on the engine's clock
 * (an edit is checked exactly `checkDebounceMs` after the last one, never sooner), the boot
 * re-request is a real crash, the compare-and-set and the delete run on the real node service. No
 * sleeps, no timing asserts; esbuild's service answers on real I/O, so waits are for events. The
 * HTTP and /sync guards stay against a real server (test/integration/code-check.test.ts).
 */

const DEBOUNCE = 300

const checksOnSim: SimEngineFactory = (ctx, deps) =>
  createActivitiesEngine({ clock: deps.clock, changes$: deps.changes$, seedTemplates: false, spares: 0, cpuSlots: 0, reconcileIntervalMs: null, checkDebounceMs: DEBOUNCE })(ctx)

let mesh: SimMesh | null = null
afterEach(async () => {
  await mesh?.close()
  mesh = null
})

const checks = (m: SimMesh) => m.engine<ActivitiesEngine>('activities').checks
const settledCheck = (n: MeshNode) => n.content.Status === 'Passed' || n.content.Status === 'Failed'
const hashOf = (language: string, source: string) => sourceHash(`${language}\n${source}`)

/** The check of `code` once it is settled for exactly this source. */
function checked(m: SimMesh, code: NodePath, language: string, source: string): Promise<MeshNode> {
  return until(m.nodes, checkPathOf(code), (n) => settledCheck(n) && n.content.SourceHash === hashOf(language, source))
}

describe('[ACT16][KIT10] the Code check on the engine clock', () => {
  it('a syntax error fails with its line and column, a fix passes; edits within the debounce are checked once, not a millisecond early', async () => {
    mesh = await SimMesh.open({ seed: 1, engines: [checksOnSim] })
    const m = mesh
    const broken = 'Log.info("a")\nconst x = ;\nreturn x'
    const code = await codeNode(m.nodes, 'broken', broken)
    await m.clock.advance(DEBOUNCE - 1)
    expect(await m.nodes.get(SYSTEM, checkPathOf(code))).toBeNull()
    const first = checked(m, code, 'javascript', broken)
    await m.clock.advance(1)
    const failed = await first
    expect(failed.content.Status).toBe('Failed')
    const errors = failed.content.Errors as { Line: number; Column: number; Text: string }[]
    expect(errors[0]).toMatchObject({ Line: 2, Column: 11 })
    expect(errors[0]!.Text).toMatch(/Unexpected/)
    expect(failed.createdBy).toBe('system')
    expect(failed.content.CheckedAt).toBe(new Date(m.clock.now()).toISOString())

    // Three edits, each within the debounce of the one before: one check, of the last.
    const versions = (await m.nodes.get(SYSTEM, checkPathOf(code)))!.version
    // Each check claims the node (Status → Checking): count the claims.
    let claims = 0
    let last: unknown = 'Failed'
    const watch = m.nodes.node$(checkPathOf(code)).subscribe((n) => {
      if (n?.content.Status === 'Checking' && last !== 'Checking') claims++
      last = n?.content.Status
    })
    for (const s of ['const y = ;', 'const z = ;', 'Log.info("a")\nconst x = 1\nreturn x']) {
      await m.nodes.patch(SYSTEM, code, { Source: s })
      await m.clock.advance(DEBOUNCE - 1)
    }
    expect((await m.nodes.get(SYSTEM, checkPathOf(code)))!.version).toBe(versions)
    const fixed = checked(m, code, 'javascript', 'Log.info("a")\nconst x = 1\nreturn x')
    await m.clock.advance(1)
    const passed = await fixed
    expect(passed.content).toMatchObject({ Status: 'Passed', Errors: [] })
    // One check for the three edits.
    expect(claims).toBe(1)
    watch.unsubscribe()

    // Types are an error in JavaScript and fine in TypeScript.
    await m.nodes.patch(SYSTEM, code, { Source: 'const n: number = 1\nreturn n' })
    const js = checked(m, code, 'javascript', 'const n: number = 1\nreturn n')
    await m.clock.advance(DEBOUNCE)
    expect((await js).content.Errors).toHaveLength(1)
    await m.nodes.patch(SYSTEM, code, { Language: 'typescript' })
    const ts = checked(m, code, 'typescript', 'const n: number = 1\nreturn n')
    await m.clock.advance(DEBOUNCE)
    expect((await ts).content.Status).toBe('Passed')
  })

  it('a check left Checking by a crashed process is re-requested at boot and checked again, whatever the feed loses', async () => {
    await forEachSeed('code check crash', seeds(3, 1600), async (seed) => {
      mesh = await SimMesh.open({ seed, faults: { drop: 0.3, delay: 0.3, maxDelayMs: 50 }, engines: [checksOnSim] })
      const m = mesh
      const code = await codeNode(m.nodes, 'interrupted', 'return 40 + 2')
      // The debounce and any delayed event; a dropped one is found by the crash's boot pass below.
      await m.clock.advance(DEBOUNCE + 50)
      await checks(m).settled()
      const check = checkPathOf(code)
      // What a crash in the middle of a check leaves behind: Checking, with no result.
      await m.nodes.update(SYSTEM, check, () => ({ nodeType: 'CodeCheck', name: 'Check', content: { Status: 'Checking', SourceHash: hashOf('javascript', 'return 40 + 2'), Errors: [], CheckedAt: null } }), 'engine')
      const before = (await m.nodes.get(SYSTEM, check))!.version
      await m.crash()
      // Boot flipped it back to Pending and scheduled it at once (0 ms on the clock).
      const again = checked(m, code, 'javascript', 'return 40 + 2')
      await m.clock.advance(0)
      const done = await again
      expect(done.content.Status, `seed ${seed}`).toBe('Passed')
      expect(typeof done.content.CheckedAt).toBe('string')
      expect(done.version).toBeGreaterThan(before + 1) // Checking → Pending → Checking → Passed
      const steps = m.counts.events + m.counts.crashes
      await m.close()
      mesh = null
      return steps
    })
  })

  it('the re-request reads the owner state and flips only what is still in progress (compare-and-set)', async () => {
    mesh = await SimMesh.open({ seed: 5, engines: [] })
    const nodes = mesh.nodes
    const base = 'Owners'
    await nodes.put(SYSTEM, base as NodePath, { nodeType: 'Document', name: base, content: {} })
    const mk = (name: string, status: string) => nodes.put(SYSTEM, `${base}/${name}` as NodePath, { nodeType: 'BuildOwner', name, content: { BuildStatus: status } })
    await mk('a', 'Building')
    await mk('b', 'Built')
    await mk('c', 'Building')
    // c moves on between the query and the flip: it must be left alone.
    const racing = {
      query: async (...args: Parameters<typeof nodes.query>) => {
        const found = await nodes.query(...args)
        await nodes.patch(SYSTEM, `${base}/c` as NodePath, { BuildStatus: 'Built' })
        return found
      },
      update: nodes.update.bind(nodes),
    }
    const flipped = await reRequestInterrupted(racing, { nodeType: 'BuildOwner', field: 'BuildStatus', inProgress: 'Building', requested: 'Pending' }, { log: pino({ level: 'silent' }) })
    expect(flipped).toEqual([`${base}/a`])
    const status = async (n: string) => (await nodes.get(SYSTEM, `${base}/${n}` as NodePath))?.content.BuildStatus
    expect([await status('a'), await status('b'), await status('c')]).toEqual(['Pending', 'Built', 'Built'])
  })

  it('deleting the Code node takes its check with it, also while a check is scheduled', async () => {
    mesh = await SimMesh.open({ seed: 6, engines: [checksOnSim] })
    const m = mesh
    const code = await codeNode(m.nodes, 'doomed', 'return 1')
    const first = checked(m, code, 'javascript', 'return 1')
    await m.clock.advance(DEBOUNCE)
    await first
    await m.nodes.patch(SYSTEM, code, { Source: 'return 2' })
    await m.nodes.delete(SYSTEM, code)
    await m.clock.advance(DEBOUNCE)
    await checks(m).settled()
    expect(await m.nodes.get(SYSTEM, checkPathOf(code))).toBeNull()
  })
})

describe('[ACT16] checkSource', () => {
  it('never throws and reports lines inside the source, whatever the text (property, seeded)', async () => {
    await fc.assert(
      fc.asyncProperty(fc.string({ maxLength: 200 }), fc.constantFrom('javascript' as const, 'typescript' as const), async (src, lang) => {
        const errors = await checkSource(src, lang)
        const lines = src.split('\n').length
        for (const e of errors) {
          expect(e.Line).toBeGreaterThanOrEqual(1)
          // An error at the end of the body may point at the wrapper's closing line.
          expect(e.Line).toBeLessThanOrEqual(lines + 1)
          expect(typeof e.Text).toBe('string')
        }
      }),
      { numRuns: 200, seed: Number(process.env.WEFT_FC_SEED ?? 20261203) },
    )
  })
})
