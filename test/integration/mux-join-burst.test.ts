import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest'
import { MuxType, decodeMuxFrame, encodeMuxFrame } from '../../shared/index.js'
import { InFlightGate } from '../../sync-server/sync/socket-guards.js'
import { createDocument, createSpace, openRawSocket, signup, startTestServer, waitFor, type TestServer, type TestUser } from '../helpers/index.js'

/**
 * [SYNC17] On a real server with a small in-flight limit, a burst of joins far past it (sent at
 * once, without waiting for answers; thousands of small frames arrive in one read) never has more
 * than the limit waiting on their nodes: frames the WebSocket library delivers after the pause
 * wait in the session. Every join is answered (Joined for a node, Denied not_found for a path
 * with none), the socket stays open, and the server serves another client meanwhile.
 */
describe('[SYNC17] a burst of joins is pushed back, never dropped', () => {
  let ts: TestServer
  let ann: TestUser
  let space = ''
  beforeAll(async () => {
    ts = await startTestServer({ config: { maxInFlightPerSocket: 4 } })
    ann = await signup(ts.url)
    space = await createSpace(ts.url, ann.token)
  })
  afterAll(() => ts.cleanup())

  afterEach(() => {
    vi.restoreAllMocks()
  })

  it('3,000 joins in one burst with a limit of 4: never more than 4 waiting, all answered, the socket open', async () => {
    // The gate's own count, observed on the real server (same process): joins and updates waiting.
    let waiting = 0
    let peak = 0
    const track = InFlightGate.prototype.track
    vi.spyOn(InFlightGate.prototype, 'track').mockImplementation(function (this: InFlightGate, p: Promise<unknown>) {
      peak = Math.max(peak, ++waiting)
      const done = () => void waiting--
      p.then(done, done)
      track.call(this, p)
    })
    const docs: string[] = []
    for (let i = 0; i < 30; i++) docs.push(await createDocument(ts.url, ann.token, `${space}/d${i}`, { N: i }))
    const missing = Array.from({ length: 2_970 }, (_, i) => `${space}/none${i}`)
    const raw = await openRawSocket(ts.url, `/mux?token=${encodeURIComponent(ann.token)}`)
    try {
      for (const path of [...docs, ...missing]) raw.send(encodeMuxFrame({ type: MuxType.Join, path }))
      const answers = () => {
        const joined = new Set<string>()
        const denied = new Map<string, string>()
        for (const m of raw.messages) {
          const f = decodeMuxFrame(m)
          if (f.type === MuxType.Joined) joined.add(f.path)
          if (f.type === MuxType.Denied) denied.set(f.path, f.code)
        }
        return { joined, denied }
      }
      await waitFor(() => {
        const { joined, denied } = answers()
        return joined.size + denied.size === docs.length + missing.length
      }, { description: 'every join answered', timeoutMs: 60_000 })
      const { joined, denied } = answers()
      expect([...joined].sort()).toEqual([...docs].sort())
      expect([...denied.values()].every((c) => c === 'not_found')).toBe(true)
      expect(raw.socket.readyState).toBe(raw.socket.OPEN)
      expect(peak).toBeGreaterThan(1)
      expect(peak).toBeLessThanOrEqual(4)
      // Still serving: another socket joins at once.
      const other = await openRawSocket(ts.url, `/mux?token=${encodeURIComponent(ann.token)}`)
      other.send(encodeMuxFrame({ type: MuxType.Join, path: docs[0]! }))
      await waitFor(() => other.messages.some((m) => decodeMuxFrame(m).type === MuxType.Joined), { description: 'the other socket joined', timeoutMs: 30_000 })
      await other.close()
    } finally {
      await raw.close()
    }
  })
})

/**
 * [SYNC17] A socket the server stopped reading (its joins wait on their nodes) cannot be heard
 * answering pings: it is not closed as dead for it. Before, two ping intervals of a slow
 * database cut every client it held up (the pongs sat unread in the paused socket).
 */
describe('[SYNC17] a socket held back is not taken for dead', () => {
  let ts: TestServer
  let ann: TestUser
  let space = ''
  beforeAll(async () => {
    ts = await startTestServer({ config: { maxInFlightPerSocket: 2, pingIntervalMs: 100 } })
    ann = await signup(ts.url)
    space = await createSpace(ts.url, ann.token)
  })
  afterAll(() => ts.cleanup())

  it('three ping intervals while its joins wait: still open, every join answered once released', async () => {
    const docs: string[] = []
    for (let i = 0; i < 3; i++) docs.push(await createDocument(ts.url, ann.token, `${space}/p${i}`, { N: i }))
    let release = () => undefined as void
    const held = new Promise<void>((resolve) => (release = resolve))
    const nodes = ts.server.nodes
    const acquire = nodes.acquireDoc.bind(nodes)
    const spy = vi.spyOn(nodes, 'acquireDoc').mockImplementation(async (path) => {
      await held
      return acquire(path)
    })
    const raw = await openRawSocket(ts.url, `/mux?token=${encodeURIComponent(ann.token)}`)
    // Another socket, read as usual: its pings count the intervals that pass.
    const clock = await openRawSocket(ts.url, `/mux?token=${encodeURIComponent(ann.token)}`)
    try {
      let ticks = 0
      for (const path of docs) raw.send(encodeMuxFrame({ type: MuxType.Join, path }))
      await waitFor(() => spy.mock.calls.length >= 2, { description: 'two joins waiting on their nodes', timeoutMs: 30_000 })
      clock.socket.on('ping', () => ticks++)
      await waitFor(() => ticks >= 3, { description: 'three ping intervals', timeoutMs: 30_000 })
      expect(raw.socket.readyState).toBe(raw.socket.OPEN)
      release()
      await waitFor(() => raw.messages.filter((m) => decodeMuxFrame(m).type === MuxType.Joined).length === docs.length, { description: 'every join answered', timeoutMs: 30_000 })
      expect(raw.socket.readyState).toBe(raw.socket.OPEN)
      // Read again, it is pinged and answers as any socket.
      let pinged = 0
      raw.socket.on('ping', () => pinged++)
      await waitFor(() => pinged >= 2, { description: 'pinged again', timeoutMs: 30_000 })
      expect(raw.socket.readyState).toBe(raw.socket.OPEN)
    } finally {
      release()
      spy.mockRestore()
      await clock.close()
      await raw.close()
    }
  })
})
