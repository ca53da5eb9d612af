import { z } from 'zod'
import type { JsonObject } from './json.js'
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

export const PutNodeBody = z.object({
  nodeType: z.string().min(1).max(100),
  name: z.string().max(500).optional(),
  content: z.record(z.string(), z.unknown()).default({}),
})
export type PutNodeBody = z.infer<typeof PutNodeBody>
