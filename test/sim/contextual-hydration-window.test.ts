import { afterEach, describe, expect, it } from 'vitest'
import { SYSTEM, type JsonObject, type MeshNode, type NodePath } from '../../shared/index.js'
import type { LiveChange } from '../../sync-server/nodes/index.js'
import { hydrate } from '../../sync-server/contextual/context.js'
import { compileDefinition } from '../../sync-server/contextual/definition.js'
import type { LeasedEvent } from '../../sync-server/storage/index.js'
import { ME, Harness, USER } from './contextual-harness.js'
import { Rng, forEachSeed, seeds } from './rng.js'

let h: Harness | null = null
afterEach(async () => {
  await h?.close()
  h = null
})

const IN = 'P/in'
const DEF: JsonObject = {
  Operation: 'look',
  Events: { NodeTypes: ['Document'], Kinds: ['Created', 'Updated'], PathPrefix: IN },
  Hydration: {
    first: { Get: `${IN}/d0` },
    siblings: { Children: '{event.parent}', NodeType: 'Document', Limit: 50 },
  },
  Reactions: { annotate: { Command: 'patch', Target: '{event.path}', Parameters: { Note: { Type: 'string' } } } },
  Limits: { LeaseSeconds: 300, MaxInFlight: 8, MaxAttempts: 10 },
}

async function setUp(): Promise<{ h: Harness; event: LeasedEvent }> {
  const harness = (h = await Harness.sqlite())
  for (const space of ['P', 'Q']) await harness.nodes.put(SYSTEM, space as NodePath, { nodeType: 'Space', content: {} })
  await harness.nodes.put(SYSTEM, 'P/_Access/u1_Access' as NodePath, { nodeType: 'AccessAssignment', content: { Subject: USER, Role: 'Editor' } })
  await harness.nodes.put(SYSTEM, IN as NodePath, { nodeType: 'Document', content: {} })
  await harness.nodes.put(SYSTEM, 'Q/other' as NodePath, { nodeType: 'Document', content: { n: 0 } })
  for (const d of ['d0', 'd1']) await harness.nodes.put(ME, `${IN}/${d}` as NodePath, { nodeType: 'Document', content: { n: 0 } })
  const v = await harness.storage.lastVersion()
  return { h: harness, event: { eventId: 'e1', version: v, path: `${IN}/d1`, nodeType: 'Document', kind: 'Updated', attempt: 1, token: 't', expiresAt: 0 } }
}

/**
 * A storage whose head moves before each read of it: `write` commits something (awaited) every
 * time the hydration reads the head, so a commit lands inside every read window.
 */
function movingHead(harness: Harness, write: (n: number) => Promise<unknown>) {
  let n = 0
  return {
    lastVersion: async () => {
      await write(n++)
      return harness.storage.lastVersion()
    },
    changesSince: (v: number, limit: number) => harness.storage.changesSince(v, limit),
  }
}

/**
 * [CTX16] A hydration is re-read only when a commit landing while it reads touches what it read
 * (a node got, a child of a parent listed, an access rule). Before, any commit anywhere did: on a
 * loaded server a pull was refused `unavailable` now and then (a CI rehearsal's failure).
 */
describe('[CTX16] what a commit landing during a hydration costs', () => {
  it('a commit elsewhere in the database does not refuse the pull; the view is the state as of the head after it', async () => {
    const { h, event } = await setUp()
    const storage = movingHead(h, (n) => h.nodes.patch(SYSTEM, 'Q/other' as NodePath, { n: n + 1 }))
    const view = await hydrate(h.nodes, storage, ME, compileDefinition(DEF), event, {})
    const head = await h.storage.lastVersion()
    // Two reads of the head, each after a commit elsewhere: the head after the reads is the view's.
    expect(view.contextHead).toBe(head)
    expect((view.results.first as MeshNode).path).toBe(`${IN}/d0`)
    expect((view.results.siblings as MeshNode[]).map((n) => n.path)).toEqual([`${IN}/d0`, `${IN}/d1`])
    expect(view.event?.path).toBe(`${IN}/d1`)
  })

  const touching: Array<[string, (h: Harness, n: number) => Promise<unknown>]> = [
    ['a node it got', (h, n) => h.nodes.patch(ME, `${IN}/d0` as NodePath, { n: n + 1 })],
    ['the event node', (h, n) => h.nodes.patch(ME, `${IN}/d1` as NodePath, { n: n + 1 })],
    ['a new child of a parent it listed', (h, n) => h.nodes.put(ME, `${IN}/new${n}` as NodePath, { nodeType: 'Note', content: {} })],
    [
      'an access rule elsewhere',
      (h, n) => h.nodes.put(SYSTEM, `Q/_Access/x${n}_Access` as NodePath, { nodeType: 'AccessAssignment', content: { Subject: `x${n}`, Role: 'Viewer' } }),
    ],
    ['a membership elsewhere', (h, n) => h.nodes.put(SYSTEM, `Q/team/x${n}_Membership` as NodePath, { nodeType: 'Membership', content: {} })],
  ]
  for (const [what, write] of touching) {
    it(`a commit to ${what} during every read refuses it with unavailable, never a torn view`, async () => {
      const { h, event } = await setUp()
      if (what === 'a membership elsewhere') await h.nodes.put(SYSTEM, 'Q/team' as NodePath, { nodeType: 'Group', content: {} })
      const storage = movingHead(h, (n) => write(h, n))
      const err = await hydrate(h.nodes, storage, ME, compileDefinition(DEF), event, {}).then(
        () => null,
        (e: unknown) => e,
      )
      expect((err as { code?: string } | null)?.code).toBe('unavailable')
    })
  }
})

