import { afterAll, describe, expect, it } from 'vitest'
import { api, createSpace, makeTempDir, removeDir, signup, spawnServer, stockProvider, waitFor, type SpawnedServer, TEST_SCRYPT_N } from '../helpers/index.js'
import { createCode, run, terminal, texts, waitForStatus } from './activities-helpers.js'

/**
 * [ACT9] Recovery after a crash: the server is killed with SIGKILL while a script runs. After the
 * restart the activity is Failed with a message naming the restart, End set, and a re-run works.
 */
describe('[ACT9] kill -9 mid-run', () => {
  let dir = ''
  const children: SpawnedServer[] = []
  afterAll(async () => {
    for (const c of children) await c.kill('SIGKILL')
    if (dir) await removeDir(dir)
  })

  /** A child server on `dataDir` (killed after the suite), with a user and a Code node in their space. */
  async function serverWithCode(dataDir: string, name: string, source: string, env?: Record<string, string>) {
    const server = await spawnServer({ dataDir, env })
    children.push(server)
    const user = await signup(server.url)
    const space = await createSpace(server.url, user.token)
    return { first: server, user, code: await createCode(server.url, user.token, `${space}/${name}`, source) }
  }

  it('the lost run ends Failed naming the restart, and Re-run succeeds', { timeout: 90_000 }, async () => {
    dir = await makeTempDir('weft-act-kill9-')
    const { first, user, code } = await serverWithCode(dir, 'slow', 'if (Inputs.fast) return "quick"; Log.info("started"); for (;;) await sleep(50)', { LOG_LEVEL: 'info' })
    const path = await run(first.url, user.token, code)
    await waitFor(async () => texts((await api(first.url, user.token).getNode(path)).body as never).includes('started'), 15_000)
    await first.kill('SIGKILL')

    const second = await spawnServer({ dataDir: dir })
    children.push(second)
    const failed = (await api(second.url, user.token).getNode(path)).body
    expect(failed.content.Status).toBe('Failed')
    expect(typeof failed.content.End).toBe('string')
    expect(texts(failed).join('\n')).toMatch(/server restarted/)
    expect(String(failed.content.Error)).toMatch(/server restarted/)

    const again = await run(second.url, user.token, code, { inputs: { fast: true } })
    const done = await waitForStatus(second.url, user.token, again, terminal, 15_000)
    expect(done.content).toMatchObject({ Status: 'Succeeded', ReturnValue: 'quick' })
  })

  it('[ACT12] kill -9 mid-log before the row was rewritten: the log comes back from the update log, an in-order prefix of what was logged', { timeout: 150_000 }, async () => {
    const d = await makeTempDir('weft-act-log-kill9-')
    try {
      const { first, user, code } = await serverWithCode(d, 'chatty', 'for (let i = 0; i < 300; i++) { Log.info("line " + i); if (i % 50 === 0) await sleep(5) } for (;;) await sleep(50)')
      const path = await run(first.url, user.token, code, { start: false })
      // A watcher on /sync: the node's doc is built, so each append is a Yjs insert whose row
      // content is written later, coalesced ([STO5]).
      const watcher = stockProvider(first.url, path, user.token)
      await watcher.synced()
      await api(first.url, user.token).patchNode(path, { RequestedStatus: 'Running' })
      const seen = () => ((watcher.content.get('Messages') as { length: number } | undefined)?.length ?? 0)
      await waitFor(() => seen() >= 300, 60_000)
      // At once: well inside the row's one-second coalescing window.
      await first.kill('SIGKILL')
      watcher.destroy()

      const second = await spawnServer({ dataDir: d })
      children.push(second)
      const after = (await api(second.url, user.token).getNode(path)).body
      // A watcher is sent a line when it is applied, before its commit is durable (as any relay):
      // what survives is what was durable, which is a prefix, in order, never a gap. The row's
      // rewrite is due a second after the first line, so (on a machine that is not starved) the
      // lines here came back from the update log; on an idle machine all 300 do.
      const lines = texts(after as never).filter((t) => t.startsWith('line '))
      expect(lines.length).toBeGreaterThan(0)
      expect(lines).toEqual(Array.from({ length: lines.length }, (_, i) => `line ${i}`))
      expect(after.content.Status).toBe('Failed')
    } finally {
      await removeDir(d)
    }
  })

  it('[ACT9] a draft whose RequestedStatus is Running when the server starts is started', { timeout: 90_000 }, async () => {
    const d = await makeTempDir('weft-act-pending-')
    try {
      const { first, user, code } = await serverWithCode(d, 'later', 'return "ran"')
      const path = await run(first.url, user.token, code, { start: false })
      await first.kill('SIGTERM')
      // Stopped: the request is written straight to storage by a server with no engines.
      const { startServer } = await import('../../sync-server/server.js')
      const { SYSTEM } = await import('../../shared/index.js')
      const quiet = await startServer({ port: 0, host: '127.0.0.1', passwordScryptN: TEST_SCRYPT_N, dataDir: d, logLevel: 'silent', engines: [] })
      // As the engine's write rule records a start request: with its requester ([ACT17]).
      await quiet.nodes.patch(SYSTEM, path as never, { RequestedStatus: 'Running', StartedBy: user.userId })
      await quiet.close()
      const second = await spawnServer({ dataDir: d })
      children.push(second)
      const done = await waitForStatus(second.url, user.token, path, terminal, 15_000)
      expect(done.content).toMatchObject({ Status: 'Succeeded', ReturnValue: 'ran' })
    } finally {
      await removeDir(d)
    }
  })
})
