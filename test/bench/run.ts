/**
 * `npm run bench`: runs every bench module present, prints one table of figures with their
 * goals and pass/fail, and writes everything to .tmp/bench.json.
 *
 * A module exports one async function returning a flat record of figures. It may also export
 * `GOALS` (figure name → goal) to have its goals checked here; the goals of issue 2 are below.
 * Modules written by other teams are imported dynamically and skipped, with a note, when absent.
 * `BENCH_ONLY=activities,feed` runs only the named modules (a module may select its own parts,
 * e.g. `ACTIVITIES_BENCH_PARTS=flood,slope`).
 */
import { existsSync } from 'node:fs'
import { mkdir, writeFile } from 'node:fs/promises'
import { cpus, loadavg, totalmem } from 'node:os'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'

type Figures = Record<string, number | string>

export interface Goal {
  op: '<' | '<=' | '>' | '>='
  value: number
  unit?: string
}

interface BenchModule {
  name: string
  file: string
  fn: string
}

const HERE = dirname(fileURLToPath(import.meta.url))
const ROOT = resolve(HERE, '../..')

const MODULES: BenchModule[] = [
  { name: 'sync', file: 'sync-bench.ts', fn: 'benchSync' },
  { name: 'storage', file: 'storage-bench.ts', fn: 'benchStorage' },
  { name: 'web', file: 'web-bench.ts', fn: 'benchWeb' },
  { name: 'typing', file: 'typing-bench.ts', fn: 'benchTyping' },
  { name: 'subscriptions', file: 'subscriptions-bench.ts', fn: 'benchSubscriptions' },
  { name: 'feed', file: 'feed-bench.ts', fn: 'benchFeed' },
  { name: 'query', file: 'query-bench.ts', fn: 'benchQuery' },
  { name: 'gate', file: 'gate-bench.ts', fn: 'benchGate' },
  { name: 'activities', file: 'activities-bench.ts', fn: 'benchActivities' },
  { name: 'kit', file: 'kit-bench.ts', fn: 'benchKit' },
  { name: 'sim-net', file: 'sim-net-bench.ts', fn: 'benchSimNet' },
  { name: 'threads', file: 'threads-bench.ts', fn: 'benchThreads' },
  { name: 'threads-scale', file: 'threads-scale-bench.ts', fn: 'benchThreadsScale' },
  { name: 'threads-model', file: 'threads-model-bench.ts', fn: 'benchThreadsModel' },
  { name: 'search', file: 'search-bench.ts', fn: 'benchSearch' },
  { name: 'cluster', file: 'cluster-bench.ts', fn: 'benchCluster' },
  { name: 'compaction', file: 'compaction-bench.ts', fn: 'benchCompaction' },
  { name: 'creates', file: 'create-bench.ts', fn: 'benchCreates' },
  { name: 'metrics', file: 'metrics-bench.ts', fn: 'benchMetrics' },
  { name: 'mcp', file: 'mcp-bench.ts', fn: 'benchMcp' },
  { name: 'contextual', file: 'contextual-bench.ts', fn: 'benchContextual' },
  { name: 'contextual-scale', file: 'contextual-scale-bench.ts', fn: 'benchContextualScale' },
  { name: 'contextual-sweep', file: 'contextual-sweep-bench.ts', fn: 'benchContextualSweep' },
  { name: 'rss', file: 'rss-bench.ts', fn: 'benchRss' },
  { name: 'backup', file: 'backup-bench.ts', fn: 'benchBackup' },
]

/** Goals of issue 2 (docs/BENCHMARKS.md explains each). */
const BUILTIN_GOALS: Record<string, Goal> = {
  'sync.syncP50RatioToRelay': { op: '<=', value: 1.5, unit: '×' },
  'sync.fanoutAllSeenP99Ms': { op: '<', value: 100, unit: 'ms' },
  'sync.fanoutPerReaderP99Ms': { op: '<', value: 100, unit: 'ms' },
  'sync.muxUpdatesAckedPerSec': { op: '>=', value: 5_000, unit: '/s' },
}

function check(goal: Goal, value: number): boolean {
  switch (goal.op) {
    case '<':
      return value < goal.value
    case '<=':
      return value <= goal.value
    case '>':
      return value > goal.value
    case '>=':
      return value >= goal.value
    default:
      goal.op satisfies never
      return false
  }
}

interface Row {
  figure: string
  value: number | string
  goal: string
  result: string
}

