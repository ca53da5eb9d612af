/**
 * Storage throughput: durable single-field patch commits through the SQLite adapter (group
 * commit with 64 in flight, and one at a time), against raw better-sqlite3 inserts of the same
 * update bytes with the same durability (WAL, synchronous=FULL) and the same transaction sizes.
 *
 * Run alone: `npx tsx test/bench/storage-bench.ts` prints JSON.
 */
import Database from 'better-sqlite3'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'
import * as Y from 'yjs'
import { applyPatchToDoc, docToJson, type JsonObject, type NodePath } from '../../shared/index.js'
import { openStorage, type CommitInput, type StorageAdapter } from '../../sync-server/storage/index.js'

const CONCURRENCY = 64
const CONCURRENT_COMMITS = 6400
const SEQUENTIAL_COMMITS = 300

interface Patch {
  update: Uint8Array
  content: JsonObject
}

/** A node with a realistic handful of fields, then `count` single-field patches to it. */
function makeNode(count: number, seed: number): { created: Patch; patches: Patch[] } {
  const doc = new Y.Doc()
  let last: Uint8Array | null = null
  doc.on('update', (u: Uint8Array) => (last = u))
  const take = (): Patch => {
    if (!last) throw new Error('no update')
    return { update: last, content: docToJson(doc) }
  }
  applyPatchToDoc(doc, {
    Title: `Node ${seed}`,
    Status: 'Pending',
    Owner: 'alice',
    Tags: ['a', 'b'],
    Details: { Priority: 1, Notes: 'Lorem ipsum dolor sit amet, consectetur adipiscing elit.' },
  })
  const created = take()
  const patches: Patch[] = []
  for (let i = 0; i < count; i++) {
    applyPatchToDoc(doc, i % 3 === 0 ? { Status: `S${i}` } : { Details: { Priority: i } })
    patches.push(take())
  }
  return { created, patches }
}

function commitInput(path: NodePath, kind: 'Created' | 'Updated', patch: Patch): CommitInput {
  return { path, kind, nodeType: 'Document', name: path, content: patch.content, createdBy: 'bench', at: new Date().toISOString(), update: patch.update }
}

async function adapterRun(store: StorageAdapter, prefix: string, workers: number, perWorker: number): Promise<number> {
  const nodes = Array.from({ length: workers }, (_, i) => ({ path: `${prefix}/n${i}` as NodePath, ...makeNode(perWorker, i) }))
  await Promise.all(nodes.map((n) => store.commit(commitInput(n.path, 'Created', n.created))))
  const start = performance.now()
  await Promise.all(
    nodes.map(async (n) => {
      for (const p of n.patches) await store.commit(commitInput(n.path, 'Updated', p))
    }),
  )
  return (workers * perWorker) / ((performance.now() - start) / 1000)
}

/** One INSERT per row, `batch` rows per transaction, same pragmas as the adapter. */
function rawRun(file: string, updates: Uint8Array[], batch: number): number {
  const db = new Database(file)
  db.pragma('journal_mode = WAL')
  db.pragma('synchronous = FULL')
  db.exec('CREATE TABLE IF NOT EXISTS raw_updates (path TEXT NOT NULL, seq INTEGER NOT NULL, data BLOB NOT NULL, PRIMARY KEY (path, seq))')
  const insert = db.prepare<[string, number, Buffer]>('INSERT INTO raw_updates (path, seq, data) VALUES (?, ?, ?)')
  const buffers = updates.map((u) => Buffer.from(u))
  const writeBatch = db.transaction((from: number, to: number) => {
    for (let i = from; i < to; i++) insert.run(`raw/n${i % CONCURRENCY}`, i, buffers[i] as Buffer)
  })
  const start = performance.now()
  for (let i = 0; i < buffers.length; i += batch) writeBatch.immediate(i, Math.min(i + batch, buffers.length))
  const rate = buffers.length / ((performance.now() - start) / 1000)
  db.close()
  return rate
}

export async function benchStorage(): Promise<Record<string, number | string>> {
  const dir = await mkdtemp(join(tmpdir(), 'weft-bench-'))
  try {
    const store = await openStorage({ dataDir: dir })
    const concurrent = await adapterRun(store, 'conc', CONCURRENCY, CONCURRENT_COMMITS / CONCURRENCY)
    const sequential = await adapterRun(store, 'seq', 1, SEQUENTIAL_COMMITS)
    await store.close()

    const sample = makeNode(CONCURRENT_COMMITS / CONCURRENCY, 0).patches.map((p) => p.update)
    const updates = Array.from({ length: CONCURRENT_COMMITS }, (_, i) => sample[i % sample.length] as Uint8Array)
    const rawBatched = rawRun(join(dir, 'raw-batched.db'), updates, CONCURRENCY)
    const rawSequential = rawRun(join(dir, 'raw-sequential.db'), updates.slice(0, SEQUENTIAL_COMMITS), 1)

    const round = (x: number): number => Math.round(x)
    return {
      durability: 'WAL, synchronous=FULL',
      updateBytes: Math.round(sample.reduce((s, u) => s + u.byteLength, 0) / sample.length),
      adapterConcurrent64CommitsPerSec: round(concurrent),
      rawBatched64InsertsPerSec: round(rawBatched),
      concurrentRatioAdapterToRaw: Number((concurrent / rawBatched).toFixed(3)),
      adapterSequentialCommitsPerSec: round(sequential),
      rawSequentialInsertsPerSec: round(rawSequential),
      sequentialRatioAdapterToRaw: Number((sequential / rawSequential).toFixed(3)),
      groupCommitSpeedup: Number((concurrent / sequential).toFixed(1)),
    }
  } finally {
    await rm(dir, { recursive: true, force: true })
  }
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  console.log(JSON.stringify(await benchStorage(), null, 2))
}
