import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import * as Y from 'yjs'
import {
  MuxClient,
  api,
  createDocument,
  createSpace,
  encodeCrafted,
  expectStatus,
  grantRole,
  makeTempDir,
  openRawSocket,
  removeDir,
  rootEntry,
  signup,
  spawnServer,
  startTestServer,
  stockProvider,
  syncUpdateMessage,
  waitFor,
  type SpawnedServer,
  type TestServer,
  type TestUser,
} from '../helpers/index.js'
import { CONTENT_MAP } from '../../shared/index.js'

/**
 * [ACC12] Acks mean kept (issue 15, finding 10), over the real transports, with the server's
 * state read back over HTTP.
 */
let ts: TestServer
let admin: TestUser
let alice: TestUser
let bob: TestUser
let space: string

beforeAll(async () => {
  ts = await startTestServer()
  admin = await signup(ts.url)
  alice = await signup(ts.url)
  bob = await signup(ts.url)
  space = await createSpace(ts.url, admin.token)
  await grantRole(ts.url, admin.token, space, alice.userId, 'Editor')
  await grantRole(ts.url, admin.token, space, bob.userId, 'Editor')
})
afterAll(() => ts.cleanup())

async function content(path: string): Promise<Record<string, unknown>> {
  return expectStatus(await api(ts.url, admin.token).getNode(path), 200).body.content as Record<string, unknown>
}

/** The Yjs id of the item holding `content[key]` in a synced doc, and its client's next clock: what anyone who syncs the node can read. */
function writerOf(doc: Y.Doc, key: string): { client: number; next: number } {
  const item = (doc.getMap(CONTENT_MAP) as unknown as { _map: Map<string, Y.Item> })._map.get(key)!
  return { client: item.id.client, next: Y.getState(doc.store, item.id.client) }
}

/** One map entry `content[key] = value` under `client` at `clock`: a struct another writer's id cannot carry. */
function squat(client: number, clock: number, key: string, value: unknown): Uint8Array {
  return encodeCrafted([{ client, clock, structs: [rootEntry(client, clock, key, [value])] }])
}

describe('[ACC12] finding 10: an acknowledged edit cannot be turned into a deletion', () => {
  it('Bob\'s struct under Alice\'s client id and next clock is refused (client_id_conflict, never acked); her next edit of title is kept', async () => {
    const path = await createDocument(ts.url, alice.token, `${space}/squat`, { title: 'first' })
    // Alice: a stock y-websocket provider on /sync.
    const a = stockProvider(ts.url, path, alice.token)
    await a.synced()
    a.content.set('title', 'second')
    await waitFor(async () => (await content(path)).title === 'second')
    // Bob syncs the node and reads Alice's client id and next clock from it.
    const b = await MuxClient.connect(ts.url, bob.token)
    expect(await b.join(path)).toMatchObject({ ok: true })
    await waitFor(() => b.json(path).title === 'second')
    const her = writerOf(b.doc(path), 'title')
    expect(her.client).toBe(a.doc.clientID)
    // Alice is offline for a moment (her edit then races Bob's, as in the finding).
    a.provider.disconnect()
    const answer = await b.sendUpdate(path, squat(her.client, her.next, 'bobfield', 'squat'))
    expect(answer).toMatchObject({ ok: false, code: 'client_id_conflict' })
    // Alice's next honest edit of title, sent when she reconnects.
    a.content.set('title', 'third')
    a.provider.connect()
    await waitFor(async () => (await content(path)).title === 'third')
    expect(await content(path)).toEqual({ title: 'third' })
    // Bob's own edits under his own id still go through.
    expect(await b.patch(path, { bobfield: 'fair' })).toMatchObject({ ok: true })
    expect(await content(path)).toEqual({ title: 'third', bobfield: 'fair' })
    a.destroy()
    await b.close()
  })

  it('an id another principal wrote with first is refused to everyone else on /mux and /sync; its owner, and an exact resend, are accepted', async () => {
    const path = await createDocument(ts.url, alice.token, `${space}/claimed`, { n: 0 })
    const id = 777_001
    const b = await MuxClient.connect(ts.url, bob.token)
    b.doc(path).clientID = id
    expect(await b.join(path)).toMatchObject({ ok: true })
    const bobs = await b.patch(path, { bob: 1 })
    expect(bobs).toMatchObject({ ok: true })
    // Alice on /mux, with the same id at its next clock (she never saw Bob's struct).
    const m = await MuxClient.connect(ts.url, alice.token)
    const next = Y.getState(b.doc(path).store, id)
    expect(await m.join(path)).toMatchObject({ ok: true })
    expect(await m.sendUpdate(path, squat(id, next, 'alice', 1))).toMatchObject({ ok: false, code: 'client_id_conflict' })
    // Over /sync, the same struct is answered with y-protocols permission-denied naming the code.
    const raw = await openRawSocket(ts.url, `/sync/${path}?token=${alice.token}`)
    raw.send(syncUpdateMessage(squat(id, next, 'alice', 1)))
    await waitFor(() => raw.messages.some((msg) => msg[0] === 2 && new TextDecoder().decode(msg).includes('client_id_conflict')))
    await raw.close()
    // Bob, the owner, writes on; an exact resend of his acked update is a harmless no-op.
    expect(await b.patch(path, { bob: 2 })).toMatchObject({ ok: true })
    const again = Y.encodeStateAsUpdate(b.doc(path))
    expect(await b.sendUpdate(path, again)).toMatchObject({ ok: true })
    expect(await content(path)).toEqual({ n: 0, bob: 2 })
    await b.close()
    await m.close()
  })

  it('nobody writes under the server doc\'s own client id; the server\'s own writes go on', async () => {
    const path = await createDocument(ts.url, alice.token, `${space}/serverid`, { title: 'by http' })
    const b = await MuxClient.connect(ts.url, bob.token)
    expect(await b.join(path)).toMatchObject({ ok: true })
    await waitFor(() => b.json(path).title === 'by http')
    const server = writerOf(b.doc(path), 'title')
    expect(await b.sendUpdate(path, squat(server.client, server.next, 'title', 'forged'))).toMatchObject({ ok: false, code: 'client_id_conflict' })
    expectStatus(await api(ts.url, alice.token).patchNode(path, { title: 'by http again' }), 200)
    expect(await content(path)).toEqual({ title: 'by http again' })
    await b.close()
  })
})

