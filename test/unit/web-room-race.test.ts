// @vitest-environment node
import 'fake-indexeddb/auto'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { WebSocket as WsWebSocket } from 'ws'
import { SYSTEM, type NodePath } from '../../shared/index.js'
import { createSpace, signup, startTestServer, waitFor, type TestServer } from '../helpers/index.js'
import { createThread, node, post, settled } from '../integration/threads-helpers.js'
import { SyncClient, type NodeReplica } from '../../web/sync/index.js'

let ts: TestServer
beforeAll(async () => {
  ts = await startTestServer()
})
afterAll(() => ts.cleanup())

describe('[SYNC13] the web client opening the engine\'s answer cell while it is created and streamed', () => {
  it('[SYNC13] a replica acquired the moment the answer cell is created ends with the server content', async () => {
    const u = await signup(ts.url, undefined, undefined, 'Ann')
    const space = await createSpace(ts.url, u.token)
    const thread = await createThread(ts.url, u.token, `${space}/t`)
    const c = new SyncClient({ session: { userId: u.userId, token: u.token, name: 'Ann' }, baseUrl: ts.url, dbName: 'web-room-race', WebSocketImpl: WsWebSocket as unknown as typeof WebSocket })
    await c.start()
    const held = new Map<string, NodeReplica>()
    const sub = ts.server.nodes.changes$.subscribe((ch) => {
      if (ch.nodeType === 'ThreadMessage' && ch.by === 'system' && ch.kind === 'Created' && ch.node?.content.Role === 'assistant' && !held.has(ch.path)) held.set(ch.path, c.acquire(ch.path, false))
    })
    try {
      for (let i = 0; i < 10; i++) {
        await post(ts.url, u.token, thread, `message ${i} streamed a word at a time`)
        await settled(ts.url, u.token, thread)
      }
      expect(held.size).toBe(10)
      for (const [p, r] of held) {
        const server = (await node(ts.url, u.token, p)).content
        await waitFor(() => {
          if (JSON.stringify(r.content) !== JSON.stringify(server)) throw new Error(`${p}: server ${JSON.stringify(server)}, replica ${JSON.stringify(r.content)} ${JSON.stringify(r.state$.value)}`)
          return true
        }, { timeoutMs: 10_000, description: `the replica of ${p} holds the server content` })
      }
    } finally {
      sub.unsubscribe()
      c.stop()
    }
  }, 120_000)
})

describe('[SYNC14] a replica opened before the engine creates its node', () => {
  it('[SYNC14] a node opened a moment before it is created (join refused not_found) is joined once its row arrives, and shows the streamed content', async () => {
    const u = await signup(ts.url, undefined, undefined, 'Bea')
    const space = await createSpace(ts.url, u.token)
    const path = `${space}/_r.early` as NodePath
    const c = new SyncClient({ session: { userId: u.userId, token: u.token, name: 'Bea' }, baseUrl: ts.url, dbName: 'web-room-race-early', WebSocketImpl: WsWebSocket as unknown as typeof WebSocket })
    await c.start()
    try {
      const r = c.acquire(path, false)
      await waitFor(() => r.state$.value.denied?.code === 'not_found', { description: 'the early join is refused not_found' })
      // The engine makes the cell and streams into it while the view still holds the replica.
      const nodes = ts.server.nodes
      await nodes.update(SYSTEM, path, (cur) => (cur ? undefined : { nodeType: 'Document', content: { Role: 'assistant', Text: '' } }), 'engine')
      let text = ''
      for (let i = 0; i < 10; i++) await nodes.patch(SYSTEM, path, { Text: (text += `w${i} `) }, 'engine')
      // The thread's listing brings the cell's row (here: a refresh of it).
      await c.refreshNode(path)
      const server = (await nodes.get(SYSTEM, path))!.content
      await waitFor(() => {
        if (JSON.stringify(r.content) !== JSON.stringify(server)) throw new Error(`server ${JSON.stringify(server)}, replica ${JSON.stringify(r.content)} ${JSON.stringify(r.state$.value)}`)
        return true
      }, { timeoutMs: 10_000, description: `the replica of ${path} holds the server content` })
      expect(r.state$.value).toMatchObject({ joined: true, denied: null })
      c.release(path)
    } finally {
      c.stop()
    }
  }, 180_000)
})