/**
 * [CTX16] The guarantee itself, seeded: whatever commits land inside the read windows (elsewhere,
 * on a node read, a new child of a parent listed, an access rule), a hydration either refuses
 * (`unavailable`) or returns exactly the committed state as of its `contextHead`.
 */
describe('[CTX16] a hydration is the state as of its head, whatever lands while it reads (seeded)', () => {
  it('every node it returns, and the children it lists, are the committed state at contextHead', { timeout: 120_000 }, async () => {
    await forEachSeed('contextual hydration window', seeds(30, 5200), async (seed) => {
      const rng = new Rng(seed)
      const { h, event } = await setUp()
      const states = new Map<string, Array<{ version: number; content: JsonObject | null }>>()
      const tap = h.nodes.changes$.subscribe((c: LiveChange) => {
        const list = states.get(c.path) ?? []
        list.push({ version: c.version, content: c.node ? c.node.content : null })
        states.set(c.path, list)
      })
      for (const path of [`${IN}/d0`, `${IN}/d1`]) {
        const n = (await h.nodes.get(SYSTEM, path as NodePath))!
        states.set(path, [{ version: n.version, content: n.content }, ...(states.get(path) ?? [])])
      }
      const at = (path: string, head: number) => (states.get(path) ?? []).filter((e) => e.version <= head).at(-1)
      let made = 0
      const writes: Array<(n: number) => Promise<unknown>> = [
        async () => undefined,
        (n) => h.nodes.patch(SYSTEM, 'Q/other' as NodePath, { n: n + 1 }),
        (n) => h.nodes.patch(ME, `${IN}/${rng.pick(['d0', 'd1'])}` as NodePath, { n: n + 1 }),
        () => h.nodes.put(ME, `${IN}/m${made++}` as NodePath, { nodeType: 'Document', content: {} }),
        (n) => h.nodes.put(SYSTEM, `Q/_Access/x${n}_Access` as NodePath, { nodeType: 'AccessAssignment', content: { Subject: `x${n}`, Role: 'Viewer' } }),
      ]
      // Mostly writes elsewhere or none, so that both answers happen.
      const storage = movingHead(h, (n) => rng.pick(rng.next() < 0.6 ? writes.slice(0, 2) : writes)(n))
      let answered = 0
      const steps = 12
      for (let step = 0; step < steps; step++) {
        const view = await hydrate(h.nodes, storage, ME, compileDefinition(DEF), event, {}).catch((err: { code?: string }) => {
          expect(err.code).toBe('unavailable')
          return null
        })
        if (!view) continue
        answered++
        const head = view.contextHead
        const got = [view.event, view.results.first as MeshNode | null, ...(view.results.siblings as MeshNode[])]
        for (const n of got) {
          expect(n).not.toBeNull()
          expect(n!.version).toBe(at(n!.path, head)?.version)
          expect(n!.content).toEqual(at(n!.path, head)?.content)
        }
        const children = [...states.keys()].filter((p) => p.startsWith(`${IN}/`) && !p.slice(IN.length + 1).includes('/') && at(p, head)?.content)
        expect((view.results.siblings as MeshNode[]).map((n) => n.path).sort()).toEqual(children.sort())
      }
      tap.unsubscribe()
      expect(answered).toBeGreaterThan(0)
      await h.close()
      return steps
    })
  })
})
