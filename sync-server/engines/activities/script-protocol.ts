import type { JsonObject, JsonValue } from '../../../shared/index.js'

/** Messages between the activity engine (main thread) and a script worker. One worker runs one script. */

export type ScriptLanguage = 'javascript' | 'typescript'

export interface ScriptLimits {
  timeoutMs: number
  memoryMb: number
}

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
export type ScriptLimit = 'SCRIPT_TIMEOUT_MS' | 'SCRIPT_MEMORY_MB'

export type FromWorker =
  | { t: 'ready' }
  /** Log lines in the order logged, batched (a few milliseconds' worth, or one synchronous stretch). */
  | { t: 'logs'; lines: { level: 'Info' | 'Warning' | 'Error'; text: string }[] }
  | { t: 'progress'; fraction: number; text?: string }
  | { t: 'mesh'; id: number; op: MeshOp; args: JsonValue[] }
  | { t: 'done'; ok: true; value: JsonValue }
  | { t: 'done'; ok: false; message: string; aborted: boolean; limit?: ScriptLimit }
