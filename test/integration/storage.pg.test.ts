import { randomBytes } from 'node:crypto'
import pg from 'pg'
import { openPostgresStorage } from '../../sync-server/storage/index.js'
import { runStorageContract } from './storage-contract.js'

/** Needs PostgreSQL: `WEFT_TEST_DATABASE_URL`, else the local test database. */
const connectionString = process.env.WEFT_TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test'

runStorageContract('postgres', async () => {
  // A fresh schema per test: runs never see each other's rows, and dropping it cleans up.
  const schema = `weft_test_${randomBytes(6).toString('hex')}`
  return {
    adapter: await openPostgresStorage({ connectionString, schema }),
    reopen: () => openPostgresStorage({ connectionString, schema }),
    cleanup: async () => {
      const client = new pg.Client({ connectionString })
      await client.connect()
      try {
        await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`)
      } finally {
        await client.end()
      }
    },
  }
})
