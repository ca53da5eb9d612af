import { describe, expect, it } from 'vitest'
import * as Y from 'yjs'
import { compactUpdates } from '../../sync-server/storage/compaction.js'
import { FoldThread } from '../../sync-server/storage/fold-thread.js'
import { tombstoneOfLog } from '../../sync-server/storage/tombstone.js'

/** A snapshot and a log of `n` updates, as a node's storage holds them. */
function nodeLog(n: number): { snapshot: Uint8Array; updates: Uint8Array[]; doc: Y.Doc } {
  const doc = new Y.Doc()
  const map = doc.getMap('content')
  for (let i = 0; i < 500; i++) map.set(`k${i}`, i)
  const snapshot = Y.encodeStateAsUpdate(doc)
  const updates: Uint8Array[] = []
  doc.on('update', (u: Uint8Array) => updates.push(u))
  for (let i = 0; i < n; i++) map.set(`k${i % 500}`, -i)
  return { snapshot, updates, doc }
}

describe('[SCALE15] the fold thread', () => {
  it('folds on the thread what it folds inline, byte for byte; small folds stay inline', async () => {
    const { snapshot, updates, doc } = nodeLog(300)
    const thread = new FoldThread(1)
    try {
      const [a, b] = await Promise.all([thread.fold(snapshot, updates), thread.fold(null, updates.slice(0, 10))])
      expect(a).toEqual(compactUpdates(snapshot, updates))
      expect(b).toEqual(compactUpdates(null, updates.slice(0, 10)))
      const folded = new Y.Doc()
      Y.applyUpdate(folded, a)
      expect(folded.getMap('content').toJSON()).toEqual(doc.getMap('content').toJSON())
      // Under the default threshold a small node's fold does not start the thread.
      const inline = new FoldThread()
      expect(await inline.fold(snapshot, updates.slice(0, 5))).toEqual(compactUpdates(snapshot, updates.slice(0, 5)))
      await inline.close()
    } finally {
      await thread.close()
    }
  })

  it('[TOMB1] makes on the thread the tombstone it makes inline, byte for byte: it covers every struct and holds no value', async () => {
    const { snapshot, updates, doc } = nodeLog(300)
    const thread = new FoldThread(1)
    try {
      const made = await thread.tombstone(snapshot, updates)
      expect(made).toEqual(tombstoneOfLog(snapshot, updates))
      expect(await thread.tombstone(null, [])).toBeNull()
      const stone = new Y.Doc()
      Y.applyUpdate(stone, made!)
      expect(stone.getMap('content').toJSON()).toEqual({})
      expect(Y.encodeStateVector(stone)).toEqual(Y.encodeStateVector(doc))
      // Field names stay (the items' keys); values do not. Replayed over it, the log brings nothing back.
      expect(Buffer.from(made!).toString('latin1').includes('k42')).toBe(true)
      expect(made!.byteLength).toBeLessThan(Y.encodeStateAsUpdate(doc).byteLength)
      const again = new Y.Doc()
      Y.applyUpdate(again, made!)
      for (const u of [snapshot, ...updates]) Y.applyUpdate(again, u)
      expect(again.getMap('content').toJSON()).toEqual({})
    } finally {
      await thread.close()
    }
  })

  it('a fold the thread cannot do is refused with its cause, and the next fold works', async () => {
    const { snapshot, updates } = nodeLog(50)
    const thread = new FoldThread(1)
    try {
      await expect(thread.fold(new Uint8Array([255, 255, 255, 255]), [])).rejects.toThrow(/The fold failed/)
      expect(await thread.fold(snapshot, updates)).toEqual(compactUpdates(snapshot, updates))
    } finally {
      await thread.close()
    }
  })

  it('closed, it refuses what waited on it and folds inline from then on', async () => {
    const { snapshot, updates } = nodeLog(200)
    const thread = new FoldThread(1)
    const refused = expect(thread.fold(snapshot, updates)).rejects.toThrow(/closed/)
    await thread.close()
    await refused
    expect(await thread.fold(snapshot, updates)).toEqual(compactUpdates(snapshot, updates))
  })

  it('[TOMB1] a thread that dies with a tombstone waiting: the tombstone is made here (a delete does not fail), a fold waiting beside it is refused', async () => {
    const { snapshot, updates } = nodeLog(100)
    // Comes online, then exits on its first request.
    const dying = new URL(`data:text/javascript,${encodeURIComponent("import { parentPort } from 'node:worker_threads'; parentPort.postMessage({ ready: true }); parentPort.on('message', () => process.exit(3))")}`)
    const thread = new FoldThread(1, dying)
    try {
      const [stone, fold] = await Promise.allSettled([thread.tombstone(snapshot, updates), thread.fold(snapshot, updates)])
      expect(stone).toEqual({ status: 'fulfilled', value: tombstoneOfLog(snapshot, updates) })
      expect(fold.status).toBe('rejected')
      expect(String((fold as PromiseRejectedResult).reason)).toMatch(/exited \(code 3\)/)
    } finally {
      await thread.close()
    }
  })

  it('a thread that cannot start (its file missing from a build): folds run inline, none is lost', async () => {
    const { snapshot, updates } = nodeLog(100)
    const thread = new FoldThread(1, new URL('./no-such-fold-worker.mjs', import.meta.url))
    try {
      expect(await thread.fold(snapshot, updates)).toEqual(compactUpdates(snapshot, updates))
      expect(await thread.fold(null, updates)).toEqual(compactUpdates(null, updates))
    } finally {
      await thread.close()
    }
  })
})
