import { randomBytes } from 'node:crypto'
import { afterAll, describe, expect, it } from 'vitest'
import pg from 'pg'
import pino from 'pino'
import { SYSTEM, userPrincipal, type NodePath, type UserId } from '../../shared/index.js'
import { AccessService } from '../../sync-server/access/access-service.js'
import { MoveService } from '../../sync-server/nodes/move-service.js'
import { NodeService } from '../../sync-server/nodes/node-service.js'
import { openPostgresStorage } from '../../sync-server/storage/postgres-adapter.js'
import { openSqliteStorage } from '../../sync-server/storage/sqlite-adapter.js'
import type { StorageAdapter } from '../../sync-server/storage/types.js'
import { makeTempDir, removeDir } from '../helpers/index.js'

/** [MOVE2] The one-transaction move on both backends, through the node service. */
const connectionString = process.env.WEFT_TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test'
const schema = `weft_test_${randomBytes(6).toString('hex')}`
const cleanups: (() => Promise<void>)[] = []
afterAll(async () => {
  for (const c of cleanups.reverse()) await c()
})

const backends: [string, () => Promise<StorageAdapter>][] = [
  [
    'sqlite',
    async () => {
      const dir = await makeTempDir()
      cleanups.push(() => removeDir(dir))
      return openSqliteStorage({ file: `${dir}/weft.db` })
    },
  ],
  [
    'postgres',
    async () => {
      cleanups.push(async () => {
        const client = new pg.Client({ connectionString })
        await client.connect()
        await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`)
        await client.end()
      })
      return openPostgresStorage({ connectionString, schema })
    },
  ],
]

describe.each(backends)('[MOVE2] move on %s', (_name, open) => {
  it('[MOVE2] moves rows, logs and feed in one transaction; a taken target changes nothing', async () => {
    const storage = await open()
    const access = new AccessService()
    const nodes = new NodeService(storage, access, { idleUnloadMs: 60_000, log: pino({ level: 'silent' }) })
    cleanups.push(async () => {
      await nodes.close()
      await storage.close()
    })
    await nodes.boot()
    const put = (path: string, nodeType: string, content = {}) => nodes.update(SYSTEM, path as NodePath, () => ({ nodeType, content }), 'system')
    await put('A', 'Space')
    await put('B', 'Space')
    await put('A/doc', 'Document', { T: 1 })
    await put('A/doc/child', 'Document', { T: 2 })
    await put('A/doc/_Access/bob_Access', 'AccessAssignment', { Subject: 'bob', Role: 'Viewer' })
    await put('B/taken', 'Document', {})
    const bob = userPrincipal('bob' as UserId)
    expect(access.has(bob, 'A/doc/child' as NodePath, 'Read')).toBe(true)
    const since = await storage.lastVersion()
    await expect(storage.moveSubtree({ from: 'A/doc' as NodePath, to: 'B/taken' as NodePath, at: new Date().toISOString(), redirect: true })).rejects.toMatchObject({ code: 'conflict' })
    expect(await storage.lastVersion()).toBe(since)
    const moves = new MoveService(nodes)
    expect(await moves.move(SYSTEM, 'A/doc' as NodePath, 'B/doc' as NodePath)).toEqual({ path: 'B/doc', moved: 3 })
    expect((await nodes.get(SYSTEM, 'B/doc/child' as NodePath))?.content).toEqual({ T: 2 })
    expect(await nodes.get(SYSTEM, 'A/doc' as NodePath)).toBeNull()
    expect(access.has(bob, 'B/doc/child' as NodePath, 'Read')).toBe(true)
    expect(access.has(bob, 'A/doc/child' as NodePath, 'Read')).toBe(false)
    const feed = await storage.changesSince(since, 100)
    expect(feed.filter((c) => c.kind === 'Deleted').map((c) => c.path)).toEqual(['A/doc', 'A/doc/_Access/bob_Access', 'A/doc/child'])
    expect(feed.filter((c) => c.kind === 'Created').map((c) => c.path)).toEqual(['B/doc', 'B/doc/_Access/bob_Access', 'B/doc/child'])
    expect(await nodes.movedTo('A/doc/child' as NodePath)).toBe('B/doc/child')
    const { trashPath } = await moves.trash(SYSTEM, 'B/doc' as NodePath)
    expect((await storage.listTrash('B' as NodePath)).map((e) => [e.path, e.originalPath])).toEqual([[trashPath, 'B/doc']])
    expect(access.has(bob, `${trashPath}/child` as NodePath, 'Read')).toBe(false)
    expect(await moves.restore(SYSTEM, trashPath)).toEqual({ path: 'B/doc' })
    expect(await storage.listTrash('B' as NodePath)).toEqual([])
    expect(access.has(bob, 'B/doc/child' as NodePath, 'Read')).toBe(true)
  })
})
