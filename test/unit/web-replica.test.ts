// @vitest-environment node
import 'fake-indexeddb/auto'
import { describe, expect, it } from 'vitest'
import { MuxType, type MuxFrame } from '../../shared/protocol.js'
import { NodeStore } from '../../web/store/index.js'
import { NodeReplica } from '../../web/sync/node-replica.js'
import type { MuxConnection, RoomHandler } from '../../web/sync/mux-connection.js'

/** A socket that records what the replica sends and lets the test play the server. */
class FakeConnection {
  sent: MuxFrame[] = []
  joins = 0
  leaves = 0
  isOpen = true
  handler: RoomHandler | null = null
  join(_path: string, handler: RoomHandler) {
    this.joins++
    this.handler = handler
    handler.onSocketOpen()
  }
  leave() {
    this.leaves++
  }
  send(frame: MuxFrame) {
    this.sent.push(frame)
    return true
  }
}

let n = 0
async function setup() {
  const store = new NodeStore(`web-replica-test-${++n}`)
  await store.open()
  const conn = new FakeConnection()
  const replica = new NodeReplica('space/doc', {
    store,
    conn: conn as unknown as MuxConnection,
    broadcast: () => {},
    onIdle: () => {},
  })
  replica.startSync()
  await replica.ready
  await new Promise((r) => setTimeout(r, 0))
  return { store, conn, replica }
}

describe('node replica', () => {
  it('a transient room denial (1011) is retried with a new join; nothing is refused', async () => {
    const { store, conn, replica } = await setup()
    await replica.patch({ A: 1 })
    expect(conn.joins).toBe(1)
    replica.onFrame({ type: MuxType.Denied, path: 'space/doc', closeCode: 1011, code: 'internal', message: 'Joining failed; retry.' })
    expect(replica.state$.value.denied).toBeNull()
    await new Promise((r) => setTimeout(r, 700))
    expect(conn.joins).toBe(2)
    expect((await store.pendingEntries('space/doc')).length).toBe(1)
    store.close()
  })

  it('a final room denial (4403) is shown, turns unsent edits into refused ones and is not retried', async () => {
    const { store, conn, replica } = await setup()
    await replica.patch({ A: 1 })
    replica.onFrame({ type: MuxType.Denied, path: 'space/doc', closeCode: 4403, code: 'forbidden', message: 'No access.' })
    expect(replica.state$.value.denied?.code).toBe('forbidden')
    await new Promise((r) => setTimeout(r, 700))
    expect(conn.joins).toBe(1)
    expect((await store.outboxFor('space/doc')).map((e) => e.status)).toEqual(['refused'])
    store.close()
  })

  it('sends each outbox entry once per connection, pipelined before Joined', async () => {
    const { store, conn, replica } = await setup()
    await replica.patch({ A: 1 })
    // Not joined yet: the patch waits; the next (re)connect sends it behind the Join.
    expect(conn.sent.filter((f) => f.type === MuxType.Update)).toHaveLength(0)
    conn.handler!.onSocketOpen()
    await new Promise((r) => setTimeout(r, 20))
    expect(conn.sent.filter((f) => f.type === MuxType.Update)).toHaveLength(1)
    replica.onFrame({ type: MuxType.Joined, path: 'space/doc', permissions: 0xffff })
    conn.handler!.onFrame({ type: MuxType.Sync, path: 'space/doc', message: new Uint8Array([0, 0, 1, 0]) }) // server step 1 (empty state vector)
    await new Promise((r) => setTimeout(r, 20))
    expect(conn.sent.filter((f) => f.type === MuxType.Update)).toHaveLength(1)
    store.close()
  })
})
