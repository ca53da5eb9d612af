/**
 * [QUERY1] Queries among many rows the caller cannot read: how long the web app's home feed
 * query (`nodeType=ActivityLog&where.CreatedBy=<me>`, one page of 200) and a filter that only
 * unreadable rows match take, over real HTTP.
 *  - `homeFeedAmong20000UnreadableP50Ms`: 20,000 ActivityLogs of another user (unreadable) and
 *    50 of the reader's own, in their home; the query lists the 50.
 *  - `unreadableOnlyMatchP50Ms`: `where.CreatedBy=<other>`: only unreadable rows match; the answer
 *    is empty and final in one request.
 *  - `requestsToAnswer`: requests the second answer takes, following `next`.
 * Real server on port 0, real SQLite in a temp dir; the rows are written through the node service.
 * Run alone: `npx tsx test/bench/query-bench.ts` prints JSON.
 */
import { performance } from 'node:perf_hooks'
import { pathToFileURL } from 'node:url'
import { SYSTEM, type NodePath } from '../../shared/index.js'
import { api, createSpace, signup, startTestServer } from '../helpers/index.js'

/** Checked by `npm run bench` (test/bench/run.ts). */
export const GOALS: Record<string, { op: '<' | '<=' | '>' | '>='; value: number; unit?: string }> = {
  homeFeedAmong20000UnreadableP50Ms: { op: '<', value: 100, unit: 'ms' },
  unreadableOnlyMatchP50Ms: { op: '<', value: 100, unit: 'ms' },
}

const UNREADABLE = 20_000
const OWN = 50
const RUNS = 15

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b)
  return Number(s[Math.floor(s.length / 2)]!.toFixed(1))
}

export async function benchQuery(): Promise<Record<string, number | string>> {
  const ts = await startTestServer()
  try {
    const [alice, bob] = await Promise.all([signup(ts.url), signup(ts.url)])
    const bobs = await createSpace(ts.url, bob.token)
    const nodes = ts.server.nodes
    const log = (path: string, by: string) => nodes.update(SYSTEM, path as NodePath, () => ({ nodeType: 'ActivityLog', content: { Category: 'bench', CreatedBy: by, Messages: [] } }), 'system')
    for (let done = 0; done < UNREADABLE; done += 1000) {
      await Promise.all(Array.from({ length: 1000 }, (_, i) => log(`${bobs}/_Activity/r${String(done + i).padStart(5, '0')}`, bob.userId)))
    }
    await Promise.all(Array.from({ length: OWN }, (_, i) => log(`${alice.userId}/_Activity/m${String(i).padStart(3, '0')}`, alice.userId)))
    const http = api(ts.url, alice.token)
    const page = async (by: string, after?: string) => {
      const res = await http.get<{ items: unknown[]; next?: string }>(`/api/nodes?nodeType=ActivityLog&where.CreatedBy=${by}&limit=200${after ? `&after=${encodeURIComponent(after)}` : ''}`)
      if (res.status !== 200) throw new Error(`query answered ${res.status}`)
      return res.body
    }
    const home: number[] = []
    const only: number[] = []
    let requests = 0
    for (let run = 0; run < RUNS; run++) {
      let t0 = performance.now()
      const mine = await page(alice.userId)
      home.push(performance.now() - t0)
      if (mine.items.length !== OWN) throw new Error(`the home feed listed ${mine.items.length} of ${OWN}`)
      t0 = performance.now()
      requests = 0
      let after: string | undefined
      for (;;) {
        const p = await page(bob.userId, after)
        requests++
        if (p.items.length > 0) throw new Error('an unreadable row was listed')
        if (p.next === undefined) break
        after = p.next
      }
      only.push(performance.now() - t0)
    }
    return {
      storage: 'sqlite',
      homeFeedAmong20000UnreadableP50Ms: median(home),
      unreadableOnlyMatchP50Ms: median(only),
      requestsToAnswer: requests,
    }
  } finally {
    await ts.cleanup()
  }
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  console.log(JSON.stringify(await benchQuery(), null, 2))
  process.exit(0)
}
