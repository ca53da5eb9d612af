// @vitest-environment node
import 'fake-indexeddb/auto'
import { describe, expect, it } from 'vitest'
import * as Y from 'yjs'
import * as encoding from 'lib0/encoding'
import { syncUpdateMessage } from '../helpers/crafted-updates.js'
import { waitFor } from '../helpers/wait-for.js'
import { MuxType, type MuxFrame } from '../../shared/protocol.js'
import { permissionMask } from '../../shared/access-policy.js'
import { groupRefused, NodeStore } from '../../web/store/index.js'
import { NodeReplica, type TabMessage } from '../../web/sync/node-replica.js'
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
async function setup(opts: { broadcast?: (msg: TabMessage) => void; maxPayloadBytes?: number } = {}) {
  const store = new NodeStore(`web-replica-test-${++n}`)
  await store.open()
  const conn = new FakeConnection()
  const replica = new NodeReplica('space/doc', {
    store,
    conn: conn as unknown as MuxConnection,
    broadcast: opts.broadcast ?? (() => {}),
    onIdle: () => {},
    maxPayloadBytes: opts.maxPayloadBytes === undefined ? undefined : () => opts.maxPayloadBytes!,
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
    // Joined again after the rejoin delay (waited for, not slept past).
    await waitFor(() => conn.joins === 2, { description: 'a second join' })
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
    await waitFor(() => conn.sent.some((f) => f.type === MuxType.Update), { description: 'the outbox entry sent behind the Join' })
    expect(conn.sent.filter((f) => f.type === MuxType.Update)).toHaveLength(1)
    replica.onFrame({ type: MuxType.Joined, path: 'space/doc', permissions: 0xffff })
    conn.handler!.onFrame({ type: MuxType.Sync, path: 'space/doc', message: new Uint8Array([0, 0, 1, 0]) }) // server step 1 (empty state vector)
    await new Promise((r) => setTimeout(r, 20))
    expect(conn.sent.filter((f) => f.type === MuxType.Update)).toHaveLength(1)
    store.close()
  })
})

/** Joined with every permission, the server's state (empty) applied: edits are sent as they are made. */
function join(replica: NodeReplica, conn: FakeConnection) {
  replica.onFrame({ type: MuxType.Joined, path: 'space/doc', permissions: 0xffff })
  const step2 = encoding.createEncoder()
  encoding.writeVarUint(step2, 0) // messageSync
  encoding.writeVarUint(step2, 1) // messageYjsSyncStep2
  encoding.writeVarUint8Array(step2, Y.encodeStateAsUpdate(new Y.Doc()))
  conn.handler!.onFrame({ type: MuxType.Sync, path: 'space/doc', message: encoding.toUint8Array(step2) })
}

function updatesSent(conn: FakeConnection) {
  return conn.sent.flatMap((f) => (f.type === MuxType.Update ? [f] : []))
}

/** What the server would hold after applying every Update frame sent. */
function serverText(conn: FakeConnection, key: string): string {
  const doc = new Y.Doc()
  for (const f of updatesSent(conn)) Y.applyUpdate(doc, f.update)
  const v = doc.getMap('content').get(key)
  return v instanceof Y.Text ? v.toString() : String(v)
}

/** For a check that must stay true (nothing sent): one short turn. Waits for something to happen use `eventually`. */
const settle = () => new Promise((r) => setTimeout(r, 20))
/** Retries the assertions until they pass (the store's writes are async): a wait, not a sleep. */
const eventually = (check: () => unknown) =>
  waitFor(async () => {
    await check()
    return true
  })

