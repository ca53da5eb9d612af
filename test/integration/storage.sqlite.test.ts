import Database from 'better-sqlite3'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { openStorage } from '../../sync-server/storage/index.js'
import { runStorageContract } from './storage-contract.js'

runStorageContract('sqlite', async () => {
  const dataDir = await mkdtemp(join(tmpdir(), 'weft-storage-'))
  return {
    adapter: await openStorage({ dataDir }),
    reopen: () => openStorage({ dataDir }),
    cleanup: () => rm(dataDir, { recursive: true, force: true }),
    dropClientBindings: async () => {
      const raw = new Database(join(dataDir, 'weft.db'))
      raw.prepare('DROP TABLE node_clients').run()
      raw.close()
    },
    failWritesOf: async (path) => {
      const raw = new Database(join(dataDir, 'weft.db'))
      raw.prepare(`CREATE TRIGGER boom BEFORE INSERT ON node_updates WHEN NEW.path = '${path.replaceAll("'", "''")}' BEGIN SELECT RAISE(ABORT, 'boom'); END`).run()
      raw.close()
    },
  }
})
