/**
 * [FIND1] [FIND2] Quick find over 100,000 nodes, server side, and the boot it costs.
 *  - `quickFindP50Ms` / `quickFindP99Ms`: `SearchService.search` in the server process (what
 *    `GET /api/search` spends between parsing the request and writing the answer), for a reader
 *    of 10 of 100 spaces (10,000 of the 100,000 nodes readable), over 400 queries: whole words
 *    common and rare, 3–5 character parts of words, two-word queries, Japanese and Korean, one
 *    and two characters (the scan path), and words only unreadable nodes hold.
 *  - `quickFind.<class>.p50Ms/p99Ms`: the same per query class; `quickFindCpuP50Ms/P99Ms`: the
 *    process's CPU time per query (user + system), less swayed by a loaded machine than wall time.
 *  - `storage.*`: [FIND4] the storage search alone, side by side, alternating per query: the
 *    whole index's ranked stream access-checked row by row (`wholeIndex`, the way before) and
 *    driven by the reader's readable regions (`regions`); the run fails if they disagree.
 *  - `quickFindAll*`, `storageAll.*`: [FIND4] the same for a reader of every node (the owner of
 *    all 100 spaces: a self-hosted server's one person, or an Admin), past the bound where a
 *    reader's own names are kept (searchWithinLimits.walkAtMost).
 *  - `quickFindHttpP99Ms`: the same queries over HTTP on loopback, client-measured.
 *  - `indexBuild100kMs`: the first boot of a data dir from before the index (100,000 nodes):
 *    the one-time build. `boot100kToHealthzMs`: a later boot to `/healthz` ok, index in place.
 *  - `boot10kToHealthzMs`: boot to `/healthz` ok with 10,000 nodes (the server side of a cold
 *    start; the browser side is `web.coldStartListMedianMs`).
 * Real server on port 0, real SQLite in a temp dir; rows are written straight into the file
 * (as the node service writes them: row, change record) while the server is down, with the
 * index dropped: the next boot builds it, as for a data dir from before the index.
 * Run alone: `npx tsx test/bench/search-bench.ts` prints JSON (`SEARCH_BENCH_TRACE=1`: each
 * query's time on stderr; `SEARCH_BENCH_KEEP=1`: the 100,000-node data dir is kept, its path on stderr).
 */
import { join } from 'node:path'
import { performance } from 'node:perf_hooks'
import { pathToFileURL } from 'node:url'
import Database from 'better-sqlite3'
import { userPrincipal, type NodePath, type UserId } from '../../shared/index.js'
import { SearchService } from '../../sync-server/search/index.js'
import { planSearch } from '../../sync-server/storage/index.js'
import { pathColumns } from '../../sync-server/storage/row-mapping.js'
import { api, grantRole, makeTempDir, removeDir, signup, startTestServer, waitFor } from '../helpers/index.js'

export const GOALS: Record<string, { op: '<' | '<=' | '>' | '>='; value: number; unit?: string }> = {
  quickFindP99Ms: { op: '<', value: 50, unit: 'ms' },
  quickFindAllP99Ms: { op: '<', value: 50, unit: 'ms' },
  boot10kToHealthzMs: { op: '<', value: 300, unit: 'ms' },
}

const SPACES = Number(process.env.SEARCH_BENCH_SPACES ?? 100)
const PER_SPACE = 1000
const READABLE_SPACES = 10
const QUERIES = 400

/** Real words (the most frequent) in several scripts, then 3,000 made-up ones: a vocabulary drawn Zipf-like. */
const REAL = (
  'project plan meeting notes budget roadmap design review launch customer invoice report summary draft ' +
  'release sprint backlog feature bug incident postmortem hiring onboarding training policy contract ' +
  '日本語 会議 議事録 予算 計画 メモ 한국어 회의 메모 계획 예산 Über Café résumé naïve'
).split(' ')
const SYLLABLES = 'ka ri to mo la ne su vi do ge pa zu ro mi te ba'.split(' ')
const WORDS = [...REAL, ...Array.from({ length: 3000 }, (_, i) => SYLLABLES[i % 16]! + SYLLABLES[Math.floor(i / 16) % 16]! + SYLLABLES[Math.floor(i / 256) % 16]! + (i >= 4096 ? 'x' : ''))]

