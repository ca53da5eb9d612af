import type { IncomingMessage } from 'node:http'
import type { Duplex } from 'node:stream'
import { WebSocketServer, type RawData, type WebSocket } from 'ws'
import type { Logger } from 'pino'
import type { Subscription } from 'rxjs'
import {
  CloseCode,
  MuxType,
  decodePathParam,
  rawPathname,
  WeftError,
  decodeMuxFrame,
  encodeMuxFrame,
  isWeftError,
  parseNodePath,
  permissionMask,
  tryParseNodePath,
  userPrincipal,
  type MuxFrame,
  type NodePath,
  type Principal,
  type UserId,
} from '../../shared/index.js'
import type { RoomConnection, SyncNodeApi, SyncRoom } from '../nodes/index.js'
import type { AccessService } from '../access/index.js'
import { greeting, socketConnection, type SocketConnection } from './framing.js'
import { handleRoomMessage, permissionDeniedMessage, presenceIdentity, type PresenceIdentity } from './room-protocol.js'
import { CLOSE_SESSION_ENDED, InFlightGate, RefusalBudget, sendBounded, spendRefusal } from './socket-guards.js'

/** What a socket's token stands for; the socket ends with it. */
export interface SocketSession {
  userId: UserId
  tokenHash: string
  expiresAt: number
}

export interface SocketServerOptions {
  nodes: SyncNodeApi
  access: AccessService
  authenticate(token: string | null): Promise<SocketSession | null>
  /** Subscribes to token revocations (logout); returns the unsubscribe function. */
  onRevoked?(listener: (tokenHash: string) => void): () => void
  maxPayloadBytes: number
  maxRoomsPerSocket: number
  /** A socket whose unsent data passes this is closed as too slow (default 16 MiB). */
  maxSendBufferBytes?: number
  /** Updates of one socket waiting for durability before it stops being read (default 256). */
  maxUpdatesInFlight?: number
  log: Logger
}

const PING_INTERVAL_MS = 30_000
/** setTimeout's largest delay: a session ending later is checked again then. */
const MAX_TIMER_MS = 2 ** 31 - 1
/** Change hints are coalesced: one frame per socket per this many ms, whatever the write rate. */
const CHANGED_COALESCE_MS = 50
let nextConnectionId = 1

function toBytes(data: RawData): Uint8Array {
  if (Array.isArray(data)) return new Uint8Array(Buffer.concat(data))
  if (data instanceof ArrayBuffer) return new Uint8Array(data)
  return new Uint8Array(data.buffer, data.byteOffset, data.byteLength)
}

/**
 * Binary frames only (a text frame closes the socket with 1002). Frames that arrive while the
 * socket is still being authenticated wait; `deliverTo(handler)` hands them over in order, then
 * every later one.
 */
function receiveBinary(ws: WebSocket): (handler: (bytes: Uint8Array) => void) => void {
  // Registered once, before anything else can fail: a socket that errors costs itself only.
  const early: Uint8Array[] = []
  let deliver: ((bytes: Uint8Array) => void) | null = null
  ws.on('message', (data, isBinary) => {
    if (!isBinary) return ws.close(CloseCode.ProtocolError, 'binary frames only')
    const bytes = toBytes(data)
    if (deliver) deliver(bytes)
    else early.push(bytes)
  })
  return (handler) => {
    deliver = handler
    for (const bytes of early.splice(0)) handler(bytes)
  }
}

/** Why a principal may not join a room, as a close code, or null when it may. */
async function refusal(nodes: SyncNodeApi, principal: Principal, path: NodePath): Promise<{ closeCode: number; code: string; message: string } | null> {
  if (!nodes.permissions(principal, path).has('Read')) {
    return { closeCode: CloseCode.Forbidden, code: 'forbidden', message: `You cannot read ${path}.` }
  }
  const room = await nodes.acquire(path)
  if (!room.node) return { closeCode: CloseCode.NotFound, code: 'not_found', message: `No node at ${path}; create it over HTTP first.` }
  return null
}

/**
 * `/sync/{path}` (one stock y-websocket room per socket) and `/mux` (many rooms per socket),
 * both through the same room protocol and the same access checks as HTTP.
 */
export class SocketServer {
  private readonly wss: WebSocketServer
  /** Every live room membership, for access re-checks when assignments change. */
  private readonly memberships = new Set<{ conn: RoomConnection; room: SyncRoom }>()
  private recheckScheduled = false
  private readonly pingTimer: NodeJS.Timeout
  private readonly unsubscribeAccess: () => void
  private readonly sessions = new Set<MuxSession>()
  private readonly changesSub: Subscription
  /** Open sockets per token hash: a revoked token closes them all ([AUTH2]). */
  private readonly byToken = new Map<string, Set<WebSocket>>()
  private readonly unsubscribeRevoked: () => void
  private readonly sendLimit: number
  private readonly inFlightLimit: number

