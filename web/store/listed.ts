import type { IndexRow } from './db.js'

/**
 * Whether a child is listed where a person browses (the navigation tree, a node page's
 * children): not a node whose segment starts with `_` (the system's: a Code node's `_Check`,
 * runs, access, a thread's `_r.…` replies), and not a thread's message cell, which its thread
 * page shows as a message.
 */
export function isListedChild(row: Pick<IndexRow, 'path' | 'nodeType'>): boolean {
  return !row.path.slice(row.path.lastIndexOf('/') + 1).startsWith('_') && row.nodeType !== 'ThreadMessage'
}
