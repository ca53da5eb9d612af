import { readFile } from 'node:fs/promises'
import { join } from 'node:path'
import fc from 'fast-check'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import * as Y from 'yjs'
import { jsonEqual, type JsonObject } from '../../shared/index.js'
import { HEADER_BYTES, InvalidBackup, restoreBackup } from '../../sync-server/backup/index.js'
import { tombstoneOfDoc } from '../../sync-server/storage/index.js'
import {
  api,
  createDocument,
  createSpace,
  expectStatus,
  grantRole,
  makeTempDir,
  removeDir,
  signup,
  startTestServer,
  stockProvider,
  waitFor,
  type TestServer,
  type TestUser,
} from '../helpers/index.js'
import { backupLines, rewriteBackupRecord, runWeft } from '../helpers/backup-fixtures.js'
import { holdCopy, reconnect, restoreOverDeleted } from './tombstone-cases.js'

/**
 * [TOMB1] A Yjs client keeps every struct it synced. Before tombstones, a copy of a deleted (or
 * trashed, or moved-away) node pushed its structs into whatever was created at the path next: the
 * deleted content came back, mixed into the new node, for everyone. These tests hold stale copies
 * in plain Y.Docs and reconnect them with stock y-websocket providers.
 */

const dirs: string[] = []
afterAll(async () => {
  for (const d of dirs) await removeDir(d)
})
async function tempDir(): Promise<string> {
  const d = await makeTempDir('weft-tomb-')
  dirs.push(d)
  return d
}

