import Database from 'better-sqlite3'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import type { NodePath } from '../../shared/index.js'
import { openStorage } from '../../sync-server/storage/index.js'
import { runStorageContract } from './storage-contract.js'

runStorageContract('sqlite', async () => {
  const dataDir = await mkdtemp(join(tmpdir(), 'weft-storage-'))
  return {
    adapter: await openStorage({ dataDir }),
    reopen: () => openStorage({ dataDir }),
    cleanup: () => rm(dataDir, { recursive: true, force: true }),
  }
})

describe('storage: sqlite specifics', () => {
  it('fails every commit of a batch whose transaction fails, and writes none of them', async () => {
    const dataDir = await mkdtemp(join(tmpdir(), 'weft-storage-'))
    const store = await openStorage({ dataDir })
    try {
      // A write failure the adapter cannot foresee (think: disk full), hit by one commit of the batch.
      const raw = new Database(join(dataDir, 'weft.db'))
      raw.exec(`CREATE TRIGGER boom BEFORE INSERT ON node_updates WHEN NEW.path = 'boom' BEGIN SELECT RAISE(ABORT, 'boom'); END`)
      raw.close()
      const commit = (path: string) =>
        store.commit({
          path: path as NodePath,
          kind: 'Created',
          nodeType: 'Document',
          name: path,
          content: { P: path },
          createdBy: 'alice',
          at: new Date().toISOString(),
          update: new Uint8Array([0, 0]),
        })
      const results = await Promise.allSettled([commit('good1'), commit('boom'), commit('good2')])
      expect(results.map((r) => r.status)).toEqual(['rejected', 'rejected', 'rejected'])
      expect(await store.lastVersion()).toBe(0)
      expect(await store.getNode('good1' as NodePath)).toBeNull()
      // The next batch is unaffected.
      expect((await commit('good3')).version).toBeGreaterThan(0)
    } finally {
      await store.close()
      await rm(dataDir, { recursive: true, force: true })
    }
  })
})
