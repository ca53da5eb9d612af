import Database from 'better-sqlite3'
import { execFileSync } from 'node:child_process'
import { readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import {
  MuxClient,
  REPO_ROOT,
  api,
  createDocument,
  createSpace,
  login,
  makeTempDir,
  removeDir,
  signup,
  spawnServer,
  stockProvider,
  waitFor,
  type SpawnedServer,
  type TestUser,
} from '../helpers/index.js'
import { createCode, run, terminal, waitForStatus } from './activities-helpers.js'

/**
 * [PROD1] The production build (issue 20, item 4): `node sync-server/build.mjs` compiles the server
 * to plain JavaScript, and that build, run with plain `node` as a child process, serves a
 * representative slice of the integration suite: accounts, node CRUD, a stock y-websocket client,
 * a `/mux` client, a script run (the QuickJS worker thread from the compiled layout), /healthz,
 * /metrics, and a graceful restart on the SQLite writer thread's files.
 */
const METRICS_TOKEN = 'compiled-metrics-token-0123456789'

describe('[PROD1] the compiled server', () => {
  // Inside the checkout (.tmp/ is ignored by git), so the bundle's packages resolve from node_modules.
  const outdir = join(REPO_ROOT, '.tmp', `compiled-${process.pid}`)
  let dataDir = ''
  let server: SpawnedServer
  let user: TestUser

  const start = () => spawnServer({ dataDir, compiledEntry: join(outdir, 'main.mjs'), env: { METRICS_TOKEN } })

  beforeAll(async () => {
    execFileSync(process.execPath, ['sync-server/build.mjs', '--outdir', outdir], { cwd: REPO_ROOT, stdio: 'inherit' })
    dataDir = await makeTempDir('weft-compiled-')
    server = await start()
    user = await signup(server.url)
  }, 120_000)
  afterAll(async () => {
    await server?.kill('SIGKILL')
    await removeDir(dataDir)
    await removeDir(outdir)
  })

  it('[PROD1] the build is plain JavaScript: no file loads tsx or a .ts source, and the workers sit beside the bundle', () => {
    const files = readdirSync(outdir).filter((f) => f.endsWith('.mjs'))
    expect(files).toEqual(expect.arrayContaining(['main.mjs', 'weft.mjs', 'sqlite-writer-worker.mjs', 'fold-worker.mjs', 'script-worker.mjs']))
    for (const f of files) {
      const text = readFileSync(join(outdir, f), 'utf8')
      expect(text, f).not.toMatch(/from\s*["']tsx/)
      expect(text, f).not.toMatch(/import\(\s*["'][^"']*\.ts["']\s*\)/)
    }
  })

  it('[CTX35] with GRPC_PORT the compiled server serves gRPC from the .proto copied beside the bundle', async () => {
    const dir = await makeTempDir('weft-compiled-grpc-')
    const withGrpc = await spawnServer({ dataDir: dir, compiledEntry: join(outdir, 'main.mjs'), env: { GRPC_PORT: '0' } })
    try {
      await waitFor(() => withGrpc.logs().some((l) => l.msg === 'grpc listening'), { timeoutMs: 60_000, description: 'grpc listening' })
      const port = Number(withGrpc.logs().find((l) => l.msg === 'grpc listening')!.port)
      const grpc = await import('@grpc/grpc-js')
      const protoLoader = await import('@grpc/proto-loader')
      const pkg = grpc.loadPackageDefinition(protoLoader.loadSync(join(outdir, 'proto/weft/contextual/v1/contextual.proto'))) as unknown as {
        weft: { contextual: { v1: { Contextual: new (a: string, c: unknown) => { status(req: object, cb: (err: { code: number } | null) => void): void; close(): void } } } }
      }
      const client = new pkg.weft.contextual.v1.Contextual(`127.0.0.1:${port}`, grpc.credentials.createInsecure())
      // No token: the service answers (UNAUTHENTICATED), so it is up.
      const code = await new Promise<number>((resolve) => client.status({ consumerId: 'x' }, (err) => resolve(err ? err.code : grpc.status.OK)))
      client.close()
      expect(code).toBe(grpc.status.UNAUTHENTICATED)
    } finally {
      await withGrpc.kill('SIGKILL')
      await removeDir(dir)
    }
  })

  it('[PROD3] the embedded default starts without the packages only other set-ups or first uses need', async () => {
    const dir = await makeTempDir('weft-compiled-lazy-')
    const log = join(dir, 'packages.txt')
    const lazy = await spawnServer({
      dataDir: join(dir, 'data'),
      compiledEntry: join(outdir, 'main.mjs'),
      nodeArgs: ['--import', join(REPO_ROOT, 'test/helpers/package-log.mjs')],
      env: { WEFT_PACKAGE_LOG: log },
    })
    try {
      await waitFor(async () => (await fetch(`${lazy.url}/healthz`).catch(() => null))?.ok === true)
      const loaded = new Set(readFileSync(log, 'utf8').split('\n').filter(Boolean))
      // What every start needs is there (the log works) ...
      expect([...loaded]).toEqual(expect.arrayContaining(['better-sqlite3', 'yjs', 'ws', 'prom-client']))
      // ... and what only DATABASE_URL, REDIS_URL, GRPC_PORT, an LLM agent or /mcp needs is not.
      for (const name of ['pg', 'ioredis', '@grpc/grpc-js', '@grpc/proto-loader', 'ai', '@ai-sdk/openai-compatible', '@modelcontextprotocol/sdk']) {
        expect(loaded.has(name), name).toBe(false)
      }
    } finally {
      await lazy.kill('SIGKILL')
      await removeDir(dir)
    }
  })

  it('[PROD1] /healthz is ok, signup and login work', async () => {
    const health = await api(server.url).get('/healthz')
    expect(health).toMatchObject({ status: 200, body: { ok: true } })
    const again = await login(server.url, user.email)
    expect(again.userId).toBe(user.userId)
    expect((await api(server.url).post('/api/auth/login', { email: user.email, password: 'wrong-password' })).status).toBe(401)
  })

  it('[PROD1] node CRUD over HTTP', async () => {
    const space = await createSpace(server.url, user.token)
    const path = await createDocument(server.url, user.token, `${space}/doc`, { Title: 'one' })
    const a = api(server.url, user.token)
    expect((await a.patchNode(path, { Title: 'two', Tags: ['x'] })).body.content).toMatchObject({ Title: 'two', Tags: ['x'] })
    expect((await a.queryNodes({ parent: space, nodeType: 'Document' })).body.items.map((n) => n.path)).toContain(path)
    expect((await a.deleteNode(path)).status).toBe(204)
    expect((await a.getNode(path)).status).toBe(404)
  })

  it('[PROD1] a stock y-websocket client and a /mux client sync one node', async () => {
    const space = await createSpace(server.url, user.token)
    const path = await createDocument(server.url, user.token, `${space}/synced`, { Title: 'start' })
    const provider = stockProvider(server.url, path, user.token)
    const mux = await MuxClient.connect(server.url, user.token)
    try {
      await provider.synced()
      expect(provider.json()).toMatchObject({ Title: 'start' })
      provider.content.set('FromSync', 'yes')
      await waitFor(async () => (await api(server.url, user.token).getNode(path)).body.content?.FromSync === 'yes')
      expect(await mux.join(path)).toMatchObject({ ok: true })
      expect(mux.json(path)).toMatchObject({ Title: 'start', FromSync: 'yes' })
      await api(server.url, user.token).patchNode(path, { FromHttp: 1 })
      await waitFor(() => provider.json().FromHttp === 1 && mux.json(path).FromHttp === 1)
    } finally {
      provider.destroy()
      await mux.close()
    }
  })

  it('[PROD1] a script runs in the compiled QuickJS worker and its return value lands', async () => {
    const space = await createSpace(server.url, user.token)
    const code = await createCode(server.url, user.token, `${space}/add`, 'const n: number = Inputs.a + 1\nLog.info("adding")\nreturn n', {
      Language: 'typescript',
      Inputs: { a: { Type: 'number', Default: 41 } },
    })
    const done = await waitForStatus(server.url, user.token, await run(server.url, user.token, code), terminal, 30_000)
    expect(done.content).toMatchObject({ Status: 'Succeeded', ReturnValue: 42 })
  })

  it('[SCALE15] the compiled SQLite writer compacts a big node (folded on the fold thread, whose file sits beside the bundle)', async () => {
    const space = await createSpace(server.url, user.token)
    const path = await createDocument(server.url, user.token, `${space}/big`, { Blob: 'b'.repeat(100_000), N: 0 })
    const a = api(server.url, user.token)
    // Past 200 entries with a 100 KB create in the log: due, and over the inline limit (64 KB).
    for (let n = 1; n <= 210; n++) expect((await a.patchNode(path, { N: n })).status).toBe(200)
    const logged = () => {
      const db = new Database(join(dataDir, 'weft.db'), { readonly: true })
      try {
        return db.prepare('SELECT (SELECT count(*) FROM node_updates WHERE path = ?) AS n, length(snapshot) AS snapshot FROM nodes WHERE path = ?').get(path, path) as { n: number; snapshot: number | null }
      } finally {
        db.close()
      }
    }
    await waitFor(() => (logged().snapshot ?? 0) > 100_000, { timeoutMs: 30_000, description: 'the big node compacted' })
    expect(logged().n).toBeLessThan(200)
    expect((await a.getNode(path)).body.content).toMatchObject({ N: 210 })
  })

  it('[PROD1] /metrics answers Prometheus text to the metrics token', async () => {
    const res = await fetch(`${server.url}/metrics`, { headers: { authorization: `Bearer ${METRICS_TOKEN}` } })
    expect(res.status).toBe(200)
    const text = await res.text()
    expect(text).toMatch(/^weft_acks_total\{transport="(sync|mux)"\} [1-9]/m)
    expect(text).toMatch(/^nodejs_eventloop_lag_seconds /m)
    expect((await fetch(`${server.url}/metrics`)).status).toBe(401)
  })

  it('[PROD1] SIGTERM exits 0 and a restart of the compiled server keeps every write', async () => {
    const space = await createSpace(server.url, user.token)
    const path = await createDocument(server.url, user.token, `${space}/kept`, { Title: 'kept' })
    expect((await server.kill('SIGTERM')).code).toBe(0)
    server = await start()
    expect((await api(server.url, user.token).getNode(path)).body.content).toMatchObject({ Title: 'kept' })
  })
})
