import { isInTrash } from '../../shared/path.js'
import { app } from '../app-context.js'

/** How many recently opened nodes the home lists. */
const RECENT_MAX = 12

function key(): string {
  return `weft.recent.${app().session.userId}`
}

/** [WEB14] The paths this person opened on this device, most recent first. */
export function recentPaths(): string[] {
  try {
    const v = JSON.parse(localStorage.getItem(key()) ?? '[]') as unknown
    return Array.isArray(v) ? v.filter((p): p is string => typeof p === 'string') : []
  } catch {
    return []
  }
}

export function recordRecent(path: string): void {
  // A trash entry is not a place to come back to (its id means nothing to a person).
  if (isInTrash(path)) return
  try {
    const next = [path, ...recentPaths().filter((p) => p !== path)].slice(0, RECENT_MAX)
    localStorage.setItem(key(), JSON.stringify(next))
  } catch {
    // storage full or blocked: the list is a convenience
  }
}

/** A node that is gone from its place (deleted, moved) leaves the list: its old path leads nowhere. */
export function forgetRecent(path: string): void {
  try {
    const paths = recentPaths()
    if (paths.includes(path)) localStorage.setItem(key(), JSON.stringify(paths.filter((p) => p !== path)))
  } catch {
    // storage blocked: the list is a convenience
  }
}
