// @vitest-environment node
import 'fake-indexeddb/auto'
import { describe, expect, it } from 'vitest'
import { api, createDocument, createSpace, grantRole, waitFor } from '../helpers/index.js'
import { OFFLINE_URL, statusIs, webServerSuite } from '../helpers/web-clients.js'
import { HttpApi } from '../../web/api/index.js'
import { NodeStore } from '../../web/store/index.js'
import type { Session } from '../../web/sync/index.js'

/**
 * Renames and deletions queued on a device while offline, replayed against a real server: once
 * across the tabs of the device, and, when the server refuses them for good, kept and told.
 */
const { server, web } = webServerSuite('web-offline-ops')
const { client, user } = web

/** A node of `owner`'s new space that `editor` (an Editor there) has on a device (`dbName`), and that device offline. */
async function nodeOnDevice(owner: Session, editor: Session) {
  const space = await createSpace(server().url, owner.token)
  if (editor.userId !== owner.userId) await grantRole(server().url, owner.token, space, editor.userId, 'Editor')
  const path = await createDocument(server().url, owner.token, `${space}/notes`, { Title: 't' })
  const dbName = web.dbName()
  const first = await client(editor, { dbName })
  await first.refreshChildren(space)
  const name = (await first.store.getIndexRow(path))!.name
  first.stop()
  const offline = await client(editor, { baseUrl: OFFLINE_URL, dbName })
  return { space, path, name, dbName, offline }
}

async function serverName(s: Session, path: string): Promise<string> {
  return ((await api(server().url, s.token).getNode(path)).body as { name: string }).name
}

