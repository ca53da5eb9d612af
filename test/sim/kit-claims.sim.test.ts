import { afterEach, describe, expect, it } from 'vitest'
import { SYSTEM, type NodePath } from '../../shared/index.js'
import { acquire, claim, fenced, isExpired, release, renew } from '../../sync-server/engines/kit/index.js'
import { SimMesh } from './mesh.js'
import { forEachSeed, seeds } from './rng.js'

let mesh: SimMesh | null = null
afterEach(async () => {
  await mesh?.close()
  mesh = null
})

describe('[KIT3] kit/claim and kit/lease over the real node service', () => {
  it('of racing claimers exactly one claims, and the claim is one write', async () => {
    await forEachSeed('kit claims', seeds(5, 300), async (seed) => {
      mesh = await SimMesh.open({ seed, engines: [] })
      const m = mesh
      const path = `Work/${seed}` as NodePath
      await m.nodes.put(SYSTEM, path, { nodeType: 'Document', name: 'w', content: { State: 'Pending' } })
      const n = m.rng.int(2, 8)
      const results = await Promise.all(
        Array.from({ length: n }, (_, i) =>
          claim(m.nodes, path, {
            when: (cur) => cur?.content.State === 'Pending',
            write: (cur) => ({ nodeType: cur!.nodeType, content: { State: 'Taken', By: i } }),
          }),
        ),
      )
      expect(results.filter((r) => r.claimed)).toHaveLength(1)
      const winner = results.findIndex((r) => r.claimed)
      expect((await m.nodes.get(SYSTEM, path))?.content).toEqual({ State: 'Taken', By: winner })
      await m.close()
      mesh = null
      return n
    })
  })

  it('a lease: one holder at a time, renew and fenced writes only with the current fence, expiry frees it', async () => {
    mesh = await SimMesh.open({ seed: 1, engines: [] })
    const m = mesh
    const path = 'Work/lease' as NodePath
    await m.nodes.put(SYSTEM, path, { nodeType: 'Document', name: 'l', content: { Value: 0 } })
    const [a, b] = await Promise.all([acquire(m.nodes, path, 'a', 1_000, m.clock), acquire(m.nodes, path, 'b', 1_000, m.clock)])
    const first = (a ?? b)!
    expect([a, b].filter(Boolean)).toHaveLength(1)
    expect(first.fence).toBe(1)
    expect(await fenced(m.nodes, path, first, m.clock, (cur) => ({ ...cur.content, Value: 1 }))).toBe(true)
    await m.clock.advance(500)
    const renewed = (await renew(m.nodes, path, first, 1_000, m.clock))!
    expect(renewed.expiresAt).toBe(m.clock.now() + 1_000)
    await m.clock.advance(1_000)
    expect(isExpired((await m.nodes.get(SYSTEM, path))!.content, m.clock.now())).toBe(true)
    // Expired: another takes it with a higher fence; the old holder is fenced out.
    const other = (await acquire(m.nodes, path, 'c', 1_000, m.clock))!
    expect(other.fence).toBe(2)
    expect(await fenced(m.nodes, path, renewed, m.clock, (cur) => ({ ...cur.content, Value: 99 }))).toBe(false)
    expect(await renew(m.nodes, path, renewed, 1_000, m.clock)).toBeNull()
    expect(await release(m.nodes, path, renewed)).toBe(false)
    expect(await release(m.nodes, path, other)).toBe(true)
    const after = (await m.nodes.get(SYSTEM, path))!.content
    expect(after).toEqual({ Value: 1, LeaseFence: 2 })
    // A crash keeps the lease state (it is the node's): the fence never goes back.
    await m.crash()
    expect((await acquire(m.nodes, path, 'd', 1_000, m.clock))!.fence).toBe(3)
  })
})

describe('[KIT7] queryFields: a light page of paths and named fields, never the whole content', () => {
  it('projects the fields, pages by path, filters like query; field names and principals are checked', async () => {
    mesh = await SimMesh.open({ seed: 2, engines: [] })
    const m = mesh
    const big = Array.from({ length: 2_000 }, (_, i) => ({ Level: 'Info', Text: `line ${i}` }))
    for (let i = 0; i < 7; i++) {
      await m.nodes.put(SYSTEM, `Logs/l${i}` as NodePath, { nodeType: 'Document', name: `l${i}`, content: { Status: i % 2 ? 'Running' : 'Done', N: i, Flag: i === 3, Messages: big } })
    }
    const nodes = m.nodes as typeof m.nodes & { queryFields(p: typeof SYSTEM, q: object, f: string[]): Promise<{ path: string; fields: Record<string, unknown> }[]> }
    const first = await nodes.queryFields(SYSTEM, { nodeType: 'Document', where: { Status: 'Running' }, limit: 2 }, ['Status', 'N', 'Flag', 'Missing'])
    expect(first).toEqual([
      { path: 'Logs/l1', nodeType: 'Document', stale: false, fields: { Status: 'Running', N: 1, Flag: false, Missing: undefined } },
      { path: 'Logs/l3', nodeType: 'Document', stale: false, fields: { Status: 'Running', N: 3, Flag: true, Missing: undefined } },
    ])
    const rest = await nodes.queryFields(SYSTEM, { nodeType: 'Document', where: { Status: 'Running' }, limit: 2, after: 'Logs/l3' }, ['N'])
    expect(rest.map((r) => r.fields.N)).toEqual([5])
    await expect(nodes.queryFields(SYSTEM, { nodeType: 'Document' }, ["N') --"])).rejects.toMatchObject({ code: 'invalid_request' })
    await expect(nodes.queryFields({ kind: 'user', userId: 'alice' } as never, { nodeType: 'Document' }, ['N'])).rejects.toMatchObject({ code: 'forbidden' })
  })
})
