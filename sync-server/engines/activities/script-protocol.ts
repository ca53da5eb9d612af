import type { JsonObject, JsonValue } from '../../../shared/index.js'

/** Messages between the activity engine (main thread) and a script worker. One worker runs one script. */

export type ScriptLanguage = 'javascript' | 'typescript'

/** [ACT18] What bounds one run; each is named by its configuration variable when it is hit. */
export interface ScriptLimits {
  /** SCRIPT_TIMEOUT_MS */
  timeoutMs: number
  /** SCRIPT_MEMORY_MB: the run's whole WASM memory (QuickJS heap and interpreter), sized once. */
  memoryMb: number
  /** SCRIPT_LOG_MAX_LINES: lines kept per run; later lines are dropped (one Warning says so). */
  logMaxLines?: number
  /** SCRIPT_LOG_MAX_BYTES: UTF-8 bytes of line text kept per run; later lines are dropped. */
  logMaxBytes?: number
  /** SCRIPT_MESH_IN_FLIGHT: Mesh calls of one run the server works on at once; later calls wait their turn. */
  meshInFlight?: number
  /** MAX_PAYLOAD_BYTES: the largest value a script writes (a Mesh call's arguments, ReturnValue, a line, progress text). */
  maxPayloadBytes?: number
}

/**
 * [ACT12] Log batches a worker has sent that the host has not given back yet, at most: past it
 * the script waits (it is a flood), so it goes at the pace the server takes its lines.
 */
export const LOG_BATCHES_IN_FLIGHT = 2

export type MeshOp = 'get' | 'put' | 'patch' | 'delete' | 'query' | 'waitFor'

export type ToWorker =
  | {
      t: 'run'
      source: string
      language: ScriptLanguage
      inputs: JsonObject
      limits: ScriptLimits
      /** Int32Array over it: [0] = 1 once cancellation is requested (read by Ct.aborted while a script spins). */
      cancelFlag: SharedArrayBuffer
    }
  | { t: 'cancel' }
  | { t: 'mesh-result'; id: number; ok: true; value: JsonValue }
  | { t: 'mesh-result'; id: number; ok: false; code: string; message: string }

/** The limit a run went past, named by its configuration variable. */
export type ScriptLimit = 'SCRIPT_TIMEOUT_MS' | 'SCRIPT_MEMORY_MB' | 'MAX_PAYLOAD_BYTES'

export type LogLine = { level: 'Info' | 'Warning' | 'Error'; text: string }

export type FromWorker =
  | { t: 'ready' }
  /**
   * Log lines in the order logged, batched (a few milliseconds' worth, or one synchronous
   * stretch), with the latest progress of that stretch (a script calling Progress in a loop
   * costs the server one message per batch, not one per call).
   */
  | { t: 'logs'; lines: LogLine[]; progress?: { fraction: number; text?: string } }
  | { t: 'mesh'; id: number; op: MeshOp; args: JsonValue[] }
  | { t: 'done'; ok: true; value: JsonValue }
  | { t: 'done'; ok: false; message: string; aborted: boolean; limit?: ScriptLimit }
