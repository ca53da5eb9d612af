import { afterEach, describe, expect, it, vi } from 'vitest'
import pino from 'pino'
import { EMPTY } from 'rxjs'
import type { MeshNode, NodePath } from '../../shared/index.js'
import type { NodeApi, UpdateFn } from '../../sync-server/nodes/types.js'
import { LegacyMigrator, toSubscriptionContent } from '../../sync-server/engines/subscriptions/legacy-migration.js'

function legacyNode(): MeshNode {
  const at = '2026-01-01T00:00:00.000Z'
  return {
    path: 'Admin/ScheduledAction/inv1' as NodePath, nodeType: 'ScheduledAction', name: 'inv1',
    content: { TriggerNodeType: 'User', MatchField: 'email', MatchValue: 'a@b.c', ContinuationType: 'GrantSpaceAccess', TargetPath: 'S' },
    createdBy: 'system', createdAt: at, updatedAt: at, version: 1, state: 'Active',
  }
}

/** A node API over a map, whose first write to the subscription path fails (a transient fault). */
function flakyNodes() {
  const store = new Map<string, MeshNode>([['Admin/ScheduledAction/inv1', legacyNode()]])
  let failures = 1
  const api: Partial<NodeApi> = {
    changes$: EMPTY,
    async query(_p, q) {
      return [...store.values()].filter((n) => n.path.startsWith(`${q.parent}/`))
    },
    async get(_p, path) {
      return store.get(path) ?? null
    },
    async update(_p, path, fn: UpdateFn) {
      if (path.startsWith('Admin/EventSubscription/') && failures-- > 0) throw new Error('database is locked')
      const current = store.get(path) ?? null
      const result = fn(current)
      if (result === undefined || result === current) return current
      if (result === null) {
        store.delete(path)
        return null
      }
      const node = { ...legacyNode(), path, nodeType: result.nodeType, content: result.content }
      store.set(path, node)
      return node
    },
  }
  return { nodes: api as NodeApi, store }
}

describe('[SUB7] legacy ScheduledAction migration', () => {
  afterEach(() => vi.useRealTimers())

  it('a failed migration keeps the legacy node and is retried; then the legacy node is removed', async () => {
    vi.useFakeTimers()
    const { nodes, store } = flakyNodes()
    const m = new LegacyMigrator(nodes, pino({ level: 'silent' }))
    await m.migrateAll()
    expect(store.has('Admin/ScheduledAction/inv1')).toBe(true)
    expect(store.has('Admin/EventSubscription/inv1')).toBe(false)
    await vi.advanceTimersByTimeAsync(1000)
    expect(store.get('Admin/EventSubscription/inv1')?.content).toMatchObject({ Id: 'inv1', TriggerType: 'NodeChange', Status: 'Pending', MatchValue: 'a@b.c' })
    expect(store.has('Admin/ScheduledAction/inv1')).toBe(false)
    m.stop()
  })

  it('never overwrites an EventSubscription that already exists at the id', async () => {
    const { nodes, store } = flakyNodes()
    store.set('Admin/EventSubscription/inv1', { ...legacyNode(), path: 'Admin/EventSubscription/inv1' as NodePath, nodeType: 'EventSubscription', content: { Id: 'inv1', Status: 'Fired' } })
    const m = new LegacyMigrator(nodes, pino({ level: 'silent' }))
    await m.migrateAll() // the first write attempt fails (flaky), nothing changes
    await m.migrateAll()
    expect(store.get('Admin/EventSubscription/inv1')?.content).toEqual({ Id: 'inv1', Status: 'Fired' })
    expect(store.has('Admin/ScheduledAction/inv1')).toBe(false)
    m.stop()
  })

  it('[SUB14] a node a person wrote is not migrated, whatever its content says: it is removed', async () => {
    const { nodes, store } = flakyNodes()
    store.set('Admin/ScheduledAction/inv1', { ...legacyNode(), content: { ...legacyNode().content, CreatedBy: 'admin' }, createdBy: 'mallory' })
    const m = new LegacyMigrator(nodes, pino({ level: 'silent' }))
    await m.migrateAll()
    expect(store.has('Admin/EventSubscription/inv1')).toBe(false)
    expect(store.has('Admin/ScheduledAction/inv1')).toBe(false)
    m.stop()
  })

  it('[SUB14] a system-made node keeps the user the system recorded as CreatedBy; none is the system\'s own', async () => {
    const named = toSubscriptionContent('inv1', { ...legacyNode(), content: { ...legacyNode().content, CreatedBy: 'admin' } })
    expect(named.CreatedBy).toBe('admin')
    expect(toSubscriptionContent('inv1', legacyNode()).CreatedBy).toBeNull()
  })
})
