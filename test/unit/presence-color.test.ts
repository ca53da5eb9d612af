// @vitest-environment node
import 'fake-indexeddb/auto'
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import * as decoding from 'lib0/decoding'
import { MuxType, type MuxFrame } from '../../shared/protocol.js'
import { NodeStore } from '../../web/store/index.js'
import { NodeReplica } from '../../web/sync/node-replica.js'
import type { MuxConnection, RoomHandler } from '../../web/sync/mux-connection.js'
import { colorsToAvoid, presenceColor } from '../../web/sync/presence-color.js'
import { waitFor } from '../helpers/wait-for.js'

/** User ids whose hash colour is the same: without the free-colour rule they would share it. */
function sameHashColour(count: number): string[] {
  const ids: string[] = []
  const want = presenceColor('user-0').color
  for (let i = 0; ids.length < count; i++) if (presenceColor(`user-${i}`).color === want) ids.push(`user-${i}`)
  return ids
}

describe('presence colours', () => {
  it('the rule settles to distinct colours for up to eight people, whatever their ids and the order replicas look (seeded)', () => {
    fc.assert(
      fc.property(
        fc.uniqueArray(fc.integer({ min: 1, max: 2 ** 31 - 1 }), { minLength: 1, maxLength: 8 }),
        fc.array(fc.string({ minLength: 1, maxLength: 6 }), { minLength: 8, maxLength: 8 }),
        fc.array(fc.nat(), { minLength: 64, maxLength: 64 }),
        (clientIds, names, order) => {
          const users = clientIds.map((clientId, i) => ({ clientId, userId: `${names[i]}#${i}`, color: presenceColor(`${names[i]}#${i}`).color }))
          // Replicas look in any order; each round every one looks once. N rounds settle it.
          for (let round = 0; round < users.length; round++) {
            const seq = users.map((_, i) => i).sort((a, b) => (order[(a + round * 8) % 64]! - order[(b + round * 8) % 64]!))
            for (const i of seq) {
              const self = users[i]!
              const states = users.map((u) => [u.clientId, { user: { id: u.userId, color: u.color } }] as [number, { user: { id: string; color: string } }])
              self.color = presenceColor(self.userId, colorsToAvoid(self, states)).color
            }
          }
          expect(new Set(users.map((u) => u.color)).size).toBe(users.length)
          // Settled: one more look changes nobody.
          for (const self of users) {
            const states = users.map((u) => [u.clientId, { user: { id: u.userId, color: u.color } }] as [number, { user: { id: string; color: string } }])
            expect(presenceColor(self.userId, colorsToAvoid(self, states)).color).toBe(self.color)
          }
        },
      ),
      { seed: 20261204, numRuns: 300 },
    )
  })

  it('tabs of the same person are not avoided, and a crafted state without a colour is ignored', () => {
    const taken = colorsToAvoid({ clientId: 10, userId: 'ann' }, [
      [1, { user: { id: 'ann', color: '#1f6fd1' } }],
      [2, { user: { id: 'bob', color: 42 } }],
      [3, {}],
      [11, { user: { id: 'carol', color: '#c2410c' } }],
    ])
    expect([...taken]).toEqual([])
  })

  it('replicas of one node, relayed as the server would, show each person in a colour nobody else on it has', async () => {
    const ids = sameHashColour(4)
    const handlers: RoomHandler[] = []
    const replicas: NodeReplica[] = []
    const stores: NodeStore[] = []
    for (let i = 0; i < ids.length; i++) {
      const store = new NodeStore(`presence-color-${i}-${Date.now()}`)
      await store.open()
      stores.push(store)
      const conn = {
        isOpen: true,
        join(_path: string, handler: RoomHandler) {
          handlers[i] = handler
          handler.onSocketOpen()
        },
        leave() {},
        send(frame: MuxFrame) {
          // The server relays awareness to the others in the room (sync messages it answers itself).
          if (frame.type !== MuxType.Sync || decoding.readVarUint(decoding.createDecoder(frame.message)) !== 1) return true
          queueMicrotask(() => handlers.forEach((h, j) => j !== i && h.onFrame(frame)))
          return true
        },
      }
      const replica = new NodeReplica('space/doc', { store, conn: conn as unknown as MuxConnection, broadcast: () => {}, onIdle: () => {} })
      replica.startSync()
      await replica.ready
      await waitFor(() => handlers[i] !== undefined, { description: 'joined' })
      replica.onFrame({ type: MuxType.Joined, path: 'space/doc', permissions: 0xffff })
      replicas.push(replica)
    }
    for (let i = 0; i < ids.length; i++) replicas[i]!.setPresence({ id: ids[i]!, name: ids[i]! })

    /** Each replica's view of each person's colour. */
    const views = () =>
      replicas.map((r) => new Map([...r.awareness.getStates().values()].map((s) => [(s as { user: { id: string } }).user.id, (s as { user: { color: string } }).user.color])))
    await waitFor(() => views().every((v) => v.size === ids.length && new Set(v.values()).size === ids.length), { description: 'four people, four colours, on every replica' })
    const first = [...views()[0]!.entries()].sort()
    for (const v of views()) expect([...v.entries()].sort()).toEqual(first)
    for (const r of replicas) r.dispose()
    for (const s of stores) s.close()
  })
})
