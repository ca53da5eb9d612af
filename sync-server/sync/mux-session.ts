import type { Logger } from 'pino'
import {
  CloseCode,
  MuxType,
  WeftError,
  decodeMuxFrame,
  encodeMuxFrame,
  isWeftError,
  asWeftError,
  parseNodePath,
  permissionMask,
  tryParseNodePath,
  type MuxFrame,
  type NodePath,
  type Principal,
} from '../../shared/index.js'
import type { RoomConnection, SyncNodeApi, SyncRoom } from '../nodes/index.js'
import { greeting, socketConnection, type SocketConnection } from './framing.js'
import { handleRoomMessage, type PresenceIdentity } from './room-protocol.js'
import { InFlightGate, RefusalBudget, sendBounded, spendRefusal, type SessionSocket } from './socket-guards.js'
import { nextConnectionId, refusal, unreadable } from './sync-session.js'

/** What a /mux session needs of the server. */
export interface MuxSessionOptions {
  nodes: SyncNodeApi
  maxPayloadBytes: number
  maxRoomsPerSocket: number
  log: Logger
  /** [OPS3] Told of an update refused here, before the node store sees it (the metrics' refusals by code). */
  onRefused?(code: string, transport: 'mux'): void
}

/** Change hints are coalesced: one frame per socket per this many ms, whatever the write rate. */
const CHANGED_COALESCE_MS = 50

interface MuxRoom {
  path: NodePath
  conn: SocketConnection
  room: SyncRoom | null
  /** Frames for this room run after its join settles, in order. */
  chain: Promise<void>
  membership?: { conn: RoomConnection; room: SyncRoom }
  /** The permission mask this room's client was last sent (Joined). */
  mask?: number
  /**
   * [SYNC16] A Sync frame came from the client after its Joined was sent: the client's step 1,
   * which it sends on reading Joined. An Update before it may have been sent before the client
   * could know the room's permissions, even if it arrives after Joined was sent (in flight).
   */
  heardAfterJoined?: boolean
}

/** One /mux socket: rooms joined and authorised one by one; a refusal ends that room only. */
export class MuxSession {
  private readonly rooms = new Map<string, MuxRoom>()
  private changedVersion = 0
  private changedTimer: NodeJS.Timeout | null = null
  private readonly budget = new RefusalBudget()
  /**
   * [SYNC16] Rooms whose first refused Update came before their Joined: that refusal was not
   * charged. Once per path per socket and at most `maxRoomsPerSocket` of them, so the refusals
   * excused stay bounded by the joins made (each a permission check and a doc acquired).
   */
  private readonly excused = new Set<string>()
  private readonly inFlight: InFlightGate

