// @vitest-environment node
import 'fake-indexeddb/auto'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import * as Y from 'yjs'
import { firstValueFrom, filter } from 'rxjs'
import { applyPatchToDoc, docToJson } from '../../shared/merge-patch.js'
import type { MeshNode } from '../../shared/node.js'
import type { NodePath } from '../../shared/path.js'
import { liveStoreQuery, NodeStore } from '../../web/store/index.js'
import { waitFor } from '../helpers/wait-for.js'

let store: NodeStore
let n = 0

beforeEach(async () => {
  store = new NodeStore(`web-store-test-${++n}`)
  await store.open()
})

afterEach(() => store.close())

function patchUpdate(doc: Y.Doc, patch: Record<string, unknown>): Uint8Array {
  let captured: Uint8Array = new Uint8Array()
  const h = (u: Uint8Array) => (captured = u)
  doc.on('update', h)
  applyPatchToDoc(doc, patch as never)
  doc.off('update', h)
  return captured
}

function meshNode(path: string, nodeType = 'Document', name = path): MeshNode {
  return { path: path as NodePath, nodeType, name, content: {}, createdBy: 'u', createdAt: 'x', updatedAt: 'x', version: 1, state: 'Active' }
}

describe('web store', () => {
  it('appends updates and loads the doc back', async () => {
    const doc = new Y.Doc()
    await store.appendUpdate('a/b', patchUpdate(doc, { Title: 'one' }))
    await store.appendUpdate('a/b', patchUpdate(doc, { Body: 'two' }))
    expect(docToJson(await store.loadDoc('a/b'))).toEqual({ Title: 'one', Body: 'two' })
    expect(await store.loadState('missing')).toBeNull()
  })

  it('compacts a node into one row without losing content', async () => {
    const doc = new Y.Doc()
    for (let i = 0; i < 10; i++) await store.appendUpdate('c', patchUpdate(doc, { [`F${i}`]: i }))
    expect(await store.db.updates.where('path').equals('c').count()).toBe(10)
    await store.compact('c')
    expect(await store.db.updates.where('path').equals('c').count()).toBe(1)
    expect(docToJson(await store.loadDoc('c'))).toEqual(docToJson(doc))
  })

  it('compacts by itself after many rows', async () => {
    const doc = new Y.Doc()
    for (let i = 0; i < 70; i++) await store.appendUpdate('busy', patchUpdate(doc, { N: i }))
    // The compaction runs in the background: waited for, not slept past (50 ms was a guess).
    await waitFor(async () => (await store.db.updates.where('path').equals('busy').count()) < 70, { description: 'the busy doc compacted' })
    expect(docToJson(await store.loadDoc('busy'))).toEqual({ N: 69 })
  })

  it('loads many docs in one read', async () => {
    for (let i = 0; i < 20; i++) await store.appendUpdate(`m/${i}`, patchUpdate(new Y.Doc(), { I: i }))
    const docs = await store.loadDocs(Array.from({ length: 20 }, (_, i) => `m/${i}`).concat('m/none'))
    expect(docs.size).toBe(21)
    expect(docToJson(docs.get('m/7')!)).toEqual({ I: 7 })
    expect(docToJson(docs.get('m/none')!)).toEqual({})
  })

  it('records local patches as intent with pending counts; ack and refuse settle them', async () => {
    await store.upsertNodes([meshNode('s/doc')])
    const doc = new Y.Doc()
    const id1 = await store.recordLocalPatch('s/doc', { A: 1 }, patchUpdate(doc, { A: 1 }))
    const id2 = await store.recordLocalPatch('s/doc', { B: 2 }, patchUpdate(doc, { B: 2 }))
    expect((await store.getIndexRow('s/doc'))?.pending).toBe(2)
    expect(await store.totalPending()).toBe(2)
    expect((await store.pendingEntries('s/doc')).map((e) => e.patch)).toEqual([{ A: 1 }, { B: 2 }])
    expect(await store.pathsWithPending()).toEqual(['s/doc'])

    await store.ack(id1)
    expect((await store.getIndexRow('s/doc'))?.pending).toBe(1)
    await store.ack(id1) // a duplicate ack changes nothing
    expect((await store.getIndexRow('s/doc'))?.pending).toBe(1)

    const refused = await store.refuse(id2, 'forbidden_field', 'no')
    expect(refused?.status).toBe('refused')
    const row = await store.getIndexRow('s/doc')
    expect(row).toMatchObject({ pending: 0, refused: 1 })
    // A refused edit stays until discarded: never dropped silently.
    expect((await store.outboxFor('s/doc')).map((e) => [e.status, e.code])).toEqual([['refused', 'forbidden_field']])
    await store.discard(id2)
    expect(await store.outboxFor('s/doc')).toEqual([])
    expect((await store.getIndexRow('s/doc'))?.refused).toBe(0)
  })

  it('keeps a dependent refusal pending for one replay, then makes it final', async () => {
    const id = await store.recordLocalPatch('r', { A: 1 }, patchUpdate(new Y.Doc(), { A: 1 }))
    expect((await store.refuse(id, 'invalid_update', 'depends', true))?.status).toBe('pending')
    expect((await store.pendingEntries('r')).length).toBe(1)
    expect((await store.refuse(id, 'invalid_update', 'depends', true))?.status).toBe('refused')
  })

  it('batches pending reads asked for in the same tick', async () => {
    for (let i = 0; i < 5; i++) await store.recordLocalPatch(`p/${i}`, { I: i }, patchUpdate(new Y.Doc(), { I: i }))
    const all = await Promise.all([0, 1, 2, 3, 4, 4].map((i) => store.pendingEntries(`p/${i}`)))
    expect(all.map((rows) => rows.map((r) => r.patch))).toEqual([[{ I: 0 }], [{ I: 1 }], [{ I: 2 }], [{ I: 3 }], [{ I: 4 }], [{ I: 4 }]])
  })

  it('lists a parent in name order from the index and searches offline', async () => {
    await store.upsertNodes([meshNode('top', 'Space', 'Top'), meshNode('top/b', 'Document', 'Beta'), meshNode('top/a', 'Group', 'Alpha'), meshNode('other/x')])
    expect((await store.query({ parent: 'top' })).map((r) => r.name)).toEqual(['Alpha', 'Beta'])
    expect((await store.query({ parent: 'top', limit: 1 })).map((r) => r.name)).toEqual(['Alpha'])
    expect((await store.query({ parent: '' })).map((r) => r.path)).toEqual(['top'])
    expect((await store.query({ text: 'bet' })).map((r) => r.path)).toEqual(['top/b'])
    expect((await store.query({ nodeType: 'Group' })).map((r) => r.path)).toEqual(['top/a'])
  })

  it('[WEB30] a listing of what a person browses counts only those before its limit: 300 messages of a thread do not hide its document', async () => {
    const cells = Array.from({ length: 300 }, (_, i) => meshNode(`t/m${String(i).padStart(3, '0')}`, 'ThreadMessage', `A ${i}`))
    await store.upsertNodes([meshNode('t', 'Thread', 'T'), ...cells, meshNode('t/_r.1', 'ThreadMessage', 'A reply'), meshNode('t/notes', 'Document', 'Notes')])
    expect((await store.query({ parent: 't', limit: 200 })).map((r) => r.name)).not.toContain('Notes')
    expect((await store.query({ parent: 't', listedOnly: true, limit: 200 })).map((r) => r.path)).toEqual(['t/notes'])
    expect((await store.query({ parent: 't', listedOnly: true, text: 'no' })).map((r) => r.path)).toEqual(['t/notes'])
  })

  it('reconciles a full listing: children the server no longer lists are forgotten, local work is kept', async () => {
    await store.upsertNodes([meshNode('k/a'), meshNode('k/b'), meshNode('k/c')])
    await store.recordLocalPatch('k/c', { X: 1 }, patchUpdate(new Y.Doc(), { X: 1 }))
    await store.queueCreate('k/d', 'Document', 'd')
    await store.reconcileChildren('k', [meshNode('k/a')], true)
    expect((await store.query({ parent: 'k' })).map((r) => r.path).sort()).toEqual(['k/a', 'k/c', 'k/d'])
  })

  it('[WEB19] a listing asked before a child was learned (a create answered while it was on its way) does not forget that child; one asked after does', async () => {
    await store.upsertNodes([meshNode('r/a'), meshNode('r/gone')])
    const askedAt = store.stamp()
    // The create's answer lands while the listing is on its way; the listing cannot hold it.
    await store.upsertNodes([meshNode('r/new')])
    await store.reconcileChildren('r', [meshNode('r/a')], true, askedAt)
    expect((await store.query({ parent: 'r' })).map((r) => r.path).sort()).toEqual(['r/a', 'r/new'])
    // A listing asked after it, without it: the server no longer has it.
    await store.reconcileChildren('r', [meshNode('r/a')], true, store.stamp())
    expect((await store.query({ parent: 'r' })).map((r) => r.path).sort()).toEqual(['r/a'])
  })

  it('queues creations and deletions made offline; a node created and deleted offline never reaches the server', async () => {
    await store.queueCreate('q/new', 'Document', 'New')
    expect((await store.getIndexRow('q/new'))?.localOnly).toBe(1)
    await store.removeLocal('q/new', true)
    expect(await store.pendingOps()).toEqual([])

    await store.upsertNodes([meshNode('q/old'), meshNode('q/old/child'), meshNode('q/older')])
    await store.appendUpdate('q/old/child', patchUpdate(new Y.Doc(), { A: 1 }))
    await store.removeLocal('q/old', true)
    expect((await store.pendingOps()).map((o) => [o.kind, o.path])).toEqual([['delete', 'q/old']])
    expect(await store.getIndexRow('q/old/child')).toBeUndefined()
    expect(await store.loadState('q/old/child')).toBeNull()
    expect(await store.getIndexRow('q/older')).toBeDefined()
  })

  it('replaces a node state after a rebuild, with the replayed updates', async () => {
    const id = await store.recordLocalPatch('rb', { A: 1 }, patchUpdate(new Y.Doc(), { A: 1 }))
    const fresh = new Y.Doc()
    const replayed = patchUpdate(fresh, { A: 1 })
    await store.replaceState('rb', Y.encodeStateAsUpdate(fresh), new Map([[id, replayed]]))
    expect(await store.db.updates.where('path').equals('rb').count()).toBe(1)
    expect((await store.pendingEntries('rb'))[0]?.update).toEqual(replayed)
  })

  it('live store queries re-run after writes, throttled', async () => {
    const counts = liveStoreQuery(store.db, ['outbox'], () => store.totalPending(), 5)
    const seen: number[] = []
    const sub = counts.subscribe((v) => seen.push(v))
    await firstValueFrom(counts.pipe(filter((v) => v === 0)))
    for (let i = 0; i < 10; i++) await store.recordLocalPatch('lq', { I: i }, patchUpdate(new Y.Doc(), { I: i }))
    await firstValueFrom(counts.pipe(filter((v) => v === 10)))
    sub.unsubscribe()
    expect(seen[0]).toBe(0)
    expect(seen.length).toBeLessThan(12)
  })
})

describe('web store, denied rooms', () => {
  it('a refused room turns its pending entries into refused ones', async () => {
    await store.recordLocalPatch('gone', { A: 1 }, patchUpdate(new Y.Doc(), { A: 1 }))
    await store.recordLocalPatch('gone', { B: 1 }, patchUpdate(new Y.Doc(), { B: 1 }))
    expect(await store.refuseAllPending('gone', 'forbidden', 'access removed')).toBe(2)
    expect(await store.totalPending()).toBe(0)
    expect((await store.outboxFor('gone')).map((e) => [e.status, e.code])).toEqual([
      ['refused', 'forbidden'],
      ['refused', 'forbidden'],
    ])
  })
})