  constructor(private readonly opts: SocketServerOptions) {
    // Frames up to four times the payload limit are read, so that an oversized /mux Update is
    // answered with Refused payload_too_large (the client learns why); beyond that ws closes 1009.
    this.wss = new WebSocketServer({ noServer: true, maxPayload: Math.max(4 * opts.maxPayloadBytes, opts.maxPayloadBytes + 1024), perMessageDeflate: false })
    this.sendLimit = opts.maxSendBufferBytes ?? 16 * 1024 * 1024
    this.inFlightLimit = opts.maxUpdatesInFlight ?? 256
    this.unsubscribeAccess = opts.access.onChange(() => this.scheduleRecheck())
    this.unsubscribeRevoked = opts.onRevoked?.((hash) => this.endSessions(hash, 'signed out: this token was revoked')) ?? (() => undefined)
    this.changesSub = opts.nodes.changes$.subscribe((c) => {
      for (const session of this.sessions) session.notifyChanged(c.path, c.version)
    })
    this.pingTimer = setInterval(() => {
      for (const ws of this.wss.clients) {
        const w = ws as WebSocket & { isAlive?: boolean }
        if (w.isAlive === false) {
          w.terminate()
          continue
        }
        w.isAlive = false
        w.ping()
      }
    }, PING_INTERVAL_MS)
    this.pingTimer.unref()
  }

  /** Routes an HTTP upgrade; returns false when the URL is not ours. */
  handleUpgrade(req: IncomingMessage, socket: Duplex, head: Buffer): boolean {
    let url: URL
    try {
      url = new URL(req.url ?? '/', 'http://localhost')
    } catch {
      // A malformed request line must cost this socket only, never the process.
      socket.end('HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n')
      return true
    }
    const isMux = url.pathname === '/mux'
    const isSync = rawPathname(req.url).startsWith('/sync/')
    if (!isMux && !isSync) return false
    this.wss.handleUpgrade(req, socket, head, (ws) => {
      const w = ws as WebSocket & { isAlive?: boolean }
      w.isAlive = true
      ws.on('pong', () => (w.isAlive = true))
      ws.on('error', (err) => this.opts.log.debug({ err }, 'socket error'))
      if (isMux) this.acceptMux(ws, url)
      else this.acceptSync(ws, url, req)
    })
    return true
  }

  /**
   * Ties a socket to its token: closed (4401) when the token is revoked or expires. Returns
   * false when the socket is already closed.
   */
  private bindSession(ws: WebSocket, session: SocketSession): boolean {
    if (ws.readyState !== ws.OPEN) return false
    let set = this.byToken.get(session.tokenHash)
    if (!set) this.byToken.set(session.tokenHash, (set = new Set()))
    set.add(ws)
    let timer: NodeJS.Timeout | null = null
    const arm = () => {
      const left = session.expiresAt - Date.now()
      if (left <= 0) return ws.close(CLOSE_SESSION_ENDED, 'unauthorized: the session expired; sign in again')
      timer = setTimeout(arm, Math.min(left, MAX_TIMER_MS))
      timer.unref()
    }
    arm()
    ws.once('close', () => {
      if (timer) clearTimeout(timer)
      const open = this.byToken.get(session.tokenHash)
      open?.delete(ws)
      if (open?.size === 0) this.byToken.delete(session.tokenHash)
    })
    return ws.readyState === ws.OPEN
  }

  private endSessions(tokenHash: string, reason: string): void {
    for (const ws of this.byToken.get(tokenHash) ?? []) ws.close(CLOSE_SESSION_ENDED, `unauthorized: ${reason}`.slice(0, 120))
  }

  private scheduleRecheck(): void {
    if (this.recheckScheduled) return
    this.recheckScheduled = true
    queueMicrotask(() => {
      this.recheckScheduled = false
      for (const m of this.memberships) {
        if (!this.opts.nodes.permissions(m.conn.principal, m.room.path).has('Read')) {
          m.conn.evict(CloseCode.Forbidden, 'forbidden', `Your access to ${m.room.path} was removed.`)
        }
      }
    })
  }

  // ------------------------------------------------------------------ /sync/{path}

