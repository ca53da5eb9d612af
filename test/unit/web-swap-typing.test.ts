// @vitest-environment node
import 'fake-indexeddb/auto'
import { describe, expect, it } from 'vitest'
import * as Y from 'yjs'
import * as encoding from 'lib0/encoding'
import * as decoding from 'lib0/decoding'
import { waitFor } from '../helpers/wait-for.js'
import { MuxType, type MuxFrame } from '../../shared/protocol.js'
import { NodeStore } from '../../web/store/index.js'
import { NodeReplica, type TextEditorBinding } from '../../web/sync/node-replica.js'
import type { MuxConnection, RoomHandler } from '../../web/sync/mux-connection.js'
import { TextInputBinding } from '../../web/components/text-input-binding.js'
import { mulberry32 } from '../helpers/seeded.js'

/**
 * [WEB48] A doc swap (a refusal's rebuild, a reload) never loses or overwrites a keystroke: the
 * real replica and store (fake-indexeddb), the person typing into an input bound like
 * `weft-text-field` (each keystroke a patch reading the input when it applies; the input shown the
 * doc's text on every change) and into an editor bound like the CodeMirror controller (each
 * keystroke a transaction of the editor's origin on the bound Y.Text; bound again on a swap), and
 * a server that refuses what it cannot integrate and, now and then, a whole update
 * (`client_id_conflict`: replayable, so every character typed ends on the server).
 */

const PATH = 'space/doc'

/** The server end of the socket: applies what integrates, refuses the rest; its answers wait in a queue the test delivers. */
class FakeServer {
  readonly doc = new Y.Doc()
  readonly answers: MuxFrame[] = []
  handler: RoomHandler | null = null
  isOpen = true
  opens = 1
  /** Refuses this integrable update outright when true (a client id conflict). */
  refuseNext: (update: Uint8Array, seq: number) => boolean = () => false
  refusals = 0

  constructor() {
    const content = this.doc.getMap('content')
    content.set('Caption', new Y.Text('c0'))
    content.set('Source', new Y.Text('s0'))
  }

  join(_path: string, handler: RoomHandler) {
    this.handler = handler
    handler.onSocketOpen()
    this.answers.push({ type: MuxType.Joined, path: PATH, permissions: 0xffff }, this.sync(0, Y.encodeStateVector(this.doc)))
  }
  leave() {}

  /** Someone else types `ch` into `key` on the server: the change goes out to the client after the answers queued before it. */
  othersType(key: string, ch: string, at: number) {
    const text = this.doc.getMap('content').get(key) as Y.Text
    let update: Uint8Array | null = null
    const capture = (u: Uint8Array) => (update = u)
    this.doc.on('update', capture)
    this.doc.transact(() => text.insert(Math.min(at, text.length), ch), 'other')
    this.doc.off('update', capture)
    this.answers.push(this.sync(2, update!))
  }

  private sync(kind: 0 | 1 | 2, payload: Uint8Array): MuxFrame {
    const e = encoding.createEncoder()
    encoding.writeVarUint(e, 0)
    encoding.writeVarUint(e, kind)
    encoding.writeVarUint8Array(e, payload)
    return { type: MuxType.Sync, path: PATH, message: encoding.toUint8Array(e) }
  }

  send(frame: MuxFrame) {
    if (frame.type === MuxType.Sync) {
      const d = decoding.createDecoder(frame.message)
      if (decoding.readVarUint(d) !== 0 || decoding.readVarUint(d) !== 0) return true
      const sv = decoding.readVarUint8Array(d)
      this.answers.push(this.sync(1, Y.encodeStateAsUpdate(this.doc, sv)))
      return true
    }
    if (frame.type !== MuxType.Update) return true
    const trial = new Y.Doc()
    Y.applyUpdate(trial, Y.encodeStateAsUpdate(this.doc))
    Y.applyUpdate(trial, frame.update)
    if (trial.store.pendingStructs || trial.store.pendingDs) {
      this.answers.push({ type: MuxType.Refused, path: PATH, seq: frame.seq, code: 'invalid_update', message: 'Missing structs.' })
    } else if (this.refuseNext(frame.update, frame.seq)) {
      this.refusals++
      this.answers.push({ type: MuxType.Refused, path: PATH, seq: frame.seq, code: 'client_id_conflict', message: 'Another writer holds this client id.' })
    } else {
      Y.applyUpdate(this.doc, frame.update)
      this.answers.push({ type: MuxType.Ack, path: PATH, seq: frame.seq, version: 1 })
    }
    return true
  }