async function main(): Promise<void> {
  const startedAt = new Date()
  const out: Record<string, unknown> = {
    date: startedAt.toISOString(),
    command: 'npm run bench',
    machine: {
      cpus: cpus().length,
      cpuModel: cpus()[0]?.model ?? 'unknown',
      memoryGb: Math.round(totalmem() / 2 ** 30),
      node: process.version,
      // Figures from a busy machine are not comparable: the load is recorded with them.
      loadAvg1mAtStart: Number((loadavg()[0] ?? 0).toFixed(2)),
    },
    results: {} as Record<string, Figures>,
    skipped: [] as string[],
    goals: [] as Row[],
  }
  const results = out.results as Record<string, Figures>
  const rows: Row[] = []
  const goals: Record<string, Goal> = { ...BUILTIN_GOALS }

  const only = process.env.BENCH_ONLY ? new Set(process.env.BENCH_ONLY.split(',').map((s) => s.trim())) : null
  if (only) out.command = `BENCH_ONLY=${process.env.BENCH_ONLY} npm run bench`
  for (const m of MODULES) {
    if (only && !only.has(m.name)) continue
    const path = join(HERE, m.file)
    if (!existsSync(path)) {
      console.log(`-- ${m.name}: skipped (${m.file} not present)`)
      ;(out.skipped as string[]).push(`${m.name}: ${m.file} not present`)
      continue
    }
    console.log(`-- ${m.name}: running ${m.file} ...`)
    const t0 = performance.now()
    try {
      const mod = (await import(pathToFileURL(path).href)) as Record<string, unknown>
      const fn = mod[m.fn]
      if (typeof fn !== 'function') throw new Error(`${m.file} does not export ${m.fn}()`)
      const figures = (await fn()) as Figures
      results[m.name] = figures
      for (const [key, goal] of Object.entries((mod.GOALS as Record<string, Goal> | undefined) ?? {})) goals[`${m.name}.${key}`] = goal
      console.log(`   done in ${((performance.now() - t0) / 1000).toFixed(1)} s`)
    } catch (e) {
      console.log(`   FAILED: ${(e as Error).stack ?? String(e)}`)
      results[m.name] = { error: (e as Error).message }
    }
  }

  // Cross-module figures: how much of the storage layer's durable rate survives the full server.
  const mux = results.sync?.muxUpdatesAckedPerSec
  const http = results.sync?.httpPatchesPerSec
  const storage = results.storage?.adapterConcurrent64CommitsPerSec
  if (typeof storage === 'number' && storage > 0) {
    const derived: Figures = {}
    if (typeof mux === 'number') derived.muxAckedToStorageCommitRatio = Number((mux / storage).toFixed(3))
    if (typeof http === 'number') derived.httpPatchToStorageCommitRatio = Number((http / storage).toFixed(3))
    results.derived = derived
  }

  for (const [bench, figures] of Object.entries(results)) {
    for (const [key, value] of Object.entries(figures)) {
      const goal = goals[`${bench}.${key}`]
      let result = ''
      if (goal) result = typeof value === 'number' && check(goal, value) ? 'PASS' : 'FAIL'
      rows.push({ figure: `${bench}.${key}`, value, goal: goal ? `${goal.op} ${goal.value}${goal.unit ?? ''}` : '', result })
    }
  }
  for (const key of Object.keys(goals)) {
    const [bench, figure] = key.split('.') as [string, string]
    if (results[bench] && !(figure in results[bench])) rows.push({ figure: key, value: 'missing', goal: '', result: 'FAIL' })
  }
  out.goals = rows.filter((r) => r.goal !== '')
  ;(out.machine as Record<string, unknown>).loadAvg1mAtEnd = Number((loadavg()[0] ?? 0).toFixed(2))
  out.durationSec = Math.round((Date.now() - startedAt.getTime()) / 1000)

  const width = Math.max(...rows.map((r) => r.figure.length), 6)
  console.log('')
  console.log(`${'figure'.padEnd(width)}  ${'value'.padStart(12)}  ${'goal'.padEnd(12)}  result`)
  console.log(`${'-'.repeat(width)}  ${'-'.repeat(12)}  ${'-'.repeat(12)}  ------`)
  for (const r of rows) console.log(`${r.figure.padEnd(width)}  ${String(r.value).padStart(12)}  ${r.goal.padEnd(12)}  ${r.result}`)

  const file = join(ROOT, '.tmp', 'bench.json')
  await mkdir(dirname(file), { recursive: true })
  await writeFile(file, JSON.stringify(out, null, 2) + '\n')
  const failed = rows.filter((r) => r.result === 'FAIL').length
  const machine = out.machine as Record<string, unknown>
  console.log(`\n${rows.filter((r) => r.result === 'PASS').length} goals met, ${failed} missed; JSON in ${file}`)
  console.log(`load average (1 min) ${machine.loadAvg1mAtStart} at start, ${machine.loadAvg1mAtEnd} at end, on ${machine.cpus} cores`)
}

await main()
// Bench clients (providers' timers, sockets) must not keep the process alive.
process.exit(0)
