import * as Y from 'yjs'
import { expect } from 'vitest'
import { jsonEqual, type JsonObject } from '../../shared/index.js'
import { api, createDocument, createSpace, expectStatus, signup, stockProvider, waitFor, type StockClient, type TestServer } from '../helpers/index.js'
import { runWeft } from '../helpers/backup-fixtures.js'

/** [TOMB1] [TOMB2] Cases shared by the SQLite and PostgreSQL suites (tombstones.test.ts, tombstones.pg.test.ts). */

/** A copy of `path` as a client that synced it holds it, once the server has every edit made on it. */
export async function holdCopy(url: string, path: string, token: string, edits: JsonObject = {}): Promise<Y.Doc> {
  const doc = new Y.Doc()
  const c = stockProvider(url, path, token, doc)
  await c.synced()
  for (const [k, v] of Object.entries(edits)) c.content.set(k, v)
  if (Object.keys(edits).length > 0) {
    await waitFor(async () => {
      const node = (await api(url, token).getNode(path)).body
      return Object.entries(edits).every(([k, v]) => jsonEqual((node.content as JsonObject | undefined)?.[k] ?? null, v))
    }, { description: `the server has the edits to ${path}` })
  }
  c.provider.destroy()
  return doc
}

/**
 * Reconnects a held copy and waits until the server has applied whatever its sync pushed: a probe
 * written after the sync (one socket applies in order) is there. Viewers cannot write a probe: for
 * them, the copy converging on the server's content is the end.
 */
export async function reconnect(url: string, path: string, token: string, doc: Y.Doc, probe: string | null): Promise<StockClient> {
  const c = stockProvider(url, path, token, doc)
  await c.synced()
  if (probe) {
    c.content.set('Probe', probe)
    await waitFor(async () => ((await api(url, token).getNode(path)).body.content as JsonObject | undefined)?.Probe === probe, { description: `the probe on ${path}` })
  }
  return c
}

/**
 * [TOMB2] Decision 0010's gap: a node deleted after a backup, restored; a copy newer than the
 * backup reconnects. And a node the restore deletes, created again, with its old copy.
 */
export async function restoreOverDeleted(o: { start: () => Promise<TestServer>; env: Record<string, string>; file: string }): Promise<void> {
    const ts = await o.start()
    const file = o.file
    try {
      const alice = await signup(ts.url)
      const space = await createSpace(ts.url, alice.token)
      let a = api(ts.url, alice.token)
      const kept = `${space}/kept`
      await createDocument(ts.url, alice.token, kept, { Title: 'as backed up' })
      expect((await runWeft(['backup', file], o.env)).code).toBe(0)
      // After the backup: edited by a client that keeps its copy, then deleted.
      const stale = await holdCopy(ts.url, kept, alice.token, { Title: 'newer', After: 1 })
      expectStatus(await a.deleteNode(kept), 204)
      // And a node the backup does not have, with a copy held.
      const later = `${space}/later`
      await createDocument(ts.url, alice.token, later, { NotInBackup: 'secret' })
      const laterCopy = await holdCopy(ts.url, later, alice.token, { More: 1 })
      await ts.server.close()
      expect((await runWeft(['restore', file], o.env)).code).toBe(0)
      await ts.restart()
      a = api(ts.url, alice.token)
      expect((await a.getNode(kept)).body.content).toEqual({ Title: 'as backed up' })
      const s = await reconnect(ts.url, kept, alice.token, stale, 'stale')
      expect((await a.getNode(kept)).body.content).toEqual({ Title: 'as backed up', Probe: 'stale' })
      expect(s.json()).toEqual({ Title: 'as backed up', Probe: 'stale' })
      s.destroy()
      // The node the restore deleted: created again, its old copy brings nothing back.
      expect((await a.getNode(later)).status).toBe(404)
      await createDocument(ts.url, alice.token, later, { New: true })
      const l = await reconnect(ts.url, later, alice.token, laterCopy, 'later')
      expect((await a.getNode(later)).body.content).toEqual({ New: true, Probe: 'later' })
      l.destroy()
    } finally {
      await ts.cleanup()
    }
}
