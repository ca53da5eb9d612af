import { WeftError } from './errors.js'

declare const brand: unique symbol
export type Brand<T, B extends string> = T & { readonly [brand]: B }

/** A validated node path: `/`-separated segments of `[A-Za-z0-9_.@-]`, no leading or trailing slash. */
export type NodePath = Brand<string, 'NodePath'>
export type UserId = Brand<string, 'UserId'>

const SEGMENT = /^[A-Za-z0-9_.@-]+$/
export const MAX_PATH_LENGTH = 1024
export const MAX_SEGMENTS = 32

export function isValidSegment(segment: string): boolean {
  return SEGMENT.test(segment) && segment !== '.' && segment !== '..'
}

const NORMAL_PATH = /^[A-Za-z0-9_.@-]+(?:\/[A-Za-z0-9_.@-]+)*$/
const DOT_SEGMENT = /(?:^|\/)\.\.?(?:\/|$)/

/** Whether `raw` is already a normalised path: two scans, no split (every write checks its path). */
function isNormalPath(raw: string): boolean {
  if (raw.length > MAX_PATH_LENGTH || !NORMAL_PATH.test(raw) || DOT_SEGMENT.test(raw)) return false
  let segments = 1
  for (let i = 0; i < raw.length; i++) if (raw.charCodeAt(i) === 47) segments++
  return segments <= MAX_SEGMENTS
}

/** The one parser for paths. Tolerates one leading and trailing slash (URLs), rejects everything else. */
export function parseNodePath(raw: unknown): NodePath {
  if (typeof raw !== 'string') throw new WeftError('invalid_path', 'A node path must be a string.')
  if (isNormalPath(raw)) return raw as NodePath
  const trimmed = raw.replace(/^\/+/, '').replace(/\/+$/, '')
  if (trimmed.length === 0) throw new WeftError('invalid_path', 'A node path must not be empty.')
  if (trimmed.length > MAX_PATH_LENGTH) {
    throw new WeftError('invalid_path', `A node path may be at most ${MAX_PATH_LENGTH} characters long.`)
  }
  const segments = trimmed.split('/')
  if (segments.length > MAX_SEGMENTS) {
    throw new WeftError('invalid_path', `A node path may have at most ${MAX_SEGMENTS} segments.`)
  }
  for (const segment of segments) {
    if (!isValidSegment(segment)) {
      throw new WeftError(
        'invalid_path',
        `Invalid path segment ${JSON.stringify(segment)} in ${JSON.stringify(raw)}: a path segment uses only the ASCII letters a-z and A-Z, digits and _ . @ - (a node's name may be in any language: its path is made from it, and the app shows names, never paths). Copy a node's path from the address bar after #/n/.`,
      )
    }
  }
  return trimmed as NodePath
}

export function tryParseNodePath(raw: unknown): NodePath | null {
  try {
    return parseNodePath(raw)
  } catch {
    return null
  }
}

export function pathSegments(path: NodePath): string[] {
  return path.split('/')
}

export function parentPath(path: NodePath): NodePath | null {
  const i = path.lastIndexOf('/')
  return i < 0 ? null : (path.slice(0, i) as NodePath)
}

export function lastSegment(path: NodePath): string {
  const i = path.lastIndexOf('/')
  return i < 0 ? path : path.slice(i + 1)
}

export function joinPath(parent: NodePath, ...segments: string[]): NodePath {
  return parseNodePath([parent, ...segments].join('/'))
}

/** The path itself and its ancestors, closest first. */
export function selfAndAncestors(path: NodePath): NodePath[] {
  const out: NodePath[] = []
  let p: NodePath | null = path
  while (p) {
    out.push(p)
    p = parentPath(p)
  }
  return out
}

export function topLevel(path: NodePath): NodePath {
  const i = path.indexOf('/')
  return (i < 0 ? path : path.slice(0, i)) as NodePath
}

export function isDescendantOrSelf(path: NodePath, ancestor: NodePath): boolean {
  return path === ancestor || path.startsWith(ancestor + '/')
}

/** Segments starting with `_` are reserved for system children (`_Access`, `_Activity`, `_Pin`, ...). */
export function isReservedSegment(segment: string): boolean {
  return segment.startsWith('_')
}

/**
 * A reserved place that holds nodes without being one (`_Access`, `_Activity`, `_Trash`,
 * `_Check`): letters only. A node the engine makes at a reserved segment carries an id after a
 * dot (a sub-thread `_sub.{id}`, a response `_r.{id}`).
 */
export function isContainerSegment(segment: string): boolean {
  return /^_[A-Za-z]+$/.test(segment)
}

export function parseUserId(raw: unknown): UserId {
  const path = parseNodePath(raw)
  if (path.includes('/')) throw new WeftError('invalid_path', 'A user id is a single path segment.')
  return path as string as UserId
}

/** [MOVE5] `{top}/_Trash/{id}`: where a trashed node waits, readable only by the Admins of `{top}`. */
export const TRASH_SEGMENT = '_Trash'

/**
 * [MOVE5] Whether the path lies in a trash (`{top}/_Trash` or below). Trashed nodes are left out of
 * queries, the feed for non-Admins and any index a search builds: filter with this (or on the
 * path prefix `{top}/_Trash/` in SQL).
 */
export function isInTrash(path: string): boolean {
  const i = path.indexOf('/')
  return i > 0 && path.startsWith(`${TRASH_SEGMENT}`, i + 1) && (path.length === i + 1 + TRASH_SEGMENT.length || path[i + 1 + TRASH_SEGMENT.length] === '/')
}

export const ADMIN_PARTITION = 'Admin' as NodePath

/** Slug per the invite contract: trim, lower-case, every character that is not a letter or digit becomes `_`. */
export function slug(value: string): string {
  return value.trim().toLowerCase().replace(/[^\p{L}\p{N}]/gu, '_')
}
