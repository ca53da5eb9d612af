import { afterAll, describe, it } from 'vitest'
import { freshDatabase, makeTempDir, removeDir, type SpawnedServer } from '../helpers/index.js'
import { staleRowsAfterKill9 } from './stale-rows-kill9.js'

describe('[STO8] rows left stale by kill -9 are repaired at boot (PostgreSQL)', () => {
  let dir = ''
  let db: Awaited<ReturnType<typeof freshDatabase>> | null = null
  const children: SpawnedServer[] = []
  afterAll(async () => {
    for (const c of children) await c.kill('SIGKILL')
    if (dir) await removeDir(dir)
    await db?.drop()
  })

  it('[STO5] [STO8] after kill -9 inside the coalescing window, where.tag=new lists the node and where.tag=old does not, from the first request', { timeout: 60_000 }, async () => {
    dir = await makeTempDir('weft-stale-kill9-pg-')
    db = await freshDatabase('weft_stale_')
    await staleRowsAfterKill9({ dataDir: dir, databaseUrl: db.url }, children)
  })
})