  /** The socket drops with what it had not delivered, and a new one joins ([WEB53]: an Ack lost so). */
  reconnect() {
    this.answers.length = 0
    this.handler!.onSocketClose()
    this.opens++
    this.join(PATH, this.handler!)
  }

  deliverOne(): boolean {
    const f = this.answers.shift()
    if (!f) return false
    this.handler!.onFrame(f)
    return true
  }

  text(key: string): string {
    return (this.doc.getMap('content').get(key) as Y.Text).toString()
  }
}

/**
 * An <input> bound as weft-text-field binds it (its TextInputBinding): typing patches the input's
 * value as it is when the patch applies; a change of the doc is shown in it, merged with what was
 * typed and not yet applied ([WEB49]).
 */
class InputField {
  private readonly el = { value: '', selectionStart: 0, selectionEnd: 0, setSelectionRange(start: number, end: number) {
    this.selectionStart = start
    this.selectionEnd = end
  } }
  private readonly binding: TextInputBinding
  constructor(replica: NodeReplica) {
    this.binding = new TextInputBinding(replica, 'Caption', { input: () => this.el, isFocused: () => true, textChanged: () => {}, patch: (read) => replica.patch(read) })
    this.binding.start(replica.textOf('Caption')?.toString() ?? 'c0')
  }
  get value() {
    return this.el.value
  }
  type(ch: string, at: number) {
    const i = Math.min(at, this.el.value.length)
    this.el.value = this.el.value.slice(0, i) + ch + this.el.value.slice(i)
    this.el.setSelectionRange(i + 1, i + 1)
    void this.binding.applyInput().catch(() => {})
  }
}

/** An editor bound like the CodeMirror controller: keystrokes go into the bound Y.Text in the editor's origin; a swap binds it again. */
class EditorField {
  value = ''
  private readonly origin = { editor: 'codemirror' }
  private bound: { text: Y.Text; binding: TextEditorBinding } | null = null
  constructor(private readonly replica: NodeReplica) {
    replica.changed$.subscribe(() => this.follow())
    this.follow()
  }
  private follow() {
    const text = this.replica.textOf('Source')
    if (!text || this.bound?.text === text) return
    this.bound?.binding.dispose()
    this.bound?.text.unobserve(this.onText)
    this.value = text.toString()
    this.bound = { text, binding: this.replica.bindTextEditor('Source', text, [this.origin]) }
    text.observe(this.onText)
  }
  /** What others write into the Y.Text shows in the editor (yCollab's sync plugin). */
  private readonly onText = (event: Y.YTextEvent) => {
    this.value = (event.target as Y.Text).toString()
  }
  type(ch: string, at: number) {
    const b = this.bound!
    const i = Math.min(at, b.text.length)
    b.text.doc!.transact(() => b.text.insert(i, ch), this.origin)
    this.value = b.text.toString()
  }
}

/** Off while the test waits for the end: the store hooks then type no more. */
let typingOn = true

let n = 0
async function setup(opts: { typeKnown: boolean } = { typeKnown: true }) {
  typingOn = true
  const store = new NodeStore(`web-swap-typing-${++n}`)
  await store.open()
  if (opts.typeKnown) await store.db.nodes.put({ path: PATH, parent: 'space', nodeType: 'Document', name: 'doc', updatedAt: '2025-01-01T00:00:00.000Z', version: 1, pending: 0, refused: 0 })
  const server = new FakeServer()
  const replica = new NodeReplica(PATH, { store, conn: server as unknown as MuxConnection, broadcast: () => {}, onIdle: () => {} })
  replica.startSync()
  await waitFor(() => server.handler, { description: 'the join' })
  while (server.deliverOne());
  await waitFor(() => replica.textOf('Caption')?.toString() === 'c0' && replica.textOf('Source'), { description: 'the server state' })
  // The node's type is read before the first keystroke, as a field's warmPolicy does: until then
  // a patch waits on the store before it applies, and the input can be reset meanwhile.
  await replica.patch({})
  return { store, server, replica }
}

