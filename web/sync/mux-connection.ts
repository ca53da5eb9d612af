import { BehaviorSubject, Subject } from 'rxjs'
import { decodeMuxFrame, encodeMuxFrame, MuxType, type MuxFrame } from '../../shared/protocol.js'

export type ConnectionStatus = 'offline' | 'connecting' | 'open' | 'final'

/** A refusal of the whole session (4400–4499): retrying cannot help, the user must act. */
export interface FinalClose {
  code: number
  reason: string
}

/**
 * The socket keeps failing the same way (same close code): shown in the status so a person
 * learns why instead of watching it cycle. `count` is the number of such failures in a row.
 */
export interface ConnectionTrouble {
  code: number
  reason: string
  count: number
}

/**
 * A socket must stay open this long before the backoff starts over: a server that accepts the
 * socket and then closes it (a frame over its limit, a crash on join) would otherwise be
 * retried at the minimum delay forever.
 */
const STABLE_OPEN_MS = 5_000

export interface RoomHandler {
  /** The socket is open and the Join for this room has been sent. */
  onSocketOpen(): void
  onFrame(frame: MuxFrame): void
  /** The socket closed; everything in flight on it is lost. */
  onSocketClose(): void
}

export interface MuxConnectionOptions {
  url: () => string
  WebSocketImpl?: typeof WebSocket
  /** First retry delay; doubles per failed attempt up to maxDelayMs (with jitter). */
  minDelayMs?: number
  maxDelayMs?: number
}

export function isFinalCloseCode(code: number): boolean {
  return code >= 4400 && code <= 4499
}

/**
 * The one WebSocket of a session, carrying every node's room (DESIGN.md "One socket").
 * Reconnects with exponential backoff; a close in 4400–4499 is final and stops retrying.
 * It also trusts the browser's offline signal: an open WebSocket survives the browser going
 * offline (e.g. Playwright's setOffline leaves open sockets working, microsoft/playwright#4910,
 * and a real network loss can leave a half-open socket for minutes), and a socket that
 * silently eats frames is worse than none.
 */
export class MuxConnection {
  readonly status$ = new BehaviorSubject<ConnectionStatus>('offline')
  readonly final$ = new BehaviorSubject<FinalClose | null>(null)
  /** The server's hint that readable nodes changed, up to this version (MuxType.Changed). */
  readonly changed$ = new Subject<number>()
  readonly trouble$ = new BehaviorSubject<ConnectionTrouble | null>(null)
  /** Sockets opened (diagnostics and tests: a reconnect loop shows up here). */
  opens = 0
  private stableTimer: ReturnType<typeof setTimeout> | null = null
  /** Diagnostics (benchmarks): called with every frame received and sent. */
  tap: ((direction: 'in' | 'out', frame: MuxFrame) => void) | null = null
  private ws: WebSocket | null = null
  private readonly rooms = new Map<string, RoomHandler>()
  private attempt = 0
  private timer: ReturnType<typeof setTimeout> | null = null
  private running = false
  private readonly WS: typeof WebSocket
  private readonly onOnline = () => this.connectNow()
  private readonly onOffline = () => this.dropSocket()

  constructor(private readonly opts: MuxConnectionOptions) {
    this.WS = opts.WebSocketImpl ?? WebSocket
  }

  start(): void {
    if (this.running) return
    this.running = true
    if (typeof window !== 'undefined') {
      window.addEventListener('online', this.onOnline)
      window.addEventListener('offline', this.onOffline)
    }
    this.connect()
  }

  stop(): void {
    this.running = false
    if (this.stableTimer) clearTimeout(this.stableTimer)
    this.stableTimer = null
    if (typeof window !== 'undefined') {
      window.removeEventListener('online', this.onOnline)
      window.removeEventListener('offline', this.onOffline)
    }
    if (this.timer) clearTimeout(this.timer)
    this.timer = null
    this.dropSocket()
  }

  get isOpen(): boolean {
    return this.status$.value === 'open'
  }

  join(path: string, handler: RoomHandler): void {
    this.rooms.set(path, handler)
    if (this.isOpen) {
      this.send({ type: MuxType.Join, path })
      handler.onSocketOpen()
    }
  }

  leave(path: string): void {
    if (!this.rooms.delete(path)) return
    if (this.isOpen) this.send({ type: MuxType.Leave, path })
  }

  hasRoom(path: string): boolean {
    return this.rooms.has(path)
  }