describe('[ACC12] bindings go with the node', () => {
  it('after a delete, a node created again at the path starts with no bindings: an id Bob held there may be anyone\'s', async () => {
    const path = await createDocument(ts.url, alice.token, `${space}/reborn`, { n: 0 })
    const id = 888_001
    const b = await MuxClient.connect(ts.url, bob.token)
    b.doc(path).clientID = id
    expect(await b.join(path)).toMatchObject({ ok: true })
    expect(await b.patch(path, { bob: 1 })).toMatchObject({ ok: true })
    await b.close()
    expectStatus(await api(ts.url, admin.token).deleteNode(path), 204)
    // Read back from storage, not from the copy in memory.
    await ts.restart()
    await createDocument(ts.url, alice.token, path, { n: 1 })
    await ts.restart()
    const m = await MuxClient.connect(ts.url, alice.token)
    m.doc(path).clientID = id
    expect(await m.join(path)).toMatchObject({ ok: true })
    await waitFor(() => m.json(path).n === 1)
    m.doc(path).clientID = id
    expect(await m.patch(path, { alice: 1 })).toMatchObject({ ok: true })
    expect(await content(path)).toEqual({ n: 1, alice: 1 })
    await m.close()
  })
})

describe('[ACC12] a binding survives kill -9', () => {
  let dir = ''
  const children: SpawnedServer[] = []
  afterAll(async () => {
    for (const c of children) await c.kill('SIGKILL')
    if (dir) await removeDir(dir)
  })

  it('an id acked to Alice before SIGKILL is still hers after the restart: Bob\'s struct under it is refused', { timeout: 120_000 }, async () => {
    dir = await makeTempDir('weft-acks-kill9-')
    const first = await spawnServer({ dataDir: dir })
    children.push(first)
    const owner = await signup(first.url)
    const other = await signup(first.url)
    const s = await createSpace(first.url, owner.token)
    await grantRole(first.url, owner.token, s, other.userId, 'Editor')
    const path = await createDocument(first.url, owner.token, `${s}/doc`, { title: 'a' })
    const m = await MuxClient.connect(first.url, owner.token)
    m.doc(path).clientID = 424_242
    expect(await m.join(path)).toMatchObject({ ok: true })
    // Acked = durable ([STO1]), binding included: kill at once, nothing gets a chance to flush.
    expect(await m.patch(path, { title: 'b' })).toMatchObject({ ok: true })
    const next = Y.getState(m.doc(path).store, 424_242)
    await first.kill('SIGKILL')
    await m.close()

    const second = await spawnServer({ dataDir: dir })
    children.push(second)
    const b = await MuxClient.connect(second.url, other.token)
    expect(await b.join(path)).toMatchObject({ ok: true })
    expect(await b.sendUpdate(path, squat(424_242, next, 'bobfield', 'squat'))).toMatchObject({ ok: false, code: 'client_id_conflict' })
    // The owner's next edit under her id is accepted and kept.
    const again = await MuxClient.connect(second.url, owner.token)
    again.doc(path).clientID = 424_242
    expect(await again.join(path)).toMatchObject({ ok: true })
    await waitFor(() => again.json(path).title === 'b')
    again.doc(path).clientID = 424_242
    expect(await again.patch(path, { title: 'c' })).toMatchObject({ ok: true })
    expect(expectStatus(await api(second.url, owner.token).getNode(path), 200).body.content).toEqual({ title: 'c' })
    await b.close()
    await again.close()
  })
})
