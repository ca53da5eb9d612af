import fc from 'fast-check'
import pino from 'pino'
import { afterEach, describe, expect, it, vi } from 'vitest'
import * as Y from 'yjs'
import { FanOut, holdsUpdate } from '../../sync-server/cluster/fan-out.js'
import type { BusMessage } from '../../sync-server/cluster/redis-bus.js'
import type { EarlyUpdate, NodeService } from '../../sync-server/nodes/index.js'
import type { StorageAdapter, StoredDoc } from '../../sync-server/storage/index.js'

/**
 * [SCALE12] An update another instance sent before its commit, whose change message is late: the
 * database is asked before it is held lost. Logic only (the nodes and storage are stand-ins
 * with real Yjs updates); the two-instance behaviour is cluster-early-confirm.pg.test.ts.
 */
function setup(stored: () => StoredDoc | null) {
  const taken: EarlyUpdate[] = []
  const dropped: string[] = []
  const loads = { count: 0 }
  const nodes = {
    connectCluster: () => {},
    applyEarly: (_path: string, _key: string, _u: Uint8Array, _c: unknown, early: EarlyUpdate) => (taken.push(early), true),
    dropEarly: (_path: string, key: string) => dropped.push(key),
  } as unknown as NodeService
  const storage = { lastVersion: async () => 0, loadDoc: async () => (loads.count++, stored()), changesSince: async () => [] } as unknown as StorageAdapter
  const fan = new FanOut({ instanceId: 'here', nodes, storage, log: pino({ level: 'silent' }), publish: () => {}, pollMs: 100, earlyConfirmMs: 1000 })
  const receive = (update: Uint8Array, key = 'there:1') =>
    fan.receive({ t: 'update', from: 'there', key, path: 'S/doc', update: Buffer.from(update).toString('base64') } as BusMessage)
  return { fan, taken, dropped, receive, loads }
}

function edit(doc: Y.Doc, f: (m: Y.Map<unknown>) => void): Uint8Array {
  const before = Y.encodeStateVector(doc)
  doc.transact(() => f(doc.getMap('content')))
  return Y.encodeStateAsUpdate(doc, before)
}

afterEach(() => vi.useRealTimers())

describe('[SCALE12] a late early update', () => {
  it('one the database holds is confirmed, not failed: what was built on it is acknowledged', async () => {
    vi.useFakeTimers()
    const doc = new Y.Doc()
    const base = edit(doc, (m) => m.set('A', 1))
    const late = edit(doc, (m) => m.set('B', 2))
    const { fan, taken, dropped, receive } = setup(() => ({ snapshot: base, updates: [late] }))
    await fan.start()
    receive(late)
    expect(taken).toHaveLength(1)
    await vi.advanceTimersByTimeAsync(500)
    expect(taken[0]!.done).toBe(false)
    await vi.advanceTimersByTimeAsync(1000)
    expect(taken[0]!.done).toBe(true)
    await expect(taken[0]!.settled).resolves.toBeUndefined()
    expect(dropped).toEqual([])
    await fan.close()
  })

  it('one the database does not hold waits (a slow commit), and is held lost at three times the wait', async () => {
    vi.useFakeTimers()
    const doc = new Y.Doc()
    const base = edit(doc, (m) => m.set('A', 1))
    const late = edit(doc, (m) => m.set('B', 2))
    let store: StoredDoc = { snapshot: base, updates: [] }
    const { fan, taken, dropped, receive, loads } = setup(() => store)
    await fan.start()
    receive(late, 'there:1')
    receive(edit(doc, (m) => m.set('C', 3)), 'there:2')
    await vi.advanceTimersByTimeAsync(2000)
    expect(taken.map((t) => t.done)).toEqual([false, false])
    // Asked once in the second second (both entries, one node: one read), not at each 100 ms poll.
    expect(loads.count).toBe(1)
    // The first commit lands (its message lost): found in the database at the next look.
    store = { snapshot: base, updates: [late] }
    await vi.advanceTimersByTimeAsync(200)
    expect(taken.map((t) => t.done)).toEqual([true, false])
    await vi.advanceTimersByTimeAsync(1000)
    expect(taken[1]!.done).toBe(true)
    await expect(taken[1]!.settled).rejects.toThrow('never confirmed')
    expect(dropped).toEqual(['there:2'])
    await fan.close()
  })

  it('a change message that comes late still confirms it at once, and a deletion alone is never proved by the database', async () => {
    vi.useFakeTimers()
    const doc = new Y.Doc()
    const base = edit(doc, (m) => m.set('A', 1))
    const del = edit(doc, (m) => m.delete('A'))
    expect(Y.parseUpdateMeta(del).to.size).toBe(0)
    const { fan, taken, dropped, receive } = setup(() => ({ snapshot: base, updates: [del] }))
    await fan.start()
    receive(del)
    await vi.advanceTimersByTimeAsync(3200)
    await expect(taken[0]!.settled).rejects.toThrow('never confirmed')
    expect(dropped).toEqual(['there:1'])
    receive(edit(doc, (m) => m.set('D', 4)), 'there:2')
    await vi.advanceTimersByTimeAsync(1500)
    fan.receive({ t: 'change', from: 'there', version: 1, path: 'S/doc', nodeType: 'Document', kind: 'updated', by: 'u', origin: 'client', early: 'there:2' } as BusMessage)
    expect(taken[1]!.done).toBe(true)
    await expect(taken[1]!.settled).resolves.toBeUndefined()
    await fan.close()
  })

  it('holdsUpdate says "held" only when applying the update to the stored state would change nothing (seeded)', () => {
    fc.assert(
      fc.property(
        fc.array(fc.tuple(fc.nat(2), fc.constantFrom('A', 'B', 'C'), fc.oneof(fc.integer(), fc.constant(null))), { minLength: 1, maxLength: 12 }),
        fc.array(fc.boolean(), { minLength: 12, maxLength: 12 }),
        fc.nat(11),
        (edits, keep, pick) => {
          const docs = [new Y.Doc(), new Y.Doc(), new Y.Doc()]
          const updates: Uint8Array[] = []
          for (const [who, key, value] of edits) {
            const d = docs[who]!
            // Each writer sees everything before it (as a server relays), then edits.
            for (const u of updates) Y.applyUpdate(d, u)
            updates.push(edit(d, (m) => (value === null ? m.delete(key) : m.set(key, value))))
          }
          const stored = updates.filter((_, i) => keep[i])
          const u = updates[pick % updates.length]!
          const held = holdsUpdate({ snapshot: null, updates: stored }, u)
          if (held) {
            const s = new Y.Doc()
            for (const x of stored) Y.applyUpdate(s, x)
            const before = Y.encodeStateVector(s)
            const json = JSON.stringify(s.getMap('content').toJSON())
            Y.applyUpdate(s, u)
            expect(Y.encodeStateVector(s)).toEqual(before)
            expect(JSON.stringify(s.getMap('content').toJSON())).toBe(json)
          }
          // Everything stored holds each of its own inserting updates.
          if (keep.slice(0, updates.length).every(Boolean) && Y.parseUpdateMeta(u).to.size > 0) expect(held).toBe(true)
        },
      ),
      { seed: 1204, numRuns: 400 },
    )
  })
})
