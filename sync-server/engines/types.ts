import type { Logger } from 'pino'
import type { NodeApi } from '../nodes/index.js'
import type { Route } from '../http/index.js'
import type { UserDirectory } from '../auth/index.js'

/** What the server hands every engine. Engines act as SYSTEM and re-check callers where the seeds say so. */
export interface EngineContext {
  nodes: NodeApi
  users: UserDirectory
  log: Logger
  /** Aborted when the server shuts down. */
  signal: AbortSignal
  /** The server's MAX_PAYLOAD_BYTES: what an engine writes on someone's behalf stays under it too. */
  maxPayloadBytes?: number
}

export interface Engine {
  readonly name: string
  /** Reconcile on boot: resolves once the engine has caught up with current state (gates /healthz). */
  start(): Promise<void>
  stop(): Promise<void>
  /** HTTP routes the engine serves under /api. */
  readonly routes?: readonly Route[]
  /** The limits the engine enforces, by the settings' names, for `GET /api/config`. */
  limits?(): Record<string, number>
  /**
   * [PROD3] Someone uses this server (its first signed-in request or socket since boot): warm
   * what their first use will need. Called once, possibly before `start` resolves; an engine not
   * started (another instance owns the engines) warms when it starts.
   */
  inUse?(): void
}

export type EngineFactory = (ctx: EngineContext) => Engine
