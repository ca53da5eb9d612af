import { WeftError, isWeftError } from '../../shared/errors.js'
import type { ChangeRecord, ErrorCode } from '../../shared/index.js'
import type { ItemResult } from './group-commit.js'
import type { BatchItem } from './sqlite-writer.js'
import type { Account, MoveInput } from './types.js'
import type { ContextualCall } from './contextual-store.js'

/** Messages from the storage adapter to its writer thread. */
export type WriterRequest =
  | { id: number; op: 'batch'; batch: BatchItem[] }
  | { id: number; op: 'createAccount'; account: Account }
  | { id: number; op: 'deleteAccount'; userId: string; email: string }
  | { id: number; op: 'saveToken'; hash: string; userId: string; expiresAt: string }
  | { id: number; op: 'revokeToken'; hash: string }
  | { id: number; op: 'purgeTokens'; before: string }
  | { id: number; op: 'purgeChanges'; below: number }
  | { id: number; op: 'move'; move: MoveInput }
  | { id: number; op: 'contextual'; call: ContextualCall }
  | { id: number; op: 'close' }

export interface SerializedError {
  message: string
  code?: ErrorCode
}

export type WireItemResult = { ok: true; value: ChangeRecord | null } | { ok: false; error: SerializedError }

export type WriterResponse = { id: number; ok: true; value?: WireItemResult[]; result?: unknown } | { id: number; ok: false; error: SerializedError }

export interface WriterInit {
  file: string
  busyTimeoutMs: number
}

/** Errors cross the thread boundary as data; WeftErrors keep their stable code. */
export function serializeError(error: unknown): SerializedError {
  if (isWeftError(error)) return { message: error.message, code: error.code }
  return { message: error instanceof Error ? error.message : String(error) }
}

export function deserializeError(error: SerializedError): Error {
  return error.code ? new WeftError(error.code, error.message) : new Error(error.message)
}

export function toWire(results: ItemResult<ChangeRecord | null>[]): WireItemResult[] {
  return results.map((r) => (r.ok ? r : { ok: false, error: serializeError(r.error) }))
}

export function fromWire(results: WireItemResult[]): ItemResult<ChangeRecord | null>[] {
  return results.map((r) => (r.ok ? r : { ok: false, error: deserializeError(r.error) }))
}
