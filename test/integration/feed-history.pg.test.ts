import pg from 'pg'
import { afterAll, it } from 'vitest'
import { openPostgresStorage } from '../../sync-server/storage/index.js'
import { freshDatabase, startTestServer } from '../helpers/index.js'
import { describeFeedHistory, expectOlderDatabaseGainsColumn } from './feed-history-cases.js'

/** [FEED5] The feed's history under a Denied that left (moved, trashed, deleted, lifted), on PostgreSQL. */
describeFeedHistory('PostgreSQL', async () => {
  const db = await freshDatabase('weft_feedhist_')
  return { ts: await startTestServer({ config: { databaseUrl: db.url } }), drop: db.drop }
})

const drops: (() => Promise<void>)[] = []
afterAll(async () => {
  for (const d of drops) await d().catch(() => undefined)
})

it('[FEED5] a database from before the column gains it: its records are withheld from nobody, later ones as their commits say', async () => {
  const db = await freshDatabase('weft_feedhist_old_')
  drops.push(db.drop)
  const client = new pg.Client({ connectionString: db.url })
  await client.connect()
  await client.query('CREATE TABLE changes (version bigint PRIMARY KEY, path text NOT NULL, node_type text NOT NULL, kind text NOT NULL)')
  await client.query("INSERT INTO changes VALUES (1, 'Sp/a', 'Document', 'Created')")
  // The counter as that release left it (the schema creates its row when there is none).
  await client.query('CREATE TABLE version_counter (id integer PRIMARY KEY CHECK (id = 1), value bigint NOT NULL)')
  await client.query('INSERT INTO version_counter VALUES (1, 1)')
  await client.end()
  const s = await openPostgresStorage({ connectionString: db.url })
  await expectOlderDatabaseGainsColumn(s)
})
