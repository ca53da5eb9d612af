import { describe, expect, it } from 'vitest'
import { InFlightGate, type SessionSocket } from '../../sync-server/sync/socket-guards.js'
import { Rng, forEachSeed, seeds } from '../sim/rng.js'

/**
 * [SYNC17] The per-socket gate, seeded: frames arrive in chunks (a paused socket still delivers the
 * rest of the chunk it read), each frame may start work that settles later in any order. Whatever
 * the interleaving: the work in flight never passes the limit (a chunk's tail waits), every frame runs exactly once and
 * in arrival order, nothing is read while the socket is paused, and once everything settles the
 * socket is read again with nothing held.
 */
describe('[SYNC17] the in-flight gate under any interleaving (seeded)', () => {
  it('bounded, ordered, exactly once, resumed', async () => {
    await forEachSeed('in-flight gate', seeds(200, 7300), async (seed) => {
      const rng = new Rng(seed)
      const max = rng.int(2, 8)
      const ws = {
        readyState: 1,
        OPEN: 1,
        bufferedAmount: 0,
        isPaused: false,
        send: () => undefined,
        close: () => undefined,
        pause: () => void (ws.isPaused = true),
        resume: () => void (ws.isPaused = false),
      }
      const gate = new InFlightGate(ws as typeof ws & SessionSocket, max)
      const ran: number[] = []
      const pending: Array<() => void> = []
      let inFlight = 0
      let peak = 0
      let sent = 0
      const total = rng.int(20, 300)
      const frame = (n: number) => () => {
        ran.push(n)
        // Most frames start work (an update stored, a join's load); some do not (awareness).
        if (rng.next() < 0.8) {
          inFlight++
          peak = Math.max(peak, inFlight)
          let settle!: () => void
          gate.track(new Promise<void>((resolve) => (settle = resolve)).then(() => void inFlight--))
          pending.push(settle)
        }
      }
      const tick = () => new Promise<void>((r) => setImmediate(r))
      while (sent < total || pending.length > 0) {
        if (sent < total && !ws.isPaused && rng.next() < 0.6) {
          // A chunk read from the socket: every frame of it is delivered, paused or not.
          for (let k = rng.int(1, 12); k > 0 && sent < total; k--) gate.admit(frame(sent++))
        } else if (pending.length > 0) {
          pending.splice(rng.int(0, pending.length - 1), 1)[0]!()
          await tick()
        } else if (ws.isPaused) {
          throw new Error('paused with nothing in flight: never read again')
        }
        expect(inFlight).toBeLessThanOrEqual(max)
      }
      await tick()
      // Every frame ran once, in arrival order; nothing held; the socket read again.
      expect(ran).toEqual(Array.from({ length: total }, (_, i) => i))
      expect(ws.isPaused).toBe(false)
      // A chunk's tail delivered after the pause waits: it never starts work past the limit.
      expect(peak).toBeLessThanOrEqual(max)
      expect(peak).toBeGreaterThan(0)
      return total
    })
  })
})
