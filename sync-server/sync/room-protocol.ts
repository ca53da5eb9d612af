import * as Y from 'yjs'
import * as decoding from 'lib0/decoding'
import * as encoding from 'lib0/encoding'
import * as awarenessProtocol from 'y-protocols/awareness'
import * as syncProtocol from 'y-protocols/sync'
import { SYSTEM, WeftError, YMessage, isJsonObject, isSafeColor, isUint, isWeftError, isSystem, type JsonObject, type JsonValue, type MeshNode, type NodePath, type Principal } from '../../shared/index.js'
import type { ChangeOrigin, SyncNodeApi, SyncRoom } from '../nodes/index.js'
import { permissionDeniedMessage, presenceMessage, syncStep2Message, type SocketConnection } from './framing.js'

export { permissionDeniedMessage } from './framing.js'

export interface RoomContext {
  nodes: SyncNodeApi
  room: SyncRoom
  conn: SocketConnection
  principal: Principal
  origin: ChangeOrigin
  /** Called when an update is refused (the socket's refusal budget). */
  onRefused?: () => void
  /** [SYNC5] Who this socket is, as its presence shows it (`presenceIdentity`); absent: the user id. */
  presence?: PresenceIdentity
}

/** [SYNC5] The `user.id` and `user.name` the server writes into a socket's presence. */
export interface PresenceIdentity {
  id: string
  name: string
}

/**
 * [SYNC5] One presence state (JSON text) is at most this long: room for a name, colours and a
 * selection (a few hundred bytes), not for a document. A bigger one is dropped (the others of
 * the update still apply), so presence cannot carry bulk data to everyone in the room.
 */
const MAX_PRESENCE_STATE_BYTES = 8 * 1024

/** Longest display name a presence carries (a User's FullName is free text). */
const MAX_PRESENCE_NAME = 200

/** [SYNC5] The identity a socket's presence carries: the user id and their User node's FullName (else the id). */
export async function presenceIdentity(nodes: SyncNodeApi, principal: Principal): Promise<PresenceIdentity> {
  if (isSystem(principal)) return { id: 'system', name: 'system' }
  const id = principal.userId as string
  const user = await nodes.get(SYSTEM, id as NodePath).catch(() => null)
  const full = user?.content.FullName
  const name = typeof full === 'string' && full.trim() !== '' ? full.slice(0, MAX_PRESENCE_NAME) : id
  return { id, name }
}

/**
 * Handles one stock y-websocket message from a client of a room. Everything up to the point
 * where an update is applied runs synchronously, so a connection's messages apply in order.
 * Returns the durability promise of an applied update (or null). A refused update is answered
 * with permission-denied and never touches the server doc. Throws `protocol_error` on garbage.
 */
export function handleRoomMessage(ctx: RoomContext, message: Uint8Array): Promise<MeshNode | null> | null {
  let decoder: decoding.Decoder
  let type: number
  try {
    decoder = decoding.createDecoder(message)
    type = decoding.readVarUint(decoder)
  } catch {
    throw new WeftError('protocol_error', 'Malformed y-websocket message.')
  }
  switch (type) {
    case YMessage.Sync: {
      let subtype: number
      let payload: Uint8Array
      try {
        subtype = decoding.readVarUint(decoder)
        payload = decoding.readVarUint8Array(decoder)
      } catch {
        throw new WeftError('protocol_error', 'Malformed sync message.')
      }
      if (subtype === syncProtocol.messageYjsSyncStep1) {
        let diff: Uint8Array
        try {
          diff = Y.encodeStateAsUpdate(ctx.room.doc, payload)
        } catch {
          throw new WeftError('protocol_error', 'Malformed state vector in sync step 1.')
        }
        ctx.conn.send(syncStep2Message(diff))
        return null
      }
      if (subtype === syncProtocol.messageYjsSyncStep2 || subtype === syncProtocol.messageYjsUpdate) {
        return applyUpdate(ctx, payload)
      }
      throw new WeftError('protocol_error', `Unknown sync message type ${subtype}.`)
    }
    case YMessage.Awareness: {
      let update: Uint8Array
      try {
        update = ownEntriesOnly(ctx, decoding.readVarUint8Array(decoder))
        if (update.length > 1) awarenessProtocol.applyAwarenessUpdate(ctx.room.awareness, update, ctx.conn)
      } catch {
        throw new WeftError('protocol_error', 'Malformed awareness update.')
      }
      return null
    }
    case YMessage.QueryAwareness: {
      ctx.conn.send(presenceMessage(ctx.room.awareness))
      return null
    }
    case YMessage.Auth:
      return null
    default:
      throw new WeftError('protocol_error', `Unknown y-websocket message type ${type}.`)
  }
}

