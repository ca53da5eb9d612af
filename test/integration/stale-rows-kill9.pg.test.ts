import { randomBytes } from 'node:crypto'
import { afterAll, describe, it } from 'vitest'
import pg from 'pg'
import { makeTempDir, removeDir, type SpawnedServer } from '../helpers/index.js'
import { staleRowsAfterKill9 } from './stale-rows-kill9.js'

const admin = process.env.WEFT_TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test'
const database = `weft_stale_${randomBytes(6).toString('hex')}`

async function sql(text: string): Promise<void> {
  const client = new pg.Client({ connectionString: admin })
  await client.connect()
  try {
    await client.query(text)
  } finally {
    await client.end()
  }
}

describe('[STO8] rows left stale by kill -9 are repaired at boot (PostgreSQL)', () => {
  let dir = ''
  const children: SpawnedServer[] = []
  afterAll(async () => {
    for (const c of children) await c.kill('SIGKILL')
    if (dir) await removeDir(dir)
    await sql(`DROP DATABASE IF EXISTS "${database}" WITH (FORCE)`)
  })

  it('[STO5] [STO8] after kill -9 inside the coalescing window, where.tag=new lists the node and where.tag=old does not, from the first request', { timeout: 60_000 }, async () => {
    dir = await makeTempDir('weft-stale-kill9-pg-')
    await sql(`CREATE DATABASE "${database}"`)
    const url = new URL(admin)
    url.pathname = `/${database}`
    await staleRowsAfterKill9({ dataDir: dir, databaseUrl: url.toString() }, children)
  })
})
