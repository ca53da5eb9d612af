import Database from 'better-sqlite3'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import * as Y from 'yjs'
import { applyPatchToDoc, docToJson, type NodePath } from '../../shared/index.js'
import { COMPACT_AFTER_UPDATES, openStorage, type CommitInput, type StorageAdapter } from '../../sync-server/storage/index.js'
import { compactUpdates } from '../../sync-server/storage/compaction.js'
import { SqliteWriter } from '../../sync-server/storage/sqlite-writer.js'
import { waitFor } from '../helpers/wait-for.js'
import { NodeWriter, rebuild, runStorageContract } from './storage-contract.js'

runStorageContract('sqlite', async () => {
  const dataDir = await mkdtemp(join(tmpdir(), 'weft-storage-'))
  return {
    adapter: await openStorage({ dataDir }),
    reopen: () => openStorage({ dataDir }),
    cleanup: () => rm(dataDir, { recursive: true, force: true }),
    dropClientBindings: async () => {
      const raw = new Database(join(dataDir, 'weft.db'))
      raw.prepare('DROP TABLE node_clients').run()
      raw.close()
    },
    failWritesOf: async (path) => {
      const raw = new Database(join(dataDir, 'weft.db'))
      raw.prepare(`CREATE TRIGGER boom BEFORE INSERT ON node_updates WHEN NEW.path = '${path.replaceAll("'", "''")}' BEGIN SELECT RAISE(ABORT, 'boom'); END`).run()
      raw.close()
    },
  }
})

describe('[STO5] SQLite: a deferred commit to a row already stale leaves the row alone', () => {
  const P = (s: string): NodePath => s as NodePath
  let dataDir: string
  let store: StorageAdapter
  beforeEach(async () => {
    dataDir = await mkdtemp(join(tmpdir(), 'weft-storage-heads-'))
    store = await openStorage({ dataDir })
  })
  afterEach(async () => {
    await store.close()
    await rm(dataDir, { recursive: true, force: true })
  })

  const doc = new Y.Doc()
  let n = 0
  const edit = (path: NodePath, kind: 'Created' | 'Updated', at: string, deferContent = false): CommitInput => {
    let update: Uint8Array | null = null
    const capture = (u: Uint8Array) => (update = u)
    doc.on('update', capture)
    applyPatchToDoc(doc, { [`L${n}`]: n++ })
    doc.off('update', capture)
    return { path, kind, nodeType: 'Document', name: 'log', content: docToJson(doc), createdBy: 'alice', at, update: update!, ...(deferContent ? { deferContent } : {}) }
  }
  const raw = () => {
    const db = new Database(join(dataDir, 'weft.db'), { readonly: true })
    try {
      const row = db.prepare("SELECT version, updated_at, update_count, content_stale FROM nodes WHERE path = 'heads/log'").get() as { version: number; updated_at: string; update_count: number; content_stale: number }
      const logged = (db.prepare("SELECT count(*) AS n FROM node_updates WHERE path = 'heads/log'").get() as { n: number }).n
      return { ...row, logged }
    } finally {
      db.close()
    }
  }
  const at = (i: number) => new Date(Date.UTC(2026, 0, 1, 0, 0, i)).toISOString()

  it('catches the row up at its content write, at compaction, at close, and from the log after a crash', async () => {
    const path = P('heads/log')
    await store.commit(edit(path, 'Created', at(0)))
    // The first deferred commit marks the row stale; the next four only log (the row keeps the first's version).
    const commits = []
    for (let i = 1; i <= 5; i++) commits.push(await store.commit(edit(path, 'Updated', at(i), true)))
    expect(raw()).toMatchObject({ version: commits[0]!.version, updated_at: at(1), content_stale: 1 })
    // Reads still tell the latest version and content.
    expect((await store.getNode(path))?.version).toBe(commits[4]!.version)
    expect((await store.getNode(path))?.content).toEqual(docToJson(doc))
    // The row's write brings its head along.
    await store.writeContent(path, docToJson(doc))
    expect(raw()).toMatchObject({ version: commits[4]!.version, updated_at: at(5), content_stale: 0, update_count: 6, logged: 6 })

    // Past the compaction threshold: the count stays that of the log.
    let last = commits[4]!
    for (let i = 6; i < 6 + COMPACT_AFTER_UPDATES + 20; i++) last = await store.commit(edit(path, 'Updated', at(i), true))
    await waitFor(() => raw().logged < COMPACT_AFTER_UPDATES)
    await store.commit(edit(path, 'Updated', at(1000), true)).then((c) => (last = c))
    // Close writes what is left of the head: the count the compaction and the skipped commits left is the log's.
    await store.close()
    expect(raw()).toMatchObject({ version: last.version, updated_at: at(1000), content_stale: 1 })
    expect(raw().update_count).toBe(raw().logged)

    // A crash leaves a stale row's head behind (simulated): the boot's repair takes it from the log.
    const db = new Database(join(dataDir, 'weft.db'))
    db.prepare("UPDATE nodes SET version = version - 3, update_count = 0 WHERE path = 'heads/log'").run()
    db.close()
    store = await openStorage({ dataDir })
    expect((await store.getNode(path))?.version).toBe(last.version)
    await store.writeContent(path, (await store.getNode(path))!.content)
    expect(raw()).toMatchObject({ version: last.version, content_stale: 0 })
    expect(raw().update_count).toBe(raw().logged)
    expect((await store.getNode(path))?.content).toEqual(docToJson(doc))
  })
})

