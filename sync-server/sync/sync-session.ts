import type { Logger } from 'pino'
import { CloseCode, isWeftError, type NodePath, type Principal } from '../../shared/index.js'
import type { RoomConnection, SyncNodeApi, SyncRoom } from '../nodes/index.js'
import { greeting, permissionDeniedMessage, socketConnection, type SocketConnection } from './framing.js'
import { handleRoomMessage, presenceIdentity, type PresenceIdentity } from './room-protocol.js'
import { InFlightGate, RefusalBudget, sendBounded, spendRefusal, type SessionSocket } from './socket-guards.js'

let connectionIds = 1

/** A process-wide id for each room connection. */
export function nextConnectionId(): number {
  return connectionIds++
}

export interface JoinRefusal {
  closeCode: number
  code: string
  message: string
}

/** The refusal of a join by someone who may not read the node (checked before the join's waits, and again as it joins). */
export function unreadable(path: NodePath): JoinRefusal {
  return { closeCode: CloseCode.Forbidden, code: 'forbidden', message: `You cannot read ${path}.` }
}

/** Why a principal may not join a room, as a close code, or null when it may. */
export async function refusal(nodes: SyncNodeApi, principal: Principal, path: NodePath): Promise<JoinRefusal | null> {
  if (!(await nodes.mayRead(principal, path))) return unreadable(path)
  const room = await nodes.acquire(path)
  if (!room.node) return { closeCode: CloseCode.NotFound, code: 'not_found', message: `No node at ${path}; create it over HTTP first.` }
  return null
}

/** Closes a socket whose handling threw: garbage is the client's (1002), anything else ours (1011). */
export function closeOnError(ws: SessionSocket, e: unknown, log: Logger): void {
  if (isWeftError(e) && e.code === 'protocol_error') {
    ws.close(CloseCode.ProtocolError, e.message.slice(0, 120))
    return
  }
  log.error({ err: e }, 'socket handler failed')
  ws.close(CloseCode.InternalError, 'internal error')
}

/** What a /sync session needs of the server. */
export interface SyncSessionOptions {
  nodes: SyncNodeApi
  maxPayloadBytes: number
  /** A socket whose unsent data passes this is closed as too slow. */
  sendLimit: number
  /** Updates of one socket waiting for durability before it stops being read. */
  inFlightLimit: number
  log: Logger
  /** Told of the room joined, in the stretch that joins it (the access recheck's memberships). */
  joined?: (membership: { conn: RoomConnection; room: SyncRoom }) => void
}

/** One `/sync/{path}` socket, authenticated: one stock y-websocket room. */
export class SyncSession {
  private readonly budget = new RefusalBudget()
  private readonly inFlight: InFlightGate

  /** The room and this socket's connection to it, as the access recheck walks them. */
  readonly membership: { conn: RoomConnection; room: SyncRoom }

  private constructor(
    private readonly ws: SessionSocket,
    readonly room: SyncRoom,
    readonly conn: SocketConnection,
    private readonly principal: Principal,
    private readonly presence: PresenceIdentity,
    private readonly opts: SyncSessionOptions,
  ) {
    this.inFlight = new InFlightGate(ws, opts.inFlightLimit)
    this.membership = { conn, room }
  }

  /**
   * Joins the socket to the node's room and greets it (sync step 1, presence). A refusal is told
   * (permission-denied) and closes the socket; null then, or when the socket closed meanwhile.
   */
  static async open(ws: SessionSocket, principal: Principal, path: NodePath, opts: SyncSessionOptions): Promise<SyncSession | null> {
    const refuse = (refused: JoinRefusal): null => {
      ws.send(permissionDeniedMessage(refused.code, refused.message))
      ws.close(refused.closeCode, `${refused.code}: ${refused.message}`.slice(0, 120))
      return null
    }
    const refused = await refusal(opts.nodes, principal, path)
    if (refused) return refuse(refused)
    if (ws.readyState !== ws.OPEN) return null
    const presence = await presenceIdentity(opts.nodes, principal)
    // [SYNC10] Joined in the same synchronous stretch as the copy is handed over: an await in
    // between let the copy be unloaded (idle, or the cap) and the socket join a dead room that
    // later writes, made on a fresh copy, never reach.
    const room = await opts.nodes.acquireDoc(path)
    // Building the doc may have waited for storage: a socket closed meanwhile must not join.
    if (ws.readyState !== ws.OPEN) return null
    // [ACC8] Read again, in the stretch that joins (and registers the membership the access
    // recheck walks): a change made during the waits above found nothing of this socket to end.
    if (!opts.nodes.permissions(principal, path).has('Read')) return refuse(unreadable(path))
    const conn = socketConnection({
      id: nextConnectionId(),
      principal,
      awarenessIds: new Set(),
      send: (m) => sendBounded(ws, m, opts.sendLimit),
      evict: (closeCode, code, message) => {
        if (ws.readyState === ws.OPEN) ws.send(permissionDeniedMessage(code, message))
        ws.close(closeCode, `${code}: ${message}`.slice(0, 120))
      },
    })
    room.join(conn)
    const session = new SyncSession(ws, room, conn, principal, presence, opts)
    opts.joined?.(session.membership)
    for (const m of greeting(room)) conn.send(m)
    return session
  }

  /** One y-websocket message off the wire, once the in-flight gate is open ([SYNC17]); whatever it throws costs this socket only. */
  receive(m: Uint8Array): void {
    this.inFlight.admit(() => this.receiveNow(m))
  }

  private receiveNow(m: Uint8Array): void {
    const ws = this.ws
    if (ws.readyState !== ws.OPEN) return
    if (m.length > this.opts.maxPayloadBytes) {
      return ws.close(CloseCode.MessageTooBig, `payload_too_large: frames are limited to ${this.opts.maxPayloadBytes} bytes`)
    }
    try {
      const written = handleRoomMessage(
        { nodes: this.opts.nodes, room: this.room, conn: this.conn, principal: this.principal, origin: 'sync', onRefused: () => spendRefusal(ws, this.budget), presence: this.presence },
        m,
      )
      if (written) this.inFlight.track(written)
    } catch (e) {
      closeOnError(ws, e, this.opts.log)
    }
  }

  /** The socket closed: the connection leaves the room. */
  close(): void {
    this.room.leave(this.conn)
  }
}