describe('[TOMB1] a node created where another one was leaves nothing of that one to a stale copy', () => {
  let ts: TestServer
  let alice: TestUser
  let viewer: TestUser
  let space: string
  beforeAll(async () => {
    ts = await startTestServer()
    alice = await signup(ts.url)
    viewer = await signup(ts.url)
    space = await createSpace(ts.url, alice.token)
    await grantRole(ts.url, alice.token, space, viewer.userId, 'Viewer')
  })
  afterAll(() => ts.cleanup())

  for (const how of ['deleted', 'trashed', 'moved away'] as const) {
    it(`[TOMB1] ${how}, then created again at the same path: an Editor's and a Viewer's stale copies (node and child) bring nothing back, and drop what they held`, async () => {
      const a = api(ts.url, alice.token)
      const root = `${space}/${how.replace(' ', '-')}`
      const child = `${root}/child`
      await createDocument(ts.url, alice.token, root, { Old: 'secret', Shared: 'old' })
      await createDocument(ts.url, alice.token, child, { OldChild: 1 })
      const editorCopy = await holdCopy(ts.url, root, alice.token, { Later: 'synced before', Shared: 'edited' })
      const childCopy = await holdCopy(ts.url, child, alice.token, { LaterChild: true })
      const viewerCopy = await holdCopy(ts.url, root, viewer.token)
      expect(viewerCopy.getMap('content').toJSON()).toMatchObject({ Old: 'secret', Later: 'synced before' })

      if (how === 'deleted') expectStatus(await a.deleteNode(root), 204)
      else if (how === 'trashed') expectStatus(await a.post(`/api/nodes/${root}/trash`), 200)
      else expectStatus(await a.post(`/api/nodes/${root}/move`, { to: `${space}/elsewhere` }), 200)

      await createDocument(ts.url, alice.token, root, { Fresh: how })
      await createDocument(ts.url, alice.token, child, { FreshChild: how })
      const e = await reconnect(ts.url, root, alice.token, editorCopy, 'editor')
      const c = await reconnect(ts.url, child, alice.token, childCopy, 'child')
      const v = await reconnect(ts.url, root, viewer.token, viewerCopy, null)
      expect((await a.getNode(root)).body.content).toEqual({ Fresh: how, Probe: 'editor' })
      expect((await a.getNode(child)).body.content).toEqual({ FreshChild: how, Probe: 'child' })
      // The copies were told to delete the old content: they hold what the server holds.
      expect(e.json()).toEqual({ Fresh: how, Probe: 'editor' })
      expect(c.json()).toEqual({ FreshChild: how, Probe: 'child' })
      await waitFor(() => jsonEqual(v.json(), { Fresh: how, Probe: 'editor' }), { description: "the Viewer's copy converges" })
      // The Viewer's copy pushed nothing it may not write: it was never refused.
      expect(v.denied).toEqual([])
      // A fresh reader sees the same.
      const fresh = stockProvider(ts.url, root, viewer.token)
      await fresh.synced()
      expect(fresh.json()).toEqual({ Fresh: how, Probe: 'editor' })
      for (const x of [e, c, v, fresh]) x.destroy()
      if (how === 'moved away') {
        // The node that moved keeps its own content, and its own copy still syncs with it.
        expect((await a.getNode(`${space}/elsewhere`)).body.content).toEqual({ Old: 'secret', Shared: 'edited', Later: 'synced before' })
        await expect((await a.getNode(`${space}/elsewhere/child`)).body.content).toEqual({ OldChild: 1, LaterChild: true })
      }
    })
  }

  it('[TOMB1] a node moved onto a path where another one was deleted gets nothing of that one from its stale copy; moved back out and in, it keeps its own content', async () => {
    const a = api(ts.url, alice.token)
    const place = `${space}/place`
    await createDocument(ts.url, alice.token, place, { Gone: 'secret' })
    const stale = await holdCopy(ts.url, place, alice.token, { GoneToo: 1 })
    expectStatus(await a.deleteNode(place), 204)
    await createDocument(ts.url, alice.token, `${space}/mover`, { Mine: 'kept' })
    const moverCopy = await holdCopy(ts.url, `${space}/mover`, alice.token)
    expectStatus(await a.post(`/api/nodes/${space}/mover/move`, { to: place }), 200)
    const s = await reconnect(ts.url, place, alice.token, stale, 'stale')
    expect((await a.getNode(place)).body.content).toEqual({ Mine: 'kept', Probe: 'stale' })
    expect(s.json()).toEqual({ Mine: 'kept', Probe: 'stale' })
    s.destroy()
    // The mover's own copy (from before the move) is the same node: it syncs, nothing lost.
    const m = await reconnect(ts.url, place, alice.token, moverCopy, 'mover')
    expect(m.json()).toEqual({ Mine: 'kept', Probe: 'mover' })
    m.destroy()
    // Trash and restore from the trash: the node comes back whole, and its copies still sync.
    const trashed = await a.post<{ trashPath: string }>(`/api/nodes/${place}/trash`)
    expectStatus(trashed, 200)
    expectStatus(await a.post(`/api/nodes/${trashed.body.trashPath}/restore`), 200)
    const back = stockProvider(ts.url, place, alice.token)
    await back.synced()
    expect(back.json()).toEqual({ Mine: 'kept', Probe: 'mover' })
    back.content.set('After', true)
    await waitFor(async () => ((await a.getNode(place)).body.content as JsonObject).After === true)
    back.destroy()
  })

  it('[TOMB1] a node restored from the trash to a path where another node lived and was deleted meanwhile: that node\'s stale copy brings nothing back and deletes nothing of it', async () => {
    const a = api(ts.url, alice.token)
    const place = `${space}/twice`
    await createDocument(ts.url, alice.token, place, { Mine: 'first', Keep: 1 })
    const trashed = await a.post<{ trashPath: string }>(`/api/nodes/${place}/trash`)
    expectStatus(trashed, 200)
    // Another node lives at the path (over the first one's tombstone), a copy of it is held, it goes.
    await createDocument(ts.url, alice.token, place, { Theirs: 'secret' })
    const theirs = await holdCopy(ts.url, place, alice.token, { TheirsToo: 2 })
    expectStatus(await a.deleteNode(place), 204)
    expectStatus(await a.post(`/api/nodes/${trashed.body.trashPath}/restore`), 200)
    expect((await a.getNode(place)).body.content).toEqual({ Mine: 'first', Keep: 1 })
    const s = await reconnect(ts.url, place, alice.token, theirs, 'theirs')
    expect((await a.getNode(place)).body.content).toEqual({ Mine: 'first', Keep: 1, Probe: 'theirs' })
    expect(s.json()).toEqual({ Mine: 'first', Keep: 1, Probe: 'theirs' })
    s.destroy()
    const fresh = stockProvider(ts.url, place, alice.token)
    await fresh.synced()
    expect(fresh.json()).toEqual({ Mine: 'first', Keep: 1, Probe: 'theirs' })
    fresh.destroy()
  })

  it('[TOMB1] seeded property: whatever sequence of edits, deletes, trashes, moves and re-creations, a node at a path holds no field written to an earlier node at that path, whichever copy reconnects', { timeout: 240_000 }, async () => {
    const seed = Number(process.env.TOMB_SEED ?? 20261205)
    const [ops] = fc.sample(fc.array(fc.integer({ min: 0, max: 99 }), { minLength: 40, maxLength: 40 }), { seed, numRuns: 1 })
    const a = api(ts.url, alice.token)
    const path = `${space}/prop`
    let generation = 0
    let exists = false
    let away = 0
    let olderReconnects = 0
    const copies: { doc: Y.Doc; generation: number; token: string; viewer: boolean }[] = []
    /** Every field a node at the path holds is tagged with its generation: `G<n>_...`. */
    const fieldsOf = (c: unknown) => Object.keys((c as JsonObject | undefined) ?? {})
    const check = async (where: string) => {
      const node = (await a.getNode(path)).body
      if (!exists) return
      const fields = fieldsOf(node.content).filter((f) => f !== 'Probe')
      expect(fields.every((f) => f.startsWith(`G${generation}_`)), `${where}: ${JSON.stringify(node.content)} at generation ${generation} (seed ${seed})`).toBe(true)
    }
    for (const [step, op] of ops!.entries()) {
      if (!exists) {
        generation++
        await createDocument(ts.url, alice.token, path, { [`G${generation}_created`]: step })
        exists = true
      } else if (op < 30) {
        const who = op % 2 === 0 ? alice : viewer
        copies.push({ doc: await holdCopy(ts.url, path, who.token, who === alice ? { [`G${generation}_edit${step}`]: step } : {}), generation, token: who.token, viewer: who === viewer })
      } else if (op < 55 && copies.length > 0) {
        const copy = copies[op % copies.length]!
        const c = await reconnect(ts.url, path, copy.token, copy.doc, copy.viewer ? null : `p${step}`)
        if (copy.viewer) await waitFor(async () => jsonEqual(c.json(), (await a.getNode(path)).body.content), { description: 'the Viewer copy converges' })
        await check(`after copy of generation ${copy.generation} reconnected at step ${step}`)
        if (copy.generation < generation) olderReconnects++
        if (copy.generation < generation) expect(fieldsOf(c.json()).filter((f) => f !== 'Probe').every((f) => f.startsWith(`G${generation}_`))).toBe(true)
        c.provider.destroy()
        // The copy now holds this generation (what it was told).
        copy.generation = generation
        if (!copy.viewer) {
          // Its probe is a write of this generation: tag it so the invariant holds.
          expectStatus(await a.patchNode(path, { Probe: null }), 200)
        }
      } else if (op < 70) {
        expectStatus(await a.deleteNode(path), 204)
        exists = false
      } else if (op < 85) {
        expectStatus(await a.post(`/api/nodes/${path}/trash`), 200)
        exists = false
      } else {
        expectStatus(await a.post(`/api/nodes/${path}/move`, { to: `${space}/away${++away}` }), 200)
        exists = false
      }
      await check(`after step ${step} (op ${op})`)
    }
    // The seed exercises the case: copies of earlier nodes at the path came back, several times.
    expect(generation).toBeGreaterThan(3)
    expect(olderReconnects).toBeGreaterThan(2)
  })
})

