import { z } from 'zod'
import { WeftError } from './errors.js'
import { isJsonObject, type JsonObject } from './json.js'
import { storableText, unstorableTextReason } from './storable-text.js'
import type { NodePath } from './path.js'
import type { MeshChangeKind } from './enums.js'

export type NodeState = 'Active'

/** DESIGN.md node model. `version` is the global commit sequence of the node's last change. */
export interface MeshNode {
  path: NodePath
  nodeType: string
  name: string
  content: JsonObject
  createdBy: string
  createdAt: string
  updatedAt: string
  version: number
  state: NodeState
}

export interface ChangeRecord {
  version: number
  path: NodePath
  nodeType: string
  kind: MeshChangeKind
}

/** A half-open range of path strings, `from <= path < to` (bytewise, as both backends order paths): a caller's readable region ([QUERY1]). */
export interface PathRange {
  from: string
  to: string
}

export interface NodeQuery {
  parent?: NodePath
  nodeType?: string
  /** Equality on top-level content fields; values compare as strings, field names and values case-insensitively. */
  where?: Record<string, string>
  limit?: number
  /** Keyset paging: only paths sorting after this one (results are ordered by path). */
  after?: string
}

/** The longest display name a node may have, in UTF-16 code units. */
export const MAX_NODE_NAME = 500

/**
 * A node's display name as every write checks it (HTTP, MCP, scripts, engines): at most
 * MAX_NODE_NAME characters, any language, storable on every storage (no NUL, no lone surrogate).
 */
export function assertNodeName(name: string): void {
  if (name.length > MAX_NODE_NAME) throw new WeftError('invalid_request', `A node's name is at most ${MAX_NODE_NAME} characters (this one has ${name.length}).`)
  if (!storableText(name)) throw new WeftError('invalid_request', `The name holds ${unstorableTextReason(name)}, which cannot be stored; remove it.`)
}

/**
 * A JSON object as a request carries it, kept as parsed. zod's record copies members by
 * assignment, and an assignment to `__proto__` sets the copy's prototype instead: a PUT lost a
 * field named `__proto__` that a PATCH had written, and MCP could not write one at all. Described
 * to JSON Schema (an MCP tool's input) as an object.
 */
export const JsonObjectInput = z
  .unknown()
  .refine(isJsonObject, { message: 'Expected a JSON object' })
  .meta({ type: 'object', additionalProperties: {} }) as unknown as z.ZodType<Record<string, unknown>, Record<string, unknown>>

export const PutNodeBody = z.object({
  nodeType: z.string().min(1).max(100),
  name: z.string().max(MAX_NODE_NAME).optional(),
  content: JsonObjectInput.default({}),
})
export type PutNodeBody = z.infer<typeof PutNodeBody>