describe('[WEB3] a text editor bound with its own origin (bindTextEditor)', () => {
  it('[WEB3] an edit in the editor origin is sent early, lands in the outbox with the field as intent, and reaches the other tabs', async () => {
    const tabs: TabMessage[] = []
    const { store, conn, replica } = await setup({ broadcast: (m) => tabs.push(m) })
    join(replica, conn)
    await replica.patch({ Source: 'let a = 1\n' })
    const text = await waitFor(() => replica.textOf('Source'))
    expect(text).toBeInstanceOf(Y.Text)
    const origin = { editor: 'codemirror' } // stands for y-codemirror.next's YSyncConfig
    replica.bindTextEditor('Source', text, [origin])
    const before = updatesSent(conn).length
    const tabsBefore = tabs.length
    replica.doc.transact(() => text.insert(text.length, 'let b = 2\n'), origin)
    // Sent in the same task as the edit, before the outbox write: a temporary seq.
    const sent = updatesSent(conn).slice(before)
    expect(sent).toHaveLength(1)
    expect(sent[0]!.seq).toBeGreaterThanOrEqual(2 ** 40)
    await eventually(async () => expect((await store.outboxFor('space/doc')).at(-1)).toMatchObject({ status: 'pending', patch: { Source: 'let a = 1\nlet b = 2\n' } }))
    expect(serverText(conn, 'Source')).toBe('let a = 1\nlet b = 2\n')
    expect(tabs.slice(tabsBefore)).toEqual([{ kind: 'update', path: 'space/doc', update: sent[0]!.update }])
    // The server's Ack names the temporary seq; it settles the outbox entry it stands for.
    replica.onFrame({ type: MuxType.Ack, path: 'space/doc', seq: sent[0]!.seq, version: 1 })
    await eventually(async () => expect((await store.outboxFor('space/doc')).map((e) => e.patch)).not.toContainEqual({ Source: 'let a = 1\nlet b = 2\n' }))
    store.close()
  })

  it('[WEB3] an undo (a Y.UndoManager registered as an origin) is recorded and sent like the edit it undoes', async () => {
    const { store, conn, replica } = await setup()
    join(replica, conn)
    await replica.patch({ Source: 'abc' })
    const text = replica.textOf('Source')!
    const origin = {}
    const undo = new Y.UndoManager(text, { trackedOrigins: new Set([origin]) })
    replica.bindTextEditor('Source', text, [origin, undo])
    replica.doc.transact(() => text.insert(3, 'def'), origin)
    // Someone else's edit meanwhile: the undo takes back only ours.
    const other = new Y.Doc()
    for (const f of updatesSent(conn)) Y.applyUpdate(other, f.update)
    other.transact(() => (other.getMap('content').get('Source') as Y.Text).insert(0, '>'))
    replica.onFrame({ type: MuxType.Sync, path: 'space/doc', message: syncUpdateMessage(Y.encodeStateAsUpdate(other, Y.encodeStateVector(replica.doc))) })
    expect(text.toString()).toBe('>abcdef')
    undo.undo()
    expect(text.toString()).toBe('>abc')
    await eventually(async () => expect((await store.outboxFor('space/doc')).at(-1)!.patch).toEqual({ Source: '>abc' }))
    const server = new Y.Doc()
    Y.applyUpdate(server, Y.encodeStateAsUpdate(other))
    for (const f of updatesSent(conn)) Y.applyUpdate(server, f.update)
    expect((server.getMap('content').get('Source') as Y.Text).toString()).toBe('>abc')
    store.close()
  })

  it('[WEB3] after dispose, or for another origin, a transaction is not the editor\'s; binding a stale Y.Text throws; a doc swap ends the binding', async () => {
    const { store, conn, replica } = await setup()
    join(replica, conn)
    await replica.patch({ Source: 'x' })
    const text = replica.textOf('Source')!
    const origin = {}
    const binding = replica.bindTextEditor('Source', text, [origin])
    binding.dispose()
    const before = updatesSent(conn).length
    replica.doc.transact(() => text.insert(1, 'y'), origin)
    await settle()
    expect(updatesSent(conn)).toHaveLength(before)
    expect(() => replica.bindTextEditor('Source', new Y.Text(), [{}])).toThrow(/current Y.Text/)
    expect(() => replica.bindTextEditor('Source', text, ['local'])).toThrow(/origin/)
    // A doc swap (another tab rebuilt the node) ends every binding; changed$ tells the editor to bind again.
    const origin2 = {}
    replica.bindTextEditor('Source', text, [origin2])
    let changed = 0
    replica.changed$.subscribe(() => changed++)
    replica.applyFromTab({ kind: 'reload', path: 'space/doc' })
    await waitFor(() => changed > 0, { description: 'changed$ after the doc swap' })
    const fresh = replica.textOf('Source')!
    expect(fresh).not.toBe(text)
    expect(fresh.toString()).toBe('x')
    replica.bindTextEditor('Source', fresh, [origin2])
    replica.doc.transact(() => fresh.insert(1, 'z'), origin2)
    await eventually(async () => expect((await store.outboxFor('space/doc')).at(-1)!.patch).toEqual({ Source: 'xz' }))
    store.close()
  })

  it('[WEB6] textRefusal: a text over the change limit is refused before it reaches the doc, with sizes', async () => {
    const { store, replica } = await setup({ maxPayloadBytes: 8 * 1024 })
    expect(replica.textRefusal('Source', 'short')).toBeNull()
    const err = replica.textRefusal('Source', 'x'.repeat(8 * 1024))
    expect(err?.code).toBe('payload_too_large')
    expect(err?.message).toMatch(/8 KB/)
    store.close()
  })
})

