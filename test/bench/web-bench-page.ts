/**
 * Runs in Chromium (served by web-bench.ts): our one-database store against y-indexeddb's
 * database-per-document, opening the same 1,000 documents cold.
 */
import * as Y from 'yjs'
import { IndexeddbPersistence } from 'y-indexeddb'
import { applyPatchToDoc, docToJson } from '../../shared/merge-patch.js'
import { NodeStore } from '../../web/store/node-store.js'

const UPDATES_PER_DOC = 5

function makeUpdates(i: number): Uint8Array[] {
  const doc = new Y.Doc()
  const updates: Uint8Array[] = []
  doc.on('update', (u: Uint8Array) => updates.push(u))
  for (let k = 0; k < UPDATES_PER_DOC; k++) applyPatchToDoc(doc, { Title: `Doc ${i}`, [`F${k}`]: k, Body: `edit ${k} of ${i}` })
  return updates
}

async function seedOurs(n: number): Promise<void> {
  const store = new NodeStore('bench-ours')
  await store.open()
  await store.db.updates.clear()
  const rows = []
  for (let i = 0; i < n; i++) {
    const path = pathOf(i)
    for (const update of makeUpdates(i)) rows.push({ path, update })
  }
  await store.db.updates.bulkAdd(rows)
  store.close()
}

async function seedYIndexeddb(n: number): Promise<void> {
  for (let i = 0; i < n; i++) {
    const name = nameOf(i)
    const doc = new Y.Doc()
    const p = new IndexeddbPersistence(name, doc)
    await p.whenSynced
    for (const update of makeUpdates(i)) Y.applyUpdate(doc, update)
    // y-indexeddb stores each update in its own transaction; wait for them to land.
    await new Promise((r) => setTimeout(r, 0))
    await p.destroy()
  }
}

/** Sequential: one document after the other, each its own read. */
async function openOursSequential(paths: string[]): Promise<{ ms: number; fields: number }> {
  const t0 = performance.now()
  const store = new NodeStore('bench-ours')
  await store.open()
  let fields = 0
  for (const path of paths) fields += Object.keys(docToJson(await store.loadDoc(path))).length
  const ms = performance.now() - t0
  store.close()
  return { ms, fields }
}

/** Batched: all documents in one read transaction (only possible with one database). */
async function openOursBatched(paths: string[]): Promise<{ ms: number; fields: number }> {
  const t0 = performance.now()
  const store = new NodeStore('bench-ours')
  await store.open()
  let fields = 0
  for (const doc of (await store.loadDocs(paths)).values()) fields += Object.keys(docToJson(doc)).length
  const ms = performance.now() - t0
  store.close()
  return { ms, fields }
}

async function openYIndexeddbOne(name: string): Promise<number> {
  const doc = new Y.Doc()
  const p = new IndexeddbPersistence(name, doc)
  await p.whenSynced
  const fields = Object.keys(docToJson(doc)).length
  await p.destroy()
  return fields
}

async function openYIndexeddbSequential(names: string[]): Promise<{ ms: number; fields: number }> {
  const t0 = performance.now()
  let fields = 0
  for (const name of names) fields += await openYIndexeddbOne(name)
  return { ms: performance.now() - t0, fields }
}

/** y-indexeddb's best: every database opened at once. */
async function openYIndexeddbParallel(names: string[]): Promise<{ ms: number; fields: number }> {
  const t0 = performance.now()
  const counts = await Promise.all(names.map(openYIndexeddbOne))
  return { ms: performance.now() - t0, fields: counts.reduce((a, b) => a + b, 0) }
}

declare global {
  interface Window {
    weftBench: {
      seed(n: number): Promise<{ oursSeedMs: number; yidbSeedMs: number }>
      /** Opens the n seeded documents from both stores (names are deterministic). */
      openCold(n: number, mode: 'sequential' | 'best'): Promise<{ oursMs: number; yidbMs: number; fields: number }>
    }
  }
}

const pathOf = (i: number) => `bench/d${i}`
const nameOf = (i: number) => `bench-yidb-d${i}`

window.weftBench = {
  async seed(n) {
    let t = performance.now()
    await seedOurs(n)
    const oursSeedMs = performance.now() - t
    t = performance.now()
    await seedYIndexeddb(n)
    return { oursSeedMs, yidbSeedMs: performance.now() - t }
  },
  async openCold(n, mode) {
    const ids = Array.from({ length: n }, (_, i) => i)
    const ours = await (mode === 'best' ? openOursBatched : openOursSequential)(ids.map(pathOf))
    const yidb = await (mode === 'best' ? openYIndexeddbParallel : openYIndexeddbSequential)(ids.map(nameOf))
    if (ours.fields !== yidb.fields) throw new Error(`stores disagree: ${ours.fields} vs ${yidb.fields} fields`)
    return { oursMs: ours.ms, yidbMs: yidb.ms, fields: ours.fields }
  },
}
document.title = 'ready'