/** A deterministic random source (mulberry32): the same data and queries every run. */
function random(seed: number): () => number {
  let a = seed
  return () => {
    a = (a + 0x6d2b79f5) | 0
    let t = Math.imul(a ^ (a >>> 15), 1 | a)
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

const progress = (what: string) => console.error(`search-bench ${new Date().toISOString()} ${what}`)

function percentile(xs: number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b)
  return Number(s[Math.min(s.length - 1, Math.floor((s.length * p) / 100))]!.toFixed(2))
}

/** Writes `count` Document rows under each space straight into the file (the server is down). */
function writeRows(file: string, spaces: string[], perSpace: number, rand: () => number, owner: string): void {
  const db = new Database(file)
  // Zipf-like: the word of rank r comes with a weight of about 1/r.
  const pick = () => WORDS[Math.min(WORDS.length - 1, Math.floor(Math.exp(rand() * Math.log(WORDS.length + 1))) - 1)]!
  const sentence = (n: number) => Array.from({ length: n }, pick).join(' ')
  const change = db.prepare<[string]>("INSERT INTO changes (path, node_type, kind) VALUES (?, 'Document', 'Created')")
  const row = db.prepare(
    `INSERT INTO nodes (path, node_type, name, parent, last_segment, content, created_by, created_at, updated_at, version, state, snapshot, update_count)
     VALUES (@path, 'Document', @name, @parent, @lastSegment, @content, @owner, @at, @at, @version, 'Active', NULL, 0)`,
  )
  const at = new Date().toISOString()
  db.transaction(() => {
    for (const space of spaces) {
      for (let i = 0; i < perSpace; i++) {
        const path = `${space}/d${i}` as NodePath
        const version = Number(change.run(path).lastInsertRowid)
        const content = JSON.stringify({ Title: sentence(3), Body: sentence(10 + Math.floor(rand() * 40)), Tags: [pick(), pick()] })
        row.run({ path, name: `${sentence(2)} ${i}`, ...pathColumns(path), content, owner, at, version })
      }
    }
  })()
  db.close()
}

/**
 * The figures of one reader (`suffix` '' for the 10-space reader: `quickFindP99Ms`, `storage.*`;
 * 'All' for the reader of everything: `quickFindAllP99Ms`, `storageAll.*`): `SearchService.search`
 * per query (wall and CPU time), then the storage search the old way and driven by the regions,
 * alternating per query, failing on the first query where their answers differ. `readable`: a
 * path this reader may be answered (any other found fails the run).
 */
async function measureReader(
  ts: Awaited<ReturnType<typeof startTestServer>>,
  search: SearchService,
  userId: UserId,
  queries: string[],
  classes: string[],
  CLASS: string[],
  figures: Record<string, number | string>,
  suffix: string,
  readable: (path: string) => boolean,
): Promise<void> {
  const reader = userPrincipal(userId)
  // Warm up (statement caches, the access regions, the kept names), then measure.
  for (const q of queries.slice(0, 20)) await search.search(reader, q)
  const inProcess: number[] = []
  // CPU time of this process per query: what a query costs, less swayed than wall time by the
  // other processes on a shared machine (it still grows with cache misses under load).
  const cpuMs: number[] = []
  const cpu = () => {
    const u = process.cpuUsage()
    return (u.user + u.system) / 1000
  }
  let hits = 0
  let t0 = 0
  for (const q of queries) {
    t0 = performance.now()
    const c0 = cpu()
    const items = await search.search(reader, q)
    cpuMs.push(cpu() - c0)
    if (process.env.SEARCH_BENCH_TRACE) console.error(`${suffix || 'ten'} ${(performance.now() - t0).toFixed(1)} ms ${items.length} ${JSON.stringify(q)}`)
    inProcess.push(performance.now() - t0)
    hits += items.length
    const stray = items.find((h) => !readable(h.path))
    if (stray) throw new Error(`an unreadable node was found: ${stray.path}`)
  }
  // [FIND4] Side by side, alternating per query: the storage search without the caller's
  // regions (the index's ranked stream, access-checked row by row: before) and driven by them (after).
  const canRead = (path: NodePath) => ts.server.nodes.permissions(reader, path).has('Read')
  const regions = ts.server.nodes.readRegions(reader) ?? undefined
  const before: number[] = []
  const after: number[] = []
  for (const q of queries) {
    const plan = planSearch(q)
    t0 = performance.now()
    const a = await ts.server.storage.searchNodes(plan, canRead, 20)
    before.push(performance.now() - t0)
    t0 = performance.now()
    const b = await ts.server.storage.searchNodes(plan, canRead, 20, regions)
    after.push(performance.now() - t0)
    if (JSON.stringify(a) !== JSON.stringify(b)) throw new Error(`the two ways disagree on ${JSON.stringify(q)} (reader ${suffix || 'of 10 spaces'})`)
  }
  const storage = `storage${suffix}`
  figures[`${storage}.wholeIndexP50Ms`] = percentile(before, 50)
  figures[`${storage}.wholeIndexP99Ms`] = percentile(before, 99)
  figures[`${storage}.regionsP50Ms`] = percentile(after, 50)
  figures[`${storage}.regionsP99Ms`] = percentile(after, 99)
  figures[`${storage}.p99Ratio`] = Number((percentile(before, 99) / percentile(after, 99)).toFixed(1))
  for (const c of CLASS) {
    const pick = (xs: number[]) => xs.filter((_, i) => classes[i] === c)
    figures[`${storage}.${c}.wholeIndexP99Ms`] = percentile(pick(before), 99)
    figures[`${storage}.${c}.regionsP99Ms`] = percentile(pick(after), 99)
  }
  const quick = `quickFind${suffix}`
  figures[`meanHitsPerQuery${suffix}`] = Number((hits / queries.length).toFixed(1))
  figures[`${quick}P50Ms`] = percentile(inProcess, 50)
  figures[`${quick}P99Ms`] = percentile(inProcess, 99)
  figures[`${quick}MaxMs`] = percentile(inProcess, 100)
  figures[`${quick}CpuP50Ms`] = percentile(cpuMs, 50)
  figures[`${quick}CpuP99Ms`] = percentile(cpuMs, 99)
  for (const c of CLASS) {
    const xs = inProcess.filter((_, i) => classes[i] === c)
    figures[`${quick}.${c}.p50Ms`] = percentile(xs, 50)
    figures[`${quick}.${c}.p99Ms`] = percentile(xs, 99)
  }
}

async function bootToHealthz(restart: () => Promise<void>, url: () => string): Promise<number> {
  const t0 = performance.now()
  await restart()
  await waitFor(async () => (await fetch(`${url()}/healthz`)).status === 200, { timeoutMs: 120_000, intervalMs: 1 })
  return Number((performance.now() - t0).toFixed(1))
}

export async function benchSearch(): Promise<Record<string, number | string>> {
  const rand = random(16)
  const figures: Record<string, number | string> = { storage: 'sqlite' }

  // The 10,000-node boot: its own data dir.
  const small = await startTestServer()
  try {
    const owner = await signup(small.url)
    await small.server.close()
    const spaces = Array.from({ length: 10 }, (_, i) => `Small${i}`)
    writeRows(join(small.dataDir, 'weft.db'), spaces, 1000, rand, owner.userId)
    await bootToHealthz(() => small.restart(), () => small.url) // builds the index once
    await small.server.close()
    progress('10k boot')
    figures.boot10kToHealthzMs = await bootToHealthz(() => small.restart(), () => small.url)
  } finally {
    await small.cleanup()
  }

  const dir = await makeTempDir('weft-search-bench-')
  const ts = await startTestServer({ dataDir: dir })
  try {
    const [alice, bob] = await Promise.all([signup(ts.url), signup(ts.url)])
    const spaces = Array.from({ length: SPACES }, (_, i) => `Space${String(i).padStart(3, '0')}`)
    for (const s of spaces) {
      const res = await api(ts.url, bob.token).putNode(s, 'Space', {})
      if (res.status !== 201) throw new Error(`space: ${res.status}`)
    }
    for (const s of spaces.slice(0, READABLE_SPACES)) await grantRole(ts.url, bob.token, s, alice.userId, 'Viewer')
    await ts.server.close()
    const file = join(dir, 'weft.db')
    progress('writing rows')
    writeRows(file, spaces, PER_SPACE, rand, bob.userId)
    progress('rows written')
    let t0 = performance.now()
    await ts.restart()
    figures.indexBuild100kMs = Number((performance.now() - t0).toFixed(0))
    progress('index built')
    await ts.server.close()
    figures.boot100kToHealthzMs = await bootToHealthz(() => ts.restart(), () => ts.url)

    const search = new SearchService(ts.server.nodes, ts.server.storage)
    const queries: string[] = []
    const classes: string[] = []
    const CLASS = ['word', 'part', 'twoWords', 'short', 'wordNumber', 'script']
    for (let i = 0; i < QUERIES; i++) {
      // Half the queries are the real (frequent) words, half the rest of the vocabulary.
      const w = i % 2 === 0 ? REAL[Math.floor(rand() * REAL.length)]! : WORDS[Math.floor(rand() * WORDS.length)]!
      const kind = i % 6
      classes.push(CLASS[kind]!)
      if (kind === 0) queries.push(w)
      else if (kind === 1) queries.push([...w].slice(0, 3 + Math.floor(rand() * 3)).join(''))
      else if (kind === 2) queries.push(`${w} ${WORDS[Math.floor(rand() * WORDS.length)]!}`)
      else if (kind === 3) queries.push([...w].slice(0, 1 + Math.floor(rand() * 2)).join(''))
      else if (kind === 4) queries.push(`${w} ${Math.floor(rand() * PER_SPACE)}`)
      else queries.push(['会議', '메모', '日本語', 'Über', 'plan'][i % 5]!)
    }
    // The reader of 10 spaces (alice), then [FIND4] the reader of everything (bob, the owner of
    // every space: a self-hosted server's one person), each with its own figures.
    await measureReader(ts, search, alice.userId as UserId, queries, classes, CLASS, figures, '', (p) => p.startsWith('Space00') || p === alice.userId || p.startsWith('Admin/'))
    progress('10-space reader done')
    await measureReader(ts, search, bob.userId as UserId, queries, classes, CLASS, figures, 'All', () => true)
    progress('reader of everything done')
    const http = api(ts.url, alice.token)
    const overHttp: number[] = []
    for (const q of queries) {
      t0 = performance.now()
      const res = await http.get(`/api/search?q=${encodeURIComponent(q)}`)
      overHttp.push(performance.now() - t0)
      if (res.status !== 200) throw new Error(`search answered ${res.status}`)
    }
    figures.nodes = SPACES * PER_SPACE
    figures.readableNodes = READABLE_SPACES * PER_SPACE
    figures.readableNodesAll = SPACES * PER_SPACE
    figures.queries = QUERIES
    figures.quickFindHttpP50Ms = percentile(overHttp, 50)
    figures.quickFindHttpP99Ms = percentile(overHttp, 99)
    return figures
  } finally {
    if (process.env.SEARCH_BENCH_KEEP) {
      await ts.server.close()
      console.error(`search-bench: kept ${dir}`)
    } else {
      await ts.cleanup()
      await removeDir(dir)
    }
  }
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  console.log(JSON.stringify(await benchSearch(), null, 2))
  process.exit(0)
}