  constructor(
    private readonly ws: SessionSocket,
    private readonly principal: Principal,
    private readonly opts: MuxSessionOptions,
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

  /**
   * One frame off the wire, handled once the socket's in-flight gate is open ([SYNC17]). An Update
   * over the payload limit is refused by name, not by closing.
   */
  receive(bytes: Uint8Array): void {
    this.inFlight.admit(() => {
      try {
        this.receiveNow(bytes)
      } catch (e) {
        this.fail(e)
      }
    })
  }

  private receiveNow(bytes: Uint8Array): void {
    // Frames still buffered when this socket was closed (4429, 1013, 4401) cost nothing more.
    if (this.ws.readyState !== this.ws.OPEN) return
    const frame = decodeMuxFrame(bytes)
    if (bytes.length > this.opts.maxPayloadBytes) {
      if (frame.type !== MuxType.Update) {
        this.ws.close(CloseCode.MessageTooBig, `payload_too_large: frames are limited to ${this.opts.maxPayloadBytes} bytes`)
        return
      }
      this.opts.onRefused?.('payload_too_large', 'mux')
      this.refuse(frame.path, frame.seq, new WeftError('payload_too_large', `This change is ${bytes.length} bytes; the server accepts at most ${this.opts.maxPayloadBytes} bytes per update. Split it or make the value smaller.`))
      return
    }
    this.handle(frame)
  }

  /**
   * Tells the client an update was refused; a socket that keeps earning refusals is closed.
   * [SYNC16] `beforeJoined`: the Update came before the client could have read this room's
   * Joined (before its first Sync frame after it), so it could not know the room's permissions
   * (a role lowered while it was offline). A client sends one such Update per room ([WEB42]);
   * the first refused one of each room is not charged (see `excused`).
   */
  private refuse(path: string, seq: number, err: WeftError, beforeJoined = false): void {
    this.sendFrame({ type: MuxType.Refused, path, seq, code: err.code, message: err.message })
    if (beforeJoined && !this.excused.has(path) && this.excused.size < this.opts.maxRoomsPerSocket) {
      this.excused.add(path)
      return
    }
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
        this.noteHeard(frame.path)
        return this.inRoom(frame.path, (r, room) => {
          const written = handleRoomMessage({ nodes: this.opts.nodes, room, conn: r.conn, principal: this.principal, origin: 'mux', onRefused: () => spendRefusal(this.ws, this.budget), presence: this.presence }, frame.message)
          if (written) this.inFlight.track(written)
        })
      case MuxType.Update:
        return this.inRoom(frame.path, (r, room, beforeJoined) => this.update(r, room, frame.seq, frame.update, beforeJoined))
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
        id: nextConnectionId(),
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
      // [ACC8] Read again, in the stretch that joins: an access change made while the doc was
      // built found no membership of this socket to end, and the room was joined after it.
      const permissions = this.opts.nodes.permissions(this.principal, path)
      if (!permissions.has('Read')) {
        this.rooms.delete(path)
        this.sendFrame({ type: MuxType.Denied, path, ...unreadable(path) })
        return
      }
      r.room = room
      room.join(r.conn)
      r.membership = { conn: r.conn, room }
      this.memberships.add(r.membership)
      r.mask = permissionMask(permissions)
      this.sendFrame({ type: MuxType.Joined, path, permissions: r.mask })
      for (const m of greeting(room)) r.conn.send(m)
    })().catch((e) => {
      this.rooms.delete(path)
      this.opts.log.error({ err: e, path }, 'mux join failed')
      this.sendFrame({ type: MuxType.Denied, path, closeCode: 1011, code: 'internal', message: 'Joining failed; retry.' })
    })
    // [SYNC17] A join waiting on its node (the access check, the doc loaded) is bounded work like
    // an update: past the in-flight limit the socket stops being read until half have settled.
    this.inFlight.track(r.chain)
  }

  /** [SYNC16] The client has read this room's Joined (see `heardAfterJoined`). */
  private noteHeard(rawPath: string): void {
    const r = this.rooms.get(tryParseNodePath(rawPath) ?? rawPath)
    if (r?.room) r.heardAfterJoined = true
  }

  /** `fn` learns whether the frame came before the client could have read the room's Joined. */
  private inRoom(rawPath: string, fn: (r: MuxRoom, room: SyncRoom, beforeJoined: boolean) => void): void {
    const key = tryParseNodePath(rawPath) ?? rawPath
    const r = this.rooms.get(key)
    if (!r) {
      // Not joined (or refused): say so for this room only.
      this.sendFrame({ type: MuxType.Denied, path: rawPath, closeCode: 4409, code: 'not_joined', message: 'Join the node before syncing it.' })
      return
    }
    const beforeJoined = !r.heardAfterJoined
    const run = () => {
      if (this.rooms.get(key) !== r || !r.room) return
      try {
        fn(r, r.room, beforeJoined)
      } catch (e) {
        this.fail(e)
      }
    }
    if (r.room) run()
    // Queued behind the join: a frame that fails there must not become an unhandled rejection.
    else r.chain = r.chain.then(run).catch((e: unknown) => this.fail(e))
  }

  private update(r: MuxRoom, room: SyncRoom, seq: number, update: Uint8Array, beforeJoined: boolean): void {
    const path = r.path
    let written: Promise<unknown>
    try {
      written = this.opts.nodes.applyClientUpdateLoaded(room, this.principal, update, r.conn, 'mux')
    } catch (e) {
      if (!isWeftError(e)) throw e
      // Undecodable bytes in an Update are that update's problem, not the socket's.
      this.refuse(path, seq, e.code === 'protocol_error' ? new WeftError('invalid_update', e.message) : e, beforeJoined)
      return
    }
    this.inFlight.track(written)
    written.then(
      (node) => this.sendFrame({ type: MuxType.Ack, path, seq, version: (node as { version?: number } | null)?.version ?? 0 }),
      (e: unknown) => {
        const err = asWeftError(e, 'The change could not be saved.')
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

  /**
   * [SYNC15] Access changed: every joined room whose permission mask is no longer the one its
   * client was sent gets Joined again with the new one (a role lowered from Editor to Viewer, or
   * raised, while the page is open). A room whose Read was lost is evicted by the caller first.
   */
  recheckPermissions(): void {
    for (const r of this.rooms.values()) {
      if (!r.room || r.mask === undefined) continue
      const perms = this.opts.nodes.permissions(this.principal, r.path)
      if (!perms.has('Read')) continue
      const mask = permissionMask(perms)
      if (mask === r.mask) continue
      r.mask = mask
      this.sendFrame({ type: MuxType.Joined, path: r.path, permissions: mask })
    }
  }

  closeAll(): void {
    if (this.changedTimer) clearTimeout(this.changedTimer)
    this.changedTimer = null
    for (const path of [...this.rooms.keys()]) this.leave(path)
  }
}
