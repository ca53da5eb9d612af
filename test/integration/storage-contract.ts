import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import * as Y from 'yjs'
import { waitFor } from '../helpers/wait-for.js'
import {
  applyPatchToDoc,
  docToJson,
  isWeftError,
  type JsonObject,
  type MeshChangeKind,
  type MergePatch,
  type NodePath,
} from '../../shared/index.js'
import { COMPACT_AFTER_UPDATES, tombstoneDigest, tombstoneOfDoc, type CommitInput, type StorageAdapter, type StoredDoc } from '../../sync-server/storage/index.js'

export interface OpenedStorage {
  adapter: StorageAdapter
  /** Removes everything the store left behind (files, schema). Called after the adapter is closed. */
  cleanup: () => Promise<void>
  /** Opens the same store again (after `adapter.close()`), to check what was persisted. */
  reopen: () => Promise<StorageAdapter>
  /**
   * Makes the database itself refuse writes of `path`'s update log (a trigger): a failure the
   * adapter cannot foresee (think: disk full), to test that a batch fails whole.
   */
  failWritesOf: (path: string) => Promise<void>
  /** Drops the `node_clients` table (with the adapter closed): a database from before [ACC12]. */
  dropClientBindings: () => Promise<void>
}

const P = (s: string): NodePath => s as NodePath

/** A real Y.Doc per node, so that the stored updates are what the sync layer will store. */
export class NodeWriter {
  readonly doc = new Y.Doc()
  constructor(
    readonly path: NodePath,
    readonly nodeType = 'Document',
  ) {}

  /** The Yjs update of one merge patch, and the materialised content after it. */
  patch(patch: MergePatch): { update: Uint8Array; content: JsonObject } {
    let update: Uint8Array | null = null
    const capture = (u: Uint8Array): void => {
      update = update ? Y.mergeUpdates([update, u]) : u
    }
    this.doc.on('update', capture)
    applyPatchToDoc(this.doc, patch)
    this.doc.off('update', capture)
    if (!update) throw new Error('patch produced no update')
    return { update, content: docToJson(this.doc) }
  }

  input(kind: MeshChangeKind, patch: MergePatch = {}, extra: Partial<CommitInput> = {}): CommitInput {
    const { update, content } = kind === 'Deleted' ? { update: null, content: {} } : this.patch(patch)
    return {
      path: this.path,
      kind,
      nodeType: this.nodeType,
      name: this.path.split('/').at(-1) ?? '',
      content,
      createdBy: 'alice',
      at: new Date().toISOString(),
      update,
      ...extra,
    }
  }
}

export function rebuild(stored: StoredDoc): Y.Doc {
  const doc = new Y.Doc()
  if (stored.snapshot) Y.applyUpdate(doc, stored.snapshot)
  for (const u of stored.updates) Y.applyUpdate(doc, u)
  return doc
}

async function expectCode(promise: Promise<unknown>, code: string): Promise<void> {
  const error = await promise.then(
    () => null,
    (e: unknown) => e,
  )
  expect(error, `expected a WeftError ${code}`).not.toBeNull()
  expect(isWeftError(error) ? error.code : error).toBe(code)
}

