/**
 * [TOMB1] Creates through the node service, on both storages: at fresh paths, and at paths where a
 * node was deleted (each create reads the tombstone with the row and starts from it), one at a time
 * and 32 at once. PostgreSQL: a fresh schema of the test database; alone, and as one instance of
 * several (`pgCluster*`: the commits carry the cluster's checks).
 *
 * Run alone: `npx tsx test/bench/create-bench.ts` prints JSON.
 */
import { randomBytes } from 'node:crypto'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'
import pg from 'pg'
import pino from 'pino'
import { SYSTEM, type NodePath } from '../../shared/index.js'
import { AccessService } from '../../sync-server/access/index.js'
import { NodeService } from '../../sync-server/nodes/index.js'
import { openPostgresStorage, openSqliteStorage, type StorageAdapter } from '../../sync-server/storage/index.js'
import { joinAsDeafInstance } from '../helpers/index.js'

const DATABASE_URL = process.env.WEFT_TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test'
const NODES = Number(process.env.CREATE_BENCH_NODES ?? 2000)

async function opened(kind: 'pg' | 'sqlite'): Promise<{ storage: StorageAdapter; drop: () => Promise<void> }> {
  if (kind === 'sqlite') {
    const dir = await mkdtemp(join(tmpdir(), 'weft-create-bench-'))
    return { storage: openSqliteStorage({ file: join(dir, 'weft.db') }), drop: () => rm(dir, { recursive: true, force: true }) }
  }
  const schema = `weft_create_${randomBytes(4).toString('hex')}`
  return {
    storage: await openPostgresStorage({ connectionString: DATABASE_URL, schema }),
    drop: async () => {
      const c = new pg.Client({ connectionString: DATABASE_URL })
      await c.connect()
      await c.query(`DROP SCHEMA ${schema} CASCADE`)
      await c.end()
    },
  }
}

/** Creates/s of `n` nodes under S/{prefix}, `concurrency` at once. */
async function creates(nodes: NodeService, prefix: string, n: number, concurrency: number): Promise<number> {
  let next = 0
  const started = performance.now()
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < n) {
        const k = next++
        await nodes.update(SYSTEM, `S/${prefix}${k}` as NodePath, () => ({ nodeType: 'Document', content: { K: k, Title: `Node ${k}` } }), 'http')
      }
    }),
  )
  return Math.round((n / (performance.now() - started)) * 1000)
}

async function one(storageKind: 'pg' | 'sqlite', cluster = false): Promise<Record<string, number>> {
  const kind = cluster ? `${storageKind}Cluster` : storageKind
  const { storage, drop } = await opened(storageKind)
  const nodes = new NodeService(storage, new AccessService(), { idleUnloadMs: 60_000, log: pino({ level: 'silent' }) })
  try {
    await nodes.boot()
    // [SCALE18] [SCALE19] As one instance of several (the commits carry what the cluster checks).
    if (cluster) await joinAsDeafInstance(nodes, storage)
    await nodes.update(SYSTEM, 'S' as NodePath, () => ({ nodeType: 'Space', content: {} }), 'engine')
    // Warm-up: the pool's connections, the JIT, the first pages of the tables.
    await creates(nodes, 'w', NODES / 4, 32)
    const fresh1 = await creates(nodes, 'a', NODES / 4, 1)
    const fresh32 = await creates(nodes, 'b', NODES, 32)
    for (let k = 0; k < NODES; k++) await nodes.delete(SYSTEM, `S/b${k}` as NodePath, 'engine')
    for (let k = 0; k < NODES / 4; k++) await nodes.delete(SYSTEM, `S/a${k}` as NodePath, 'engine')
    const over1 = await creates(nodes, 'a', NODES / 4, 1)
    const over32 = await creates(nodes, 'b', NODES, 32)
    return {
      [`${kind}OverTombstoneRatio32`]: Math.round((over32 / fresh32) * 100) / 100,
      [`${kind}CreatesPerSec`]: fresh1, [`${kind}CreatesPerSec32`]: fresh32, [`${kind}CreatesOverTombstonePerSec`]: over1, [`${kind}CreatesOverTombstonePerSec32`]: over32,
    }
  } finally {
    await nodes.close()
    await storage.close()
    await drop()
  }
}

export async function benchCreates(): Promise<Record<string, number>> {
  // CREATE_BENCH_KINDS=pgCluster (say) runs only those.
  const kinds = (process.env.CREATE_BENCH_KINDS ?? 'sqlite,pg,pgCluster').split(',')
  const out: Record<string, number> = { nodes: NODES }
  if (kinds.includes('sqlite')) Object.assign(out, await one('sqlite'))
  if (kinds.includes('pg')) Object.assign(out, await one('pg'))
  if (kinds.includes('pgCluster')) Object.assign(out, await one('pg', true))
  return out
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  benchCreates().then(
    (r) => console.log(JSON.stringify(r, null, 2)),
    (e: unknown) => {
      console.error(e)
      process.exit(1)
    },
  )
}
