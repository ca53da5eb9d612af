import { afterEach, describe, expect, it } from 'vitest'
import { SYSTEM, type JsonObject, type MeshNode, type NodePath } from '../../shared/index.js'
import type { LiveChange } from '../../sync-server/nodes/index.js'
import { ME, Harness, USER, fenceOf } from './contextual-harness.js'
import { Rng, forEachSeed, seeds } from './rng.js'

let h: Harness | null = null
afterEach(async () => {
  await h?.close()
  h = null
})

const SUB = 'P/hsub' as NodePath
const IN = 'P/in'

/** Every committed state of every node, by version (from the node service's feed). */
class History {
  private readonly byPath = new Map<string, Array<{ version: number; content: JsonObject | null }>>()
  record(c: LiveChange): void {
    const list = this.byPath.get(c.path) ?? []
    list.push({ version: c.version, content: c.node ? c.node.content : null })
    this.byPath.set(c.path, list)
  }
  /** The path's state as of `head`: its last committed change at or before it (undefined: none). */
  at(path: string, head: number): { version: number; content: JsonObject | null } | undefined {
    let last: { version: number; content: JsonObject | null } | undefined
    for (const e of this.byPath.get(path) ?? []) if (e.version <= head && (!last || e.version > last.version)) last = e
    return last
  }
  /** The paths under `parent` (direct children) that exist as of `head`. */
  childrenAt(parent: string, head: number): string[] {
    const out: string[] = []
    for (const path of this.byPath.keys()) {
      if (path.slice(0, path.lastIndexOf('/')) !== parent) continue
      const s = this.at(path, head)
      if (s && s.content !== null) out.push(path)
    }
    return out.sort()
  }
}

/** A node hydrated as of `head` is exactly the committed state the history has for it then. */
function expectAsOf(history: History, node: MeshNode, head: number): void {
  const s = history.at(node.path, head)
  expect(s, `${node.path} has no committed state at ${head}`).toBeDefined()
  expect(node.version).toBe(s!.version)
  expect(node.content).toEqual(s!.content)
}

/**
 * [CTX16] Hydration is one consistent view: whatever writes land while a work item's context is
 * read, every node it hydrates (the event's node, a Get, a Children list) is exactly what was
 * committed as of its `contextHead` (no newer version, no older one, no write not yet durable), and
 * a Children list holds exactly the children that existed then. Seeded interleavings of pulls with
 * unawaited patches and creates of the event's siblings and writes elsewhere (which must not
 * refuse the pull), on the real node service and SQLite.
 */
describe('[CTX16] hydration under concurrent writes (seeded)', () => {
  it('every hydrated node is the committed state as of contextHead', { timeout: 300_000 }, async () => {
    await forEachSeed('contextual hydration', seeds(6, 4100), async (seed) => {
      const rng = new Rng(seed)
      h = await Harness.sqlite()
      const history = new History()
      const tap = h.nodes.changes$.subscribe((c) => history.record(c))
      await h.nodes.put(SYSTEM, 'P' as NodePath, { nodeType: 'Space', content: {} })
      // Another space's node, written meanwhile: a commit the hydration did not read.
      await h.nodes.put(SYSTEM, 'Q' as NodePath, { nodeType: 'Space', content: {} })
      await h.nodes.put(SYSTEM, 'Q/other' as NodePath, { nodeType: 'Document', content: { n: 0 } })
      await h.nodes.put(SYSTEM, 'P/_Access/u1_Access' as NodePath, { nodeType: 'AccessAssignment', content: { Subject: USER, Role: 'Editor' } })
      await h.nodes.put(SYSTEM, IN as NodePath, { nodeType: 'Document', content: {} })
      await h.nodes.put(ME, SUB, {
        nodeType: 'ContextualSubscription',
        content: {
          Operation: 'look',
          Events: { NodeTypes: ['Document'], Kinds: ['Created', 'Updated'], PathPrefix: IN },
          Hydration: {
            source: { Get: '{event.path}' },
            first: { Get: `${IN}/d0` },
            siblings: { Children: '{event.parent}', NodeType: 'Document', Limit: 50 },
          },
          Reactions: { annotate: { Command: 'patch', Target: '{event.path}', Parameters: { Note: { Type: 'string' } } } },
          Limits: { LeaseSeconds: 300, MaxInFlight: 8, MaxAttempts: 10 },
        },
      })
      const s = h.service
      const docs = ['d0', 'd1', 'd2']
      for (const d of docs) await h.nodes.put(ME, `${IN}/${d}` as NodePath, { nodeType: 'Document', content: { n: 0 } })
      await s.next(ME, { subscription: SUB, consumer: 'c' })
      const writes: Promise<unknown>[] = []
      let made = docs.length
      const write = () => {
        if (rng.next() < 0.3) writes.push(h!.nodes.patch(SYSTEM, 'Q/other' as NodePath, { n: rng.int(1, 1_000_000) }))
        else if (made < 30 && rng.next() < 0.25) {
          const d = `d${made++}`
          // Patched only once it exists.
          writes.push(h!.nodes.put(ME, `${IN}/${d}` as NodePath, { nodeType: 'Document', content: { n: 0 } }).then(() => docs.push(d)))
        } else writes.push(h!.nodes.patch(ME, `${IN}/${rng.pick(docs)}` as NodePath, { n: rng.int(1, 1_000_000), [`f${rng.int(0, 3)}`]: rng.int(0, 9) }))
      }
      let checked = 0
      const steps = 25
      for (let step = 0; step < steps; step++) {
        // Writes fired before and while the pull reads, some settled in between.
        for (let i = rng.int(0, 3); i > 0; i--) write()
        const pulled = s.next(ME, { subscription: SUB, consumer: 'c' }).then((r) => r)
        for (let i = rng.int(0, 4); i > 0; i--) {
          if (rng.next() < 0.5) await new Promise((r) => setImmediate(r))
          write()
        }
        let got: Awaited<ReturnType<typeof s.next>>
        try {
          got = await pulled
        } catch (err) {
          // The context kept changing on every try: a clear refusal, never a torn view.
          expect((err as { code?: string }).code).toBe('unavailable')
          continue
        }
        const item = got.item
        if (!item) continue
        await Promise.all(writes.splice(0))
        const head = item.contextHead
        expect(head).toBeGreaterThanOrEqual(item.event.version)
        const hyd = item.hydration as { source: MeshNode | null; first: MeshNode | null; siblings: MeshNode[] }
        if (item.event.node) expectAsOf(history, item.event.node as MeshNode, head)
        if (hyd.source) expectAsOf(history, hyd.source, head)
        else expect(history.at(item.event.path, head)?.content ?? null).toBeNull()
        expectAsOf(history, hyd.first!, head)
        for (const n of hyd.siblings) expectAsOf(history, n, head)
        expect(hyd.siblings.map((n) => n.path).sort()).toEqual(history.childrenAt(IN, head).filter((p) => p !== SUB))
        await s.ack(ME, fenceOf({ consumerId: got.consumerId, item }))
        checked++
      }
      await Promise.all(writes)
      tap.unsubscribe()
      expect(checked).toBeGreaterThan(0)
      await h.close()
      h = null
      return steps
    })
  })
})