/** Delivers the server's answers until every edit is settled and no rebuild runs. */
async function drain(store: NodeStore, server: FakeServer, replica: NodeReplica) {
  typingOn = false
  await waitFor(
    async () => {
      while (server.deliverOne());
      await new Promise((r) => setTimeout(r, 1))
      return server.answers.length === 0 && !replica.state$.value.rebuilding && (await store.pendingEntries(PATH)).length === 0
    },
    { description: 'every edit settled' },
  )
}

/** The server refuses the first update outright (a client id conflict, replayable), then takes what integrates. */
function refuseFirst(server: FakeServer) {
  let refuse = true
  server.refuseNext = () => {
    const r = refuse
    refuse = false
    return r
  }
}

/** The first temporary seq (NodeReplica's TEMP_SEQ_BASE): an edit sent before its outbox write. */
const TEMP_SEQ = 2 ** 40

/** Unique characters, so a lost or doubled one shows. */
const glyph = (i: number) => String.fromCharCode(0x4e00 + i)

describe('[WEB48] a doc swap never loses what is being typed', () => {
  it('[WEB48] a keystroke typed while the rebuild reads the outbox for the last time is in the field, the doc and on the server', async () => {
    const { store, server, replica } = await setup()
    const input = new InputField(replica)
    const editor = new EditorField(replica)
    const pendingEntries = store.pendingEntries.bind(store)
    let typed = 0
    const task = () => new Promise((r) => setImmediate(r))
    // The rebuild's last outbox read comes after it stored the rebuilt state.
    const replaceState = store.replaceState.bind(store)
    let stored = false
    store.replaceState = async (...args: Parameters<NodeStore['replaceState']>) => {
      await replaceState(...args)
      stored = true
    }
    store.pendingEntries = async (path: string) => {
      const rows = await pendingEntries(path)
      // The person types while the rebuild's last outbox read is under way: in tasks of their
      // own, after the read took its rows and before the rebuild has them (before the swap).
      if (stored && typed < 6) {
        await task()
        input.type(glyph(typed++), Infinity)
        await task()
        editor.type(glyph(typed++), Infinity)
        await task()
      }
      return rows
    }
    // The first keystroke's update is refused whole (replayable); the next builds on it
    // (invalid_update). The replica rebuilds, and replays both.
    refuseFirst(server)
    editor.type('x', 2)
    await new Promise((r) => setImmediate(r))
    input.type('a', 2)
    await drain(store, server, replica)
    expect(typed).toBeGreaterThan(0)
    expect(input.value).toBe(replica.textOf('Caption')!.toString())
    expect(editor.value).toBe(replica.textOf('Source')!.toString())
    for (let i = 0; i < typed; i += 2) {
      expect(input.value).toContain(glyph(i))
      expect(editor.value).toContain(glyph(i + 1))
    }
    expect(server.text('Caption')).toBe(input.value)
    expect(server.text('Source')).toBe(editor.value)
    store.close()
  })

  it('[WEB51] another person typing during every outbox read of a rebuild does not hold it: it swaps after one read, and their characters are in the field', async () => {
    const { store, server, replica } = await setup()
    const input = new InputField(replica)
    const pendingEntries = store.pendingEntries.bind(store)
    const replaceState = store.replaceState.bind(store)
    let stored = false
    store.replaceState = async (...args: Parameters<NodeStore['replaceState']>) => {
      await replaceState(...args)
      stored = true
    }
    let reads = 0
    const theirs: string[] = []
    store.pendingEntries = async (path: string) => {
      const rows = await pendingEntries(path)
      // Each of the rebuild's last reads: someone else's keystroke reaches this tab while it runs.
      if (stored && replica.state$.value.rebuilding && reads < 10) {
        reads++
        const ch = glyph(100 + reads)
        theirs.push(ch)
        server.othersType('Caption', ch, 0)
        while (server.deliverOne());
        await new Promise((r) => setImmediate(r))
      }
      return rows
    }
    refuseFirst(server)
    input.type('a', 2)
    await drain(store, server, replica)
    // One read (before, every remote append during a read started it again: ten reads, and more
    // for as long as the other person typed).
    expect(reads).toBe(1)
    for (const ch of theirs) expect(input.value).toContain(ch)
    expect(input.value).toContain('a')
    expect(server.text('Caption')).toBe(input.value)
    store.close()
  })

  for (const seed of seeds) {
    it(`[WEB48] seeded interleavings of keystrokes, refusals, rebuilds and store reads: every character typed ends in its field and on the server (seed ${seed})`, async () => {
      await typeThroughInterleavings(seed, { typeKnown: true, othersType: false })
    })
  }
})

