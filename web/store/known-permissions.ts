import { NO_PERMISSIONS, permissionMask, permissionsFromMask, type PermissionSet } from '../../shared/access-policy.js'
import { selfAndAncestors, type NodePath } from '../../shared/path.js'
import type { WeftDb } from './db.js'

/**
 * [WEB85] What the server last told this device the person may do on a node (the room's Joined
 * mask; none after a final denial), kept in `meta` under `permissions:{path}`. Offline, or before
 * a node's room has answered, a page decides by this node's mask or its nearest ancestor's
 * (assignments are inherited down the tree): a Viewer is not offered edits on a page she never
 * opened, an Editor still edits offline. A deeper assignment can differ; the server decides and
 * a refused edit is kept ([WEB42]). The database is the person's own (`dbNameFor`).
 */
const keyOf = (path: string) => `permissions:${path}`

export interface KnownPermissions {
  /** The node the mask was learned on: the node itself or an ancestor. */
  path: string
  permissions: PermissionSet
}

/** Records the mask the server sent for `path`; `NO_PERMISSIONS` after a final denial. */
export async function rememberPermissions(db: WeftDb, path: string, permissions: PermissionSet): Promise<void> {
  const mask = permissionMask(permissions)
  const key = keyOf(path)
  await db.transaction('rw', db.meta, async () => {
    const row = await db.meta.get(key)
    if (row?.value !== mask) await db.meta.put({ key, value: mask })
  })
}

/** The mask last learned for `path` or, failing that, for its nearest ancestor; null when none is known. */
export async function lastKnownPermissions(db: WeftDb, path: string): Promise<KnownPermissions | null> {
  const paths = selfAndAncestors(path as NodePath)
  const rows = await db.meta.bulkGet(paths.map(keyOf))
  for (let i = 0; i < paths.length; i++) {
    const value = rows[i]?.value
    if (typeof value === 'number') return { path: paths[i]!, permissions: value === 0 ? NO_PERMISSIONS : permissionsFromMask(value) }
  }
  return null
}
