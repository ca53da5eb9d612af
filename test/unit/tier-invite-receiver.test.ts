import { describe, expect, it } from 'vitest'
import pino from 'pino'
import { NEVER } from 'rxjs'
import { type MeshNode, type NodePath } from '../../shared/index.js'
import { registerTierInviteType, tierInviteModule, tierInviteReceiver } from '../../sync-server/engines/subscriptions/modules/tier-invite.js'
import type { NodeApi } from '../../sync-server/nodes/types.js'

/** [SUB8] [SUB11] The TierInvite receiver's scheduling, over a node API that counts what it is asked. */
registerTierInviteType()
const log = pino({ level: 'silent' })

function invite(path: string): MeshNode {
  return { path: path as NodePath, nodeType: 'TierInvite', name: path, content: {}, createdBy: 'system', createdAt: '', updatedAt: '', version: 1, state: 'Active' }
}

/** Every `get` waits for the test to let it go, so passes overlap for real. */
function fakeNodes(all: MeshNode[]) {
  const gates: Array<() => void> = []
  const stats = { gets: 0, inFlight: 0, maxInFlight: 0 }
  const nodes = {
    async get(_p: unknown, path: NodePath) {
      stats.gets++
      stats.inFlight++
      stats.maxInFlight = Math.max(stats.maxInFlight, stats.inFlight)
      await new Promise<void>((resolve) => gates.push(resolve))
      stats.inFlight--
      return all.find((n) => n.path === path) ?? null
    },
    async query() {
      return all
    },
  } as unknown as NodeApi
  const releaseAll = async () => {
    while (gates.length) {
      for (const g of gates.splice(0)) g()
      await new Promise((r) => setTimeout(r, 0))
    }
  }
  return { nodes, stats, gates, releaseAll }
}

describe('TierInvite receiver', () => {
  it('[SUB8] changes that arrive during a pass are not dropped: they coalesce into exactly one more pass', async () => {
    const f = fakeNodes([invite('Admin/T/a')])
    const receiver = tierInviteReceiver(f.nodes, log)
    const first = receiver.run('Admin/T/a' as NodePath)
    // Two more deliveries (or the receiver's own write) while the first pass reads the node.
    void receiver.run('Admin/T/a' as NodePath)
    void receiver.run('Admin/T/a' as NodePath)
    await f.releaseAll()
    await first
    expect(f.stats.gets).toBe(2)
    // Idle again: the next change is a fresh pass.
    const again = receiver.run('Admin/T/a' as NodePath)
    await f.releaseAll()
    await again
    expect(f.stats.gets).toBe(3)
  })

  it('[SUB11] the boot reconcile of 100 TierInvites runs at most 16 at a time, and reaches every one', async () => {
    const all = Array.from({ length: 100 }, (_, i) => invite(`Admin/T/${i}`))
    const f = fakeNodes(all)
    const started = tierInviteModule.start!({ nodes: f.nodes, log, changes$: NEVER })
    for (let i = 0; i < 20 && f.stats.gets < 100; i++) {
      await new Promise((r) => setTimeout(r, 0))
      expect(f.stats.inFlight).toBeLessThanOrEqual(16)
      for (const g of f.gates.splice(0)) g()
    }
    await f.releaseAll()
    const stop = await started
    stop()
    expect(f.stats.gets).toBe(100)
    expect(f.stats.maxInFlight).toBe(16)
  })
})
