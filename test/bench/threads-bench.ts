/**
 * Threads (issue 18): submit → first streamed token visible to a second watcher, built-in agent.
 * The watcher is a second user on one mux socket (as the web app is), joined to the thread; when
 * the thread's Messages name the response cell it joins the cell, as a thread page does. The
 * submitter POSTs the message over HTTP; the figure is the time from sending the POST to the
 * watcher's first non-empty `Text` (so it includes the watcher's join of the new cell). 60
 * rounds, one after another, each on a fresh thread; p50 and p99.
 *
 * Run alone: `npx tsx test/bench/threads-bench.ts` prints JSON.
 */
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { performance } from 'node:perf_hooks'
import { pathToFileURL } from 'node:url'
import type * as Y from 'yjs'
import { startServer } from '../../sync-server/server.js'
import { createThreadsEngine } from '../../sync-server/engines/threads/index.js'
import { MuxClient, api, createSpace, grantRole, nodeUrlPath, signup, waitFor, withTimeout } from '../helpers/index.js'

export const GOALS: Record<string, { op: '<' | '<=' | '>' | '>='; value: number; unit?: string }> = {
  submitToFirstTokenP50Ms: { op: '<', value: 30, unit: 'ms' },
  submitToFirstTokenP99Ms: { op: '<', value: 100, unit: 'ms' },
}

function pct(xs: number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b)
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]!
}

export async function benchThreads(): Promise<Record<string, number>> {
  const dir = await mkdtemp(join(tmpdir(), 'weft-thr-bench-'))
  const server = await startServer({ port: 0, host: '127.0.0.1', logLevel: 'silent', dataDir: dir, engines: [createThreadsEngine()] })
  try {
    const user = await signup(server.url)
    const watcherUser = await signup(server.url)
    const space = await createSpace(server.url, user.token)
    const http = api(server.url, user.token)
    await grantRole(server.url, user.token, space, watcherUser.userId, 'Viewer')
    const ROUNDS = Number(process.env.THREADS_BENCH_ROUNDS ?? 60)
    const watcher = await MuxClient.connect(server.url, watcherUser.token)
    const times: number[] = []
    for (let i = 0; i < ROUNDS + 5; i++) {
      const thread = `${space}/t${i}`
      await http.putNode(thread, 'Thread', { Agent: { Kind: 'builtin' } })
      const joinedThread = await withTimeout(watcher.join(thread, { waitSynced: true }), 10_000, 'join the thread')
      if (!joinedThread.ok) throw new Error(`the watcher may not join ${thread}`)
      const cell = `${thread}/_r.m`
      const first = new Promise<number>((resolve) => {
        let joined = false
        const check = () => {
          const t = watcher.content(cell).get('Text') as Y.Text | string | undefined
          if (t !== undefined && t.toString().length > 0) {
            off()
            resolve(performance.now())
          }
        }
        const onThread = () => {
          // The response cell exists once the round is Executing (the claim lists it first).
          const { Messages: messages, Status: status } = watcher.json(thread)
          if (!joined && status !== 'StartingExecution' && Array.isArray(messages) && messages.includes(cell)) {
            joined = true
            watcher.doc(cell).on('afterTransaction', check)
            void watcher.join(cell)
          }
        }
        const off = () => {
          watcher.doc(thread).off('afterTransaction', onThread)
          watcher.doc(cell).off('afterTransaction', check)
        }
        watcher.doc(thread).on('afterTransaction', onThread)
      })
      const t0 = performance.now()
      const res = await http.post(`/api/nodes/${nodeUrlPath(thread)}/messages`, { id: 'm', text: 'hello world, how are you' })
      if (res.status !== 201) throw new Error(`post answered ${res.status}`)
      const seen = await withTimeout(first, 10_000, 'the first token')
      // The first five warm the server up (JIT, the storage writer); they are not counted.
      if (i >= 5) times.push(seen - t0)
      await waitFor(async () => (await http.getNode(thread)).body.content.Status === 'Idle', 10_000)
      watcher.leave(thread)
      watcher.leave(cell)
    }
    await watcher.close()
    return {
      submitToFirstTokenP50Ms: Number(pct(times, 50).toFixed(2)),
      submitToFirstTokenP99Ms: Number(pct(times, 99).toFixed(2)),
      rounds: ROUNDS,
    }
  } finally {
    await server.close()
    await rm(dir, { recursive: true, force: true })
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  benchThreads().then((r) => console.log(JSON.stringify(r, null, 2)), (e: unknown) => {
    console.error(e)
    process.exit(1)
  })
}
