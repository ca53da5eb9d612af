/**
 * What a session needs of its socket: a `ws` WebSocket, or a simulated one in tests
 * (test/sim/net/). Sessions never touch anything else of the transport.
 */
export interface SessionSocket {
  readonly readyState: number
  readonly OPEN: number
  /** Bytes queued but not yet sent. */
  readonly bufferedAmount: number
  send(data: Uint8Array): void
  close(code?: number, reason?: string): void
  /** Stops reading the client's frames (backpressure) until `resume`. */
  pause(): void
  resume(): void
}

/**
 * Refusals a socket may earn before it is closed (4429): a token bucket. Refusing an update
 * costs admission work; a client that keeps sending refused updates must not be able to spend
 * the server's CPU on it. An honest client earns a refusal now and then (it then rebuilds).
 */
export class RefusalBudget {
  private tokens: number
  private last = Date.now()

  constructor(
    private readonly capacity = 30,
    private readonly perSecond = 5,
  ) {
    this.tokens = capacity
  }

  /** Spends one refusal; false once the socket has earned more than the budget allows. */
  spend(): boolean {
    const now = Date.now()
    this.tokens = Math.min(this.capacity, this.tokens + ((now - this.last) / 1000) * this.perSecond)
    this.last = now
    this.tokens -= 1
    return this.tokens >= 0
  }
}

/** Counts one refusal against the socket's budget; past it the socket is closed with 4429. */
export function spendRefusal(ws: SessionSocket, budget: RefusalBudget): void {
  if (!budget.spend()) ws.close(CLOSE_TOO_MANY_REFUSALS, 'too_many_refusals: this socket keeps sending refused updates')
}

/**
 * Bounded work per socket: at most `max` of its updates wait for durability; past that the
 * socket stops being read (TCP pushes back on the client) until half of them have settled.
 */
export class InFlightGate {
  private count = 0
  private paused = false
  /**
   * [SYNC17] Frames that arrived while the gate was closed: pausing the socket stops it reading,
   * but the WebSocket library still delivers every frame of the chunk it already read (a burst of
   * thousands of small frames is one chunk). They wait here, in order, bounded by what was read
   * before the pause, and run as the gate opens.
   */
  private readonly held: (() => void)[] = []

  constructor(
    private readonly ws: SessionSocket,
    private readonly max: number,
  ) {}

  /** Runs `frame` now, or once the gate opens when it is closed (in arrival order). `frame` must not throw. */
  admit(frame: () => void): void {
    if (this.paused || this.held.length > 0) {
      this.held.push(frame)
      return
    }
    frame()
  }

  track(written: Promise<unknown>): void {
    this.count++
    if (this.count >= this.max && !this.paused) {
      this.paused = true
      this.ws.pause()
    }
    const settle = () => {
      this.count--
      if (this.paused && this.count <= this.max / 2) {
        this.paused = false
        // Held frames first: they may close the gate again before the socket is read.
        while (this.held.length > 0 && !this.paused) this.held.shift()!()
        if (!this.paused && this.ws.readyState === this.ws.OPEN) this.ws.resume()
      }
    }
    written.then(settle, settle)
  }
}

/**
 * Sends unless the socket's send buffer is past `limit`: a client that does not read (or reads
 * too slowly) is closed (1013, transient: it reconnects and catches up by sync step 1) instead of
 * holding an ever-growing buffer of relays in server memory.
 */
export function sendBounded(ws: SessionSocket, data: Uint8Array, limit: number): void {
  if (ws.readyState !== ws.OPEN) return
  if (ws.bufferedAmount > limit) {
    ws.close(CLOSE_TOO_SLOW, 'too_slow: the connection does not keep up; reconnect')
    return
  }
  ws.send(data)
}

const CLOSE_TOO_SLOW = 1013
const CLOSE_TOO_MANY_REFUSALS = 4429
export const CLOSE_SESSION_ENDED = 4401