// 43: a reload as the first step, read before the server's state was stored ([WEB48]).
const seeds = (process.env.WEFT_FUZZ_SEEDS ?? '1,2,3,4,5,6,7,8,43').split(',').map(Number)

/** Another person's characters: unique, and never one of ours (glyph). */
const theirGlyph = (i: number) => String.fromCharCode(0xac00 + i)

/**
 * Seeded interleavings of keystrokes into both fields, server answers, refusals and rebuilds,
 * reloads, and keystrokes landing while the store works. `typeKnown: false`: the local index does
 * not know the node's type, so each keystroke of the input waits for a type read before it
 * applies. `othersType`: another person types into both fields on the server, now and then while
 * a type read runs. At the end every character typed, ours and theirs, is once in its field, the
 * replica's doc and on the server.
 */
async function typeThroughInterleavings(seed: number, opts: { typeKnown: boolean; othersType: boolean; refuseWhileOthersType?: boolean }) {
  const rand = mulberry32(seed)
  const { store, server, replica } = await setup({ typeKnown: opts.typeKnown })
  const input = new InputField(replica)
  const editor = new EditorField(replica)
  let next = 0
  const typedInto = { Caption: [] as string[], Source: [] as string[] }
  const typeSomewhere = () => {
    const ch = glyph(next++)
    if (rand() < 0.5) {
      input.type(ch, Math.floor(rand() * (input.value.length + 1)))
      typedInto.Caption.push(ch)
    } else {
      editor.type(ch, Math.floor(rand() * (editor.value.length + 1)))
      typedInto.Source.push(ch)
    }
  }
  let theirNext = 0
  const theirs = { Caption: [] as string[], Source: [] as string[] }
  const othersTypeSomewhere = () => {
    const ch = theirGlyph(theirNext++)
    const key = rand() < 0.6 ? 'Caption' : 'Source'
    server.othersType(key, ch, Math.floor(rand() * (server.text(key).length + 1)))
    theirs[key].push(ch)
  }
  // Only edits never replayed are refused whole: a replay refused again is refused for good
  // ([WEB42]), and this test is about what a swap does to typing, not about that.
  const rebuiltIds = new Set<number>()
  replica.state$.subscribe((st) => {
    if (!st.rebuilding) rebuiltIds.add(replica.doc.clientID)
  })
  const clientsOf = (u: Uint8Array) => Y.decodeUpdate(u).structs.map((st) => st.id.client)
  // Not while another person types in the [WEB49] runs (about a keystroke waiting on a type
  // read); the [WEB53] runs refuse while they type.
  server.refuseNext = (u) => !opts.othersType && rand() < 0.1 && clientsOf(u).every((c) => !rebuiltIds.has(c))
  // [WEB53] While the other person types too: a refused edit is replayed as what it changed, and
  // what they typed meanwhile stays. Refused whole: a keystroke as it is first sent (ahead of its
  // outbox write, with a temporary seq), never a replay or an entry sent again. (An edit typed
  // just after a rebuild's swap goes out ahead of the replays and is refused as building on them:
  // refusing one of those replays whole would refuse it a second time, for good.)
  if (opts.refuseWhileOthersType) server.refuseNext = (_u, seq) => seq >= TEMP_SEQ && rand() < 0.2
  // Keystrokes land while the store works (the rebuild's reads and writes, a reload's read).
  for (const name of ['pendingEntries', 'replaceState', 'loadDoc', 'storeReplayed'] as const) {
    const original = (store[name] as (...a: unknown[]) => Promise<unknown>).bind(store)
    ;(store as unknown as Record<string, unknown>)[name] = (...args: unknown[]) => {
      const p = original(...args)
      if (typingOn && rand() < 0.5) setTimeout(() => typingOn && typeSomewhere(), 0)
      // [WEB53] And the other person's keystrokes, while a rebuild reads and stores.
      if (opts.refuseWhileOthersType && typingOn && rand() < 0.5) {
        setTimeout(() => {
          if (!typingOn) return
          othersTypeSomewhere()
          while (server.deliverOne());
        }, 0)
      }
      return p
    }
  }
  // [WEB49] The other person's keystrokes arrive while type reads run (a keystroke waits on one).
  if (opts.othersType) {
    const getIndexRow = store.getIndexRow.bind(store)
    store.getIndexRow = (path: string) => {
      const p = getIndexRow(path)
      if (typingOn && rand() < 0.5) {
        setTimeout(() => {
          if (!typingOn) return
          othersTypeSomewhere()
          while (server.deliverOne());
        }, 0)
      }
      return p
    }
  }
  try {
    // Each step is a task, as a browser runs them: a keystroke, a frame from the server, a
    // message from another tab; the microtasks it queued run before the next one.
    // [WEB53] Longer, with pauses past the wait before a rebuild starts (20 ms), and now and then
    // one until everything has settled (a rebuild ends when the person pauses), so that several
    // refusals and rebuilds come while both people type.
    const steps = opts.refuseWhileOthersType ? 300 : 120
    for (let step = 0; step < steps; step++) {
      if (opts.refuseWhileOthersType && rand() < 0.03) {
        await drain(store, server, replica)
        typingOn = true
      }
      const x = rand()
      if (x < 0.45) typeSomewhere()
      else if (x < 0.75) server.deliverOne()
      else if (x < 0.97) {
        if (opts.othersType && rand() < 0.5) othersTypeSomewhere()
        else await new Promise((r) => setTimeout(r, opts.refuseWhileOthersType && rand() < 0.2 ? 25 : rand() < 0.5 ? 0 : 2))
      } else if (opts.refuseWhileOthersType && rand() < 0.5) server.reconnect()
      else replica.applyFromTab({ kind: 'reload', path: PATH })
      await new Promise((r) => setImmediate(r))
    }
    await drain(store, server, replica)
    expect((await store.outboxFor(PATH)).filter((r) => r.status === 'refused')).toEqual([])
    for (const [key, field] of [['Caption', input], ['Source', editor]] as const) {
      expect(field.value, `what the ${key} field shows`).toBe(replica.textOf(key)!.toString())
      for (const ch of typedInto[key]) expect(field.value.split(ch).length - 1, `${key} holds ${ch} once`).toBe(1)
      for (const ch of theirs[key]) expect(field.value.split(ch).length - 1, `${key} holds their ${ch} once`).toBe(1)
      expect(server.text(key), `the server's ${key}`).toBe(field.value)
    }
    expect(replica.content, 'the replica and the server agree').toEqual(server.doc.getMap('content').toJSON())
  } catch (e) {
    throw new Error(`seed ${seed}: ${(e as Error).message}`, { cause: e })
  } finally {
    store.close()
  }
}

