import { join } from 'node:path'
import Database from 'better-sqlite3'
import { afterAll, expect, it } from 'vitest'
import type { NodePath } from '../../shared/index.js'
import { openSqliteStorage } from '../../sync-server/storage/index.js'
import { makeTempDir, removeDir, startTestServer } from '../helpers/index.js'
import { describeFeedHistory } from './feed-history-cases.js'

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
  try {
    await s.commit({ path: 'Sp/a/b' as NodePath, kind: 'Created', nodeType: 'Document', name: 'b', content: {}, createdBy: 'u1', at: new Date(0).toISOString(), update: null, withhold: [{ scope: 'Sp/a' as NodePath, subject: 'bob' }] })
    expect((await s.changesSince(0, 10)).map((r) => [r.path, r.withheld ?? null])).toEqual([
      ['Sp/a', ['bob']],
      ['Sp/a/b', ['bob']],
    ])
  } finally {
    await s.close()
  }
})
