import { spawn, type ChildProcess } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { createServer } from 'node:net'
import pg from 'pg'
import type { NodeService } from '../../sync-server/nodes/index.js'
import type { StorageAdapter } from '../../sync-server/storage/index.js'
import { spawnServer, type SpawnedServer } from './spawn-server.js'
import { makeTempDir, removeDir } from './test-server.js'
import { waitFor } from './wait-for.js'

/** The machine's PostgreSQL (trust): each test gets a database of its own, dropped after. */
export const TEST_DATABASE_URL = process.env.WEFT_TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test'

async function sql(text: string): Promise<void> {
  const client = new pg.Client({ connectionString: TEST_DATABASE_URL })
  await client.connect()
  try {
    await client.query(text)
  } finally {
    await client.end()
  }
}

export async function freshDatabase(prefix = 'weft_scale_'): Promise<{ url: string; drop: () => Promise<void> }> {
  const name = `${prefix}${randomBytes(5).toString('hex')}`
  await sql(`CREATE DATABASE "${name}"`)
  const url = new URL(TEST_DATABASE_URL)
  url.pathname = `/${name}`
  return { url: url.toString(), drop: () => sql(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`) }
}

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer()
    s.once('error', reject)
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port
      s.close(() => resolve(port))
    })
  })
}

/**
 * A private `redis-server` child on a free port (never the machine's shared Redis): `stop()`
 * kills it with SIGKILL and `start()` starts a new empty one on the same port, as a Redis crash
 * and restart would.
 */
export interface PrivateRedis {
  url: string
  stop(): Promise<void>
  start(): Promise<void>
  /** Freezes the server (SIGSTOP): connections stay up, messages wait. `resume` (SIGCONT) goes on. */
  pause(): void
  resume(): void
}

export async function privateRedis(): Promise<PrivateRedis> {
  const port = await freePort()
  let child: ChildProcess | null = null
  const start = async () => {
    const c = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], { stdio: ['ignore', 'pipe', 'pipe'] })
    child = c
    await new Promise<void>((resolve, reject) => {
      let out = ''
      c.stdout?.on('data', (d: Buffer) => {
        out += d.toString()
        if (out.includes('Ready to accept connections')) resolve()
      })
      c.once('exit', (code) => reject(new Error(`redis-server exited (${code}): ${out}`)))
    })
  }
  const stop = async () => {
    const c = child
    child = null
    if (!c || c.exitCode !== null) return
    const exited = new Promise((r) => c.once('exit', r))
    c.kill('SIGKILL')
    await exited
  }
  const signal = (sig: NodeJS.Signals) => {
    const c = child as ChildProcess | null
    if (c && c.exitCode === null) c.kill(sig)
  }
  await start()
  return { url: `redis://127.0.0.1:${port}`, start, stop, pause: () => signal('SIGSTOP'), resume: () => signal('SIGCONT') }
}

export interface Instances {
  servers: SpawnedServer[]
  redis: PrivateRedis
  /** The instances' database (to read the lease table directly). */
  databaseUrl: string
  cleanup(): Promise<void>
}

/** `n` instances of the server on one fresh database and a private Redis, as child processes. */
export async function startInstances(n: number, env: Record<string, string> = {}): Promise<Instances> {
  const db = await freshDatabase()
  const redis = await privateRedis()
  const dirs: string[] = []
  const servers: SpawnedServer[] = []
  const add = async () => {
    const dir = await makeTempDir('weft-scale-')
    dirs.push(dir)
    servers.push(await spawnServer({ dataDir: dir, env: { DATABASE_URL: db.url, REDIS_URL: redis.url, INSTANCE_ID: `i${servers.length + 1}`, ...env }, startTimeoutMs: 60_000 }))
  }
  // One at a time: the first creates the schema (the others would wait on its lock anyway).
  for (let i = 0; i < n; i++) await add()
  return {
    servers,
    redis,
    databaseUrl: db.url,
    async cleanup() {
      redis.resume()
      for (const s of servers) await s.kill('SIGKILL')
      await redis.stop()
      await db.drop().catch(() => undefined)
      for (const d of dirs) await removeDir(d)
    },
  }
}

/** The engine partitions, one per default engine ([SCALE17]). */
export const ENGINE_PARTITIONS = ['activities', 'subscriptions', 'threads'] as const

export interface PartitionLease {
  partition: string
  holder: string | null
  fence: number
  expiresMs: number
  live: boolean
}

/** [SCALE17] The engine partitions' lease rows, by the database's clock. */
export async function partitionLeases(databaseUrl: string): Promise<PartitionLease[]> {
  const client = new pg.Client({ connectionString: databaseUrl })
  await client.connect()
  try {
    const r = await client.query<{ name: string; holder: string | null; fence: string; expires_ms: string; live: boolean }>(
      `SELECT name, holder, fence, (extract(epoch FROM expires_at) * 1000)::bigint AS expires_ms, expires_at > now() AND holder IS NOT NULL AS live
       FROM engine_leases WHERE name LIKE 'engines:%' ORDER BY name`,
    )
    return r.rows.map((x) => ({ partition: x.name.slice('engines:'.length), holder: x.holder, fence: Number(x.fence), expiresMs: Number(x.expires_ms), live: x.live }))
  } finally {
    await client.end()
  }
}

/** The server an instance id (`i1`, `i2`, ...) names, in a set from `startInstances`. */
export function instanceOf(servers: readonly SpawnedServer[], holder: string | null): SpawnedServer | undefined {
  const n = holder?.match(/^i(\d+)$/)?.[1]
  return n ? servers[Number(n) - 1] : undefined
}

/** [SCALE17] The engine partition a log line names (its lease `engines:<name>`), or undefined. */
export function partitionOf(line: Record<string, unknown>): string | undefined {
  return typeof line.partition === 'string' && line.partition.startsWith('engines:') ? line.partition.slice('engines:'.length) : undefined
}

/** The partitions an instance logged starting its engine for, in order. */
export function partitionsStarted(s: SpawnedServer): string[] {
  return s.logs().filter((l) => l.msg === 'engines started under the lease').map((l) => partitionOf(l)!)
}

/**
 * [SCALE17] Waits until every engine partition runs on a live instance (its lease live and its
 * holder's log saying its engine started since it took it) and, with `spread`, on as many
 * distinct instances as there are partitions or instances alive; answers partition → server.
 */
export async function partitionOwners(servers: readonly SpawnedServer[], databaseUrl: string, o: { spread?: boolean; timeoutMs?: number } = {}): Promise<Map<string, SpawnedServer>> {
  const alive = servers.filter((s) => s.child.exitCode === null && s.child.signalCode === null)
  return waitFor(async () => {
    const leases = await partitionLeases(databaseUrl)
    const owners = new Map<string, SpawnedServer>()
    for (const l of leases) {
      const s = instanceOf(servers, l.holder)
      if (!l.live || !s || !alive.includes(s)) return null
      // Its engine started (the last start or stop it logged for the partition is a start).
      const last = s.logs().filter((x) => partitionOf(x) === l.partition && (x.msg === 'engines started under the lease' || x.msg === 'engine stopped: lease gone')).at(-1)
      if (last?.msg !== 'engines started under the lease') return null
      owners.set(l.partition, s)
    }
    if (owners.size !== ENGINE_PARTITIONS.length) return null
    if (o.spread && new Set(owners.values()).size !== Math.min(ENGINE_PARTITIONS.length, alive.length)) return null
    return owners
  }, { timeoutMs: o.timeoutMs ?? 30_000, description: `every engine partition owned${o.spread ? ', spread over the instances' : ''}` })
}

/**
 * [SCALE16]-[SCALE20] A node service made one instance of several whose change messages never
 * arrive (a delay as long as the test: the window a fan-out has). What it has applied is its own
 * commits and what a catch-up from the change log brings, as the fan-out's when a write asks.
 */
export async function joinAsDeafInstance(nodes: NodeService, storage: StorageAdapter): Promise<{ freshen: () => Promise<void> }> {
  let applied = await storage.lastVersion()
  const mine = new Set<number>()
  const advance = () => {
    while (mine.delete(applied + 1)) applied++
  }
  nodes.connectCluster({
    committed: (change) => {
      mine.add(change.version)
      advance()
    },
    accepted: () => 'k',
    acceptedFailed: () => undefined,
    presence: () => undefined,
    presenceOpened: () => undefined,
    watermark: () => applied,
    freshen,
  })
  return { freshen }
  async function freshen(): Promise<void> {
    for (;;) {
      const records = await storage.changesSince(applied, 1000)
      await nodes.applyRemotePage(records, (r) => !mine.has(r.version), () => undefined)
      applied = Math.max(applied, records.at(-1)?.version ?? applied)
      advance()
      if (records.length < 1000) return
    }
  }
}

/** One unlabelled gauge or counter of an instance's `/metrics` (served with its METRICS_TOKEN). */
export async function metricValue(url: string, metricsToken: string, name: string): Promise<number> {
  const text = await (await fetch(`${url}/metrics`, { headers: { authorization: `Bearer ${metricsToken}` } })).text()
  const line = text.split('\n').find((l) => l.startsWith(`${name} `))
  if (!line) throw new Error(`no ${name} in /metrics`)
  return Number(line.split(' ')[1])
}
