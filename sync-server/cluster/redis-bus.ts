import { Redis } from 'ioredis'
import type { Logger } from 'pino'

/** One message between instances on the `weft:cluster` channel (JSON; binary fields base64). */
export type BusMessage =
  | { t: 'change'; from: string; version: number; path: string; nodeType: string; kind: string; by: string; origin: string; update?: string; clients?: { client: number; principal: string }[]; name?: string; at?: string; early?: string }
  /** [SCALE12] An update accepted by `from`, sent before it is durable; its `change` (or `failed`) message names its `key`. */
  | { t: 'update'; from: string; key: string; path: string; update: string; clients?: { client: number; principal: string }[] }
  | { t: 'failed'; from: string; key: string; path: string }
  | { t: 'presence'; from: string; path: string; update: string }
  | { t: 'presence?'; from: string; path: string }
  /** [PROD2] An instance shutting down gave the `name` lease up: the others try to take it at once. */
  | { t: 'lease-released'; from: string; name: string }
  /** [CTX43] An MCP client cancelled its call `id` on `from`: the instance running it ends it. */
  | { t: 'mcp-cancel'; from: string; caller: string; id: string | number }
  /** [CTX48] A contextual consumer changed on `from` (settled, work due, deleted): its long polls elsewhere look again. */
  | { t: 'contextual-wake'; from: string; consumer: string; due: boolean }
  /** [AUTH7] A token was revoked (logout) on `from`: the others forget it and end what holds it. */
  | { t: 'token-revoked'; from: string; hash: string }

export const CLUSTER_CHANNEL = 'weft:cluster'

/**
 * [SCALE1] Redis pub/sub between the instances of one deployment (ioredis: one connection to
 * publish, one subscribed). Fire and forget: what Redis drops is caught up from PostgreSQL by
 * the fan-out (fan-out.ts), so nothing here retries. `reconnected` fires each time the
 * subscription is back after a loss (the fan-out then reads what it missed).
 */
export class RedisBus {
  private readonly pub: Redis
  private readonly sub: Redis
  private wasLost = false

  constructor(
    url: string,
    private readonly log: Logger,
    handlers: { message: (m: BusMessage) => void; reconnected: () => void },
  ) {
    const options = { maxRetriesPerRequest: 1, enableOfflineQueue: false, retryStrategy: (n: number) => Math.min(50 * n, 500) }
    this.pub = new Redis(url, options)
    this.sub = new Redis(url, { ...options, enableOfflineQueue: true })
    for (const c of [this.pub, this.sub]) c.on('error', (err: Error) => log.debug({ err: err.message }, 'redis: connection error'))
    this.sub.on('close', () => {
      this.wasLost = true
    })
    this.sub.on('ready', () => {
      if (!this.wasLost) return
      this.wasLost = false
      log.info('redis: subscription back; catching up from the database')
      handlers.reconnected()
    })
    this.sub.on('message', (_channel: string, text: string) => {
      let m: BusMessage
      try {
        m = JSON.parse(text) as BusMessage
      } catch {
        return
      }
      // Whatever else is on the channel (a number, null, an object without a kind) is not ours.
      if (typeof m !== 'object' || m === null || typeof (m as { t?: unknown }).t !== 'string') return
      handlers.message(m)
    })
  }

  async start(): Promise<void> {
    await this.sub.subscribe(CLUSTER_CHANNEL)
  }

  /** Resolves once Redis took the message (or refused it; never rejects): a caller about to close awaits it. */
  publish(m: BusMessage): Promise<void> {
    return this.pub.publish(CLUSTER_CHANNEL, JSON.stringify(m)).then(
      () => undefined,
      (err: unknown) => {
        this.log.debug({ err: (err as Error).message }, 'redis: publish failed (the others catch up from the database)')
      },
    )
  }

  async close(): Promise<void> {
    this.sub.disconnect()
    this.pub.disconnect()
  }
}
