import type { IncomingMessage } from 'node:http'
import type { Duplex } from 'node:stream'
import { WebSocketServer, type RawData, type WebSocket } from 'ws'
import type { Logger } from 'pino'
import type { Subscription } from 'rxjs'
import {
  CloseCode,
  decodePathParam,
  rawPathname,
  parseNodePath,
  userPrincipal,
  type NodePath,
  type UserId,
} from '../../shared/index.js'
import type { RoomConnection, SyncNodeApi, SyncRoom } from '../nodes/index.js'
import type { AccessService } from '../access/index.js'
import { MuxSession } from './mux-session.js'
import { presenceIdentity } from './room-protocol.js'
import { CLOSE_SESSION_ENDED } from './socket-guards.js'
import { SyncSession, closeOnError } from './sync-session.js'

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
  /** How often each socket is pinged (default 30 s); see the constructor. */
  pingIntervalMs?: number
  log: Logger
  /** [OPS3] Told of a /mux update refused before the node store sees it (payload_too_large). */
  onRefused?(code: string, transport: 'mux'): void
}

const PING_INTERVAL_MS = 30_000
/** setTimeout's largest delay: a session ending later is checked again then. */
const MAX_TIMER_MS = 2 ** 31 - 1

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
    // A socket that has not answered the last ping by the next one is closed. One the server
    // stopped reading ([SYNC17]: its writes wait on storage) cannot be heard answering: it counts
    // as alive until it is read again, so a slow database does not cut its clients off.
    this.pingTimer = setInterval(() => {
      for (const ws of this.wss.clients) {
        const w = ws as WebSocket & { isAlive?: boolean }
        if (ws.isPaused) {
          w.isAlive = true
          continue
        }
        if (w.isAlive === false) {
          w.terminate()
          continue
        }
        w.isAlive = false
        w.ping()
      }
    }, opts.pingIntervalMs ?? PING_INTERVAL_MS)
    this.pingTimer.unref()
  }

  /** [OPS4] Open WebSockets, /sync and /mux together (read on scrape). */
  get connectionCount(): number {
    return this.wss.clients.size
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
      // [SYNC15] Those who keep Read are told their new permissions (a /sync room has no such
      // frame: a stock provider learns of a lost Update from its next refused write).
      for (const session of this.sessions) session.recheckPermissions()
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
      const opened = await SyncSession.open(ws, principal, path, {
        nodes: this.opts.nodes,
        maxPayloadBytes: this.opts.maxPayloadBytes,
        sendLimit: this.sendLimit,
        inFlightLimit: this.inFlightLimit,
        log: this.opts.log,
        // [ACC8] Registered as the room is joined: an access change in the microtasks before
        // `open` returns is rechecked against it too.
        joined: (m) => this.memberships.add(m),
      })
      // Null before any room is joined (refused, or the socket closed): nothing registered.
      if (!opened) return
      ws.on('close', () => {
        opened.close()
        this.memberships.delete(opened.membership)
      })
      deliverTo((m) => opened.receive(m))
    })().catch((e) => this.closeOnError(ws, e))
  }

  private closeOnError(ws: WebSocket, e: unknown): void {
    closeOnError(ws, e, this.opts.log)
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
