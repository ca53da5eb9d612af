import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { MuxType, decodeMuxFrame, encodeMuxFrame } from '../../shared/index.js'
import { createDocument, createSpace, openRawSocket, signup, startTestServer, waitFor, type TestServer, type TestUser } from '../helpers/index.js'

/**
 * [SYNC17] On a real server with a small in-flight limit, a burst of joins far past it (sent at
 * once, without waiting for answers) pauses the socket and resumes it as joins settle: every join
 * is answered (Joined for a node, Denied not_found for a path with none), the socket stays open,
 * and the server serves another client meanwhile.
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

  it('300 joins in one burst with a limit of 4: all answered, the socket open', async () => {
    const docs: string[] = []
    for (let i = 0; i < 30; i++) docs.push(await createDocument(ts.url, ann.token, `${space}/d${i}`, { N: i }))
    const missing = Array.from({ length: 270 }, (_, i) => `${space}/none${i}`)
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
