import { availableParallelism } from 'node:os'
import type { Engine, EngineContext, EngineFactory } from '../types.js'
import { ActivityEngine, type ActivityEngineConfig } from './activity-engine.js'
import { activityRoutes } from './run-route.js'
import { CodeCheckEngine } from './code-check.js'
import { seedTemplates } from './templates.js'
import { activityWriteRule } from './activity-rules.js'

export type ActivitiesEngineOptions = Partial<ActivityEngineConfig> & {
  /** Quiet time after a Source change before its syntax check runs (default 300 ms). */
  checkDebounceMs?: number
  /** Seed the built-in operation templates (default true). */
  seedTemplates?: boolean
}

export interface ActivitiesEngine extends Engine {
  readonly engine: ActivityEngine
  readonly checks: CodeCheckEngine
}

function int(env: NodeJS.ProcessEnv, name: string, fallback: number): number {
  const v = env[name]
  if (v === undefined || v === '') return fallback
  const n = Number(v)
  if (!Number.isInteger(n) || n < 0) throw new Error(`${name} must be a non-negative integer, got ${JSON.stringify(v)}`)
  return n
}

/** The configuration from the environment (DESIGN.md names and defaults). */
export function activityConfigFromEnv(env: NodeJS.ProcessEnv = process.env): ActivityEngineConfig {
  return {
    timeoutMs: int(env, 'SCRIPT_TIMEOUT_MS', 300_000),
    memoryMb: int(env, 'SCRIPT_MEMORY_MB', 64),
    cancelGraceMs: int(env, 'SCRIPT_CANCEL_GRACE_MS', 2_000),
    watchdogMs: int(env, 'ACTIVITY_WATCHDOG_MS', 600_000),
    flushMs: int(env, 'ACTIVITY_FLUSH_MS', 20),
    maxConcurrent: int(env, 'SCRIPT_MAX_CONCURRENT', 16),
    spares: int(env, 'SCRIPT_SPARE_WORKERS', 2),
    cpuSlots: int(env, 'SCRIPT_CPU_SLOTS', Math.max(1, availableParallelism() - 1)),
    reconcileIntervalMs: int(env, 'ACTIVITY_RECONCILE_MS', 30_000) || null,
  }
}

/** The activities engine ([ACT1]–[ACT12], docs/SPEC.md "Activities (issue 11)"). */
export function createActivitiesEngine(options: ActivitiesEngineOptions = {}): EngineFactory {
  return (ctx: EngineContext): ActivitiesEngine => {
    const { seedTemplates: seed = true, checkDebounceMs = 300, ...overrides } = options
    const config: ActivityEngineConfig = { ...activityConfigFromEnv(), ...overrides }
    const log = ctx.log.child({ engine: 'activities' })
    // [ACT17] Before any write can reach an ActivityLog: who starts a run is recorded with the request.
    ctx.nodes.registerWriteRule('ActivityLog', activityWriteRule(ctx.nodes))
    const engine = new ActivityEngine(ctx.nodes, log, config, ctx.signal)
    const checks = new CodeCheckEngine(ctx.nodes, log.child({ part: 'code-check' }), { debounceMs: checkDebounceMs, signal: ctx.signal })
    return {
      name: 'activities',
      engine,
      checks,
      routes: activityRoutes(ctx.nodes, (path) => engine.watch(path)),
      async start() {
        await engine.start()
        await checks.start()
        if (seed) await seedTemplates(ctx.nodes)
      },
      async stop() {
        await checks.stop()
        await engine.stop()
      },
    }
  }
}

export const activitiesEngine: EngineFactory = createActivitiesEngine()
