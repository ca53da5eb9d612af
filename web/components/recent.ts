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
  try {
    const next = [path, ...recentPaths().filter((p) => p !== path)].slice(0, RECENT_MAX)
    localStorage.setItem(key(), JSON.stringify(next))
  } catch {
    // storage full or blocked: the list is a convenience
  }
}
