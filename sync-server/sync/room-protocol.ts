import * as Y from 'yjs'
import * as encoding from 'lib0/encoding'
import * as decoding from 'lib0/decoding'
import * as awarenessProtocol from 'y-protocols/awareness'
import * as authProtocol from 'y-protocols/auth'
import * as syncProtocol from 'y-protocols/sync'
import { WeftError, YMessage, isWeftError, type MeshNode, type Principal } from '../../shared/index.js'
import type { LoadedNode, RoomConnection } from '../nodes/loaded-node.js'
import type { NodeService } from '../nodes/node-service.js'
import type { ChangeOrigin } from '../nodes/types.js'

/** `[messageAuth][permissionDenied][reason]`: how y-protocols says no. Reasons start with our error code. */
export function permissionDeniedMessage(code: string, message: string): Uint8Array {
  const e = encoding.createEncoder()
  encoding.writeVarUint(e, YMessage.Auth)
  authProtocol.writePermissionDenied(e, `${code}: ${message}`)
  return encoding.toUint8Array(e)
}

export interface RoomContext {
  nodes: NodeService
  room: LoadedNode
  conn: RoomConnection
  principal: Principal
  origin: ChangeOrigin
  /** Called when an update is refused (the socket's refusal budget). */
  onRefused?: () => void
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
        const e = encoding.createEncoder()
        encoding.writeVarUint(e, YMessage.Sync)
        encoding.writeVarUint(e, syncProtocol.messageYjsSyncStep2)
        encoding.writeVarUint8Array(e, diff)
        ctx.conn.send(encoding.toUint8Array(e))
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
      const states = ctx.room.awareness.getStates()
      const e = encoding.createEncoder()
      encoding.writeVarUint(e, YMessage.Awareness)
      encoding.writeVarUint8Array(e, awarenessProtocol.encodeAwarenessUpdate(ctx.room.awareness, [...states.keys()]))
      ctx.conn.send(encoding.toUint8Array(e))
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
 * or ids nobody in the room holds yet. Nobody can rewrite or remove another person's presence.
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
    if (!owner || owner === ctx.conn) kept.push({ clientId, clock, state })
  }
  if (kept.length === count) return update
  const e = encoding.createEncoder()
  encoding.writeVarUint(e, kept.length)
  for (const k of kept) {
    encoding.writeVarUint(e, k.clientId)
    encoding.writeVarUint(e, k.clock)
    encoding.writeVarString(e, k.state)
  }
  return encoding.toUint8Array(e)
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
