import WebSocket from 'ws'
import { toWsUrl, type CloseInfo } from './stock-provider.js'

/**
 * A bare WebSocket for tests of what stock clients never send (garbage, oversized frames): it
 * records every binary message and the close code, and has no retry of any kind.
 */
export interface RawSocket {
  readonly socket: WebSocket
  readonly messages: Uint8Array[]
  readonly closed: Promise<CloseInfo>
  send(bytes: Uint8Array | string): void
  close(): Promise<CloseInfo>
}

/** Opens `${url}${pathAndQuery}` (e.g. `/sync/a/b?token=...`) and resolves once it is open. */
export async function openRawSocket(url: string, pathAndQuery: string): Promise<RawSocket> {
  const socket = new WebSocket(`${toWsUrl(url)}${pathAndQuery}`)
  const messages: Uint8Array[] = []
  socket.on('message', (data: Buffer) => messages.push(new Uint8Array(data)))
  socket.on('error', () => {
    // Followed by 'close'; `closed` reports the code.
  })
  const closed = new Promise<CloseInfo>((resolve) => {
    socket.on('close', (code, reason) => resolve({ code, reason: reason.toString() }))
  })
  await new Promise<void>((resolve, reject) => {
    socket.once('open', () => resolve())
    void closed.then((c) => reject(new Error(`socket closed before open: ${c.code} ${c.reason}`)))
  })
  return {
    socket,
    messages,
    closed,
    send: (bytes) => socket.send(bytes),
    close: async () => {
      if (socket.readyState === WebSocket.OPEN) socket.close()
      return closed
    },
  }
}
