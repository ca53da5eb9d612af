import type { Observable } from 'rxjs'
import type { Logger } from 'pino'
import type { LiveChange, NodeApi } from '../../nodes/index.js'
import type { Clock } from '../kit/index.js'
import type { ContinuationHandler } from './continuation-registry.js'

export interface ModuleContext {
  nodes: NodeApi
  log: Logger
  changes$: Observable<LiveChange>
  /** The engine's clock (the runner's). */
  clock?: Clock
}

/**
 * A module plugs into the runner in two ways: it may claim continuation types (exactly one
 * claimant per type), and it may run receivers for EventDeliveries written onto its own nodes
 * (the generic DeliverToNode continuation). `start` reconciles before it resolves, like the
 * runner, and returns the function that stops it.
 */
export interface SubscriptionModule {
  readonly name: string
  readonly continuations?: Readonly<Record<string, ContinuationHandler>>
  start?(ctx: ModuleContext): Promise<() => void>
}
