import { randomBytes } from 'node:crypto'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import pg from 'pg'
import pino from 'pino'
import { SYSTEM, userPrincipal, type NodePath, type UserId } from '../../shared/index.js'
import { AccessService } from '../../sync-server/access/access-service.js'
import { NodeService } from '../../sync-server/nodes/node-service.js'
import { openPostgresStorage } from '../../sync-server/storage/postgres-adapter.js'
import type { StorageAdapter } from '../../sync-server/storage/types.js'

/** [FEED1] [FEED2] [FEED3] The paging cursor on PostgreSQL (a fresh schema), over the node service. */
const connectionString = process.env.WEFT_TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test'
const schema = `weft_test_${randomBytes(6).toString('hex')}`
let storage: StorageAdapter
let nodes: NodeService
const alice = userPrincipal('alice' as UserId)

beforeAll(async () => {
  storage = await openPostgresStorage({ connectionString, schema })
  nodes = new NodeService(storage, new AccessService(), { idleUnloadMs: 60_000, log: pino({ level: 'silent' }) })
  await nodes.boot()
  const put = (path: string, nodeType: string, content = {}) => nodes.update(SYSTEM, path as NodePath, () => ({ nodeType, content }), 'system')
  await put('alice', 'User', { Email: 'alice@example.com', FullName: 'Alice' })
  await put('Shared', 'Space')
  await put('Shared/_Access/alice_Access', 'AccessAssignment', { Subject: 'alice', Role: 'Editor' })
  await put('Hidden', 'Space')
})
afterAll(async () => {
  await nodes?.close()
  await storage?.close()
  const client = new pg.Client({ connectionString })
  await client.connect()
  await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`)
  await client.end()
})

describe('paging on PostgreSQL', () => {
  it('[FEED2] 5,000 unreadable changes ahead: following `next` reaches the readable one in two requests', async () => {
    const since = await storage.lastVersion()
    await nodes.update(SYSTEM, 'Hidden/burst' as NodePath, () => ({ nodeType: 'Document', content: { N: 0 } }), 'system')
    for (let done = 0; done < 5_000; done += 500) {
      await Promise.all(Array.from({ length: 500 }, (_, i) => nodes.patch(SYSTEM, 'Hidden/burst' as NodePath, { N: done + i + 1 }, 'system')))
    }
    await nodes.update(SYSTEM, 'Shared/seen' as NodePath, () => ({ nodeType: 'Document', content: {} }), 'system')
    const first = await nodes.changesPage(alice, since, 500)
    expect(first.items.map((c) => c.path)).toEqual(['Shared/seen'])
    expect(first.next).toBe(await storage.lastVersion())
    expect(await nodes.changesPage(alice, first.next, 500)).toEqual({ items: [], next: first.next })
  })

  it('[FEED3] 1,200 unreadable children ahead of readable ones: the page fills, `next` and `after` continue', async () => {
    await nodes.update(SYSTEM, 'Mixed' as NodePath, () => ({ nodeType: 'Space', content: {} }), 'system')
    await Promise.all(Array.from({ length: 1200 }, (_, i) => nodes.update(SYSTEM, `Mixed/a${String(i).padStart(4, '0')}` as NodePath, () => ({ nodeType: 'Document', content: {} }), 'system')))
    for (const name of ['b1', 'b2', 'b3']) {
      await nodes.update(SYSTEM, `Mixed/${name}` as NodePath, () => ({ nodeType: 'Document', content: {} }), 'system')
      await nodes.update(SYSTEM, `Mixed/${name}/_Access/alice_Access` as NodePath, () => ({ nodeType: 'AccessAssignment', content: { Subject: 'alice', Role: 'Viewer' } }), 'system')
    }
    const first = await nodes.queryPage(alice, { parent: 'Mixed' as NodePath, limit: 2 })
    expect(first.items.map((n) => n.path)).toEqual(['Mixed/b1', 'Mixed/b2'])
    expect(first.next).toBe('Mixed/b2')
    const second = await nodes.queryPage(alice, { parent: 'Mixed' as NodePath, limit: 2, after: first.next! })
    expect(second).toEqual({ items: [expect.objectContaining({ path: 'Mixed/b3' })], next: null })
  })
})