  private acceptSync(ws: WebSocket, url: URL, req: IncomingMessage): void {
    const deliverTo = receiveBinary(ws)
    void (async () => {
      const session = await this.opts.authenticate(url.searchParams.get('token'))
      if (!session) return ws.close(CloseCode.Unauthorized, 'unauthorized: sign in and pass ?token=')
      if (!this.bindSession(ws, session)) return
      const userId = session.userId
      let path: NodePath
      try {
        path = parseNodePath(decodePathParam(rawPathname(req.url).slice('/sync/'.length)))
      } catch (e) {
        return ws.close(4400, `invalid_path: ${(e as Error).message}`.slice(0, 120))
      }
      const principal = userPrincipal(userId)
      const refused = await refusal(this.opts.nodes, principal, path)
      if (refused) {
        ws.send(permissionDeniedMessage(refused.code, refused.message))
        return ws.close(refused.closeCode, `${refused.code}: ${refused.message}`.slice(0, 120))
      }
      if (ws.readyState !== ws.OPEN) return
      const room = await this.opts.nodes.acquireDoc(path)
      const presence = await presenceIdentity(this.opts.nodes, principal)
      // Building the doc may have waited for storage: a socket closed meanwhile must not join.
      if (ws.readyState !== ws.OPEN) return
      const conn = socketConnection({
        id: nextConnectionId++,
        principal,
        awarenessIds: new Set(),
        send: (m) => sendBounded(ws, m, this.sendLimit),
        evict: (closeCode, code, message) => {
          if (ws.readyState === ws.OPEN) ws.send(permissionDeniedMessage(code, message))
          ws.close(closeCode, `${code}: ${message}`.slice(0, 120))
        },
      })
      const membership = { conn, room }
      room.join(conn)
      this.memberships.add(membership)
      ws.on('close', () => {
        room.leave(conn)
        this.memberships.delete(membership)
      })
      for (const m of greeting(room)) conn.send(m)
      const budget = new RefusalBudget()
      const inFlight = new InFlightGate(ws, this.inFlightLimit)
      const onRefused = () => spendRefusal(ws, budget)
      deliverTo((m) => {
        if (ws.readyState !== ws.OPEN) return
        if (m.length > this.opts.maxPayloadBytes) {
          return ws.close(CloseCode.MessageTooBig, `payload_too_large: frames are limited to ${this.opts.maxPayloadBytes} bytes`)
        }
        try {
          const written = handleRoomMessage({ nodes: this.opts.nodes, room, conn, principal, origin: 'sync', onRefused, presence }, m)
          if (written) inFlight.track(written)
        } catch (e) {
          this.closeOnError(ws, e)
        }
      })
    })().catch((e) => this.closeOnError(ws, e))
  }

  private closeOnError(ws: WebSocket, e: unknown): void {
    if (isWeftError(e) && e.code === 'protocol_error') {
      ws.close(CloseCode.ProtocolError, e.message.slice(0, 120))
      return
    }
    this.opts.log.error({ err: e }, 'socket handler failed')
    ws.close(CloseCode.InternalError, 'internal error')
  }

  // ------------------------------------------------------------------ /mux

  private acceptMux(ws: WebSocket, url: URL): void {
    const deliverTo = receiveBinary(ws)
    let session: MuxSession | null = null
    // Registered before the token check: a socket closing during it must not leak rooms.
    ws.on('close', () => {
      if (!session) return
      session.closeAll()
      this.sessions.delete(session)
    })
    void (async () => {
      const auth = await this.opts.authenticate(url.searchParams.get('token'))
      if (!auth) return ws.close(CloseCode.Unauthorized, 'unauthorized: sign in and pass ?token=')
      if (!this.bindSession(ws, auth)) return
      const principal = userPrincipal(auth.userId)
      const presence = await presenceIdentity(this.opts.nodes, principal)
      if (ws.readyState !== ws.OPEN) return
      session = new MuxSession(ws, principal, this.opts, this.memberships, this.sendLimit, this.inFlightLimit, presence)
      this.sessions.add(session)
      const current = session
      deliverTo((bytes) => {
        try {
          current.receive(bytes)
        } catch (e) {
          this.closeOnError(ws, e)
        }
      })
    })().catch((e) => this.closeOnError(ws, e))
  }

  async close(): Promise<void> {
    clearInterval(this.pingTimer)
    this.unsubscribeAccess()
    this.unsubscribeRevoked()
    this.changesSub.unsubscribe()
    for (const session of this.sessions) session.closeAll()
    for (const ws of this.wss.clients) ws.close(CloseCode.GoingAway, 'server shutting down')
    await new Promise<void>((resolve) => this.wss.close(() => resolve()))
  }
}

