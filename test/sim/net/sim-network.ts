import { existsSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import path from 'node:path'
import pino from 'pino'
import * as Y from 'yjs'
import * as encoding from 'lib0/encoding'
import * as decoding from 'lib0/decoding'
import * as syncProtocol from 'y-protocols/sync'
import * as authProtocol from 'y-protocols/auth'
import {
  CONTENT_MAP,
  MuxType,
  SYSTEM,
  YMessage,
  decodeMuxFrame,
  docToJson,
  encodeMuxFrame,
  userPrincipal,
  type JsonObject,
  type NodePath,
  type Principal,
  type UserId,
} from '../../../shared/index.js'
import { AccessService } from '../../../sync-server/access/index.js'
import { NodeService, type SyncRoom } from '../../../sync-server/nodes/index.js'
import { openSqliteStorage, type SqliteStorage } from '../../../sync-server/storage/index.js'
import { MuxSession, SyncSession, closeOnError, type SessionSocket } from '../../../sync-server/sync/index.js'

/**
 * A deterministic network for the sync server, after yjs's tests/testHelper.js and tldraw's
 * TestSocketPair: the real sessions (`SyncSession` for `/sync/{path}`, `MuxSession` for `/mux`)
 * over the real node service and a real SQLite file, behind an in-memory socket with one queue
 * per direction. Nothing moves unless a step moves it: a seeded random source picks which queue
 * delivers its next message, when a client edits, when storage lands its commits (a `tick`), and
 * when a connection drops or comes back. A seed replays one interleaving exactly.
 */

/** mulberry32: small, fast, good enough to pick steps. */
export class Rng {
  private s: number
  constructor(seed: number) {
    this.s = seed >>> 0
  }
  next(): number {
    let t = (this.s = (this.s + 0x6d2b79f5) >>> 0)
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
  int(n: number): number {
    return Math.floor(this.next() * n)
  }
  pick<T>(items: readonly T[]): T {
    return items[this.int(items.length)]!
  }
}

export type TransportKind = 'sync' | 'mux'

/** Close codes the simulation itself uses: anything else a server closed with is a failure. */
export const SIM_CLOSE = 4999

/** Marks updates a client applied from the server, so they are not sent back as its own. */
const REMOTE = Symbol('sim-remote')

/** One connection: a queue per direction and the server's end as a SessionSocket. */
export class SimLink implements SessionSocket {
  readonly OPEN = 1
  readyState = 1
  bufferedAmount = 0
  readonly toServer: Uint8Array[] = []
  readonly toClient: Uint8Array[] = []
  /** How the server closed this link (null: open, or closed by the simulation). */
  serverClose: { code: number; reason: string } | null = null
  /** Frames the server received before its session was ready (authentication, room open). */
  private early: Uint8Array[] | null = []
  private receiver: ((bytes: Uint8Array) => void) | null = null
  onClosed: (() => void) | null = null
  paused = false

  constructor(readonly id: number) {}

  get open(): boolean {
    return this.readyState === this.OPEN
  }

  send(data: Uint8Array): void {
    if (!this.open) return
    // [SIM] /mux change hints ride a wall-clock timer: dropped so that a seed replays exactly.
    if (data[0] === MuxType.Changed) return
    this.toClient.push(data)
  }

  close(code = 1000, reason = ''): void {
    if (!this.open) return
    this.readyState = 3
    if (code !== SIM_CLOSE) this.serverClose = { code, reason }
    // What the client had in flight is lost. What the server sent before closing still arrives
    // (a WebSocket close frame follows the data) unless the network itself dropped the link.
    this.toServer.length = 0
    if (code === SIM_CLOSE) this.toClient.length = 0
    // Like ws: the session hears of the close later, not inside the call that closed.
    queueMicrotask(() => this.onClosed?.())
  }

  pause(): void {
    this.paused = true
  }

  resume(): void {
    this.paused = false
  }

  /** The server's session starts reading; frames that waited are handed over in order. */
  deliverTo(receiver: (bytes: Uint8Array) => void): void {
    this.receiver = receiver
    for (const bytes of this.early!.splice(0)) receiver(bytes)
    this.early = null
  }

  /** Delivers the next client→server frame; false when there is none (or reading is paused). */
  deliverToServer(): boolean {
    if (!this.open || this.paused || this.toServer.length === 0) return false
    const bytes = this.toServer.shift()!
    if (this.receiver) this.receiver(bytes)
    else this.early!.push(bytes)
    return true
  }
}

/**
 * A client: a Y.Doc kept across connections (like a browser tab's), speaking the transport's
 * protocol over whatever link it holds now. Edits made while disconnected are sent by the sync
 * exchange when it reconnects.
 */
export class SimClient {
  readonly doc = new Y.Doc()
  link: SimLink | null = null
  /** Refusals the server sent (permission-denied on /sync, Refused / Denied on /mux). */
  readonly refusals: string[] = []
  /** [mux] Updates sent and not yet acknowledged, by seq: the client's own clock after each. */
  readonly unacked = new Map<number, number>()
  /** [mux] The highest own clock the server acknowledged as durable. */
  ackedClock = 0
  private seq = 0
  edits = 0
  /** Every key this client wrote, with its last value: all must be in the converged doc. */
  readonly wrote = new Map<string, number>()
  /** Shared keys this client wrote (a refused Viewer keeps its own value of those locally). */
  readonly wroteShared = new Set<string>()

  constructor(
    readonly name: string,
    readonly kind: TransportKind,
    readonly path: NodePath,
  ) {
    this.doc.on('update', (update: Uint8Array, origin: unknown) => {
      if (origin === REMOTE || !this.link?.open) return
      this.sendUpdate(update)
    })
  }

  private sendRaw(message: Uint8Array): void {
    if (!this.link?.open) return
    this.link.toServer.push(this.kind === 'mux' ? encodeMuxFrame({ type: MuxType.Sync, path: this.path, message }) : message)
  }

  private sendUpdate(update: Uint8Array): void {
    if (this.kind === 'sync') {
      const e = encoding.createEncoder()
      encoding.writeVarUint(e, YMessage.Sync)
      syncProtocol.writeUpdate(e, update)
      this.sendRaw(encoding.toUint8Array(e))
      return
    }
    const seq = ++this.seq
    this.unacked.set(seq, Y.getState(this.doc.store, this.doc.clientID))
    this.link!.toServer.push(encodeMuxFrame({ type: MuxType.Update, path: this.path, seq, update }))
  }

  /** A new connection: join (mux), then sync step 1 — what a provider does on every (re)connect. */
  connect(link: SimLink): void {
    this.link = link
    // Acks of the old connection never come: its updates are resent by the sync exchange.
    this.unacked.clear()
    if (this.kind === 'mux') link.toServer.push(encodeMuxFrame({ type: MuxType.Join, path: this.path }))
    const e = encoding.createEncoder()
    encoding.writeVarUint(e, YMessage.Sync)
    syncProtocol.writeSyncStep1(e, this.doc)
    this.sendRaw(encoding.toUint8Array(e))
  }

  /** A local edit: a key of its own (every edit must survive) or a shared key (last writer wins). */
  edit(rng: Rng): void {
    const map = this.doc.getMap(CONTENT_MAP)
    const n = ++this.edits
    const key = rng.next() < 0.7 ? `${this.name}_${rng.int(8)}` : `shared_${rng.int(3)}`
    this.doc.transact(() => map.set(key, n))
    if (key.startsWith(this.name)) this.wrote.set(key, n)
    else this.wroteShared.add(key)
  }

  /** Handles the next server→client frame; false when there is none. */
  receiveNext(): boolean {
    const link = this.link
    if (!link || link.toClient.length === 0) return false
    const bytes = link.toClient.shift()!
    if (this.kind === 'sync') {
      this.handleMessage(bytes)
      return true
    }
    const frame = decodeMuxFrame(bytes)
    switch (frame.type) {
      case MuxType.Sync:
        this.handleMessage(frame.message)
        break
      case MuxType.Ack: {
        const clock = this.unacked.get(frame.seq)
        this.unacked.delete(frame.seq)
        if (clock !== undefined && clock > this.ackedClock) this.ackedClock = clock
        break
      }
      case MuxType.Refused:
        this.unacked.delete(frame.seq)
        this.refusals.push(`${frame.type}:${frame.code}: ${frame.message}`)
        break
      case MuxType.Denied:
      case MuxType.Error:
        this.refusals.push(`${frame.type}:${frame.code}: ${frame.message}`)
        break
      case MuxType.Joined:
      case MuxType.Changed:
        break
      default:
        throw new Error(`the server sent a client-only frame ${frame.type}`)
    }
    return true
  }

  private handleMessage(message: Uint8Array): void {
    const d = decoding.createDecoder(message)
    const type = decoding.readVarUint(d)
    if (type === YMessage.Sync) {
      const reply = encoding.createEncoder()
      encoding.writeVarUint(reply, YMessage.Sync)
      syncProtocol.readSyncMessage(d, reply, this.doc, REMOTE)
      if (encoding.length(reply) > 1) this.sendRaw(encoding.toUint8Array(reply))
    } else if (type === YMessage.Auth) {
      authProtocol.readAuthMessage(d, this.doc, (_doc, reason) => this.refusals.push(`auth:${reason}`))
    }
  }

  json(): JsonObject {
    return docToJson(this.doc)
  }
}

export interface SimServerOptions {
  kind: TransportKind
  /** Principals of the clients: one Admin (the space's creator) and Editors. */
  clients: number
  /** Further principals holding Viewer on the space (after the clients in `principals`). */
  viewers?: number
}

/** The server side: node service over a real SQLite file (inline writer), sessions per link. */
export class SimServer {
  readonly log = pino({ level: 'silent' })
  private readonly links = new Set<SimLink>()
  private nextLink = 1
  readonly memberships = new Set<{ conn: unknown; room: SyncRoom }>()

  private constructor(
    readonly kind: TransportKind,
    readonly dir: string,
    public storage: SqliteStorage,
    public nodes: NodeService,
    readonly path: NodePath,
    readonly principals: Principal[],
  ) {}

  static async start(opts: SimServerOptions): Promise<SimServer> {
    // A real SQLite file, on a RAM disk where there is one: an fsync there costs nothing, so a
    // run covers thousands of steps per second (durability across restart is still checked).
    const dir = mkdtempSync(path.join(existsSync('/dev/shm') ? '/dev/shm' : tmpdir(), 'weft-sim-net-'))
    const { storage, nodes } = await SimServer.open(dir)
    const viewers = opts.viewers ?? 0
    const users = Array.from({ length: opts.clients + viewers }, (_, i) => userPrincipal(`user-sim${i}` as UserId))
    const space = 'SimSpace' as NodePath
    await nodes.create(users[0]!, space, { nodeType: 'Space', content: {} }, 'http')
    for (const [i, u] of users.entries()) {
      if (i === 0) continue
      const userId = (u as { userId: string }).userId
      const role = i < opts.clients ? 'Editor' : 'Viewer'
      await nodes.create(SYSTEM, `${space}/_Access/${userId}_Access` as NodePath, { nodeType: 'AccessAssignment', content: { Subject: userId, Role: role } }, 'system')
    }
    const doc = `${space}/doc` as NodePath
    await nodes.create(users[0]!, doc, { nodeType: 'Document', content: {} }, 'http')
    return new SimServer(opts.kind, dir, storage, nodes, doc, users)
  }

  private static async open(dir: string): Promise<{ storage: SqliteStorage; nodes: NodeService }> {
    const storage = openSqliteStorage({ file: path.join(dir, 'weft.db'), writer: 'inline' })
    const nodes = new NodeService(storage, new AccessService(), { idleUnloadMs: 1e9, log: pino({ level: 'silent' }) })
    await nodes.boot()
    return { storage, nodes }
  }

  /** Accepts a connection for a principal: the transport's session reads the link once ready. */
  connect(principal: Principal, path: NodePath = this.path): SimLink {
    const link = new SimLink(this.nextLink++)
    this.links.add(link)
    const opts = { nodes: this.nodes, maxPayloadBytes: 1 << 20, log: this.log }
    if (this.kind === 'mux') {
      const session = new MuxSession(link, principal, { ...opts, maxRoomsPerSocket: 16 }, this.memberships as never, 1 << 24, 256, { id: 'sim', name: 'sim' })
      link.onClosed = () => session.closeAll()
      link.deliverTo((bytes) => {
        try {
          session.receive(bytes)
        } catch (e) {
          closeOnError(link, e, this.log)
        }
      })
      return link
    }
    void SyncSession.open(link, principal, path, { ...opts, sendLimit: 1 << 24, inFlightLimit: 256 }).then(
      (session) => {
        if (!session) return
        link.onClosed = () => session.close()
        link.deliverTo((bytes) => session.receive(bytes))
      },
      (e: unknown) => closeOnError(link, e, this.log),
    )
    return link
  }

  /** The room's authoritative doc (loaded for the whole run: idle unloading is off). */
  async room(): Promise<SyncRoom> {
    return this.nodes.acquireDoc(this.path)
  }

  /** Closes the node service and opens a new one on the same file: what survives is durable. */
  async restart(): Promise<void> {
    await this.nodes.close()
    await this.storage.close()
    const { storage, nodes } = await SimServer.open(this.dir)
    this.storage = storage
    this.nodes = nodes
  }

  async stop(): Promise<void> {
    await this.nodes.close()
    await this.storage.close()
    rmSync(this.dir, { recursive: true, force: true })
  }
}

/** Lets storage land what is queued, and the sessions' async work (joins, acks) run. */
export function tick(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve))
}

/**
 * Delivers everything, both ways, and lets storage land it, until nothing moves and no /mux
 * update waits for its answer. Returns the messages delivered.
 */
export async function quiesce(clients: readonly SimClient[], maxRounds = 10_000): Promise<number> {
  let delivered = 0
  for (let round = 0; round < maxRounds; round++) {
    let moved = false
    for (const c of clients) {
      while (c.link?.deliverToServer() || c.receiveNext()) {
        moved = true
        delivered++
      }
    }
    await tick()
    const pending = clients.some((c) => c.link?.open && (c.link.toServer.length > 0 || c.link.toClient.length > 0 || c.unacked.size > 0))
    if (!moved && !pending) return delivered
  }
  throw new Error('the network does not quiesce')
}
