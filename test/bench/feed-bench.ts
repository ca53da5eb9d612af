/**
 * The change feed with 5,000 changes ahead that the reader may not read ([FEED2]): how long a
 * client takes to catch up, from the moment the readable change is durable to the moment the
 * client knows about it. Goal < 1 s.
 *  - `catchUp5000UnreadableMs`: the web client's own HttpApi following `next` from its cursor
 *    (the loop of SyncClient.pollFeed), over real HTTP; median of 5 runs, each with 5,000 fresh
 *    unreadable changes ahead of one readable one.
 *  - `catchUpRequests`: requests one catch-up takes (the last one says "caught up").
 *  - `moveDenied2000Ms`: [FEED5] a move, over HTTP, of a subtree of 2,000 documents whose root
 *    holds a Denied (its old scope's records are withheld in the move's transaction); median of 6
 *    moves back and forth.
 * Real server on port 0, real SQLite in a temp dir; the writes go through the node service
 * (a burst from another user), not HTTP, so only the read side is timed.
 * Run alone: `npx tsx test/bench/feed-bench.ts` prints JSON.
 */
import { performance } from 'node:perf_hooks'
import { pathToFileURL } from 'node:url'
import { SYSTEM, userPrincipal, type NodePath, type UserId } from '../../shared/index.js'
import { HttpApi } from '../../web/api/index.js'
import { api, createDocument, createSpace, grantRole, signup, startTestServer } from '../helpers/index.js'

/** Checked by `npm run bench` (test/bench/run.ts). */
export const GOALS: Record<string, { op: '<' | '<=' | '>' | '>='; value: number; unit?: string }> = {
  catchUp5000UnreadableMs: { op: '<', value: 1000, unit: 'ms' },
}

const UNREADABLE = 5_000
const RUNS = 5

export async function benchFeed(): Promise<Record<string, number | string>> {
  const ts = await startTestServer()
  try {
    const [alice, bob, carol] = await Promise.all([signup(ts.url), signup(ts.url), signup(ts.url)])
    const space = await createSpace(ts.url, alice.token)
    await grantRole(ts.url, alice.token, space, carol.userId, 'Editor')
    const hidden = await createSpace(ts.url, bob.token)
    const hiddenDoc = (await createDocument(ts.url, bob.token, `${hidden}/burst`, { N: 0 })) as NodePath
    const bobP = userPrincipal(bob.userId as UserId)
    const client = new HttpApi(ts.url, () => alice.token)
    const times: number[] = []
    let requests = 0
    for (let run = 0; run < RUNS; run++) {
      let since = await ts.server.storage.lastVersion()
      for (let done = 0; done < UNREADABLE; done += 500) {
        await Promise.all(Array.from({ length: 500 }, (_, i) => ts.server.nodes.patch(bobP, hiddenDoc, { N: run * UNREADABLE + done + i }, 'http')))
      }
      const target = await createDocument(ts.url, carol.token, `${space}/after-${run}`, { Run: run })
      const t0 = performance.now()
      let found = false
      requests = 0
      for (;;) {
        const page = await client.changesSince(since)
        requests++
        if (page.items.some((c) => c.path === target)) found = true
        if (page.next === since) break
        since = page.next
      }
      times.push(performance.now() - t0)
      if (!found) throw new Error(`run ${run}: the catch-up never saw ${target}`)
    }
    times.sort((a, b) => a - b)
    const moves = await benchMoveDenied(ts, alice.token, space, carol.userId)
    return {
      storage: 'sqlite',
      catchUp5000UnreadableMs: Number(times[Math.floor(times.length / 2)]!.toFixed(1)),
      catchUp5000UnreadableMaxMs: Number(times[times.length - 1]!.toFixed(1)),
      catchUpRequests: requests,
      moveDenied2000Ms: Number(moves[Math.floor(moves.length / 2)]!.toFixed(1)),
      moveDenied2000MaxMs: Number(moves[moves.length - 1]!.toFixed(1)),
    }
  } finally {
    await ts.cleanup()
  }
}

const SUBTREE = 2_000
const MOVES = 6

/**
 * [FEED5] A move of a subtree of 2,000 documents (each with two change records) whose root holds a
 * Denied: its old scope's records are withheld in the move's transaction. Timed over HTTP, moved
 * back and forth MOVES times; the change table also holds the catch-up's 25,000 records.
 */
async function benchMoveDenied(ts: Awaited<ReturnType<typeof startTestServer>>, token: string, space: string, denied: string): Promise<number[]> {
  const root = `${space}/big` as NodePath
  await createDocument(ts.url, token, root, {})
  await grantRole(ts.url, token, root, denied, 'Viewer', true)
  for (let done = 0; done < SUBTREE; done += 250) {
    await Promise.all(Array.from({ length: 250 }, (_, i) => ts.server.nodes.update(SYSTEM, `${root}/d${done + i}` as NodePath, () => ({ nodeType: 'Document', content: { N: 0 } }), 'system')))
    await Promise.all(Array.from({ length: 250 }, (_, i) => ts.server.nodes.patch(SYSTEM, `${root}/d${done + i}` as NodePath, { N: 1 }, 'system')))
  }
  const http = api(ts.url, token)
  const times: number[] = []
  let at: string = root
  for (let i = 0; i < MOVES; i++) {
    const to = i % 2 === 0 ? `${space}/big-moved` : root
    const t0 = performance.now()
    const res = await http.post(`/api/nodes/${at}/move`, { to })
    times.push(performance.now() - t0)
    if (res.status !== 200) throw new Error(`move ${i}: ${res.status} ${JSON.stringify(res.body)}`)
    at = to
  }
  return times.sort((a, b) => a - b)
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  console.log(JSON.stringify(await benchFeed(), null, 2))
  process.exit(0)
}
