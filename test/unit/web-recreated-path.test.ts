// @vitest-environment node
import 'fake-indexeddb/auto'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import { api, createDocument, createSpace, grantRole, startTestServer, waitFor, type TestServer } from '../helpers/index.js'
import { statusIs, webClients } from '../helpers/web-clients.js'
import { groupRefused } from '../../web/store/index.js'

/**
 * Edits made on this device to a node that was deleted elsewhere and replaced by a new node at the
 * same path (decision 0011), against a real server.
 */
let ts: TestServer
const web = webClients(() => ts.url, 'web-recreated-path')
const { client, user } = web

beforeAll(async () => {
  ts = await startTestServer()
})
afterAll(() => ts.cleanup())
afterEach(() => web.stopAll())

describe('a node deleted and made again at its path while edits of the old one wait', () => {
  for (const [label, edit] of [
    ['a text field both nodes have', { Title: 'old title, typed offline' }],
    ['a field only the old node had', { Old: 'old field, typed offline' }],
  ] as const) {
    it(`[SYNC22] an edit typed offline into the old node (${label}) is not put into the new node: it stays, refused, for its author`, async () => {
      const ann = await user('Ann')
      const bob = await user('Bob')
      const space = await createSpace(ts.url, ann.token)
      await grantRole(ts.url, ann.token, space, bob.userId, 'Admin')
      const path = await createDocument(ts.url, ann.token, `${space}/doc`, { Title: 'old title', Old: 'old field' })
      const a = await client(ann)
      // What the node page does: the node's row from the server (which node is at the path).
      await a.refreshNode(path)
      const ra = a.acquire(path)
      await ra.synced
      await waitFor(() => ra.textOf('Title') !== null, 5000)
      await statusIs(a, (s) => s.kind === 'saved' && s.pending === 0)
      a.conn.stop()
      const key = Object.keys(edit)[0]!
      const typed = Object.values(edit)[0]!
      let value = String(ra.content[key] ?? '')
      const keystrokes = typed.length - value.length
      for (const ch of typed.slice(value.length)) await a.patch(path, { [key]: (value += ch) })
      // Bob deletes the node and makes another at the path.
      expect((await api(ts.url, bob.token).deleteNode(path)).status).toBeLessThan(300)
      expect((await api(ts.url, bob.token).putNode(path, 'Document', { Title: 'new title', Body: 'new body' }, 'doc')).status).toBe(201)
      a.conn.start()
      await statusIs(a, (s) => s.kind === 'saved' && s.pending === 0)
      await waitFor(() => !ra.state$.value.rebuilding, 10_000)
      expect((await api(ts.url, bob.token).getNode(path)).body.content).toEqual({ Title: 'new title', Body: 'new body' })
      // Kept for Ann as refused edits of the deleted node, the last with all she typed.
      const refused = await a.store.refusedRows()
      expect(refused.length).toBe(keystrokes)
      expect(refused.at(-1)!.patch).toEqual({ [key]: typed })
      expect(refused.every((r) => r.path === path && r.code === 'not_found' && /was deleted while this edit was on its way/.test(r.message ?? ''))).toBe(true)
      expect(groupRefused(refused).map((g) => [g.field, g.value, g.nodeReplaced])).toEqual([[key, typed, true]])
      await waitFor(() => ra.content.Title === 'new title' && ra.content.Body === 'new body', 10_000)
    })
  }
})