/**
 * Keeps the entries of an awareness update that this connection may write: its own client ids,
 * or ids nobody in the room holds yet. Nobody can rewrite or remove another person's presence,
 * and every state kept is stamped with this socket's identity ([SYNC5]).
 * Layout (y-protocols/awareness): varUint count, then per entry varUint clientID, varUint clock,
 * varString state JSON.
 */
function ownEntriesOnly(ctx: RoomContext, update: Uint8Array): Uint8Array {
  const d = decoding.createDecoder(update)
  const count = decoding.readVarUint(d)
  const kept: { clientId: number; clock: number; state: string }[] = []
  for (let i = 0; i < count; i++) {
    const clientId = decoding.readVarUint(d)
    const clock = decoding.readVarUint(d)
    const state = decoding.readVarString(d)
    const owner = ctx.room.awarenessOwner(clientId)
    if (owner && owner !== ctx.conn) continue
    const stamped = stampPresence(ctx, state)
    if (stamped !== null) kept.push({ clientId, clock, state: stamped })
  }
  const e = encoding.createEncoder()
  encoding.writeVarUint(e, kept.length)
  for (const k of kept) {
    encoding.writeVarUint(e, k.clientId)
    encoding.writeVarUint(e, k.clock)
    encoding.writeVarString(e, k.state)
  }
  return encoding.toUint8Array(e)
}

/**
 * [SYNC5] The state as others will see it: `user.id` and `user.name` are the socket's own
 * (whatever the client wrote there), `user.color` / `user.colorLight` only if a plain colour
 * (isSafeColor), `cursor` only if it resolves in the room's doc, every other field is kept. A removal (`null`) passes; a
 * state that is not an object, or is longer than MAX_PRESENCE_STATE_BYTES, is dropped (null).
 * Text that is not JSON is garbage (`protocol_error`).
 */
function stampPresence(ctx: RoomContext, state: string): string | null {
  if (state.length > MAX_PRESENCE_STATE_BYTES) return null
  const parsed = JSON.parse(state) as unknown
  if (parsed === null) return state
  if (!isJsonObject(parsed)) return null
  const identity = ctx.presence ?? { id: isSystem(ctx.principal) ? 'system' : (ctx.principal.userId as string), name: isSystem(ctx.principal) ? 'system' : (ctx.principal.userId as string) }
  const claimed = parsed.user
  const user: JsonObject = isJsonObject(claimed) ? { ...claimed } : {}
  user.id = identity.id
  user.name = identity.name
  // Colours go into other people's style attributes: anything but a plain colour is dropped.
  for (const key of ['color', 'colorLight']) if (key in user && !isSafeColor(user[key])) delete user[key]
  const stamped: JsonObject = { ...parsed, user }
  // Editors resolve the caret against their doc as sent (y-codemirror.next does not catch): one
  // that does not resolve here would break the remote carets of everyone on the node.
  if ('cursor' in stamped && !cursorResolves(ctx.room.doc, stamped.cursor)) delete stamped.cursor
  const out = JSON.stringify(stamped)
  return out.length > MAX_PRESENCE_STATE_BYTES ? null : out
}

/** A caret `{ anchor, head }` of Yjs relative positions (JSON) that resolves in `doc`, or null (none). */
function cursorResolves(doc: Y.Doc, cursor: JsonValue | undefined): boolean {
  if (cursor === null) return true
  if (!isJsonObject(cursor)) return false
  for (const end of [cursor.anchor, cursor.head]) {
    if (!isRelativePosition(end)) return false
    try {
      Y.createAbsolutePositionFromRelativePosition(end as unknown as Y.RelativePosition, doc)
    } catch {
      return false
    }
  }
  return true
}

function isRelativePosition(v: JsonValue | undefined): boolean {
  if (!isJsonObject(v)) return false
  const isId = (id: JsonValue | undefined) => id === null || (isJsonObject(id) && isUint(id.client) && isUint(id.clock))
  return isId(v.type) && isId(v.item) && (v.tname === null || typeof v.tname === 'string') && (v.assoc === undefined || Number.isInteger(v.assoc))
}

/** Applies a client update; a refusal is told to the client and the update dropped. */
function applyUpdate(ctx: RoomContext, update: Uint8Array): Promise<MeshNode | null> | null {
  try {
    const written = ctx.nodes.applyClientUpdateLoaded(ctx.room, ctx.principal, update, ctx.conn, ctx.origin)
    // Durability failures are reported by the node service (the room is evicted).
    written.catch(() => undefined)
    return written
  } catch (e) {
    if (!isWeftError(e)) throw e
    if (e.code === 'protocol_error') throw e
    ctx.conn.send(permissionDeniedMessage(e.code, e.message))
    ctx.onRefused?.()
    return null
  }
}
