/**
 * The latency anchor of the sync benchmark: a bare y-protocols relay, the essence of
 * y-websocket's reference server with nothing else. One in-memory Y.Doc and Awareness per room;
 * sync and awareness messages are applied and relayed to the room's other connections. No auth,
 * no access checks, no disk: whatever our server adds on top shows up as the ratio to this.
 *
 * Rooms use the same URL scheme as ours (`/sync/{room}?token=...`, the token ignored), so the
 * same stock `WebsocketProvider` code drives both.
 */
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import * as Y from 'yjs'
import * as encoding from 'lib0/encoding'
import * as decoding from 'lib0/decoding'
import * as syncProtocol from 'y-protocols/sync'
import * as awarenessProtocol from 'y-protocols/awareness'
import { WebSocketServer, type WebSocket } from 'ws'

const MESSAGE_SYNC = 0
const MESSAGE_AWARENESS = 1
const MESSAGE_QUERY_AWARENESS = 3

interface Room {
  doc: Y.Doc
  awareness: awarenessProtocol.Awareness
  conns: Map<WebSocket, Set<number>>
}

export interface Relay {
  url: string
  port: number
  close(): Promise<void>
}

function send(conn: WebSocket, message: Uint8Array): void {
  if (conn.readyState === conn.OPEN) conn.send(message)
}

function getRoom(rooms: Map<string, Room>, name: string): Room {
  let room = rooms.get(name)
  if (room) return room
  const doc = new Y.Doc()
  const awareness = new awarenessProtocol.Awareness(doc)
  awareness.setLocalState(null)
  const conns = new Map<WebSocket, Set<number>>()
  const created: Room = { doc, awareness, conns }
  doc.on('update', (update: Uint8Array) => {
    const e = encoding.createEncoder()
    encoding.writeVarUint(e, MESSAGE_SYNC)
    syncProtocol.writeUpdate(e, update)
    const message = encoding.toUint8Array(e)
    for (const conn of conns.keys()) send(conn, message)
  })
  awareness.on('update', ({ added, updated, removed }: { added: number[]; updated: number[]; removed: number[] }, origin: unknown) => {
    const changed = added.concat(updated, removed)
    const ids = conns.get(origin as WebSocket)
    if (ids) {
      for (const id of added) ids.add(id)
      for (const id of removed) ids.delete(id)
    }
    const e = encoding.createEncoder()
    encoding.writeVarUint(e, MESSAGE_AWARENESS)
    encoding.writeVarUint8Array(e, awarenessProtocol.encodeAwarenessUpdate(awareness, changed))
    const message = encoding.toUint8Array(e)
    for (const conn of conns.keys()) send(conn, message)
  })
  rooms.set(name, created)
  room = created
  return room
}

export async function startRelay(port = 0, host = '127.0.0.1'): Promise<Relay> {
  const rooms = new Map<string, Room>()
  const http: Server = createServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'application/json' })
    res.end('{"ok":true}')
  })
  const wss = new WebSocketServer({ noServer: true })
  http.on('upgrade', (req, socket, head) => {
    const url = new URL(req.url ?? '/', 'http://relay')
    if (!url.pathname.startsWith('/sync/')) return socket.destroy()
    const name = url.pathname.slice('/sync/'.length)
    wss.handleUpgrade(req, socket, head, (conn) => {
      conn.binaryType = 'arraybuffer'
      const room = getRoom(rooms, name)
      room.conns.set(conn, new Set())
      conn.on('message', (data: ArrayBuffer) => {
        try {
          const decoder = decoding.createDecoder(new Uint8Array(data))
          const encoder = encoding.createEncoder()
          switch (decoding.readVarUint(decoder)) {
            case MESSAGE_SYNC:
              encoding.writeVarUint(encoder, MESSAGE_SYNC)
              syncProtocol.readSyncMessage(decoder, encoder, room.doc, conn)
              if (encoding.length(encoder) > 1) send(conn, encoding.toUint8Array(encoder))
              break
            case MESSAGE_AWARENESS:
              awarenessProtocol.applyAwarenessUpdate(room.awareness, decoding.readVarUint8Array(decoder), conn)
              break
            case MESSAGE_QUERY_AWARENESS:
              break
          }
        } catch {
          conn.close(1002)
        }
      })
      conn.on('close', () => {
        const ids = room.conns.get(conn)
        room.conns.delete(conn)
        if (ids && ids.size > 0) awarenessProtocol.removeAwarenessStates(room.awareness, [...ids], null)
      })
      // As y-websocket's server: sync step 1, then the awareness states known so far.
      const e = encoding.createEncoder()
      encoding.writeVarUint(e, MESSAGE_SYNC)
      syncProtocol.writeSyncStep1(e, room.doc)
      send(conn, encoding.toUint8Array(e))
      const states = room.awareness.getStates()
      if (states.size > 0) {
        const a = encoding.createEncoder()
        encoding.writeVarUint(a, MESSAGE_AWARENESS)
        encoding.writeVarUint8Array(a, awarenessProtocol.encodeAwarenessUpdate(room.awareness, [...states.keys()]))
        send(conn, encoding.toUint8Array(a))
      }
    })
  })
  await new Promise<void>((resolve) => http.listen(port, host, resolve))
  const actualPort = (http.address() as AddressInfo).port
  return {
    url: `http://${host}:${actualPort}`,
    port: actualPort,
    close: async () => {
      for (const client of wss.clients) client.terminate()
      wss.close()
      await new Promise<void>((resolve) => http.close(() => resolve()))
      for (const room of rooms.values()) room.doc.destroy()
    },
  }
}
