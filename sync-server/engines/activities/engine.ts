import { availableParallelism } from 'node:os'
import type { Observable } from 'rxjs'
import type { LiveChange } from '../../nodes/index.js'
import type { Clock } from '../kit/index.js'
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
  /** The engine's clock (default wall time; the test mesh passes a virtual one). */
  clock?: Clock
  /** The change feed (default `nodes.changes$`; the test mesh drops, delays and reorders it). */
  changes$?: Observable<LiveChange>
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
    // [ACT18] Bounds of every run (README "Settings"); each is named when a run hits it.
    logMaxLines: int(env, 'SCRIPT_LOG_MAX_LINES', 100_000),
    logMaxBytes: int(env, 'SCRIPT_LOG_MAX_BYTES', 4 * 1024 * 1024),
    logLinesPerSecond: int(env, 'SCRIPT_LOG_LINES_PER_SECOND', 10_000),
    meshInFlight: Math.max(1, int(env, 'SCRIPT_MESH_IN_FLIGHT', 64)),
    maxRunsPerUser: int(env, 'SCRIPT_MAX_RUNS_PER_USER', 4),
    workerNice: Math.min(19, int(env, 'SCRIPT_NICE', 10)),
    // The server's MAX_PAYLOAD_BYTES (the engine context carries the configured value).
    maxPayloadBytes: int(env, 'MAX_PAYLOAD_BYTES', 1024 * 1024),
  }
}

/** [ACT18] The limits of a run as `GET /api/config` lists them, by the names that set them. */
export function activityLimits(config: ActivityEngineConfig): Record<string, number> {
  return {
    SCRIPT_TIMEOUT_MS: config.timeoutMs,
    SCRIPT_MEMORY_MB: Math.max(16, config.memoryMb),
    SCRIPT_LOG_MAX_LINES: config.logMaxLines,
    SCRIPT_LOG_MAX_BYTES: config.logMaxBytes,
    SCRIPT_LOG_LINES_PER_SECOND: config.logLinesPerSecond ?? 0,
    SCRIPT_MESH_IN_FLIGHT: config.meshInFlight,
    SCRIPT_MAX_RUNS_PER_USER: config.maxRunsPerUser,
    SCRIPT_MAX_CONCURRENT: config.maxConcurrent,
    SCRIPT_CANCEL_GRACE_MS: config.cancelGraceMs,
    ACTIVITY_WATCHDOG_MS: config.watchdogMs,
    MAX_PAYLOAD_BYTES: config.maxPayloadBytes,
  }
}

/** The activities engine ([ACT1]–[ACT12], docs/SPEC.md "Activities (issue 11)"). */
export function createActivitiesEngine(options: ActivitiesEngineOptions = {}): EngineFactory {
  return (ctx: EngineContext): ActivitiesEngine => {
    const { seedTemplates: seed = true, checkDebounceMs = 300, clock, changes$, ...overrides } = options
    const fromEnv = activityConfigFromEnv()
    // MAX_PAYLOAD_BYTES is the server's setting: the context carries what the server was started with.
    const config: ActivityEngineConfig = { ...fromEnv, ...(ctx.maxPayloadBytes !== undefined ? { maxPayloadBytes: ctx.maxPayloadBytes } : {}), ...overrides }
    const log = ctx.log.child({ engine: 'activities' })
    // [ACT17] Before any write can reach an ActivityLog: who starts a run is recorded with the request.
    ctx.nodes.registerWriteRule('ActivityLog', activityWriteRule(ctx.nodes))
    const engine = new ActivityEngine(ctx.nodes, log, config, ctx.signal, { ...(clock ? { clock } : {}), ...(changes$ ? { changes$ } : {}) })
    const checks = new CodeCheckEngine(ctx.nodes, log.child({ part: 'code-check' }), { debounceMs: checkDebounceMs, signal: ctx.signal, ...(clock ? { clock } : {}), ...(changes$ ? { changes$ } : {}) })
    return {
      name: 'activities',
      engine,
      checks,
      routes: activityRoutes(ctx.nodes, (path) => engine.watch(path)),
      limits: () => activityLimits(config),
      inUse: () => engine.inUse(),
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
