import { join } from 'node:path'
import Database from 'better-sqlite3'
import { afterAll, it } from 'vitest'
import { openSqliteStorage } from '../../sync-server/storage/index.js'
import { makeTempDir, removeDir, startTestServer } from '../helpers/index.js'
import { describeFeedHistory, expectOlderDatabaseGainsColumn } from './feed-history-cases.js'

/** [FEED5] The feed's history under a Denied that left (moved, trashed, deleted, lifted), on SQLite. */
describeFeedHistory('SQLite', async () => ({ ts: await startTestServer() }))

const dirs: string[] = []
afterAll(async () => {
  for (const d of dirs) await removeDir(d)
})

it('[FEED5] a database from before the column gains it: its records are withheld from nobody, later ones as their commits say', async () => {
  const dir = await makeTempDir('weft-feedhist-')
  dirs.push(dir)
  const file = join(dir, 'weft.db')
  const old = new Database(file)
  old.exec('CREATE TABLE changes (version INTEGER PRIMARY KEY AUTOINCREMENT, path TEXT NOT NULL, node_type TEXT NOT NULL, kind TEXT NOT NULL)')
  old.prepare("INSERT INTO changes (path, node_type, kind) VALUES ('Sp/a', 'Document', 'Created')").run()
  old.close()
  const s = openSqliteStorage({ file })
  await expectOlderDatabaseGainsColumn(s)
})
