import type { Engine, EngineContext, EngineFactory } from '../types.js'
import { ThreadEngine } from './thread-engine.js'
import { systemClock, type Clock } from './model.js'
import { threadMessageWriteRule, threadRoutes } from './post.js'
import type { Agent } from './builtin-agent.js'

export { ThreadEngine } from './thread-engine.js'
export { postMessage, MAX_MESSAGE_CHARS } from './post.js'
export { builtinAgent } from './builtin-agent.js'
export type { Agent, RoundIo, RoundOutcome } from './builtin-agent.js'
export { systemClock, type Clock } from './model.js'

export interface ThreadsEngine extends Engine {
  readonly engine: ThreadEngine
}

export interface ThreadsEngineOptions {
  clock?: Clock
  agent?: Agent
}

/** The threads engine ([THR1]–[THR10], docs/SPEC.md "Threads (issue 18)"). */
export function createThreadsEngine(options: ThreadsEngineOptions = {}): EngineFactory {
  return (ctx: EngineContext): ThreadsEngine => {
    const clock = options.clock ?? systemClock
    ctx.nodes.registerWriteRule('ThreadMessage', threadMessageWriteRule())
    const engine = new ThreadEngine(ctx.nodes, ctx.log.child({ engine: 'threads' }), clock, ctx.signal, options.agent)
    return {
      name: 'threads',
      engine,
      routes: threadRoutes(ctx.nodes, clock),
      start: () => engine.start(),
      stop: () => engine.stop(),
    }
  }
}

export const threadsEngine: EngineFactory = createThreadsEngine()
