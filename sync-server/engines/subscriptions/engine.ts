import type { Observable } from 'rxjs'
import type { Engine, EngineContext, EngineFactory } from '../types.js'
import type { LiveChange } from '../../nodes/index.js'
import type { Clock } from '../kit/index.js'
import { ContinuationRegistry } from './continuation-registry.js'
import { registerPlatformContinuations } from './continuations.js'
import type { SubscriptionModule } from './module.js'
import { socialModule } from './modules/social-post.js'
import { registerTierInviteType, tierInviteModule } from './modules/tier-invite.js'
import { subscriptionWriteRule } from './requester.js'
import { inviteRoutes } from './routes.js'
import { SubscriptionRunner } from './runner.js'

export interface SubscriptionsEngineOptions {
  /** Modules claiming continuation types or receiving deliveries (default: social + tier invites). */
  modules?: readonly SubscriptionModule[]
  /** Replaces the change feed the runner listens to (tests drop events through it). */
  changes$?: (ctx: EngineContext) => Observable<LiveChange>
  reconcileIntervalMs?: number | null
  concurrency?: number
  warmAheadMs?: number
  /** The runner's clock (default wall time; the test mesh passes a virtual one). */
  clock?: Clock
}

export interface SubscriptionsEngine extends Engine {
  readonly runner: SubscriptionRunner
  readonly registry: ContinuationRegistry
}

export const DEFAULT_MODULES: readonly SubscriptionModule[] = [socialModule, tierInviteModule]

/**
 * The event-subscriptions engine: one runner per server, acting as system.
 *
 * Rules (tests cite the ids):
 *  [SUB1] persisted enum numbers never change; new members are appended.
 *  [SUB2] a value this build does not know survives a round trip and ends the subscription
 *         Failed with the value named on LastError; it is never run as something else.
 *  [SUB3] a subscription fires at most once (Pending → Fired | Failed is claimed inside
 *         nodes.update); every continuation is an idempotent create-or-update.
 *  [SUB4] invites use deterministic ids: a re-invite upserts the same subscription.
 *  [SUB5] NodeChange matching is indexed, never a scan of every pending subscription.
 *  [SUB6] exactly one claimant per continuation type; a second claim fails start-up.
 *  [SUB7] a legacy ScheduledAction migrates to an EventSubscription; a failed migration is
 *         retried and the legacy node is removed only after the new one is durable.
 *  [SUB13] a subscription acts for whoever wrote it (the write rule stamps CreatedBy), re-checked
 *          when it fires; never for whom its content names. Continuation claims
 * are made when the engine is built, so a doubly-claimed type fails server start-up, naming both
 * claimants.
 */
export function createSubscriptionsEngine(options: SubscriptionsEngineOptions = {}): EngineFactory {
  return (ctx: EngineContext): SubscriptionsEngine => {
    registerTierInviteType()
    // [SUB13] Before any write can reach a subscription: whoever writes one is who it acts for.
    ctx.nodes.registerWriteRule('EventSubscription', subscriptionWriteRule())
    const modules = options.modules ?? DEFAULT_MODULES
    const registry = new ContinuationRegistry()
    registerPlatformContinuations(registry)
    for (const m of modules) {
      for (const [type, handler] of Object.entries(m.continuations ?? {})) registry.claim(type, m.name, handler)
    }
    const log = ctx.log.child({ engine: 'subscriptions' })
    const changes$ = options.changes$?.(ctx) ?? ctx.nodes.changes$
    const runner = new SubscriptionRunner({
      nodes: ctx.nodes,
      log,
      registry,
      changes$,
      reconcileIntervalMs: options.reconcileIntervalMs,
      concurrency: options.concurrency,
      warmAheadMs: options.warmAheadMs,
      ...(options.clock ? { clock: options.clock } : {}),
    })
    const stops: Array<() => void> = []
    return {
      name: 'subscriptions',
      runner,
      registry,
      routes: inviteRoutes({ nodes: ctx.nodes, users: ctx.users }),
      async start() {
        for (const m of modules) if (m.start) stops.push(await m.start({ nodes: ctx.nodes, log: log.child({ module: m.name }), changes$, ...(options.clock ? { clock: options.clock } : {}) }))
        await runner.start()
      },
      async stop() {
        for (const s of stops.splice(0)) s()
        await runner.stop()
      },
    }
  }
}

export const subscriptionsEngine: EngineFactory = createSubscriptionsEngine()
