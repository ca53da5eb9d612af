import { join } from 'node:path'
import pino from 'pino'
import { afterEach, describe, expect, it } from 'vitest'
import { SYSTEM, type NodePath } from '../../shared/index.js'
import { AccessService } from '../../sync-server/access/access-service.js'
import { NodeService } from '../../sync-server/nodes/node-service.js'
import { openSqliteStorage, type StorageAdapter } from '../../sync-server/storage/index.js'
import { makeTempDir, removeDir, waitFor } from '../helpers/index.js'

const log = pino({ level: 'silent' })
let close: (() => Promise<void>) | null = null
afterEach(async () => {
  await close?.()
  close = null
})

/**
 * [CTX16] `NodeApi.committing` names the writes a read may be ahead of: a change of the node in
 * flight, not the coalesced rewrite of its row ([STO5]), which changes nothing a reader sees.
 * Real node service over a real SQLite file; the row write is held by wrapping the storage.
 */
describe('[CTX16] committing: the node changes in flight, not its row rewrites', () => {
  it('a held row rewrite is not waited for; a change in flight is, until it lands', async () => {
    const dir = await makeTempDir('weft-committing-')
    const storage: StorageAdapter = await openSqliteStorage({ file: join(dir, 'weft.db'), log, writer: 'inline' })
    const nodes = new NodeService(storage, new AccessService(), { idleUnloadMs: 60_000, log })
    await nodes.boot()
    close = async () => {
      release()
      await nodes.close()
      await storage.close()
      await removeDir(dir)
    }
    let release = () => {}
    let rowWrites = 0
    const writeContent = storage.writeContent.bind(storage)
    storage.writeContent = async (...args: Parameters<StorageAdapter['writeContent']>) => {
      rowWrites++
      await new Promise<void>((resolve) => (release = resolve))
      return writeContent(...args)
    }
    const path = 'P/c' as NodePath
    await nodes.put(SYSTEM, 'P' as NodePath, { nodeType: 'Space', content: {} })
    await nodes.put(SYSTEM, path, { nodeType: 'Code', content: { Source: 'return 1', Language: 'javascript' } })
    expect(nodes.committing(path)).toBeNull()
    // With its doc open, a patch of the declared text field leaves the row to a coalesced write.
    await nodes.acquireDoc(path)
    await nodes.patch(SYSTEM, path, { Source: 'return 2' })
    await waitFor(() => rowWrites === 1)
    expect(nodes.committing(path), 'a row rewrite in flight').toBeNull()
    // A change in flight is waited for, and only until it lands.
    const patched = nodes.patch(SYSTEM, path, { Language: 'typescript' })
    // The patch reaches its commit after its own awaits (loading the node).
    let waiting: Promise<void> | null = null
    for (let turn = 0; turn < 1000 && !waiting; turn++) {
      waiting = nodes.committing(path)
      if (!waiting) await new Promise((r) => setImmediate(r))
    }
    expect(waiting, 'a change in flight').not.toBeNull()
    let settled = false
    void waiting!.then(() => (settled = true))
    await patched
    await waiting
    expect(settled).toBe(true)
    expect(nodes.committing(path)).toBeNull()
    release()
  })
})