describe('[ACC12] a client id another writer holds (client_id_conflict)', () => {
  /** The server's answer to a rebuild's sync step 1: its whole state. */
  function answerRebuild(conn: FakeConnection, server: Y.Doc) {
    const step2 = encoding.createEncoder()
    encoding.writeVarUint(step2, 0) // messageSync
    encoding.writeVarUint(step2, 1) // messageYjsSyncStep2
    encoding.writeVarUint8Array(step2, Y.encodeStateAsUpdate(server))
    conn.handler!.onFrame({ type: MuxType.Sync, path: 'space/doc', message: encoding.toUint8Array(step2) })
  }
  const clientsOf = (update: Uint8Array) => [...new Set(Y.decodeUpdate(update).structs.map((s) => s.id.client))]

  it('[ACC12] the refused edit is replayed on a doc rebuilt from the server with a NEW client id; nothing typed is lost', async () => {
    const { store, conn, replica } = await setup()
    join(replica, conn)
    await replica.patch({ title: 'mine' })
    await replica.patch({ body: 'more' })
    await waitFor(() => updatesSent(conn).length >= 2, { description: 'both patches sent' })
    const first = updatesSent(conn)
    expect(first).toHaveLength(2)
    const oldId = replica.doc.clientID
    expect(clientsOf(first[0]!.update)).toEqual([oldId])
    // The server holds another writer's structs under that id: both updates are refused.
    const server = new Y.Doc()
    server.clientID = oldId
    server.getMap('content').set('bobfield', 'squat')
    // [ACC12] The store takes its time over the second refusal (a loaded machine): the doc is
    // still rebuilt once, after both, not once per refusal (a second rebuild nobody answers).
    const refuse = store.refuse.bind(store)
    let refusals = 0
    store.refuse = async (...args: Parameters<typeof store.refuse>) => {
      if (++refusals === 2) await new Promise((r) => setTimeout(r, 150))
      return refuse(...args)
    }
    for (const f of first) replica.onFrame({ type: MuxType.Refused, path: 'space/doc', seq: f.seq, code: 'client_id_conflict', message: 'Yjs client id is another writer\'s.' })
    // The rebuild asks for the server's whole state (a sync step 1 with an empty state vector).
    const syncsBefore = conn.sent.filter((f) => f.type === MuxType.Sync).length
    await waitFor(() => replica.state$.value.rebuilding && conn.sent.filter((f) => f.type === MuxType.Sync).length > syncsBefore)
    answerRebuild(conn, server)
    await waitFor(() => updatesSent(conn).length === 4 && !replica.state$.value.rebuilding)
    expect(conn.sent.filter((f) => f.type === MuxType.Sync)).toHaveLength(syncsBefore + 1)
    const replayed = updatesSent(conn).slice(2)
    // The same outbox entries (the first frames went early, under temporary seqs).
    expect(replayed.map((f) => f.seq)).toEqual((await store.outboxFor('space/doc')).map((e) => e.id))
    expect(replica.doc.clientID).not.toBe(oldId)
    for (const f of replayed) expect(clientsOf(f.update)).toEqual([replica.doc.clientID])
    // Still pending (waiting for their Ack), not refused; the server would keep all three fields.
    expect((await store.outboxFor('space/doc')).map((e) => e.status)).toEqual(['pending', 'pending'])
    for (const f of replayed) Y.applyUpdate(server, f.update)
    expect(server.getMap('content').toJSON()).toEqual({ bobfield: 'squat', title: 'mine', body: 'more' })
    expect(replica.content).toMatchObject({ bobfield: 'squat', title: 'mine', body: 'more' })
    store.close()
  })
})

