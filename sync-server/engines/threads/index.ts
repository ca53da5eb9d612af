import type { Observable } from 'rxjs'
import type { LiveChange } from '../../nodes/index.js'
import { realClock, type Clock as KitClock } from '../kit/index.js'
import type { Engine, EngineContext, EngineFactory } from '../types.js'
import { DEFAULT_MAX_DELEGATION_DEPTH, ThreadEngine } from './thread-engine.js'
import { roundClockOf, type Clock } from './model.js'
import { threadMessageWriteRule, threadRoutes } from './post.js'
import { builtinAgent, type Agent } from './builtin-agent.js'
import { threadWriteRule } from './approvals.js'
import { createLlmAgent, llmConfigFromEnv, positiveInt, type LlmConfig } from './llm-agent.js'
import { DEFAULT_MAX_RESPONSE_CHARS } from './cell-writer.js'
import { scriptAgent } from './script-agent.js'

export { ThreadEngine } from './thread-engine.js'
export { postMessage, MAX_MESSAGE_CHARS } from './post.js'
export { builtinAgent } from './builtin-agent.js'
export type { Agent, RoundIo, RoundOutcome } from './builtin-agent.js'
export { DEFAULT_APPROVE } from './llm-agent.js'
export type { LlmConfig } from './llm-agent.js'
export { RoundTools } from './round-tools.js'
export { systemClock, roundClockOf, type Clock } from './model.js'

export interface ThreadsEngine extends Engine {
  readonly engine: ThreadEngine
}

export interface ThreadsEngineOptions {
  /** The engine's clock (kit `Clock`; default wall time; the test mesh passes a virtual one). */
  clock?: KitClock
  /** A round's clock (`/sleep`; default made from `clock`): tests hold rounds open with it. */
  roundClock?: Clock
  /** The change feed (default `nodes.changes$`; the test mesh drops, delays and reorders it). */
  changes$?: Observable<LiveChange>
  /** How often a pass looks for work the feed missed (default 30 s; null = at boot only). */
  reconcileIntervalMs?: number | null
  /** The built-in kind's executor (default the deterministic built-in agent). */
  agent?: Agent
  /** [THR10] The LLM provider (default from WEFT_LLM_* in the environment; null = none). */
  llm?: LlmConfig | null
  /** [THR24] Sub-threads below a thread at most (default WEFT_THREAD_MAX_DEPTH, else 4). */
  maxDelegationDepth?: number
  /** [THR24] Characters a response cell may hold (default WEFT_THREAD_MAX_RESPONSE_CHARS, else 1,000,000). */
  maxResponseChars?: number
}

/** The threads engine ([THR1]–[THR22], docs/SPEC.md "Threads (issue 18)"). */
export function createThreadsEngine(options: ThreadsEngineOptions = {}): EngineFactory {
  return (ctx: EngineContext): ThreadsEngine => {
    const clock = options.clock ?? realClock
    const roundClock = options.roundClock ?? roundClockOf(clock)
    ctx.nodes.registerWriteRule('ThreadMessage', threadMessageWriteRule())
    ctx.nodes.registerWriteRule('Thread', threadWriteRule())
    const llm = options.llm === undefined ? llmConfigFromEnv() : options.llm
    const agents = { builtin: options.agent ?? builtinAgent, script: scriptAgent, ...(llm ? { llm: createLlmAgent(llm) } : {}) }
    const engine = new ThreadEngine(ctx.nodes, ctx.log.child({ engine: 'threads' }), {
      clock,
      roundClock,
      signal: ctx.signal,
      agents,
      ...(options.changes$ ? { changes$: options.changes$ } : {}),
      ...(options.reconcileIntervalMs !== undefined ? { reconcileIntervalMs: options.reconcileIntervalMs } : {}),
      maxDelegationDepth: options.maxDelegationDepth ?? maxDepthFromEnv(),
      maxResponseChars: options.maxResponseChars ?? maxResponseCharsFromEnv(),
    })
    return {
      name: 'threads',
      engine,
      routes: threadRoutes(ctx.nodes, roundClock),
      start: () => engine.start(),
      stop: () => engine.stop(),
    }
  }
}

/** [THR24] WEFT_THREAD_MAX_DEPTH: sub-threads below a thread at most (default 4). */
export function maxDepthFromEnv(env: NodeJS.ProcessEnv = process.env): number {
  const raw = env.WEFT_THREAD_MAX_DEPTH
  if (raw === undefined || raw.trim() === '') return DEFAULT_MAX_DELEGATION_DEPTH
  const n = Number(raw)
  if (!Number.isInteger(n) || n < 1) throw new Error(`WEFT_THREAD_MAX_DEPTH must be a positive integer, got ${JSON.stringify(raw)}`)
  return n
}

/** [THR24] WEFT_THREAD_MAX_RESPONSE_CHARS: characters a response cell may hold (default 1,000,000). */
export function maxResponseCharsFromEnv(env: NodeJS.ProcessEnv = process.env): number {
  return positiveInt(env, 'WEFT_THREAD_MAX_RESPONSE_CHARS', DEFAULT_MAX_RESPONSE_CHARS)
}

export const threadsEngine: EngineFactory = createThreadsEngine()
