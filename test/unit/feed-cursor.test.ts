import { describe, expect, it } from 'vitest'
import pino from 'pino'
import { SYSTEM, userPrincipal, type ChangeRecord, type MeshNode, type NodePath, type NodeQuery, type PathRange, type UserId } from '../../shared/index.js'
import { NodeService } from '../../sync-server/nodes/node-service.js'
import type { AccessService } from '../../sync-server/access/access-service.js'
import type { StorageAdapter } from '../../sync-server/storage/types.js'
import { nextVersion } from '../../web/api/index.js'

/**
 * [FEED1] [FEED2] [FEED3] The paging cursor of the node service over an in-memory change log and
 * node table: what it examines, what it returns, and that it always advances.
 */
const alice = userPrincipal('alice' as UserId)

function service(changes: ChangeRecord[], nodes: MeshNode[] = []) {
  const reads = { changes: 0, queries: 0, rows: 0 }
  const storage = {
    async changesSince(version: number, limit: number) {
      reads.changes++
      const out = changes.filter((c) => c.version > version).slice(0, limit)
      reads.rows += out.length
      return out
    },
    async queryNodes(q: NodeQuery, within?: PathRange) {
      reads.queries++
      const out = nodes
        .filter((n) => (q.parent === undefined || n.path.startsWith(`${q.parent}/`)) && (q.after === undefined || n.path > q.after))
        .filter((n) => !within || (n.path >= within.from && n.path < within.to))
        .slice(0, q.limit ?? 100)
      reads.rows += out.length
      return out
    },
  } as unknown as StorageAdapter
  // Alice reads what is under `mine/` only: one readable region ([QUERY1]).
  const access = {
    has: (_p: unknown, path: string) => path.startsWith('mine/'),
    readRegions: () => [{ from: 'mine/', to: 'mine0' }],
    observe: () => undefined,
  } as unknown as AccessService
  const svc = new NodeService(storage, access, { idleUnloadMs: 60_000, log: pino({ level: 'silent' }) })
  return { svc, reads }
}

const change = (version: number, path: string): ChangeRecord => ({ version, path: path as NodePath, nodeType: 'Document', kind: 'Updated' })
const node = (path: string): MeshNode => ({ path: path as NodePath, nodeType: 'Document', name: path, content: {}, createdBy: 'x', createdAt: '', updatedAt: '', version: 1, state: 'Active' })

describe('change feed cursor', () => {
  it('[FEED1] an empty page still advances: `next` is the last version examined, readable or not', async () => {
    const log = Array.from({ length: 600 }, (_, i) => change(i + 1, `other/${i}`))
    const { svc } = service(log)
    expect(await svc.changesPage(alice, 0, 500)).toEqual({ items: [], next: 600 })
    expect(await svc.changesPage(alice, 600, 500)).toEqual({ items: [], next: 600 })
    await svc.close()
  })

  it('[FEED1] fills the page across storage pages and stops at the item that fills it', async () => {
    const log = [...Array.from({ length: 3000 }, (_, i) => change(i + 1, `other/${i}`)), change(3001, 'mine/a'), change(3002, 'mine/b'), change(3003, 'other/z'), change(3004, 'mine/c')]
    const { svc } = service(log)
    const page = await svc.changesPage(alice, 0, 2)
    expect(page.items.map((c) => c.path)).toEqual(['mine/a', 'mine/b'])
    expect(page.next).toBe(3002)
    expect(await svc.changesPage(alice, page.next, 2)).toEqual({ items: [change(3004, 'mine/c')], next: 3004 })
    await svc.close()
  })

  it('[FEED2] one request examines at most 10,000 records; the cursor carries the rest', async () => {
    const log = [...Array.from({ length: 25_000 }, (_, i) => change(i + 1, `other/${i}`)), change(25_001, 'mine/a')]
    const { svc, reads } = service(log)
    const seen: string[] = []
    let since = 0
    let requests = 0
    for (;;) {
      const before = reads.rows
      const page = await svc.changesPage(alice, since, 500)
      requests++
      expect(reads.rows - before).toBeLessThanOrEqual(10_000)
      seen.push(...page.items.map((c) => c.path))
      if (page.next === since) break
      expect(page.next).toBeGreaterThan(since)
      since = page.next
    }
    expect(seen).toEqual(['mine/a'])
    expect(requests).toBe(4) // 10,000 + 10,000 + 5,001, then the empty answer that says "caught up"
    await svc.close()
  })

  it('[FEED1] system reads the log unfiltered, with the same cursor', async () => {
    const { svc } = service([change(1, 'other/a'), change(2, 'mine/b')])
    expect(await svc.changesPage(SYSTEM, 0, 10)).toEqual({ items: [change(1, 'other/a'), change(2, 'mine/b')], next: 2 })
    expect(await svc.changesPage(SYSTEM, 2, 10)).toEqual({ items: [], next: 2 })
    await svc.close()
  })

  it('[FEED1] the web client never moves its cursor back, and falls back to the items of a server without `next`', () => {
    expect(nextVersion(10, [], 600)).toBe(600)
    expect(nextVersion(10, [], undefined)).toBe(10)
    expect(nextVersion(10, [change(12, 'a'), change(15, 'b')], undefined)).toBe(15)
    expect(nextVersion(10, [change(12, 'a')], 5)).toBe(12)
    expect(nextVersion(10, [], 'x')).toBe(10)
  })
})

describe('query cursor', () => {
  it('[FEED3] [QUERY1] rows the caller cannot read are never examined; `next` is the last item of a full page', async () => {
    // Three readable rows among 1,497 unreadable ones, two more, then 1,500 unreadable: over storage pages of 1,000.
    const table = Array.from({ length: 1500 }, (_, i) => node(i % 500 === 0 ? `mine/a${String(i).padStart(4, '0')}` : `mine/a${String(i).padStart(4, '0')}x`.replace('mine/', 'mine0/')))
    table.push(node('mine/b'), node('mine/c'), ...Array.from({ length: 1500 }, (_, i) => node(`mine1/${i}`)))
    table.sort((a, b) => (a.path < b.path ? -1 : 1))
    const { svc, reads } = service([], table)
    const first = await svc.queryPage(alice, { limit: 4 })
    expect(reads.rows).toBe(4)
    expect(first.items.map((n) => n.path)).toEqual(['mine/a0000', 'mine/a0500', 'mine/a1000', 'mine/b'])
    expect(first.next).toBe('mine/b')
    const second = await svc.queryPage(alice, { limit: 4, after: first.next! })
    expect(second.items.map((n) => n.path)).toEqual(['mine/c'])
    // 1,500 unreadable rows after mine/c: read to the end, so no cursor.
    expect(second.next).toBeNull()
    await svc.close()
  })

  it('[QUERY1] 12,000 rows the caller cannot read: the answer is the end at once, and none of them was examined', async () => {
    const table = Array.from({ length: 12_000 }, (_, i) => node(`other/${String(i).padStart(5, '0')}`))
    const { svc, reads } = service([], table)
    expect(await svc.queryPage(alice, { limit: 10 })).toEqual({ items: [], next: null })
    expect(reads.rows).toBe(0)
    await svc.close()
  })
})