  send(frame: MuxFrame): boolean {
    if (!this.ws || this.ws.readyState !== this.WS.OPEN) return false
    this.tap?.('out', frame)
    this.ws.send(encodeMuxFrame(frame))
    return true
  }

  /** Drops the socket as a network failure would, then reconnects through the normal path. */
  cycle(): void {
    if (!this.running || this.status$.value === 'final') return
    this.dropSocket()
    this.scheduleReconnect()
  }

  /** Skips the backoff wait (the browser says the network is back). */
  connectNow(): void {
    if (!this.running || this.status$.value === 'final') return
    // The network came back: one immediate try, but the backoff level is kept, so a server
    // that still refuses is not hammered.
    if (this.ws) return
    if (this.timer) clearTimeout(this.timer)
    this.timer = null
    this.connect()
  }

  private connect(): void {
    if (!this.running || this.ws || this.status$.value === 'final') return
    if (typeof navigator !== 'undefined' && navigator.onLine === false) {
      this.status$.next('offline')
      return // the 'online' event reconnects
    }
    this.status$.next('connecting')
    let ws: WebSocket
    try {
      ws = new this.WS(this.opts.url())
    } catch {
      this.scheduleReconnect()
      return
    }
    ws.binaryType = 'arraybuffer'
    this.ws = ws
    this.opens++
    ws.onopen = () => {
      if (this.ws !== ws) return
      if (this.stableTimer) clearTimeout(this.stableTimer)
      this.stableTimer = setTimeout(() => {
        this.stableTimer = null
        if (this.ws !== ws) return
        this.attempt = 0
        this.trouble$.next(null)
      }, STABLE_OPEN_MS)
      this.status$.next('open')
      for (const [path, handler] of this.rooms) {
        this.send({ type: MuxType.Join, path })
        handler.onSocketOpen()
      }
    }
    ws.onmessage = (ev: MessageEvent) => {
      if (this.ws !== ws) return
      let frame: MuxFrame
      try {
        frame = decodeMuxFrame(new Uint8Array(ev.data as ArrayBuffer))
      } catch (e) {
        console.warn('[weft] dropping malformed frame', e)
        return
      }
      this.tap?.('in', frame)
      if (frame.type === MuxType.Error) {
        console.warn(`[weft] server error ${frame.code}: ${frame.message}`)
        return
      }
      if (frame.type === MuxType.Changed) {
        this.changed$.next(frame.version)
        return
      }
      this.rooms.get(frame.path)?.onFrame(frame)
    }
    ws.onclose = (ev: CloseEvent) => {
      if (this.ws !== ws) return
      this.ws = null
      if (this.stableTimer) clearTimeout(this.stableTimer)
      this.stableTimer = null
      this.noteFailure(ev.code, ev.reason)
      for (const handler of this.rooms.values()) handler.onSocketClose()
      if (isFinalCloseCode(ev.code)) {
        this.final$.next({ code: ev.code, reason: ev.reason })
        this.status$.next('final')
        return
      }
      this.status$.next('offline')
      this.scheduleReconnect()
    }
    ws.onerror = () => {
      // onclose follows; nothing to do here.
    }
  }

  private noteFailure(code: number, reason: string): void {
    const prev = this.trouble$.value
    this.trouble$.next(prev && prev.code === code ? { code, reason: reason || prev.reason, count: prev.count + 1 } : { code, reason, count: 1 })
  }

  /** Every reconnect waits: exponential with full jitter, so a fleet of clients spreads out. */
  private scheduleReconnect(): void {
    if (!this.running || this.timer) return
    const min = this.opts.minDelayMs ?? 250
    const max = this.opts.maxDelayMs ?? 10_000
    const delay = Math.min(max, min * 2 ** Math.min(this.attempt, 16)) * (0.5 + Math.random() / 2)
    this.attempt++
    this.timer = setTimeout(() => {
      this.timer = null
      this.connect()
    }, delay)
  }

  private dropSocket(): void {
    const ws = this.ws
    if (!ws) {
      if (this.status$.value !== 'final') this.status$.next('offline')
      return
    }
    this.ws = null
    ws.onopen = ws.onmessage = ws.onclose = null
    // Not null: closing a socket that is still connecting reports an error event (the `ws`
    // package in Node tests), which must land somewhere rather than become uncaught.
    ws.onerror = () => undefined
    try {
      ws.close(1000, 'offline')
    } catch {
      // already closing
    }
    for (const handler of this.rooms.values()) handler.onSocketClose()
    if (this.status$.value !== 'final') this.status$.next('offline')
  }
}
