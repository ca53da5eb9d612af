import * as encoding from 'lib0/encoding'
import * as decoding from 'lib0/decoding'
import { WeftError } from './errors.js'

/**
 * Wire protocol of `/mux`: one WebSocket carrying many nodes. Every frame is binary:
 * `varUint type, varString path, ...payload`. `MuxSync` wraps an unmodified y-websocket
 * message (sync / awareness / auth / query-awareness), so a stock `WebsocketProvider` can
 * run over a virtual per-room socket.
 *
 * PROTOCOL_VERSION history:
 *  1: join / leave / sync / denied / update-with-ack / ack / refused / error.
 *  2: changed (s→c): the change feed has news the client may read (a hint to catch up).
 */
export const PROTOCOL_VERSION = 2

export const MuxType = {
  /** c→s: join a room (node). Server answers with Sync frames (step 1, awareness) or Denied. */
  Join: 0,
  /** c→s: leave a room. */
  Leave: 1,
  /** both: payload = one y-websocket message (varUint8Array). */
  Sync: 2,
  /** s→c: the room was refused or closed: varUint closeCode (4403, 4404, ...), varString code, varString message. */
  Denied: 3,
  /** c→s: a Yjs update that wants an answer: varUint seq, varUint8Array update. */
  Update: 4,
  /** s→c: the update with seq is durable: varUint seq, varUint version. */
  Ack: 5,
  /** s→c: the update with seq was refused and not applied: varUint seq, varString code, varString message. */
  Refused: 6,
  /** s→c: connection-level error (path is ''): varString code, varString message. */
  Error: 7,
  /**
   * s→c: the room is joined and authorised: varUint permissions bitmask (Permission numbers).
   * Sent again on a joined room whenever the mask changes (a role changed, Read kept) [SYNC15];
   * a client that takes every Joined for a fresh join still works (it only asks for state again).
   */
  Joined: 8,
  /**
   * s→c (path ''): nodes the client may read changed, up to varUint version. Coalesced; the
   * client catches up from the change feed (`/api/changes?since=`) instead of polling blind.
   */
  Changed: 9,
} as const
export type MuxType = (typeof MuxType)[keyof typeof MuxType]

export type MuxFrame =
  | { type: typeof MuxType.Join; path: string }
  | { type: typeof MuxType.Leave; path: string }
  | { type: typeof MuxType.Sync; path: string; message: Uint8Array }
  | { type: typeof MuxType.Denied; path: string; closeCode: number; code: string; message: string }
  | { type: typeof MuxType.Update; path: string; seq: number; update: Uint8Array }
  | { type: typeof MuxType.Ack; path: string; seq: number; version: number }
  | { type: typeof MuxType.Refused; path: string; seq: number; code: string; message: string }
  | { type: typeof MuxType.Error; path: string; code: string; message: string }
  | { type: typeof MuxType.Joined; path: string; permissions: number }
  | { type: typeof MuxType.Changed; path: string; version: number }

export function encodeMuxFrame(frame: MuxFrame): Uint8Array {
  const e = encoding.createEncoder()
  encoding.writeVarUint(e, frame.type)
  encoding.writeVarString(e, frame.path)
  switch (frame.type) {
    case MuxType.Join:
    case MuxType.Leave:
      break
    case MuxType.Sync:
      encoding.writeVarUint8Array(e, frame.message)
      break
    case MuxType.Denied:
      encoding.writeVarUint(e, frame.closeCode)
      encoding.writeVarString(e, frame.code)
      encoding.writeVarString(e, frame.message)
      break
    case MuxType.Update:
      encoding.writeVarUint(e, frame.seq)
      encoding.writeVarUint8Array(e, frame.update)
      break
    case MuxType.Ack:
      encoding.writeVarUint(e, frame.seq)
      encoding.writeVarUint(e, frame.version)
      break
    case MuxType.Refused:
      encoding.writeVarUint(e, frame.seq)
      encoding.writeVarString(e, frame.code)
      encoding.writeVarString(e, frame.message)
      break
    case MuxType.Error:
      encoding.writeVarString(e, frame.code)
      encoding.writeVarString(e, frame.message)
      break
    case MuxType.Joined:
      encoding.writeVarUint(e, frame.permissions)
      break
    case MuxType.Changed:
      encoding.writeVarUint(e, frame.version)
      break
    default:
      frame satisfies never
  }
  return encoding.toUint8Array(e)
}

/** Throws `protocol_error` on anything malformed; the caller closes that socket (1002). */
export function decodeMuxFrame(data: Uint8Array): MuxFrame {
  try {
    const d = decoding.createDecoder(data)
    const type = decoding.readVarUint(d)
    const path = decoding.readVarString(d)
    let frame: MuxFrame
    switch (type) {
      case MuxType.Join:
      case MuxType.Leave:
        frame = { type, path }
        break
      case MuxType.Sync:
        frame = { type, path, message: decoding.readVarUint8Array(d) }
        break
      case MuxType.Denied:
        frame = { type, path, closeCode: decoding.readVarUint(d), code: decoding.readVarString(d), message: decoding.readVarString(d) }
        break
      case MuxType.Update:
        frame = { type, path, seq: decoding.readVarUint(d), update: decoding.readVarUint8Array(d) }
        break
      case MuxType.Ack:
        frame = { type, path, seq: decoding.readVarUint(d), version: decoding.readVarUint(d) }
        break
      case MuxType.Refused:
        frame = { type, path, seq: decoding.readVarUint(d), code: decoding.readVarString(d), message: decoding.readVarString(d) }
        break
      case MuxType.Error:
        frame = { type, path, code: decoding.readVarString(d), message: decoding.readVarString(d) }
        break
      case MuxType.Joined:
        frame = { type, path, permissions: decoding.readVarUint(d) }
        break
      case MuxType.Changed:
        frame = { type, path, version: decoding.readVarUint(d) }
        break
      default:
        throw new Error(`unknown frame type ${type}`)
    }
    if (decoding.hasContent(d)) throw new Error('trailing bytes')
    return frame
  } catch (e) {
    throw new WeftError('protocol_error', `Malformed mux frame: ${(e as Error).message}`)
  }
}

/** WebSocket close codes. 4400–4499 are final (y-websocket 3.1 stops reconnecting). */
export const CloseCode = {
  Normal: 1000,
  GoingAway: 1001,
  ProtocolError: 1002,
  MessageTooBig: 1009,
  InternalError: 1011,
  Unauthorized: 4401,
  Forbidden: 4403,
  NotFound: 4404,
  PayloadTooLarge: 4413,
} as const
export type CloseCode = (typeof CloseCode)[keyof typeof CloseCode]

/** y-websocket message types (the stock protocol). */
export const YMessage = { Sync: 0, Awareness: 1, Auth: 2, QueryAwareness: 3 } as const
