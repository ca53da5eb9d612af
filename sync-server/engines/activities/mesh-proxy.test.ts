import { setMaxListeners } from 'node:events'
import { Subject } from 'rxjs'
import { afterEach, describe, expect, it, vi } from 'vitest'
import { SYSTEM, permissionsFromMask, type MeshNode, type NodePath } from '../../../shared/index.js'
import type { NodeApi } from '../../nodes/index.js'
import { meshCall } from './mesh-proxy.js'

afterEach(() => vi.restoreAllMocks())

describe('[ACT18] Mesh.waitFor', () => {
  it("many waits on one node cost one JSON text of the watched field per change, not one per wait (a Viewer's 256 waits slowed every write 25×)", async () => {
    const changes = new Subject<MeshNode | null>()
    const node = (items: number): MeshNode => ({ path: 'S/doc', nodeType: 'Document', name: 'doc', content: { Items: items, Big: 'x'.repeat(1000) }, version: items } as unknown as MeshNode)
    const nodes = {
      get: async () => node(1),
      node$: () => changes,
      permissions: () => permissionsFromMask(0xff),
    } as unknown as NodeApi
    const abort = new AbortController()
    // One run's signal, as many waits as the script makes (each listens to it).
    setMaxListeners(0, abort.signal)
    const waits = Array.from({ length: 64 }, () => meshCall(nodes, SYSTEM, 'waitFor', ['S/doc' as NodePath, { Items: 3 }, { timeoutMs: 60_000 }], abort.signal))
    await new Promise((r) => setImmediate(r))
    const stringify = vi.spyOn(JSON, 'stringify')
    changes.next(node(2))
    expect(stringify.mock.calls.length).toBe(1)
    changes.next(node(3))
    expect(stringify.mock.calls.length).toBe(2)
    const done = await Promise.all(waits)
    expect(done).toHaveLength(64)
    for (const d of done) expect((d as unknown as MeshNode).content.Items).toBe(3)
  })
})