interface MuxRoom {
  path: NodePath
  conn: SocketConnection
  room: SyncRoom | null
  /** Frames for this room run after its join settles, in order. */
  chain: Promise<void>
  membership?: { conn: RoomConnection; room: SyncRoom }
}

/** One /mux socket: rooms joined and authorised one by one; a refusal ends that room only. */
class MuxSession {
  private readonly rooms = new Map<string, MuxRoom>()
  private changedVersion = 0
  private changedTimer: NodeJS.Timeout | null = null
  private readonly budget = new RefusalBudget()
  private readonly inFlight: InFlightGate

  constructor(
    private readonly ws: WebSocket,
    private readonly principal: Principal,
    private readonly opts: SocketServerOptions,
    private readonly memberships: Set<{ conn: RoomConnection; room: SyncRoom }>,
    private readonly sendLimit: number,
    inFlightLimit: number,
    /** [SYNC5] Stamped into this socket's presence in every room. */
    private readonly presence?: PresenceIdentity,
  ) {
    this.inFlight = new InFlightGate(ws, inFlightLimit)
  }

  private sendFrame(frame: MuxFrame): void {
    sendBounded(this.ws, encodeMuxFrame(frame), this.sendLimit)
  }

  /** One frame off the wire. An Update over the payload limit is refused by name, not by closing. */
  receive(bytes: Uint8Array): void {
    // Frames still buffered when this socket was closed (4429, 1013, 4401) cost nothing more.
    if (this.ws.readyState !== this.ws.OPEN) return
    const frame = decodeMuxFrame(bytes)
    if (bytes.length > this.opts.maxPayloadBytes) {
      if (frame.type !== MuxType.Update) {
        this.ws.close(CloseCode.MessageTooBig, `payload_too_large: frames are limited to ${this.opts.maxPayloadBytes} bytes`)
        return
      }
      this.refuse(frame.path, frame.seq, new WeftError('payload_too_large', `This change is ${bytes.length} bytes; the server accepts at most ${this.opts.maxPayloadBytes} bytes per update. Split it or make the value smaller.`))
      return
    }
    this.handle(frame)
  }

  /** Tells the client an update was refused; a socket that keeps earning refusals is closed. */
  private refuse(path: string, seq: number, err: WeftError): void {
    this.sendFrame({ type: MuxType.Refused, path, seq, code: err.code, message: err.message })
    spendRefusal(this.ws, this.budget)
  }

  /** Whatever a frame's handling throws costs that frame (or, for garbage, this socket) only. */
  private fail(e: unknown): void {
    if (isWeftError(e) && e.code === 'protocol_error') {
      this.ws.close(CloseCode.ProtocolError, e.message.slice(0, 120))
      return
    }
    this.opts.log.error({ err: e }, 'mux frame failed')
    this.ws.close(CloseCode.InternalError, 'internal error')
  }

  handle(frame: MuxFrame): void {
    switch (frame.type) {
      case MuxType.Join:
        return this.join(frame.path)
      case MuxType.Leave:
        return this.leave(frame.path)
      case MuxType.Sync:
        return this.inRoom(frame.path, (r, room) => {
          const written = handleRoomMessage({ nodes: this.opts.nodes, room, conn: r.conn, principal: this.principal, origin: 'mux', onRefused: () => spendRefusal(this.ws, this.budget), presence: this.presence }, frame.message)
          if (written) this.inFlight.track(written)
        })
      case MuxType.Update:
        return this.inRoom(frame.path, (r, room) => this.update(r, room, frame.seq, frame.update))
      case MuxType.Denied:
      case MuxType.Ack:
      case MuxType.Refused:
      case MuxType.Error:
      case MuxType.Joined:
      case MuxType.Changed:
        throw new WeftError('protocol_error', `Frame type ${frame.type} is sent by the server only.`)
      default:
        frame satisfies never
    }
  }

