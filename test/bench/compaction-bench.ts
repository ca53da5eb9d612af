/**
 * Commits while a big node's log is compacted ([SCALE15], issue 20), on PostgreSQL and on SQLite. Open loop:
 * RATE commits per second for SECONDS, whatever the server does (clients do not stop typing while
 * it stalls), half to a 30,000-field node, half to eight small ones. Every 1,000 entries the big
 * node's log is folded into its snapshot (~150 ms of CPU); the small ones every 200.
 *  - `commitP50Ms` / `commitP99Ms` / `commitMaxMs`: each commit's latency from when it was due
 *    (PostgreSQL);
 *  - the same with compaction switched off (`…NoCompaction`), in the same run, and
 *    `commitP99RatioToNoCompaction`: what compaction costs the p99;
 *  - `sqliteCommit…`: the same load on SQLite (its writer thread; compaction on).
 * Run alone: `npx tsx test/bench/compaction-bench.ts` prints JSON.
 */
import { randomBytes } from 'node:crypto'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'
import pg from 'pg'
import * as Y from 'yjs'
import { applyPatchToDoc, docToJson, type MergePatch, type NodePath } from '../../shared/index.js'
import { openPostgresStorage, openStorage, type CommitInput, type StorageAdapter } from '../../sync-server/storage/index.js'
import { percentile } from './stats.js'

const connectionString = process.env.WEFT_TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test'
const RATE = Number(process.env.COMPACTION_BENCH_RATE ?? 1500)
const SECONDS = Number(process.env.COMPACTION_BENCH_SECONDS ?? 8)
const BIG_FIELDS = 30_000

function writer(path: string): (kind: 'Created' | 'Updated', patch: MergePatch) => CommitInput {
  const doc = new Y.Doc()
  return (kind, patch) => {
    let update: Uint8Array | null = null
    const capture = (u: Uint8Array) => (update = update ? Y.mergeUpdates([update, u]) : u)
    doc.on('update', capture)
    applyPatchToDoc(doc, patch)
    doc.off('update', capture)
    if (!update) throw new Error('no update')
    return { path: path as NodePath, kind, nodeType: 'Document', name: path, content: kind === 'Created' ? docToJson(doc) : { Small: true }, createdBy: 'bench', at: new Date().toISOString(), update }
  }
}

type Round = { p50: number; p99: number; max: number }

async function round(autoCompact: boolean): Promise<Round> {
  const schema = `weft_compaction_bench_${randomBytes(4).toString('hex')}`
  const store = await openPostgresStorage({ connectionString, schema, autoCompact })
  try {
    return await load(store)
  } finally {
    await store.close()
    const client = new pg.Client({ connectionString })
    await client.connect()
    await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`).finally(() => client.end())
  }
}

/** The same load on the embedded default (SQLite, its writer thread). */
async function sqliteRound(): Promise<Round> {
  const dir = await mkdtemp(join(tmpdir(), 'weft-compaction-bench-'))
  const store = await openStorage({ dataDir: dir })
  try {
    return await load(store)
  } finally {
    await store.close()
    await rm(dir, { recursive: true, force: true })
  }
}

async function load(store: StorageAdapter): Promise<Round> {
  {
    const big = writer('big')
    const init: Record<string, number> = {}
    for (let i = 0; i < BIG_FIELDS; i++) init[`k${i}`] = i
    await store.commit(big('Created', init))
    const small = Array.from({ length: 8 }, (_, i) => writer(`small${i}`))
    await Promise.all(small.map((w) => store.commit(w('Created', { a: 0 }))))
    const latencies: number[] = []
    const commits: Promise<unknown>[] = []
    const t0 = performance.now()
    for (let i = 0; i < RATE * SECONDS; i++) {
      const due = t0 + (i * 1000) / RATE
      const wait = due - performance.now()
      if (wait > 1) await new Promise((resolve) => setTimeout(resolve, wait))
      const input = i % 2 === 0 ? big('Updated', { [`k${i % BIG_FIELDS}`]: -i - 1 }) : small[i % 8]!('Updated', { a: i + 1 })
      commits.push(store.commit(input).then(() => latencies.push(performance.now() - due)))
    }
    await Promise.all(commits)
    return { p50: percentile(latencies, 50), p99: percentile(latencies, 99), max: Math.max(...latencies) }
  }
}

const r1 = (n: number) => Math.round(n * 10) / 10

export async function benchCompaction(): Promise<Record<string, number>> {
  const on = await round(true)
  const off = await round(false)
  const lite = await sqliteRound()
  return {
    sqliteCommitP50Ms: r1(lite.p50),
    sqliteCommitP99Ms: r1(lite.p99),
    sqliteCommitMaxMs: r1(lite.max),
    rate: RATE,
    commitP50Ms: r1(on.p50),
    commitP99Ms: r1(on.p99),
    commitMaxMs: r1(on.max),
    commitP50MsNoCompaction: r1(off.p50),
    commitP99MsNoCompaction: r1(off.p99),
    commitMaxMsNoCompaction: r1(off.max),
    commitP99RatioToNoCompaction: Math.round((on.p99 / Math.max(0.1, off.p99)) * 100) / 100,
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  benchCompaction().then(
    (r) => console.log(JSON.stringify(r, null, 2)),
    (e: unknown) => {
      console.error(e)
      process.exit(1)
    },
  )
}