describe('[WEB42][WEB43] a role lowered under pending edits', () => {
  const READ_ONLY = permissionMask(new Set(['Read']))
  const server = new Y.Doc()
  server.getMap('content').set('Caption', new Y.Text('c0'))

  /** The server's state, as a sync message of `kind` (0: step 1, 1: step 2). */
  function serverSync(conn: FakeConnection, kind: 0 | 1) {
    const e = encoding.createEncoder()
    encoding.writeVarUint(e, 0) // messageSync
    encoding.writeVarUint(e, kind)
    if (kind === 0) encoding.writeVarUint8Array(e, Y.encodeStateVector(server))
    else encoding.writeVarUint8Array(e, Y.encodeStateAsUpdate(server))
    conn.handler!.onFrame({ type: MuxType.Sync, path: 'space/doc', message: encoding.toUint8Array(e) })
  }

  /** A replica holding the server's doc, known as a Document, with `typed` typed key by key while offline. */
  async function typedOffline(typed: string) {
    const s = await setup()
    await s.store.db.nodes.put({ path: 'space/doc', parent: 'space', nodeType: 'Document', name: 'doc', updatedAt: '2025-01-01T00:00:00.000Z', version: 1, pending: 0, refused: 0 })
    s.replica.onFrame({ type: MuxType.Joined, path: 'space/doc', permissions: 0xffff })
    serverSync(s.conn, 1)
    await waitFor(() => s.replica.textOf('Caption')?.toString() === 'c0')
    s.replica.onSocketClose()
    s.conn.sent = []
    let value = 'c0'
    for (const ch of typed) await s.replica.patch({ Caption: (value += ch) })
    expect(updatesSent(s.conn)).toHaveLength(0)
    return { ...s, value }
  }

  async function expectKeptWhole(store: NodeStore, value: string, n: number) {
    await eventually(async () => {
      const rows = await store.outboxFor('space/doc')
      expect(rows).toHaveLength(n)
      expect(rows.every((r) => r.status === 'refused' && r.code === 'forbidden')).toBe(true)
    })
    const groups = groupRefused(await store.refusedRows())
    expect(groups).toHaveLength(1)
    expect(groups[0]).toMatchObject({ field: 'Caption', value, code: 'forbidden' })
  }

  it('[WEB42] the first edit refused `forbidden` settles every later one of the node with that cause: none is replayed into the same refusal, the text is kept whole', async () => {
    const typed = ' eve wrote this sentence on the train back home'
    const { store, conn, replica, value } = await typedOffline(typed)
    // Back online; the server still says Update (it does not know yet), then refuses the first.
    conn.handler!.onSocketOpen()
    replica.onFrame({ type: MuxType.Joined, path: 'space/doc', permissions: 0xffff })
    serverSync(conn, 0)
    serverSync(conn, 1)
    await waitFor(() => updatesSent(conn).length === typed.length, { description: 'the outbox sent' })
    const [first, ...rest] = updatesSent(conn)
    replica.onFrame({ type: MuxType.Refused, path: 'space/doc', seq: first!.seq, code: 'forbidden', message: 'No Update permission.' })
    // The rest build on the refused one: the server calls them invalid_update (replayable alone).
    for (const f of rest) replica.onFrame({ type: MuxType.Refused, path: 'space/doc', seq: f.seq, code: 'invalid_update', message: 'Missing structs.' })
    await waitFor(() => replica.state$.value.rebuilding, { description: 'the rebuild' })
    serverSync(conn, 1)
    await waitFor(() => !replica.state$.value.rebuilding)
    await expectKeptWhole(store, value, typed.length)
    // Nothing was sent again: each refusal was earned once.
    await settle()
    expect(updatesSent(conn)).toHaveLength(typed.length)
    expect(replica.textOf('Caption')?.toString()).toBe('c0')
    store.close()
  })

  it('[WEB42] a forbidden_field refusal settles the later edits of that field only; an edit of another field is replayed', async () => {
    const { store, conn, replica } = await typedOffline('ab')
    await replica.patch({ Other: 'o1' })
    conn.handler!.onSocketOpen()
    replica.onFrame({ type: MuxType.Joined, path: 'space/doc', permissions: 0xffff })
    serverSync(conn, 0)
    serverSync(conn, 1)
    await waitFor(() => updatesSent(conn).length === 3)
    const [first, ...rest] = updatesSent(conn)
    replica.onFrame({ type: MuxType.Refused, path: 'space/doc', seq: first!.seq, code: 'forbidden_field', message: 'Caption is the system\'s.' })
    for (const f of rest) replica.onFrame({ type: MuxType.Refused, path: 'space/doc', seq: f.seq, code: 'invalid_update', message: 'Missing structs.' })
    await waitFor(() => replica.state$.value.rebuilding)
    serverSync(conn, 1)
    await waitFor(() => updatesSent(conn).length === 4, { description: 'the other field replayed' })
    const rows = await store.outboxFor('space/doc')
    expect(rows.map((r) => [r.status, r.code ?? null])).toEqual([['refused', 'forbidden_field'], ['refused', 'forbidden_field'], ['pending', null]])
    expect(updatesSent(conn)[3]!.seq).toBe(rows[2]!.id)
    store.close()
  })

  it('[WEB42] on a reconnect only the first edit goes before Joined; a Joined without Update settles the rest here, unsent', async () => {
    const typed = ' many keys, more than the refusal budget of a socket'
    const { store, conn, replica, value } = await typedOffline(typed)
    conn.handler!.onSocketOpen()
    await waitFor(() => updatesSent(conn).length === 1, { description: 'the first entry sent behind the Join' })
    replica.onFrame({ type: MuxType.Joined, path: 'space/doc', permissions: READ_ONLY })
    serverSync(conn, 0)
    serverSync(conn, 1)
    await expectKeptWhole(store, value, typed.length)
    // The server's answer to the one sent: it is settled already.
    replica.onFrame({ type: MuxType.Refused, path: 'space/doc', seq: updatesSent(conn)[0]!.seq, code: 'forbidden', message: 'No Update permission.' })
    await waitFor(() => replica.state$.value.rebuilding, { description: 'the rebuild' })
    serverSync(conn, 1)
    await waitFor(() => !replica.state$.value.rebuilding)
    expect(replica.textOf('Caption')?.toString()).toBe('c0')
    await settle()
    expect(updatesSent(conn)).toHaveLength(1)
    store.close()
  })

  it('[WEB43] a Joined on a joined room changes the permissions only (no new sync); an edit after a lowered mask is kept as refused, never sent', async () => {
    const { store, conn, replica } = await typedOffline('')
    conn.handler!.onSocketOpen()
    replica.onFrame({ type: MuxType.Joined, path: 'space/doc', permissions: 0xffff })
    serverSync(conn, 0)
    serverSync(conn, 1)
    await settle()
    const syncs = conn.sent.filter((f) => f.type === MuxType.Sync).length
    replica.onFrame({ type: MuxType.Joined, path: 'space/doc', permissions: READ_ONLY })
    expect(replica.state$.value.permissions?.has('Update')).toBe(false)
    expect(replica.state$.value.joined).toBe(true)
    expect(conn.sent.filter((f) => f.type === MuxType.Sync)).toHaveLength(syncs)
    await replica.patch({ Caption: 'c0 late' })
    await expectKeptWhole(store, 'c0 late', 1)
    expect(updatesSent(conn)).toHaveLength(0)
    replica.onFrame({ type: MuxType.Joined, path: 'space/doc', permissions: 0xffff })
    expect(replica.state$.value.permissions?.has('Update')).toBe(true)
    store.close()
  })
  for (const how of ['by the server', 'here, unsent (a send that found no rebuild, then a Joined without Update)'] as const) {
    it(`[WEB100] an edit refused ${how} while a rebuild replays the outbox (read before the refusal) is rebuilt away after the swap: it does not stay in the field or the stored copy`, async () => {
      const { store, conn, replica } = await typedOffline('')
      conn.handler!.onSocketOpen()
      replica.onFrame({ type: MuxType.Joined, path: 'space/doc', permissions: 0xffff })
      serverSync(conn, 0)
      serverSync(conn, 1)
      await replica.patch({ Caption: 'c0m' })
      await waitFor(() => updatesSent(conn).length === 1, { description: 'the edit sent' })
      const [edit] = updatesSent(conn)
      // A rebuild starts while the edit is in flight (here: a discard elsewhere on the node, [WEB81]).
      replica.rebuildFromServer()
      await waitFor(() => replica.state$.value.rebuilding, { description: 'the rebuild' })
      // Its first read of the outbox finds the edit pending; the refusal lands right after.
      const pendingEntries = store.pendingEntries.bind(store)
      let armed = true
      store.pendingEntries = async (...args: Parameters<typeof store.pendingEntries>) => {
        const read = await pendingEntries(...args)
        if (!armed) return read
        armed = false
        if (how === 'by the server') replica.onFrame({ type: MuxType.Refused, path: 'space/doc', seq: edit!.seq, code: 'forbidden', message: 'No Update permission.' })
        else {
          // [WEB42] What a send does once past its check (made before the rebuild began) when the
          // role turns out to have no Update: settles the pending edits here and asks for a rebuild.
          replica.onFrame({ type: MuxType.Joined, path: 'space/doc', permissions: READ_ONLY })
          await (replica as unknown as { refuseUnwritable: () => Promise<void> }).refuseUnwritable()
        }
        await eventually(async () => expect((await store.outboxFor('space/doc')).map((r) => r.status)).toEqual(['refused']))
        await waitFor(() => (replica as unknown as { refusalsSettling: number }).refusalsSettling === 0, { description: 'the refusal settled' })
        return read
      }
      // The refusal's own call for a rebuild comes while this one still stores its state (a slow
      // store, as Chromium's IndexedDB often is): it finds a rebuild running and does nothing.
      const r = replica as unknown as { startRebuild: () => void }
      const startRebuild = r.startRebuild.bind(replica)
      let calledDuring = false
      r.startRebuild = () => {
        if (!armed) calledDuring = true
        startRebuild()
      }
      const replaceState = store.replaceState.bind(store)
      store.replaceState = async (...args: Parameters<typeof store.replaceState>) => {
        await waitFor(() => calledDuring, { description: 'the refusal asked for a rebuild' })
        return replaceState(...args)
      }
      const syncs = () => conn.sent.filter((f) => f.type === MuxType.Sync).length
      const syncsBefore = syncs()
      serverSync(conn, 1)
      // The refused structs must leave the doc: the node is rebuilt again from the server's state.
      await waitFor(() => syncs() > syncsBefore && replica.state$.value.rebuilding, { description: 'a rebuild after the late refusal' })
      serverSync(conn, 1)
      await waitFor(() => !replica.state$.value.rebuilding)
      await eventually(async () => expect((await store.loadDoc('space/doc')).getMap('content').get('Caption')?.toString()).toBe('c0'))
      expect(replica.textOf('Caption')?.toString()).toBe('c0')
      await expectKeptWhole(store, 'c0m', 1)
      expect(updatesSent(conn)).toHaveLength(1)
      store.close()
    })
  }
})
