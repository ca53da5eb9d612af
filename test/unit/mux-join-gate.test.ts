import pino from 'pino'
import { describe, expect, it } from 'vitest'
import { MuxType, decodeMuxFrame, encodeMuxFrame } from '../../shared/protocol.js'
import { MuxSession, type SessionSocket } from '../../sync-server/sync/index.js'

/**
 * [SYNC17] Joins are bounded work per socket like updates: a join waiting on its node (the access
 * check, the doc loaded from storage) counts against the socket's in-flight limit, and past it the
 * socket stops being read until half have settled. A client that sends joins faster than the
 * server loads nodes is pushed back by TCP, not given unbounded concurrent loads.
 *
 * A unit test of the session's logic: the node service is a stand-in whose loads wait for the
 * test to release them (the real stack is covered by the mux integration tests).
 */
function fakeSocket() {
  const frames: ReturnType<typeof decodeMuxFrame>[] = []
  const ws = {
    readyState: 1,
    OPEN: 1,
    bufferedAmount: 0,
    paused: false,
    pauses: 0,
    send: (data: Uint8Array) => void frames.push(decodeMuxFrame(data)),
    close: () => {
      ws.readyState = 3
    },
    pause: () => {
      ws.paused = true
      ws.pauses++
    },
    resume: () => {
      ws.paused = false
    },
  }
  return { ws: ws as typeof ws & SessionSocket, frames }
}

function heldNodes() {
  const waiting: (() => void)[] = []
  const nodes = {
    mayRead: async () => true,
    // A node that is not there: each join ends Denied not_found once released.
    acquire: () => new Promise<{ node: null }>((resolve) => waiting.push(() => resolve({ node: null }))),
  }
  return { nodes, waiting }
}

describe('[SYNC17] joins count against the socket in-flight limit', () => {
  it('past the limit the socket is paused and frames already delivered are held until half of the joins settled; every join is answered, in order', async () => {
    const { ws, frames } = fakeSocket()
    const { nodes, waiting } = heldNodes()
    const limit = 8
    const session = new MuxSession(ws, { kind: 'user', userId: 'u1' } as never, { nodes: nodes as never, maxPayloadBytes: 1 << 20, maxRoomsPerSocket: 100, log: pino({ level: 'silent' }) }, new Set(), 1 << 24, limit)
    for (let i = 0; i < limit - 1; i++) session.receive(encodeMuxFrame({ type: MuxType.Join, path: `S/n${i}` }))
    await new Promise((r) => setImmediate(r))
    expect(ws.paused).toBe(false)
    session.receive(encodeMuxFrame({ type: MuxType.Join, path: `S/n${limit - 1}` }))
    await new Promise((r) => setImmediate(r))
    expect(ws.paused).toBe(true)
    expect(waiting.length).toBe(limit)
    // The WebSocket library still delivers the frames of a chunk it read before the pause: held.
    for (let i = limit; i < limit + 3; i++) session.receive(encodeMuxFrame({ type: MuxType.Join, path: `S/n${i}` }))
    await new Promise((r) => setImmediate(r))
    expect(waiting.length).toBe(limit)
    // Half settle: the held frames run (in order), then reading resumes.
    for (const release of waiting.splice(0, limit / 2)) release()
    for (let i = 0; i < 5 && ws.paused; i++) await new Promise((r) => setImmediate(r))
    expect(ws.paused).toBe(false)
    expect(waiting.length).toBe(limit / 2 + 3)
    for (const release of waiting.splice(0)) release()
    for (let i = 0; i < 5 && frames.length < limit + 3; i++) await new Promise((r) => setImmediate(r))
    const denied = frames.filter((f) => f.type === MuxType.Denied && f.code === 'not_found').map((f) => f.path)
    expect(denied).toHaveLength(limit + 3)
    expect(denied.slice(limit / 2)).toEqual(Array.from({ length: limit / 2 + 3 }, (_, i) => `S/n${limit / 2 + i}`))
    expect(ws.pauses).toBe(1)
  })
})
