import { ADMIN_PARTITION, isInTrash, isReservedSegment, pathSegments, topLevel, type NodePath } from './path.js'

/**
 * [MOVE1] [MOVE5] Why a node keeps its place: neither moved nor trashed. One rule, read by the
 * server when it refuses a move or a trash and by the app when it chooses what to offer
 * ([WEB72] [WEB73]): an app that judged on its own offered a harsher Delete the server did not
 * need, or one it refuses.
 *  - `top`: a space or a home (renamed, never moved; an Admin deletes a space);
 *  - `admin`: a node of the Admin partition;
 *  - `trash`: in a trash (restored first);
 *  - `system`: a system child (a segment starts with `_`: a run, a sub-thread), which goes with
 *    its parent only (the engine that made it finds it by its path).
 */
export type KeptPlace = 'top' | 'admin' | 'trash' | 'system'

export function keptPlace(path: NodePath): KeptPlace | null {
  if (!path.includes('/')) return 'top'
  if (topLevel(path) === ADMIN_PARTITION) return 'admin'
  if (isInTrash(path)) return 'trash'
  if (pathSegments(path).some(isReservedSegment)) return 'system'
  return null
}