describe('[TOMB2] restore and tombstones (decision 0010)', () => {
  it('[TOMB2] a node deleted after the backup comes back as the backup has it: a stale copy newer than the backup does not revert the restore; a node the restore deletes leaves a tombstone', { timeout: 300_000 }, async () => {
    const dataDir = await tempDir()
    await restoreOverDeleted({ start: () => startTestServer({ dataDir }), env: { DATA_DIR: dataDir }, file: join(await tempDir(), 'tomb.weftbak') })
  })

  it('[TOMB2] tombstones travel in the backup file; a crafted one that is not a Yjs update is refused, and one carrying content is written with its content deleted', { timeout: 120_000 }, async () => {
    const ts = await startTestServer({ dataDir: await tempDir() })
    const dir = await tempDir()
    const file = join(dir, 'tombs.weftbak')
    try {
      const alice = await signup(ts.url)
      const space = await createSpace(ts.url, alice.token)
      const path = `${space}/gone`
      await createDocument(ts.url, alice.token, path, { Old: 'secret' })
      const stale = await holdCopy(ts.url, path, alice.token)
      expectStatus(await api(ts.url, alice.token).deleteNode(path), 204)
      expect((await runWeft(['backup', file], { DATA_DIR: ts.dataDir })).code).toBe(0)
      const good = await readFile(file)
      const header = JSON.parse(good.subarray(0, HEADER_BYTES).toString()) as { counts: Record<string, number> }
      expect(header.counts.node_tombstones).toBe(1)
      const at = backupLines(good).findIndex((l) => l.startsWith('{"t":"node_tombstones"'))
      expect(at).toBeGreaterThanOrEqual(0)
      const crafted = (state: string) => rewriteBackupRecord(good, at, (rec) => (rec.r[1] = state), join(dir, 'crafted.weftbak'))
      await ts.server.close()
      // Not a Yjs update: refused before anything is written.
      const error = await restoreBackup(await crafted(Buffer.from([0xff, 0xff, 0xff, 0xff, 0x0f]).toString('base64')), { dataDir: await tempDir() }).catch((e: unknown) => e)
      expect(error).toBeInstanceOf(InvalidBackup)
      expect((error as Error).message).toMatch(/tombstone/)
      // A tombstone that smuggles content: a real update with items. Restored as its clocks only.
      const smuggler = new Y.Doc()
      smuggler.getMap('content').set('Smuggled', 'in')
      const target = await tempDir()
      await restoreBackup(await crafted(Buffer.from(Y.encodeStateAsUpdate(smuggler)).toString('base64')), { dataDir: target })
      const restored = await startTestServer({ dataDir: target })
      try {
        await createDocument(restored.url, alice.token, path, { New: 1 })
        expect((await api(restored.url, alice.token).getNode(path)).body.content).toEqual({ New: 1 })
        const fresh = stockProvider(restored.url, path, alice.token)
        await fresh.synced()
        expect(fresh.json()).toEqual({ New: 1 })
        fresh.destroy()
      } finally {
        await restored.cleanup()
      }
      // The honest file restores the real tombstone: the stale copy brings nothing back.
      const honest = await tempDir()
      await restoreBackup(file, { dataDir: honest })
      const again = await startTestServer({ dataDir: honest })
      try {
        await createDocument(again.url, alice.token, path, { New: 2 })
        const s = await reconnect(again.url, path, alice.token, stale, 'stale')
        expect((await api(again.url, alice.token).getNode(path)).body.content).toEqual({ New: 2, Probe: 'stale' })
        s.destroy()
      } finally {
        await again.cleanup()
      }
      expect(tombstoneOfDoc(new Y.Doc())).toBeNull()
    } finally {
      await ts.cleanup()
    }
  })
})
