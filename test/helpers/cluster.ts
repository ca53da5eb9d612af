import { spawn, type ChildProcess } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { createServer } from 'node:net'
import pg from 'pg'
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

/** The instance that logged taking the engines' lease last (and is still alive), waiting for one. */
export async function engineOwner(servers: readonly SpawnedServer[], timeoutMs = 30_000): Promise<SpawnedServer> {
  return waitFor(() => {
    let best: { s: SpawnedServer; time: number } | null = null
    for (const s of servers) {
      if (s.child.exitCode !== null || s.child.signalCode !== null) continue
      for (const l of s.logs()) {
        const time = typeof l.time === 'string' ? Date.parse(l.time) : Number(l.time)
        if (l.msg === 'engines started under the lease' && (!best || time > best.time)) best = { s, time }
      }
    }
    return best?.s ?? null
  }, { timeoutMs, description: 'an instance owns the engines' })
}