describe('[SCALE15] SQLite: a compaction folded off the writer thread', () => {
  let dataDir: string
  let writer: SqliteWriter
  beforeEach(async () => {
    dataDir = await mkdtemp(join(tmpdir(), 'weft-storage-fold-'))
    // The storage creates the schema; the writer is then driven directly.
    await (await openStorage({ dataDir })).close()
    writer = new SqliteWriter(join(dataDir, 'weft.db'), 5000)
  })
  afterEach(async () => {
    writer.close()
    await rm(dataDir, { recursive: true, force: true })
  })

  const commit = (input: CommitInput) => {
    const { content, ...header } = input
    const [result] = writer.writeBatch([{ input: header, contentJson: JSON.stringify(content) }])
    if (!result?.ok) throw new Error('commit refused')
  }
  const stored = () => {
    const db = new Database(join(dataDir, 'weft.db'), { readonly: true })
    try {
      const row = db.prepare("SELECT snapshot, update_count FROM nodes WHERE path = 'big'").get() as { snapshot: Buffer | null; update_count: number }
      const logged = db.prepare("SELECT data FROM node_updates WHERE path = 'big' ORDER BY seq").all() as { data: Buffer }[]
      return { snapshot: row.snapshot, count: row.update_count, updates: logged.map((u) => new Uint8Array(u.data)) }
    } finally {
      db.close()
    }
  }

  it('writes when only later entries arrived, nothing when a fold came between its read and its write; no update is lost', () => {
    const w = new NodeWriter('big' as NodePath)
    commit(w.input('Created', { N: 0 }))
    for (let i = 1; i <= COMPACT_AFTER_UPDATES + 20; i++) commit(w.input('Updated', { N: i }))
    // Read, then more commits while the fold is elsewhere: written, the later entries kept.
    let read = writer.readCompaction('big' as NodePath)!
    for (let i = 0; i < 5; i++) commit(w.input('Updated', { [`During${i}`]: i }))
    expect(writer.writeCompaction(read, compactUpdates(read.snapshot, read.logged.map((u) => u.data)))).toBe(true)
    let now = stored()
    expect(now.updates).toHaveLength(5)
    expect(now.count).toBe(5)
    expect(docToJson(rebuild({ snapshot: now.snapshot, updates: now.updates }))).toEqual(docToJson(w.doc))
    // Read, then a fold of everything and one more commit: the stale fold is not written.
    for (let i = 0; i < COMPACT_AFTER_UPDATES; i++) commit(w.input('Updated', { N: 1000 + i }))
    read = writer.readCompaction('big' as NodePath)!
    commit(w.input('Updated', { Before: true }))
    writer.writeBatch([{ fold: { path: 'big' as NodePath, state: Y.encodeStateAsUpdate(w.doc) } }])
    commit(w.input('Updated', { After: true }))
    expect(writer.writeCompaction(read, compactUpdates(read.snapshot, read.logged.map((u) => u.data)))).toBe(false)
    now = stored()
    expect(now.count).toBe(now.updates.length)
    expect(docToJson(rebuild({ snapshot: now.snapshot, updates: now.updates }))).toEqual(docToJson(w.doc))
    expect(docToJson(w.doc)).toMatchObject({ Before: true, After: true })
  })

  it('a node deleted between the read and the write is left deleted', () => {
    const w = new NodeWriter('big' as NodePath)
    commit(w.input('Created', { N: 0 }))
    for (let i = 1; i <= COMPACT_AFTER_UPDATES + 5; i++) commit(w.input('Updated', { N: i }))
    const read = writer.readCompaction('big' as NodePath)!
    commit(w.input('Deleted'))
    expect(writer.writeCompaction(read, compactUpdates(read.snapshot, read.logged.map((u) => u.data)))).toBe(false)
    const db = new Database(join(dataDir, 'weft.db'), { readonly: true })
    try {
      expect(db.prepare("SELECT count(*) AS n FROM node_updates WHERE path = 'big'").get()).toEqual({ n: 0 })
      expect(db.prepare("SELECT count(*) AS n FROM nodes WHERE path = 'big'").get()).toEqual({ n: 0 })
    } finally {
      db.close()
    }
  })
})