  private join(rawPath: string): void {
    let path: NodePath
    try {
      path = parseNodePath(rawPath)
    } catch (e) {
      return this.sendFrame({ type: MuxType.Denied, path: rawPath, closeCode: 4400, code: 'invalid_path', message: (e as Error).message })
    }
    // Rooms are keyed by the parsed path: `/S` and `S` are one room, joined once.
    if (this.rooms.has(path)) return
    if (this.rooms.size >= this.opts.maxRoomsPerSocket) {
      return this.sendFrame({ type: MuxType.Denied, path: rawPath, closeCode: 4429, code: 'too_many_rooms', message: `One socket holds at most ${this.opts.maxRoomsPerSocket} nodes.` })
    }
    const r: MuxRoom = {
      path,
      room: null,
      chain: Promise.resolve(),
      conn: socketConnection({
        id: nextConnectionId++,
        principal: this.principal,
        awarenessIds: new Set(),
        send: (message) => this.sendFrame({ type: MuxType.Sync, path, message }),
        evict: (closeCode, code, message) => {
          this.sendFrame({ type: MuxType.Denied, path, closeCode, code, message })
          this.leave(path)
        },
      }),
    }
    this.rooms.set(path, r)
    r.chain = (async () => {
      const refused = await refusal(this.opts.nodes, this.principal, path)
      if (this.rooms.get(path) !== r) return
      if (refused) {
        this.rooms.delete(path)
        this.sendFrame({ type: MuxType.Denied, path, ...refused })
        return
      }
      const room = await this.opts.nodes.acquireDoc(path)
      if (this.rooms.get(path) !== r) return
      r.room = room
      room.join(r.conn)
      r.membership = { conn: r.conn, room }
      this.memberships.add(r.membership)
      this.sendFrame({ type: MuxType.Joined, path, permissions: permissionMask(this.opts.nodes.permissions(this.principal, path)) })
      for (const m of greeting(room)) r.conn.send(m)
    })().catch((e) => {
      this.rooms.delete(path)
      this.opts.log.error({ err: e, path }, 'mux join failed')
      this.sendFrame({ type: MuxType.Denied, path, closeCode: 1011, code: 'internal', message: 'Joining failed; retry.' })
    })
  }

  private inRoom(rawPath: string, fn: (r: MuxRoom, room: SyncRoom) => void): void {
    const key = tryParseNodePath(rawPath) ?? rawPath
    const r = this.rooms.get(key)
    if (!r) {
      // Not joined (or refused): say so for this room only.
      this.sendFrame({ type: MuxType.Denied, path: rawPath, closeCode: 4409, code: 'not_joined', message: 'Join the node before syncing it.' })
      return
    }
    const run = () => {
      if (this.rooms.get(key) !== r || !r.room) return
      try {
        fn(r, r.room)
      } catch (e) {
        this.fail(e)
      }
    }
    if (r.room) run()
    // Queued behind the join: a frame that fails there must not become an unhandled rejection.
    else r.chain = r.chain.then(run).catch((e: unknown) => this.fail(e))
  }

  private update(r: MuxRoom, room: SyncRoom, seq: number, update: Uint8Array): void {
    const path = r.path
    let written: Promise<unknown>
    try {
      written = this.opts.nodes.applyClientUpdateLoaded(room, this.principal, update, r.conn, 'mux')
    } catch (e) {
      if (!isWeftError(e)) throw e
      // Undecodable bytes in an Update are that update's problem, not the socket's.
      this.refuse(path, seq, e.code === 'protocol_error' ? new WeftError('invalid_update', e.message) : e)
      return
    }
    this.inFlight.track(written)
    written.then(
      (node) => this.sendFrame({ type: MuxType.Ack, path, seq, version: (node as { version?: number } | null)?.version ?? 0 }),
      (e: unknown) => {
        const err = isWeftError(e) ? e : new WeftError('internal', 'The change could not be saved.')
        this.sendFrame({ type: MuxType.Refused, path, seq, code: err.code, message: err.message })
      },
    )
  }

  private leave(rawPath: string): void {
    const path = tryParseNodePath(rawPath) ?? rawPath
    const r = this.rooms.get(path)
    if (!r) return
    this.rooms.delete(path)
    if (r.room) r.room.leave(r.conn)
    if (r.membership) this.memberships.delete(r.membership)
  }

  /**
   * A change this principal may read was committed: tell the client, at most once per
   * CHANGED_COALESCE_MS, so lists follow the feed without polling.
   */
  notifyChanged(path: NodePath, version: number): void {
    if (!this.opts.nodes.permissions(this.principal, path).has('Read')) return
    this.changedVersion = Math.max(this.changedVersion, version)
    if (this.changedTimer) return
    this.changedTimer = setTimeout(() => {
      this.changedTimer = null
      this.sendFrame({ type: MuxType.Changed, path: '', version: this.changedVersion })
    }, CHANGED_COALESCE_MS)
  }

  closeAll(): void {
    if (this.changedTimer) clearTimeout(this.changedTimer)
    this.changedTimer = null
    for (const path of [...this.rooms.keys()]) this.leave(path)
  }
}