/** The storage contract (types.ts): every adapter runs this suite. */
export function runStorageContract(name: string, open: () => Promise<OpenedStorage>): void {
  describe(`storage contract: ${name}`, () => {
    let opened: OpenedStorage
    let store: StorageAdapter

    beforeEach(async () => {
      opened = await open()
      store = opened.adapter
    })
    afterEach(async () => {
      await store.close()
      await opened.cleanup()
    })

    it('[STO2] fails every commit of a batch whose transaction fails, and writes none of them', async () => {
      await opened.failWritesOf('boom')
      const commit = (path: string) =>
        store.commit({
          path: path as NodePath,
          kind: 'Created',
          nodeType: 'Document',
          name: path,
          content: { P: path },
          createdBy: 'alice',
          at: new Date().toISOString(),
          update: new Uint8Array([0, 0]),
        })
      const results = await Promise.allSettled([commit('good1'), commit('boom'), commit('good2')])
      expect(results.map((r) => r.status)).toEqual(['rejected', 'rejected', 'rejected'])
      // Each caller is told the cause (the database's refusal), not an echo of the aborted transaction.
      for (const r of results) expect(String((r as PromiseRejectedResult).reason)).toMatch(/boom/)
      expect(await store.lastVersion()).toBe(0)
      expect(await store.getNode('good1' as NodePath)).toBeNull()
      // The next batch is unaffected, and the failed one used up no version.
      expect((await commit('good3')).version).toBe(1)
    })

    it('round-trips create, get, update and delete', async () => {
      const w = new NodeWriter(P('space/doc1'))
      const created = await store.commit(w.input('Created', { Title: 'Hello', Tags: ['a'] }, { at: '2026-01-01T00:00:00.000Z' }))
      expect(created).toMatchObject({ path: 'space/doc1', nodeType: 'Document', kind: 'Created' })
      expect(await store.getNode(P('space/doc1'))).toEqual({
        path: 'space/doc1',
        nodeType: 'Document',
        name: 'doc1',
        content: { Title: 'Hello', Tags: ['a'] },
        createdBy: 'alice',
        createdAt: '2026-01-01T00:00:00.000Z',
        updatedAt: '2026-01-01T00:00:00.000Z',
        version: created.version,
        state: 'Active',
      })

      const updated = await store.commit(
        w.input('Updated', { Title: 'World', Body: { x: 1 } }, { name: 'Renamed', createdBy: 'bob', at: '2026-01-02T00:00:00.000Z' }),
      )
      expect(updated.version).toBeGreaterThan(created.version)
      expect(updated.kind).toBe('Updated')
      const node = await store.getNode(P('space/doc1'))
      expect(node).toMatchObject({
        name: 'Renamed',
        content: { Title: 'World', Tags: ['a'], Body: { x: 1 } },
        createdBy: 'alice',
        createdAt: '2026-01-01T00:00:00.000Z',
        updatedAt: '2026-01-02T00:00:00.000Z',
        version: updated.version,
      })

      const deleted = await store.commit(w.input('Deleted'))
      expect(deleted).toMatchObject({ kind: 'Deleted', nodeType: 'Document', path: 'space/doc1' })
      expect(await store.getNode(P('space/doc1'))).toBeNull()
      expect(await store.loadDoc(P('space/doc1'))).toBeNull()
      expect(await store.changesSince(0, 100)).toEqual([created, updated, deleted])
      expect(await store.lastVersion()).toBe(deleted.version)

      // A path can be created again after a delete, with a fresh log.
      const again = new NodeWriter(P('space/doc1'))
      await store.commit(again.input('Created', { Fresh: true }))
      expect((await store.loadDoc(P('space/doc1')))?.updates).toHaveLength(1)
    })

    it('refuses a duplicate Created and writes nothing of it', async () => {
      const w = new NodeWriter(P('dup'))
      await store.commit(w.input('Created', { A: 1 }))
      const before = await store.lastVersion()
      await expectCode(store.commit(new NodeWriter(P('dup')).input('Created', { B: 2 })), 'already_exists')
      expect(await store.lastVersion()).toBe(before)
      expect((await store.getNode(P('dup')))?.content).toEqual({ A: 1 })
      expect((await store.loadDoc(P('dup')))?.updates).toHaveLength(1)
      expect(await store.changesSince(0, 100)).toHaveLength(1)
    })

    it('refuses only the bad commit of a group-committed batch', async () => {
      const results = await Promise.allSettled([
        store.commit(new NodeWriter(P('batch/a')).input('Created', { V: 1 })),
        store.commit(new NodeWriter(P('batch/a')).input('Created', { V: 2 })),
        store.commit(new NodeWriter(P('batch/missing')).input('Updated', { V: 3 })),
        store.commit(new NodeWriter(P('batch/b')).input('Created', { V: 4 })),
      ])
      expect(results.map((r) => r.status)).toEqual(['fulfilled', 'rejected', 'rejected', 'fulfilled'])
      expect(results[1]?.status === 'rejected' && isWeftError(results[1].reason) && results[1].reason.code).toBe('already_exists')
      expect(results[2]?.status === 'rejected' && isWeftError(results[2].reason) && results[2].reason.code).toBe('not_found')
      expect((await store.getNode(P('batch/a')))?.content).toEqual({ V: 1 })
      expect(await store.getNode(P('batch/missing'))).toBeNull()
      expect((await store.changesSince(0, 100)).map((c) => c.path)).toEqual(['batch/a', 'batch/b'])
    })

    it('applies create, update, delete and re-create of one path in one batch in order', async () => {
      const first = new NodeWriter(P('cycle'))
      const second = new NodeWriter(P('cycle'))
      const records = await Promise.all([
        store.commit(first.input('Created', { Gen: 1 })),
        store.commit(first.input('Updated', { Gen: 1, More: true })),
        store.commit(first.input('Deleted')),
        store.commit(second.input('Created', { Gen: 2 })),
        store.commit(second.input('Updated', { Extra: 'x' })),
      ])
      expect(records.map((r) => r.kind)).toEqual(['Created', 'Updated', 'Deleted', 'Created', 'Updated'])
      const stored = await store.loadDoc(P('cycle'))
      expect(stored?.updates).toHaveLength(2)
      expect(docToJson(rebuild(stored ?? { snapshot: null, updates: [] }))).toEqual({ Gen: 2, Extra: 'x' })
      expect(await store.getNode(P('cycle'))).toMatchObject({ content: { Gen: 2, Extra: 'x' }, version: records[4]?.version })
    })

    it('[TOMB1] a Deleted commit leaves its tombstone, a Created one that took it drops it (also within one batch), a move leaves one per node, and an arriving node takes what it is given of the one at its path into its log (which is dropped)', async () => {
      const old = new NodeWriter(P('t/doc'))
      await store.commit(old.input('Created', { Old: 'secret' }))
      await store.commit(old.input('Updated', { More: 1 }))
      const tomb = tombstoneOfDoc(old.doc)!
      await store.commit(old.input('Deleted', {}, { tombstone: tomb }))
      expect(await store.loadTombstone(P('t/doc'))).toEqual(tomb)
      expect(await store.loadTombstone(P('t/other'))).toBeNull()
      // The path's next node starts from it: its log covers the old clocks, and holds no old content.
      const next = new NodeWriter(P('t/doc'))
      Y.applyUpdate(next.doc, tomb)
      const taken = next.input('Created', { Fresh: true })
      await store.commit({ ...taken, update: Y.encodeStateAsUpdate(next.doc), tombstone: 'taken' })
      expect(await store.loadTombstone(P('t/doc'))).toBeNull()
      const again = rebuild((await store.loadDoc(P('t/doc')))!)
      expect(docToJson(again)).toEqual({ Fresh: true })
      for (const [client, clock] of Y.decodeStateVector(Y.encodeStateVector(old.doc))) expect(again.store.clients.get(client) ? Y.getState(again.store, client) : 0).toBe(clock)
      // Deleted and re-created in one batch: the tombstone is written, then dropped, in order.
      const a = new NodeWriter(P('t/batch'))
      await store.commit(a.input('Created', { A: 1 }))
      const b = new NodeWriter(P('t/batch'))
      await Promise.all([store.commit(a.input('Deleted', {}, { tombstone: tombstoneOfDoc(a.doc)! })), store.commit(b.input('Created', { B: 2 }, { tombstone: 'taken' }))])
      expect(await store.loadTombstone(P('t/batch'))).toBeNull()
      // A move: each node leaving a path leaves what the caller gave; one arriving over a tombstone takes it.
      const m = new NodeWriter(P('t/m'))
      await store.commit(m.input('Created', { M: 1 }))
      const gone = new NodeWriter(P('t/dest'))
      await store.commit(gone.input('Created', { Gone: 1 }))
      const goneTomb = tombstoneOfDoc(gone.doc)!
      await store.commit(gone.input('Deleted', {}, { tombstone: goneTomb }))
      const mTomb = tombstoneOfDoc(m.doc)!
      await store.moveSubtree({ from: P('t/m'), to: P('t/dest'), at: new Date().toISOString(), redirect: false, tombstones: [{ path: P('t/m'), state: mTomb }], arrivals: new Map([[P('t/dest'), goneTomb]]) })
      expect(await store.loadTombstone(P('t/m'))).toEqual(mTomb)
      expect(await store.loadTombstone(P('t/dest'))).toBeNull()
      const arrived = await store.loadDoc(P('t/dest'))
      const doc = rebuild(arrived!)
      expect(docToJson(doc)).toEqual({ M: 1 })
      for (const [client, clock] of Y.decodeStateVector(Y.encodeStateVector(gone.doc))) expect(Y.getState(doc.store, client)).toBe(clock)
      // Its own entry, then the tombstone.
      expect(arrived!.updates.length).toBe(2)
      // Persisted.
      await store.close()
      store = await opened.reopen()
      expect(await store.loadTombstone(P('t/m'))).toEqual(mTomb)
    })

    it('[SCALE16] an Updated or Deleted made for a node the path no longer holds is refused with conflict and writes nothing (also within one batch); made for the node there, it commits', async () => {
      const first = new NodeWriter(P('ident'))
      await store.commit(first.input('Created', { Gen: 1 }, { at: '2026-01-01T00:00:00.000Z' }))
      await store.commit(first.input('Deleted'))
      const second = new NodeWriter(P('ident'))
      const created = await store.commit(second.input('Created', { Gen: 2 }, { at: '2026-01-02T00:00:00.000Z' }))
      // A copy of the first node (another instance that has not heard of the second) writes.
      const stale = first.input('Updated', { Stale: true }, { nodeCreatedAt: '2026-01-01T00:00:00.000Z' })
      await expectCode(store.commit(stale), 'conflict')
      await expectCode(store.commit(first.input('Deleted', {}, { nodeCreatedAt: '2026-01-01T00:00:00.000Z' })), 'conflict')
      expect(await store.getNode(P('ident'))).toMatchObject({ content: { Gen: 2 }, version: created.version })
      expect((await store.loadDoc(P('ident')))!.updates).toHaveLength(1)
      // In one batch with a good commit: only the stale one is refused.
      const results = await Promise.allSettled([
        store.commit(second.input('Updated', { More: 1 }, { nodeCreatedAt: '2026-01-02T00:00:00.000Z' })),
        store.commit(first.input('Updated', { Stale: 2 }, { nodeCreatedAt: '2026-01-01T00:00:00.000Z' })),
      ])
      expect(results.map((r) => r.status)).toEqual(['fulfilled', 'rejected'])
      expect(await store.getNode(P('ident'))).toMatchObject({ content: { Gen: 2, More: 1 } })
      await store.commit(second.input('Deleted', {}, { nodeCreatedAt: '2026-01-02T00:00:00.000Z' }))
      expect(await store.getNode(P('ident'))).toBeNull()
    })

    it('[SCALE18] a Created made on a tombstone the path no longer has is refused with conflict and writes nothing (also within one batch); made on the tombstone there, or after a delete in the same batch, it commits', async () => {
      const first = new NodeWriter(P('tid/doc'))
      await store.commit(first.input('Created', { Old: 'secret' }))
      const tomb = tombstoneOfDoc(first.doc)!
      await store.commit(first.input('Deleted', {}, { tombstone: tomb }))
      // Another instance that had not heard of that delete: it started from no tombstone.
      await expectCode(store.commit(new NodeWriter(P('tid/doc')).input('Created', { Fresh: 1 }, { tombstoneDigest: null })), 'conflict')
      // Or from an older one.
      await expectCode(store.commit(new NodeWriter(P('tid/doc')).input('Created', { Fresh: 1 }, { tombstoneDigest: tombstoneDigest(new Uint8Array([0, 0])) })), 'conflict')
      expect(await store.getNode(P('tid/doc'))).toBeNull()
      expect(await store.loadTombstone(P('tid/doc'))).toEqual(tomb)
      // Made on it: commits and takes it.
      const next = new NodeWriter(P('tid/doc'))
      Y.applyUpdate(next.doc, tomb)
      await store.commit({ ...next.input('Created', { Fresh: 2 }), update: Y.encodeStateAsUpdate(next.doc), tombstone: 'taken', tombstoneDigest: tombstoneDigest(tomb) })
      expect(await store.getNode(P('tid/doc'))).toMatchObject({ content: { Fresh: 2 } })
      expect(await store.loadTombstone(P('tid/doc'))).toBeNull()
      // Deleted and created again in one batch, the create made on the delete's tombstone; a stale create beside them is refused alone.
      const t2 = tombstoneOfDoc(next.doc)!
      const third = new NodeWriter(P('tid/doc'))
      Y.applyUpdate(third.doc, t2)
      const results = await Promise.allSettled([
        store.commit(next.input('Deleted', {}, { tombstone: t2 })),
        store.commit(new NodeWriter(P('tid/doc')).input('Created', { Stale: 1 }, { tombstoneDigest: null })),
        store.commit({ ...third.input('Created', { Third: 3 }), update: Y.encodeStateAsUpdate(third.doc), tombstone: 'taken', tombstoneDigest: tombstoneDigest(t2) }),
      ])
      expect(results.map((r) => r.status)).toEqual(['fulfilled', 'rejected', 'fulfilled'])
      expect(await store.getNode(P('tid/doc'))).toMatchObject({ content: { Third: 3 } })
      // Without a digest (one instance), nothing is checked: a create over a tombstone it did not take commits.
      const lone = new NodeWriter(P('tid/lone'))
      await store.commit(lone.input('Created', { A: 1 }))
      await store.commit(lone.input('Deleted', {}, { tombstone: tombstoneOfDoc(lone.doc)! }))
      await store.commit(new NodeWriter(P('tid/lone')).input('Created', { B: 2 }))
      expect(await store.getNode(P('tid/lone'))).toMatchObject({ content: { B: 2 } })
      // A digest that is not one is refused.
      await expectCode(store.commit(new NodeWriter(P('tid/bad')).input('Created', { X: 1 }, { tombstoneDigest: 'nope' })), 'invalid_request')
      await store.commit(new NodeWriter(P('tid/free')).input('Created', { Any: 1 }, { tombstoneDigest: null }))
      expect(await store.getNode(P('tid/free'))).toMatchObject({ content: { Any: 1 } })
    })

    it('[SCALE19] a Deleted whose tombstone covers the node only up to a version the row is past is refused with conflict and writes nothing; covering the row, it commits', async () => {
      const w = new NodeWriter(P('tbase/doc'))
      await store.commit(w.input('Created', { A: 1 }))
      const edited = await store.commit(w.input('Updated', { B: 2 }))
      const tomb = tombstoneOfDoc(w.doc)!
      await expectCode(store.commit(w.input('Deleted', {}, { tombstone: tomb, tombstoneBase: edited.version - 1 })), 'conflict')
      expect(await store.getNode(P('tbase/doc'))).toMatchObject({ content: { A: 1, B: 2 } })
      expect(await store.loadTombstone(P('tbase/doc'))).toBeNull()
      await expectCode(store.commit(w.input('Deleted', {}, { tombstone: tomb, tombstoneBase: -1 })), 'invalid_request')
      await store.commit(w.input('Deleted', {}, { tombstone: tomb, tombstoneBase: edited.version }))
      expect(await store.getNode(P('tbase/doc'))).toBeNull()
      expect(await store.loadTombstone(P('tbase/doc'))).toEqual(tomb)
    })

    it('[SCALE21] a move worked out on an older state is refused with conflict and moves nothing: a moved node changed since, or a tombstone at a new path that is not the one read; worked out on the current state, it moves', async () => {
      const at = () => new Date().toISOString()
      const root = new NodeWriter(P('mv/root'))
      await store.commit(root.input('Created', { R: 1 }))
      const child = new NodeWriter(P('mv/root/kid'))
      await store.commit(child.input('Created', { K: 1 }))
      const base = await store.lastVersion()
      // Another instance edits the child after the logs were read.
      await store.commit(child.input('Updated', { K: 2 }))
      await expectCode(store.moveSubtree({ from: P('mv/root'), to: P('mv/dest'), at: at(), redirect: false, tombstoneBase: base }), 'conflict')
      expect(await store.getNode(P('mv/root/kid'))).toMatchObject({ content: { K: 2 } })
      expect(await store.getNode(P('mv/dest'))).toBeNull()
      // A tombstone at a new path that was not there (or not this one) when the arrivals were worked out.
      const gone = new NodeWriter(P('mv/dest/kid'))
      await store.commit(gone.input('Created', { G: 1 }))
      const goneTomb = tombstoneOfDoc(gone.doc)!
      await store.commit(gone.input('Deleted', {}, { tombstone: goneTomb }))
      const now = await store.lastVersion()
      await expectCode(store.moveSubtree({ from: P('mv/root'), to: P('mv/dest'), at: at(), redirect: false, tombstoneBase: now, arrivalsSeen: new Map() }), 'conflict')
      await expectCode(store.moveSubtree({ from: P('mv/root'), to: P('mv/dest'), at: at(), redirect: false, tombstoneBase: now, arrivalsSeen: new Map([[P('mv/dest/kid'), tombstoneDigest(new Uint8Array([0, 0]))]]) }), 'conflict')
      expect(await store.loadTombstone(P('mv/dest/kid'))).toEqual(goneTomb)
      expect(await store.getNode(P('mv/root'))).toMatchObject({ content: { R: 1 } })
      // On what is there now: it moves.
      const records = await store.moveSubtree({ from: P('mv/root'), to: P('mv/dest'), at: at(), redirect: false, tombstoneBase: now, arrivalsSeen: new Map([[P('mv/dest/kid'), tombstoneDigest(goneTomb)]]), arrivals: new Map([[P('mv/dest/kid'), goneTomb]]) })
      expect(records.filter((r) => r.kind === 'Created').map((r) => r.path).sort()).toEqual([P('mv/dest'), P('mv/dest/kid')])
      expect(await store.getNode(P('mv/dest/kid'))).toMatchObject({ content: { K: 2 } })
    })

    it('[ACC12] binds client ids in the commit that introduces them, keeps the first binding, survives a reopen, and drops them with the node (also within one batch)', async () => {
      const w = new NodeWriter(P('bound/doc'))
      const sorted = async (path: string) => (await store.loadClientBindings(P(path))).sort((a, b) => a.client - b.client)
      await store.commit(w.input('Created', { A: 1 }, { clients: [{ client: 7, principal: '(server)' }] }))
      await store.commit(w.input('Updated', { B: 2 }, { clients: [{ client: 4_294_967_295, principal: 'alice' }], deferContent: true }))
      // An id already bound keeps its first writer.
      await store.commit(w.input('Updated', { C: 3 }, { clients: [{ client: 4_294_967_295, principal: 'bob' }, { client: 9, principal: 'bob' }] }))
      const expected = [{ client: 7, principal: '(server)' }, { client: 9, principal: 'bob' }, { client: 4_294_967_295, principal: 'alice' }]
      expect(await sorted('bound/doc')).toEqual(expected)
      expect(await store.loadClientBindings(P('bound/other'))).toEqual([])
      // A commit that fails writes no binding.
      await expectCode(store.commit(new NodeWriter(P('bound/missing')).input('Updated', { X: 1 }, { clients: [{ client: 1, principal: 'eve' }] })), 'not_found')
      expect(await store.loadClientBindings(P('bound/missing'))).toEqual([])
      await expectCode(store.commit(w.input('Updated', { D: 4 }, { clients: [{ client: -1, principal: 'eve' }] })), 'invalid_request')
      await store.close()
      store = await opened.reopen()
      expect(await sorted('bound/doc')).toEqual(expected)
      await store.commit(w.input('Deleted'))
      expect(await store.loadClientBindings(P('bound/doc'))).toEqual([])
      // Created, Deleted and Created again in one batch: only the last generation's bindings stay.
      const first = new NodeWriter(P('bound/cycle'))
      const second = new NodeWriter(P('bound/cycle'))
      await Promise.all([
        store.commit(first.input('Created', { Gen: 1 }, { clients: [{ client: 1, principal: 'alice' }] })),
        store.commit(first.input('Updated', { Gen: 1, More: true }, { clients: [{ client: 2, principal: 'alice' }] })),
        store.commit(first.input('Deleted')),
        store.commit(second.input('Created', { Gen: 2 }, { clients: [{ client: 3, principal: 'bob' }] })),
      ])
      expect(await sorted('bound/cycle')).toEqual([{ client: 3, principal: 'bob' }])
    })

    it('[ACC12] an existing database without the bindings table gains it at open (empty) and binds from then on', async () => {
      const w = new NodeWriter(P('legacy/doc'))
      await store.commit(w.input('Created', { A: 1 }))
      await store.close()
      await opened.dropClientBindings()
      store = await opened.reopen()
      expect(await store.loadClientBindings(P('legacy/doc'))).toEqual([])
      await store.commit(w.input('Updated', { B: 2 }, { clients: [{ client: 5, principal: 'alice' }] }))
      expect(await store.loadClientBindings(P('legacy/doc'))).toEqual([{ client: 5, principal: 'alice' }])
      expect((await store.getNode(P('legacy/doc')))?.content).toEqual({ A: 1, B: 2 })
    })

    it('[DOC1] folds the log committed before foldDoc into its state and keeps what is committed after', async () => {
      const w = new NodeWriter(P('folded'))
      // All in one turn, so one batch: the fold's place among the commits is what counts.
      const created = store.commit(w.input('Created', { A: 1 }))
      const updated = store.commit(w.input('Updated', { B: 2 }))
      const state = Y.encodeStateAsUpdate(w.doc)
      const folded = store.foldDoc(P('folded'), state)
      const after = w.input('Updated', { C: 3 })
      const later = store.commit(after)
      // A JSON-only commit (no Yjs update) leaves the log alone.
      const jsonOnly = store.commit({ ...w.input('Updated', { D: 4 }), update: null })
      await Promise.all([created, updated, folded, later, jsonOnly])
      const stored = await store.loadDoc(P('folded'))
      expect(stored?.snapshot).toEqual(state)
      expect(stored?.updates).toEqual([after.update])
      expect(docToJson(rebuild(stored!))).toEqual({ A: 1, B: 2, C: 3 })
      expect((await store.getNode(P('folded')))?.content).toEqual({ A: 1, B: 2, C: 3, D: 4 })

      // A fold right behind the create of its node finds the row; one of a missing node is a no-op.
      const fresh = new NodeWriter(P('fresh'))
      const freshCreated = store.commit({ ...fresh.input('Created', { X: 1 }), update: null })
      await Promise.all([freshCreated, store.foldDoc(P('fresh'), Y.encodeStateAsUpdate(fresh.doc)), store.foldDoc(P('nowhere'), state)])
      expect(docToJson(rebuild((await store.loadDoc(P('fresh')))!))).toEqual({ X: 1 })
      expect(await store.loadDoc(P('nowhere'))).toBeNull()

      // Persisted, not just cached.
      await store.close()
      store = await opened.reopen()
      expect(docToJson(rebuild((await store.loadDoc(P('folded')))!))).toEqual({ A: 1, B: 2, C: 3 })
    })

    it('[STO5] a deferred commit logs its update and change but not the row; reads rebuild the content from the log, before and after a reopen', async () => {
      const w = new NodeWriter(P('deferred/n'))
      await store.commit(w.input('Created', { A: 1, Big: 'x'.repeat(1000) }))
      const first = await store.commit({ ...w.input('Updated', { B: 2 }), deferContent: true })
      const second = await store.commit({ ...w.input('Updated', { A: 3 }), deferContent: true })
      expect(second.version).toBeGreaterThan(first.version)
      const expected = { A: 3, Big: 'x'.repeat(1000), B: 2 }
      expect((await store.getNode(P('deferred/n')))?.content).toEqual(expected)
      expect((await store.getNode(P('deferred/n')))?.version).toBe(second.version)
      expect((await store.queryNodes({ parent: P('deferred') })).map((n) => n.content)).toEqual([expected])
      const feed = await store.changesSince(first.version - 1, 10)
      expect(feed.map((c) => c.kind)).toEqual(['Updated', 'Updated'])
      // A crash before the row is written: the log still says everything.
      await store.close()
      store = await opened.reopen()
      expect((await store.getNode(P('deferred/n')))?.content).toEqual(expected)
      // The boot finds it among the stale rows (paged by path) to repair it.
      expect(await store.stalePaths(null, 10)).toEqual([P('deferred/n')])
      expect(await store.stalePaths('deferred/n', 10)).toEqual([])
      await store.writeContent(P('deferred/n'), expected)
      expect(await store.stalePaths(null, 10)).toEqual([])
      await store.writeContent(P('deferred/missing'), { Z: 1 })
      expect((await store.getNode(P('deferred/n')))?.content).toEqual(expected)
      expect(await store.getNode(P('deferred/missing'))).toBeNull()
      // Only an Updated commit with an update may defer.
      await expectCode(store.commit({ ...w.input('Updated', { C: 1 }), update: null, deferContent: true }), 'invalid_request')
    })

    it('[STO7] purges superseded change records below a version, keeping the latest per path; expired tokens go', async () => {
      const a = new NodeWriter(P('purge/a'))
      const b = new NodeWriter(P('purge/b'))
      const a1 = await store.commit(a.input('Created', { V: 1 }))
      const b1 = await store.commit(b.input('Created', { V: 1 }))
      const a2 = await store.commit(a.input('Updated', { V: 2 }))
      const a3 = await store.commit(a.input('Updated', { V: 3 }))
      await store.purgeSupersededChanges(a3.version)
      const left = (await store.changesSince(a1.version - 1, 100)).map((c) => c.version)
      // a1 and a2 are superseded by a3 (a2 is below the bound); b1 is b's latest; a3 is above.
      expect(left).toEqual([b1.version, a3.version])
      expect(a2.version).toBeLessThan(a3.version)
      await store.saveToken('old', 'u', '2000-01-01T00:00:00.000Z')
      await store.saveToken('new', 'u', '2999-01-01T00:00:00.000Z')
      await store.purgeExpiredTokens(new Date().toISOString())
      expect(await store.findToken('old')).toBeNull()
      expect(await store.findToken('new')).not.toBeNull()
    })

    it('refuses malformed input before it joins a batch', async () => {
      const w = new NodeWriter(P('bad'))
      await expectCode(store.commit({ ...w.input('Created', { A: 1 }), path: P('/bad//x') }), 'invalid_path')
      await expectCode(store.commit({ ...w.input('Created', { A: 2 }), kind: 'Exploded' as MeshChangeKind }), 'invalid_request')
      await expectCode(store.commit({ ...w.input('Created', { A: 3 }), at: 'yesterday' }), 'invalid_request')
      await expectCode(store.commit(new NodeWriter(P('nope')).input('Deleted')), 'not_found')
      expect(await store.lastVersion()).toBe(0)
    })

    it('gives strictly increasing versions across nodes', async () => {
      const versions: number[] = []
      for (let i = 0; i < 10; i++) {
        const w = new NodeWriter(P(`n${i % 3}/c${i}`))
        versions.push((await store.commit(w.input('Created', { I: i }))).version)
      }
      for (let i = 1; i < versions.length; i++) expect(versions[i]).toBeGreaterThan(versions[i - 1] ?? Infinity)
      expect(await store.lastVersion()).toBe(versions.at(-1))
    })

    it('pages through the change feed in ascending order', async () => {
      const w = new NodeWriter(P('feed'))
      await store.commit(w.input('Created', { N: 0 }))
      for (let i = 1; i < 25; i++) await store.commit(w.input('Updated', { N: i }))
      const all = await store.changesSince(0, 1000)
      expect(all).toHaveLength(25)
      const pages: number[][] = []
      let since = 0
      for (;;) {
        const page = await store.changesSince(since, 10)
        if (page.length === 0) break
        pages.push(page.map((c) => c.version))
        since = page.at(-1)?.version ?? since
      }
      expect(pages.map((p) => p.length)).toEqual([10, 10, 5])
      expect(pages.flat()).toEqual(all.map((c) => c.version))
      expect(all.every((c, i) => i === 0 || c.version > (all[i - 1]?.version ?? Infinity))).toBe(true)
      expect(all[0]?.kind).toBe('Created')
      expect(all.slice(1).every((c) => c.kind === 'Updated' && c.nodeType === 'Document')).toBe(true)
      expect(await store.changesSince(all.at(-1)?.version ?? 0, 10)).toEqual([])
    })

    it('queries by parent, node type and content fields, case-insensitively', async () => {
      const put = (path: string, nodeType: string, content: MergePatch) =>
        store.commit(new NodeWriter(P(path), nodeType).input('Created', content))
      await put('org', 'Space', { Title: 'Org' })
      await put('org/a', 'Document', { Status: 'Pending', Priority: 2, Done: false })
      await put('org/b', 'Document', { Status: 'FIRED', Priority: 10, Done: true })
      await put('org/c', 'Thread', { Status: 'pending' })
      await put('org/a/deep', 'Document', { Status: 'Pending' })
      await put('other/x', 'Document', { Status: 'Pending' })

      const paths = (nodes: { path: string }[]) => nodes.map((n) => n.path)
      expect(paths(await store.queryNodes({ parent: P('org') }))).toEqual(['org/a', 'org/b', 'org/c'])
      expect(paths(await store.queryNodes({ nodeType: 'Document' }))).toEqual(['org/a', 'org/a/deep', 'org/b', 'other/x'])
      expect(paths(await store.queryNodes({ parent: P('org'), nodeType: 'Document' }))).toEqual(['org/a', 'org/b'])
      expect(paths(await store.queryNodes({ parent: P('org'), where: { Status: 'PENDING' } }))).toEqual(['org/a', 'org/c'])
      expect(paths(await store.queryNodes({ parent: P('org'), where: { status: 'fired' } }))).toEqual(['org/b'])
      expect(paths(await store.queryNodes({ where: { Priority: '10' } }))).toEqual(['org/b'])
      expect(paths(await store.queryNodes({ where: { Done: 'TRUE' } }))).toEqual(['org/b'])
      expect(paths(await store.queryNodes({ where: { Done: 'false', Status: 'pending' } }))).toEqual(['org/a'])
      expect(paths(await store.queryNodes({ where: { Missing: 'x' } }))).toEqual([])
      expect(paths(await store.queryNodes({ nodeType: 'Document', limit: 2 }))).toEqual(['org/a', 'org/a/deep'])
      // [KIT7] queryFields is an engine's filter: exact (case as written), "true"/"false" are booleans.
      expect(paths(await store.queryFields({ nodeType: 'Thread', where: { Status: 'pending' } }, ['Status']))).toEqual(['org/c'])
      expect(paths(await store.queryFields({ nodeType: 'Thread', where: { Status: 'Pending' } }, ['Status']))).toEqual([])
      expect(paths(await store.queryFields({ where: { Done: 'true' } }, []))).toEqual(['org/b'])
      // queryFields with no field: the same matches, paths only (an engine's scan reads no content).
      expect(paths(await store.queryFields({ where: { Done: 'false', Status: 'Pending' } }, []))).toEqual(['org/a'])
      expect(paths(await store.queryFields({ nodeType: 'Document', after: 'org/a', limit: 2 }, []))).toEqual(['org/a/deep', 'org/b'])
      // An empty parent is the top level; `after` pages by path.
      expect(paths(await store.queryNodes({ parent: '' as NodePath }))).toEqual(['org'])
      expect(paths(await store.queryNodes({ nodeType: 'Document', limit: 2, after: 'org/a/deep' }))).toEqual(['org/b', 'other/x'])
      expect(await store.queryNodes({ parent: P('org'), nodeType: 'Document', where: { Status: 'Pending' } })).toEqual([
        await store.getNode(P('org/a')),
      ])

      await expectCode(store.queryNodes({ where: { "Status') OR 1=1 --": 'x' } }), 'invalid_request')
      await expectCode(store.queryNodes({ where: { 'a.b': 'x' } }), 'invalid_request')
    })

    it('gives queryFields values as JSON, from an engine-scan index or not', async () => {
      // [ACT19] Thread's Status, RequestedStatus and HasPending have scan indexes (read from the
      // index on SQLite); a value the index cannot tell apart is read from the row.
      const put = (path: string, content: MergePatch) => store.commit(new NodeWriter(P(path), 'Thread').input('Created', content))
      await put('t/a', { Status: 'Open', RequestedStatus: '{not json', HasPending: true, Title: 'A' })
      await put('t/b', { Status: 'Open', RequestedStatus: { Nested: 1 }, HasPending: 1, Title: 'B' })
      await put('t/c', { Status: 'Open', RequestedStatus: null, HasPending: 2.5, Title: '[x' })
      await put('t/d', { Status: 'Open', HasPending: false })
      await put('t/e', { Status: 'Closed', RequestedStatus: 'Open' })
      const rows = await store.queryFields({ nodeType: 'Thread', where: { Status: 'Open' } }, ['Status', 'RequestedStatus', 'HasPending', 'Title'])
      expect(rows.map((r) => [r.path, r.fields])).toEqual([
        ['t/a', { Status: 'Open', RequestedStatus: '{not json', HasPending: true, Title: 'A' }],
        ['t/b', { Status: 'Open', RequestedStatus: { Nested: 1 }, HasPending: 1, Title: 'B' }],
        ['t/c', { Status: 'Open', RequestedStatus: undefined, HasPending: 2.5, Title: '[x' }],
        ['t/d', { Status: 'Open', RequestedStatus: undefined, HasPending: false, Title: undefined }],
      ])
      expect((await store.queryFields({ nodeType: 'Thread', where: { RequestedStatus: 'Open' } }, ['Status'])).map((r) => [r.path, r.fields])).toEqual([['t/e', { Status: 'Closed' }]])
    })

    it('applies the default and maximum query limits', async () => {
      await Promise.all(
        Array.from({ length: 1005 }, (_, i) =>
          store.commit(new NodeWriter(P(`many/n${String(i).padStart(4, '0')}`)).input('Created', { I: i })),
        ),
      )
      expect(await store.queryNodes({ parent: P('many') })).toHaveLength(100)
      expect(await store.queryNodes({ parent: P('many'), limit: 5000 })).toHaveLength(1000)
    })

    it('lists descendants by path range, not by pattern', async () => {
      for (const p of ['a', 'a/b', 'a/b/c', 'a/_Access', 'a-b', 'a0', 'ab', 'a.x', 'a_', 'b', 'a@', 'a@/x', 'a.x/y']) {
        await store.commit(new NodeWriter(P(p)).input('Created', { P: p }))
      }
      expect(await store.descendants(P('a'))).toEqual(['a/_Access', 'a/b', 'a/b/c'])
      expect(await store.descendants(P('a/b'))).toEqual(['a/b/c'])
      expect(await store.descendants(P('a@'))).toEqual(['a@/x'])
      expect(await store.descendants(P('a/b/c'))).toEqual([])
      expect(await store.descendants(P('zzz'))).toEqual([])
    })

    it('loads a doc whose updates rebuild the Y.Doc', async () => {
      const w = new NodeWriter(P('doc'))
      await store.commit(w.input('Created', { Title: 'T', Nested: { a: 1 } }))
      await store.commit(w.input('Updated', { Nested: { b: 2 } }))
      await store.commit(w.input('Updated', { Title: null, List: [1, 2, 3] }))
      const stored = await store.loadDoc(P('doc'))
      expect(stored?.snapshot).toBeNull()
      expect(stored?.updates).toHaveLength(3)
      for (const u of stored?.updates ?? []) expect(u).toBeInstanceOf(Uint8Array)
      const doc = rebuild(stored ?? { snapshot: null, updates: [] })
      expect(docToJson(doc)).toEqual({ Nested: { a: 1, b: 2 }, List: [1, 2, 3] })
      expect(docToJson(doc)).toEqual((await store.getNode(P('doc')))?.content)
      expect(await store.loadDoc(P('absent'))).toBeNull()
    })

    it(`compacts the update log past ${COMPACT_AFTER_UPDATES} updates without changing the state`, async () => {
      const w = new NodeWriter(P('hot'))
      await store.commit(w.input('Created', { Counter: 0, Text: 'x' }))
      for (let chunk = 0; chunk < 10; chunk++) {
        await Promise.all(
          Array.from({ length: 100 }, (_, i) => {
            const n = chunk * 100 + i + 1
            return store.commit(w.input('Updated', n % 7 === 0 ? { Text: `t${n}`, [`F${n % 13}`]: n } : { Counter: n }))
          }),
        )
      }
      await waitFor(async () => ((await store.loadDoc(P('hot')))?.updates.length ?? Infinity) <= COMPACT_AFTER_UPDATES)
      const stored = await store.loadDoc(P('hot'))
      expect(stored?.snapshot).toBeInstanceOf(Uint8Array)
      expect(stored?.updates.length).toBeLessThanOrEqual(COMPACT_AFTER_UPDATES)
      const doc = rebuild(stored ?? { snapshot: null, updates: [] })
      expect(docToJson(doc)).toEqual(docToJson(w.doc))
      expect(docToJson(doc)).toMatchObject({ Counter: 1000 })
      expect(Y.encodeStateVector(doc)).toEqual(Y.encodeStateVector(w.doc))
      expect((await store.getNode(P('hot')))?.content).toEqual(docToJson(w.doc))
      // The writer's later updates still apply on top of the compacted state.
      const next = w.input('Updated', { Counter: 1001 })
      Y.applyUpdate(doc, next.update ?? new Uint8Array())
      expect(docToJson(doc)).toEqual(docToJson(w.doc))
    })

    it('[STO9] waits to compact a big node until its log is a quarter of its snapshot, and then keeps its state', async () => {
      const w = new NodeWriter(P('bignode'))
      await store.commit(w.input('Created', { Blob: 'b'.repeat(200_000), Counter: 0 }))
      // Past 200 entries with the 200 KB create in the log: compacted into a 200 KB snapshot.
      for (let n = 1; n <= 220; n += 20) await Promise.all(Array.from({ length: 20 }, (_, i) => store.commit(w.input('Updated', { Counter: n + i }))))
      await waitFor(async () => ((await store.loadDoc(P('bignode')))?.snapshot?.byteLength ?? 0) > 200_000)
      await waitFor(async () => ((await store.loadDoc(P('bignode')))?.updates.length ?? Infinity) < 200)
      const before = (await store.loadDoc(P('bignode')))?.updates.length ?? 0
      // 300 small edits: ~10 KB of log against a 200 KB snapshot. Rewriting it now would cost
      // 20 times what was appended: not due.
      for (let n = 0; n < 300; n += 20) await Promise.all(Array.from({ length: 20 }, (_, i) => store.commit(w.input('Updated', { Counter: 1000 + n + i }))))
      expect((await store.loadDoc(P('bignode')))?.updates.length).toBe(before + 300)
      // A 60 KB edit brings the log past a quarter of the snapshot: compacted.
      await store.commit(w.input('Updated', { Note: 'n'.repeat(60_000) }))
      await waitFor(async () => ((await store.loadDoc(P('bignode')))?.updates.length ?? Infinity) === 0)
      const stored = await store.loadDoc(P('bignode'))
      const doc = rebuild(stored ?? { snapshot: null, updates: [] })
      expect(docToJson(doc)).toEqual(docToJson(w.doc))
      expect(Y.encodeStateVector(doc)).toEqual(Y.encodeStateVector(w.doc))
      expect((await store.getNode(P('bignode')))?.content).toEqual(docToJson(w.doc))
    })

    it('gives 500 concurrent commits distinct versions and persists them all', async () => {
      const writers = Array.from({ length: 50 }, (_, i) => new NodeWriter(P(`conc/n${i}`)))
      await Promise.all(writers.map((w) => store.commit(w.input('Created', { Seq: 0 }))))
      const base = await store.lastVersion()
      const commits = Array.from({ length: 500 }, (_, i) => {
        const w = writers[i % writers.length]
        if (!w) throw new Error('writer')
        return store.commit(w.input('Updated', { Seq: Math.floor(i / writers.length) + 1, [`F${i}`]: i }))
      })
      const records = await Promise.all(commits)
      const versions = records.map((r) => r.version)
      expect(new Set(versions).size).toBe(500)
      expect(versions.every((v) => v > base)).toBe(true)
      // Submission order is commit order.
      expect(versions).toEqual([...versions].sort((a, b) => a - b))
      expect(await store.changesSince(base, 1000)).toHaveLength(500)
      await store.close()
      store = await opened.reopen()
      for (const w of writers) {
        const stored = await store.loadDoc(w.path)
        expect(docToJson(rebuild(stored ?? { snapshot: null, updates: [] }))).toEqual(docToJson(w.doc))
        expect((await store.getNode(w.path))?.content).toEqual(docToJson(w.doc))
      }
    })

    it('stores accounts with a case-insensitive unique email', async () => {
      const account = { userId: 'u1', email: 'Alice@Example.COM', passwordHash: 'h1', createdAt: '2026-01-01T00:00:00.000Z' }
      await store.createAccount(account)
      expect(await store.findAccountByEmail('alice@example.com')).toEqual({ ...account, email: 'alice@example.com' })
      expect(await store.findAccountByEmail('ALICE@EXAMPLE.COM')).toMatchObject({ userId: 'u1' })
      await expectCode(store.createAccount({ ...account, userId: 'u2', email: 'ALICE@example.com' }), 'email_taken')
      await expectCode(store.createAccount({ ...account, email: 'other@example.com' }), 'already_exists')
      expect(await store.findAccountByEmail('nobody@example.com')).toBeNull()
      // Only the account of both the id and the email goes.
      await store.deleteAccount('u1', 'other@example.com')
      expect(await store.findAccountByEmail('alice@example.com')).toMatchObject({ userId: 'u1' })
      await store.deleteAccount('u1', 'ALICE@example.com')
      expect(await store.findAccountByEmail('alice@example.com')).toBeNull()
      await store.createAccount({ ...account, userId: 'u1' })
      expect(await store.findAccountByEmail('alice@example.com')).toMatchObject({ userId: 'u1' })
    })

    it('saves, finds and revokes tokens', async () => {
      await store.saveToken('hash1', 'u1', '2030-01-01T00:00:00.000Z')
      await store.saveToken('hash2', 'u2', '2030-01-02T00:00:00.000Z')
      expect(await store.findToken('hash1')).toEqual({ userId: 'u1', expiresAt: '2030-01-01T00:00:00.000Z' })
      await store.revokeToken('hash1')
      expect(await store.findToken('hash1')).toBeNull()
      expect(await store.findToken('hash2')).toEqual({ userId: 'u2', expiresAt: '2030-01-02T00:00:00.000Z' })
      await store.revokeToken('never-saved')
    })

    it('waits for pending commits on close, then refuses new ones', async () => {
      const w = new NodeWriter(P('closing'))
      const settled: boolean[] = []
      const pending = [store.commit(w.input('Created', { N: 0 }))]
      for (let i = 1; i < 100; i++) pending.push(store.commit(w.input('Updated', { N: i })))
      pending.forEach((p, i) => void p.then(() => (settled[i] = true)))
      await store.close()
      await Promise.resolve()
      expect(settled.filter(Boolean)).toHaveLength(100)
      await expectCode(store.commit(w.input('Updated', { N: 100 })), 'unavailable')
      store = await opened.reopen()
      expect((await store.getNode(P('closing')))?.content).toEqual({ N: 99 })
      expect(await store.changesSince(0, 1000)).toHaveLength(100)
    })
  })
}
