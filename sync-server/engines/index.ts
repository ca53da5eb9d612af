import type { EngineFactory } from './types.js'
import { subscriptionsEngine } from './subscriptions/index.js'
import { activitiesEngine } from './activities/index.js'
import { threadsEngine } from './threads/index.js'

export type { Engine, EngineContext, EngineFactory } from './types.js'

/** Engines the server starts, in order. Each reconciles on boot before /healthz turns ok. */
export const defaultEngines: EngineFactory[] = [subscriptionsEngine, activitiesEngine, threadsEngine]
export { Ownership, type LeaseBusy, type LeaseStore } from './kit/index.js'
export type { Lease } from './kit/index.js'
