/**
 * Runs in Chromium (served by web-bench.ts): our one-database store against y-indexeddb's
 * database-per-document, opening the same 1,000 documents cold. Each doc gets the same five
 * edits in both stores, then both are compacted to one entry per doc (our store compacts when
 * a replica closes; y-indexeddb's storeState(forceStore)), so the Yjs work per open is equal
 * and the figure compares the storage layouts.
 */
import * as Y from 'yjs'
import { IndexeddbPersistence, storeState } from 'y-indexeddb'
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
  // As our store keeps a doc once its replica has closed (NodeReplica.dispose compacts).
  for (let i = 0; i < n; i++) await store.compact(pathOf(i))
  store.close()
}

async function seedYIndexeddb(n: number, compacted: boolean): Promise<void> {
  for (let i = 0; i < n; i++) {
    const name = nameOf(i, compacted)
    const doc = new Y.Doc()
    const p = new IndexeddbPersistence(name, doc)
    await p.whenSynced
    for (const update of makeUpdates(i)) Y.applyUpdate(doc, update)
    // y-indexeddb stores each update in its own transaction; wait for them to land. Its own
    // policy trims only past 500 updates; `compacted` forces one entry like ours.
    await new Promise((r) => setTimeout(r, 0))
    if (compacted) await storeState(p, true)
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
  // Same Y.Doc construction as our store (a given guid skips uuidv4): only storage differs.
  const doc = new Y.Doc({ guid: name })
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
      seedOursOnly(n: number): Promise<void>
      /** Opens the n seeded documents from both stores (names are deterministic). */
      openCold(n: number, mode: 'sequential' | 'best' | 'bestCompacted'): Promise<{ oursMs: number; yidbMs: number; fields: number }>
    }
  }
}

const pathOf = (i: number) => `bench/d${i}`
const nameOf = (i: number, compacted = false) => `bench-yidb${compacted ? 'c' : ''}-d${i}`

window.weftBench = {
  seedOursOnly: seedOurs,
  async seed(n) {
    let t = performance.now()
    await seedOurs(n)
    const oursSeedMs = performance.now() - t
    t = performance.now()
    await seedYIndexeddb(n, false)
    const yidbSeedMs = performance.now() - t
    await seedYIndexeddb(n, true)
    return { oursSeedMs, yidbSeedMs }
  },
  async openCold(n, mode) {
    const ids = Array.from({ length: n }, (_, i) => i)
    const ours = await (mode === 'sequential' ? openOursSequential : openOursBatched)(ids.map((i) => pathOf(i)))
    const names = ids.map((i) => nameOf(i, mode === 'bestCompacted'))
    const yidb = await (mode === 'sequential' ? openYIndexeddbSequential : openYIndexeddbParallel)(names)
    if (ours.fields !== yidb.fields) throw new Error(`stores disagree: ${ours.fields} vs ${yidb.fields} fields`)
    return { oursMs: ours.ms, yidbMs: yidb.ms, fields: ours.fields }
  },
}
document.title = 'ready'

/** Where the time of a batched open goes (diagnostics; not part of the figures). */
;(window as unknown as { weftProfile: (n: number) => Promise<Record<string, number>> }).weftProfile = async (n) => {
  const store = new NodeStore('bench-ours')
  await store.open()
  const paths = Array.from({ length: n }, (_, i) => pathOf(i))
  let t = performance.now()
  const rows = await store.db.updates.where('path').anyOf(paths).toArray()
  const anyOfMs = performance.now() - t
  t = performance.now()
  await store.db.updates.where('path').startsWith('bench/').toArray()
  const prefixMs = performance.now() - t
  t = performance.now()
  await store.db.updates.toArray()
  const allMs = performance.now() - t
  t = performance.now()
  const by = new Map<string, Uint8Array[]>()
  for (const r of rows) by.set(r.path, [...(by.get(r.path) ?? []), r.update])
  const docs: Y.Doc[] = []
  for (const us of by.values()) {
    const d = new Y.Doc({ guid: "p" })
    Y.applyUpdate(d, Y.mergeUpdates(us))
    docs.push(d)
  }
  const yMs = performance.now() - t
  t = performance.now()
  for (const us of by.values()) {
    const d = new Y.Doc({ guid: "p" })
    d.transact(() => us.forEach((u) => Y.applyUpdate(d, u)))
  }
  const yNoMergeMs = performance.now() - t
  t = performance.now()
  for (const d of docs) docToJson(d)
  const jsonMs = performance.now() - t
  store.close()
  return { rows: rows.length, anyOfMs, prefixMs, allMs, yMs, yNoMergeMs, jsonMs }
}