describe('[WEB49] a remote change while a keystroke waits merges into what was typed', () => {
  it('[WEB49] a node whose type is not in the local index: another person types while the keystroke waits for the type read; both keep their characters', async () => {
    const { store, server, replica } = await setup({ typeKnown: false })
    const input = new InputField(replica)
    // The other person's keystroke arrives while the type read of ours runs: after the read took
    // its row, before the patch has it (and reads the input).
    const getIndexRow = store.getIndexRow.bind(store)
    let during = false
    store.getIndexRow = async (path: string) => {
      const row = await getIndexRow(path)
      if (during) {
        during = false
        expect(row?.typeUnknown ?? 1, 'the type is unknown here').toBe(1)
        server.othersType('Caption', 'Z', 0)
        while (server.deliverOne());
        expect(replica.textOf('Caption')!.toString(), 'their change reached the doc during the read').toBe('Zc0')
      }
      return row
    }
    during = true
    input.type('a', 2)
    await drain(store, server, replica)
    expect(during, 'the keystroke waited for the type read').toBe(false)
    expect(input.value).toBe('Zc0a')
    expect(replica.textOf('Caption')!.toString()).toBe('Zc0a')
    expect(server.text('Caption')).toBe('Zc0a')
    store.close()
  })

  for (const seed of seeds) {
    it(`[WEB49] seeded interleavings on a node of unknown type while another person types: every character typed, ours and theirs, ends in its field and on the server (seed ${seed})`, async () => {
      await typeThroughInterleavings(seed, { typeKnown: false, othersType: true })
    })
  }
})

