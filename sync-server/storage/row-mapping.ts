import { lastSegment, parentPath } from '../../shared/path.js'
import type { JsonObject, MeshNode, NodePath } from '../../shared/index.js'

/** The columns of a node row both adapters select for a MeshNode (never the snapshot). */
export const NODE_COLUMNS = 'path, node_type, name, content, created_by, created_at, updated_at, version, state, content_stale'

export interface NodeRow {
  path: string
  node_type: string
  name: string
  /** JSON text (SQLite) or an already parsed object (PostgreSQL jsonb). */
  content: string | JsonObject
  created_by: string
  created_at: string
  updated_at: string
  /** PostgreSQL returns bigint as a string. */
  version: number | string
  state: string
  /** [STO5] The content column lags the Yjs log (deferred commits, or a crash before the write). */
  content_stale: number | boolean
}

export function rowToNode(row: NodeRow): MeshNode {
  return {
    path: row.path as NodePath,
    nodeType: row.node_type,
    name: row.name,
    content: typeof row.content === 'string' ? (JSON.parse(row.content) as JsonObject) : row.content,
    createdBy: row.created_by,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
    version: Number(row.version),
    state: 'Active',
  }
}

/** Derived path columns, stored so that children and name lookups use an index. */
export function pathColumns(path: NodePath): { parent: string | null; lastSegment: string } {
  return { parent: parentPath(path), lastSegment: lastSegment(path) }
}

/** A view on a driver's Buffer without copying, so callers see a plain Uint8Array. */
export function toBytes(buf: Uint8Array): Uint8Array {
  return new Uint8Array(buf.buffer, buf.byteOffset, buf.byteLength)
}

/** Drivers bind Buffers; wrap (no copy) a Uint8Array that is not one. */
export function toBuffer(bytes: Uint8Array): Buffer {
  return Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength)
}