describe('renames and deletions queued offline', () => {
  it('[WEB131] a rename made offline is queued, shown on the device at once (a listing from the server does not undo it), and made on the server once back', async () => {
    const ann = await user('Ann')
    const { space, path, name, dbName, offline } = await nodeOnDevice(ann, ann)
    await offline.renameNode(path, 'Renamed offline')
    expect((await offline.store.getIndexRow(path))!.name).toBe('Renamed offline')
    expect(await offline.store.pendingOps()).toMatchObject([{ kind: 'rename', path, name: 'Renamed offline', from: name }])
    expect((await statusIs(offline, () => true)).pending).toBe(1)
    expect(await serverName(ann, path)).toBe(name)
    offline.stop()
    const online = await client(ann, { dbName })
    await statusIs(online, (s) => s.kind === 'saved' && s.pending === 0)
    expect(await serverName(ann, path)).toBe('Renamed offline')
    await online.refreshChildren(space)
    expect((await online.store.getIndexRow(path))!.name).toBe('Renamed offline')
    expect(online.opErrors$.value).toEqual([])
    expect(await online.store.refusedOps()).toEqual([])
  })

  it('[SYNC23] two tabs back online replay a queued rename once: the second waits while the first sends it', async () => {
    const ann = await user('Ann')
    const { path, dbName, offline } = await nodeOnDevice(ann, ann)
    await offline.renameNode(path, 'Once')
    offline.stop()
    // The first tab's request is held until the other tab has either sent the rename too or
    // found the queue taken: both tabs meet the queued rename while it is on its way.
    let calls = 0
    let otherTabMet: () => void = () => {}
    const met = new Promise<void>((resolve) => (otherTabMet = resolve))
    const rename = HttpApi.prototype.renameNode
    const claim = NodeStore.prototype.claimOps as (() => Promise<boolean>) | undefined
    HttpApi.prototype.renameNode = async function (this: HttpApi, p: string, n: string) {
      if (++calls === 1) await met
      else otherTabMet()
      return rename.call(this, p, n)
    }
    if (claim) {
      NodeStore.prototype.claimOps = async function (this: NodeStore) {
        const ok = await claim.call(this)
        if (!ok) otherTabMet()
        return ok
      }
    }
    try {
      const a = await client(ann, { dbName })
      const b = await client(ann, { dbName })
      await met
      await statusIs(a, (s) => s.kind === 'saved' && s.pending === 0)
      await statusIs(b, (s) => s.kind === 'saved' && s.pending === 0)
      expect(await serverName(ann, path)).toBe('Once')
      expect(calls).toBe(1)
    } finally {
      HttpApi.prototype.renameNode = rename
      if (claim) NodeStore.prototype.claimOps = claim
    }
  })

  it('[WEB132] a rename made offline that the server refuses (Update rights lost) is kept, refused, with the name typed; the node keeps its name; it is told', async () => {
    const ann = await user('Ann')
    const bob = await user('Bob')
    const { space, path, name, dbName, offline } = await nodeOnDevice(ann, bob)
    await offline.renameNode(path, 'Bob’s title')
    offline.stop()
    await grantRole(server().url, ann.token, space, bob.userId, 'Viewer')
    const online = await client(bob, { dbName })
    await waitFor(() => online.opErrors$.value.length > 0, 10_000)
    expect(online.opErrors$.value[0]).toMatchObject({ path, code: 'forbidden', kind: 'rename', name: 'Bob’s title' })
    expect(await online.store.refusedOps()).toMatchObject([{ kind: 'rename', path, name: 'Bob’s title', from: name, refusal: { code: 'forbidden' } }])
    expect(await online.store.pendingOps()).toEqual([])
    expect((await online.store.getIndexRow(path))!.name).toBe(name)
    expect(await statusIs(online, (s) => s.kind === 'saved')).toMatchObject({ pending: 0, refused: 1 })
    expect(await serverName(ann, path)).toBe(name)
    const [op] = await online.store.refusedOps()
    await online.store.discardOp(op!.id!)
    expect(await online.store.refusedOps()).toEqual([])
  })

  it('[SYNC24] a deletion queued offline that the server refuses (a 4xx: Delete rights lost) is kept as refused and told, and the node is shown again', async () => {
    const ann = await user('Ann')
    const bob = await user('Bob')
    const { space, path, dbName, offline } = await nodeOnDevice(ann, bob)
    await offline.deleteNode(path)
    expect(await offline.store.getIndexRow(path)).toBeUndefined()
    offline.stop()
    await grantRole(server().url, ann.token, space, bob.userId, 'Viewer')
    const online = await client(bob, { dbName })
    await waitFor(() => online.opErrors$.value.length > 0, 10_000)
    expect(online.opErrors$.value[0]).toMatchObject({ path, code: 'forbidden', kind: 'delete' })
    expect(await online.store.refusedOps()).toMatchObject([{ kind: 'delete', path, refusal: { code: 'forbidden' } }])
    expect(await online.store.pendingOps()).toEqual([])
    await waitFor(async () => (await online.store.query({ parent: space, listedOnly: true })).some((r) => r.path === path), 10_000)
    expect((await api(server().url, ann.token).getNode(path)).status).toBe(200)
    expect(await statusIs(online, (s) => s.kind === 'saved')).toMatchObject({ pending: 0, refused: 1 })
  })

  it('[WEB133] a creation queued offline that the server refuses is kept, refused, on the device with its name: another tab and a reload read it there', async () => {
    const ann = await user('Ann')
    const vic = await user('Vic')
    const space = await createSpace(server().url, ann.token)
    await grantRole(server().url, ann.token, space, vic.userId, 'Viewer')
    const dbName = web.dbName()
    const path = `${space}/draft`
    const offline = await client(vic, { baseUrl: OFFLINE_URL, dbName })
    await offline.createNode(path, 'Document', 'Draft')
    offline.stop()
    const online = await client(vic, { dbName })
    await waitFor(() => online.opErrors$.value.length > 0, 10_000)
    expect(online.opErrors$.value[0]).toMatchObject({ path, code: 'forbidden', kind: 'create', name: 'Draft' })
    online.stop()
    // Another tab, or the page reloaded: the session's opErrors$ is empty there.
    const other = await client(vic, { dbName })
    expect(other.opErrors$.value).toEqual([])
    expect(await other.store.refusedOps()).toMatchObject([{ kind: 'create', path, name: 'Draft', refusal: { code: 'forbidden' } }])
    expect(await other.store.getIndexRow(path)).toBeUndefined()
    expect(await other.store.pendingOps()).toEqual([])
    expect((await api(server().url, ann.token).getNode(path)).status).toBe(404)
  })
})