describe('[WEB53] a refused edit of a text field is replayed as what it changed, not as the whole field', () => {
  for (const via of ['input', 'editor'] as const) {
    it(`[WEB53] another person types into the field after our edit, which is refused and replayed (${via}): their characters are in it once, and ours too`, async () => {
      const { store, server, replica } = await setup()
      const key = via === 'input' ? 'Caption' : 'Source'
      const field = via === 'input' ? new InputField(replica) : new EditorField(replica)
      refuseFirst(server)
      // Ours, at the end; refused whole (replayable).
      field.type('a', Infinity)
      await waitFor(async () => (await store.pendingEntries(PATH)).length === 1, { description: 'our edit stored' })
      // Theirs, at the start, typed after ours: the server has it, ours it has not.
      server.othersType(key, 'Z', 0)
      server.othersType(key, 'Y', 1)
      await drain(store, server, replica)
      expect(server.refusals).toBe(1)
      const start = key === 'Caption' ? 'c0' : 's0'
      expect(field.value).toBe(`ZY${start}a`)
      expect(replica.textOf(key)!.toString()).toBe(`ZY${start}a`)
      expect(server.text(key)).toBe(`ZY${start}a`)
      store.close()
    })
  }

  it('[WEB53] several edits of one field, someone else typing between them, the first refused: each is replayed on what it saw; every character is there once', async () => {
    const { store, server, replica } = await setup()
    const editor = new EditorField(replica)
    refuseFirst(server)
    editor.type('a', Infinity)
    // Their keystroke reaches this tab between our two edits: the second saw it, the first did not.
    server.othersType('Source', 'Z', 0)
    while (server.deliverOne());
    expect(editor.value).toBe('Zs0a')
    editor.type('b', Infinity)
    // And one more of theirs after both.
    server.othersType('Source', 'Y', 1)
    await drain(store, server, replica)
    expect(editor.value).toBe('ZYs0ab')
    expect(server.text('Source')).toBe('ZYs0ab')
    store.close()
  })

  it('[WEB53] an edit the server took, its Ack not yet here, when a later one is refused: the rebuild does not replay it (its characters once), and theirs typed since stay', async () => {
    const { store, server, replica } = await setup()
    const editor = new EditorField(replica)
    editor.type('a', Infinity)
    await waitFor(async () => (await store.pendingEntries(PATH)).length === 1 && server.answers.length === 1, { description: 'our edit stored and taken' })
    // The server took it; its Ack is lost (the socket it went on is gone, say): still pending here.
    expect(server.answers.splice(0)[0]!.type).toBe(MuxType.Ack)
    expect(server.text('Source')).toBe('s0a')
    server.othersType('Source', 'Z', 0)
    while (server.deliverOne());
    refuseFirst(server)
    editor.type('b', Infinity)
    // And theirs after both, which the rebuild's state holds.
    server.othersType('Source', 'Y', 1)
    await drain(store, server, replica)
    expect(editor.value).toBe('ZYs0ab')
    expect(server.text('Source')).toBe('ZYs0ab')
    store.close()
  })

  it('[WEB53] an edit stored by the previous version (its intent the whole field, no base) is still replayed whole', async () => {
    const { store, server, replica } = await setup()
    const input = new InputField(replica)
    refuseFirst(server)
    input.type('a', Infinity)
    await waitFor(async () => (await store.pendingEntries(PATH)).length === 1, { description: 'our edit stored' })
    const [row] = await store.pendingEntries(PATH)
    // As the previous version stored it: the patch only.
    await store.db.outbox.update(row!.id!, { base: undefined })
    server.othersType('Caption', 'Z', 0)
    await drain(store, server, replica)
    expect(input.value).toBe('c0a')
    expect(server.text('Caption')).toBe('c0a')
    store.close()
  })

  for (const seed of seeds) {
    it(`[WEB53] seeded interleavings of our typing, another person's, refusals and rebuilds: every character of theirs is in its field once, every one of ours too, and both replicas agree (seed ${seed})`, async () => {
      await typeThroughInterleavings(seed, { typeKnown: true, othersType: true, refuseWhileOthersType: true })
    })
  }
})
