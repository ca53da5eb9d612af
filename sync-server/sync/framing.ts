import * as encoding from 'lib0/encoding'
import * as awarenessProtocol from 'y-protocols/awareness'
import * as authProtocol from 'y-protocols/auth'
import * as syncProtocol from 'y-protocols/sync'
import { YMessage } from '../../shared/index.js'
import type { RoomConnection, SyncRoom } from '../nodes/index.js'

/**
 * y-websocket framing of what a room sends: `[messageType][payload]`. A relayed update or
 * presence change goes to every connection of the room with the same bytes, so each is framed
 * once (memoised on the update's identity) whatever the number of connections.
 */
const framedUpdates = new WeakMap<Uint8Array, Uint8Array>()
const framedAwareness = new WeakMap<Uint8Array, Uint8Array>()

/** `[messageType][payload]` for one relayed payload, framed the first time it is asked for. */
function framedOnce(cache: WeakMap<Uint8Array, Uint8Array>, payload: Uint8Array, frame: (e: encoding.Encoder) => void): Uint8Array {
  let message = cache.get(payload)
  if (!message) {
    const e = encoding.createEncoder()
    frame(e)
    message = encoding.toUint8Array(e)
    cache.set(payload, message)
  }
  return message
}

/** `[messageSync][messageYjsUpdate][update]`. */
function syncUpdateMessage(update: Uint8Array): Uint8Array {
  return framedOnce(framedUpdates, update, (e) => {
    encoding.writeVarUint(e, YMessage.Sync)
    syncProtocol.writeUpdate(e, update)
  })
}

/** `[messageAwareness][awareness update]`. */
function awarenessMessage(update: Uint8Array): Uint8Array {
  return framedOnce(framedAwareness, update, (e) => {
    encoding.writeVarUint(e, YMessage.Awareness)
    encoding.writeVarUint8Array(e, update)
  })
}

/** `[messageSync][messageYjsSyncStep2][diff]`: the answer to a client's sync step 1. */
export function syncStep2Message(diff: Uint8Array): Uint8Array {
  const e = encoding.createEncoder()
  encoding.writeVarUint(e, YMessage.Sync)
  encoding.writeVarUint(e, syncProtocol.messageYjsSyncStep2)
  encoding.writeVarUint8Array(e, diff)
  return encoding.toUint8Array(e)
}

/** The full presence of a room, as one awareness message. */
export function presenceMessage(awareness: awarenessProtocol.Awareness): Uint8Array {
  return awarenessMessage(awarenessProtocol.encodeAwarenessUpdate(awareness, [...awareness.getStates().keys()]))
}

/** `[messageAuth][permissionDenied][reason]`: how y-protocols says no. Reasons start with our error code. */
export function permissionDeniedMessage(code: string, message: string): Uint8Array {
  const e = encoding.createEncoder()
  encoding.writeVarUint(e, YMessage.Auth)
  authProtocol.writePermissionDenied(e, `${code}: ${message}`)
  return encoding.toUint8Array(e)
}

/** Messages a client gets on joining: the server's sync step 1 and the room's presence. */
export function greeting(room: SyncRoom): Uint8Array[] {
  const e = encoding.createEncoder()
  encoding.writeVarUint(e, YMessage.Sync)
  syncProtocol.writeSyncStep1(e, room.doc)
  const out: Uint8Array[] = [encoding.toUint8Array(e)]
  const presence = room.presence
  if (presence && presence.getStates().size > 0) out.push(presenceMessage(presence))
  return out
}

/** A room connection of a socket: the node side's relays, framed for the y-websocket wire. */
export interface SocketConnection extends RoomConnection {
  /** Sends one y-websocket message (sync / awareness / auth) to the client. */
  send(message: Uint8Array): void
}

/** A socket's connection to a room, relaying through `send` (one y-websocket message each). */
export function socketConnection(c: Omit<SocketConnection, 'sendUpdate' | 'sendAwareness'>): SocketConnection {
  return {
    ...c,
    sendUpdate: (update) => c.send(syncUpdateMessage(update)),
    sendAwareness: (update) => c.send(awarenessMessage(update)),
  }
}
