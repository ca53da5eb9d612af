import { isInTrash, isSystem, selfAndAncestors, type ChangeRecord, type MeshNode, type NodePath, type NodeQuery, type PathRange, type Principal } from '../../shared/index.js'
import type { AccessService } from '../access/index.js'
import type { StorageAdapter, StoredChange } from '../storage/index.js'
import { CursorSealer, isSealedCursor } from './query-cursor.js'

const QUERY_DEFAULT_LIMIT = 100
const QUERY_MAX_LIMIT = 1000
const CHANGES_MAX_LIMIT = 10_000
/** Change records read from storage at a time while filtering a caller's feed. */
const CHANGES_STORAGE_PAGE = 2000
/**
 * Rows one feed or query request examines at most ([FEED2]): enough to step over a burst of
 * 5,000 changes a caller cannot read in one request, few enough that one request stays a few
 * milliseconds of access checks however much lies ahead. The cursor carries the rest.
 */
const PAGE_SCAN_BUDGET = 10_000
/**
 * [QUERY1] Range queries (one per readable region, each an index range scan) one query page
 * makes at most: a user whose groups reach thousands of scopes gets a sealed cursor instead of a
 * request that blocks the loop. A few milliseconds of empty range scans.
 */
const REGION_QUERY_BUDGET = 512

/**
 * Where a filtered page reads from: `read(want)` returns up to `want` rows after the last one
 * it returned, or null when there is nothing more to read (the end, or the request's budget).
 * `examined(row)` is told of every row looked at, readable or not, before the page is full.
 */
export interface PagedSource<R> {
  read(want: number): Promise<readonly R[] | null>
  examined?(row: R): void
}

/**
 * The one filtered pager of reads: pulls rows from `source` and keeps the readable ones until
 * `wanted` are kept or the source has nothing more (its end, or its budget). A row past the
 * `wanted`-th is never examined, so the source's position after the call is the last row kept
 * or skipped, never one beyond.
 */
export async function pageFiltered<R>(wanted: number, source: PagedSource<R>, readable: (row: R) => boolean): Promise<R[]> {
  const items: R[] = []
  while (items.length < wanted) {
    const rows = await source.read(wanted - items.length)
    if (rows === null) break
    for (const row of rows) {
      if (items.length >= wanted) break
      source.examined?.(row)
      if (readable(row)) items.push(row)
    }
  }
  return items
}

/** The paged reads of the node service: queries and the change feed, filtered by access. */
export class PagedReads {
  /** [QUERY1] Seals query cursors that stop between readable regions. */
  private readonly cursors = new CursorSealer()

  constructor(
    private readonly storage: StorageAdapter,
    private readonly access: AccessService,
    /** [QUERY1] Range queries one query page makes at most (tests lower it). */
    private readonly regionQueryBudget = REGION_QUERY_BUDGET,
  ) {}

  /** Every node matching the query, paged by path (no limit). System use only. */
  async *scan(query: Omit<NodeQuery, 'limit' | 'after'>): AsyncGenerator<MeshNode> {
    let after: string | undefined
    for (;;) {
      const page = await this.storage.queryNodes({ ...query, limit: QUERY_MAX_LIMIT, after })
      for (const node of page) yield node
      if (page.length < QUERY_MAX_LIMIT) return
      after = page[page.length - 1]!.path
    }
  }

  /** [MOVE4] Every node below `path` (not itself), in path order. System use only. */
  async *scanSubtree(path: NodePath): AsyncGenerator<MeshNode> {
    let after = `${path}/`
    for (;;) {
      const page = await this.storage.queryNodes({ limit: QUERY_MAX_LIMIT }, { from: after, to: `${path}0` })
      for (const node of page) yield node
      if (page.length < QUERY_MAX_LIMIT) return
      after = `${page[page.length - 1]!.path},`
    }
  }

  /**
   * [MOVE3] Where a path that is gone now lives, following recorded moves (null: nowhere known);
   * `exists` says whether a node is at a path now.
   */
  async movedTo(path: NodePath, exists: (path: NodePath) => Promise<boolean>): Promise<NodePath | null> {
    let at = path
    for (let hop = 0; hop < 8; hop++) {
      const hit = await this.storage.movedFrom(selfAndAncestors(at))
      if (!hit) return null
      const next = `${hit.to}${at.slice(hit.from.length)}` as NodePath
      if (next === at) return null
      at = next
      if (await exists(at)) return at
    }
    return null
  }

  /**
   * [FEED3] [QUERY1] A page of the readable nodes of the query, in path order. For a user, storage
   * is scanned only inside the paths they may read (AccessService.readRegions), so a row they may
   * not read is never examined: it cannot fill a page, end one, or move the cursor, and a value
   * only such rows hold answers exactly like a value no row holds. `next` is the last item when
   * the page is full; when a page stops between regions (REGION_QUERY_BUDGET range queries) it
   * is a sealed cursor (query-cursor.ts), never a path. No `next`: the end.
   */
  async queryPage(principal: Principal, query: NodeQuery): Promise<{ items: MeshNode[]; next: string | null }> {
    const limit = Math.min(Math.max(1, query.limit ?? QUERY_DEFAULT_LIMIT), isSystem(principal) ? Number.MAX_SAFE_INTEGER : QUERY_MAX_LIMIT)
    if (isSystem(principal)) {
      const out: MeshNode[] = []
      if (limit > QUERY_MAX_LIMIT) {
        for await (const n of this.scan(query)) {
          out.push(n)
          if (out.length >= limit) break
        }
      } else {
        out.push(...(await this.storage.queryNodes({ ...query, limit })))
      }
      return { items: out, next: out.length >= limit ? out[out.length - 1]!.path : null }
    }
    const userId = principal.userId as string
    // Where to start: after a path (`after` + ',' is the least string above it among paths), or
    // at the position a sealed cursor holds.
    let start: string | null = null
    if (isSealedCursor(query.after)) start = this.cursors.unseal(userId, query.after)
    else if (query.after !== undefined) start = `${query.after},`
    // A parent's children lie in [parent/, parent0).
    const parent = query.parent
    const window = parent ? { from: `${parent}/`, to: `${parent}0` } : null
    const regions: PathRange[] = []
    const inTrash = parent !== undefined && isInTrash(parent)
    for (const r of this.access.readRegions(userId)) {
      let from = r.from
      let to = r.to
      if (start !== null && start > from) from = start
      if (window) {
        if (window.from > from) from = window.from
        if (window.to < to) to = window.to
      }
      if (from < to) regions.push({ from, to })
    }
    let i = 0
    let queries = 0
    let sealed: string | null = null
    const items = await pageFiltered<MeshNode>(
      limit,
      {
        read: async (want) => {
          if (i >= regions.length) return null
          const region = regions[i]!
          if (queries >= this.regionQueryBudget) {
            sealed = this.cursors.seal(userId, region.from)
            return null
          }
          const rows = await this.storage.queryNodes({ ...query, after: undefined, limit: want }, region)
          queries++
          if (rows.length < want) i++
          else regions[i] = { from: `${rows[rows.length - 1]!.path},`, to: region.to }
          return rows
        },
      },
      // The regions are exact; the check stays as a second line of defence.
      // [MOVE5] A trash is listed on the trash page, never in a query (unless asked for by parent).
      (row) => this.access.has(principal, row.path, 'Read') && (inTrash || !isInTrash(row.path)),
    )
    if (sealed !== null) return { items, next: sealed }
    return { items, next: items.length >= limit ? items[items.length - 1]!.path : null }
  }

  /**
   * [FEED1] [FEED2] Filters while paging: the change log is read page after page until `limit`
   * readable changes or its end, examining at most PAGE_SCAN_BUDGET records per call. `next` is
   * the last version EXAMINED, readable or not (`version` itself when nothing was): a client that
   * continues from it always advances, however many changes it may not read lie ahead.
   */
  async changesPage(principal: Principal, version: number, limit = 1000): Promise<{ items: ChangeRecord[]; next: number }> {
    const wanted = Math.min(Math.max(1, Math.floor(limit)), CHANGES_MAX_LIMIT)
    if (isSystem(principal)) {
      const rows = await this.storage.changesSince(version, wanted)
      return { items: rows.map(recordOf), next: rows.length ? rows[rows.length - 1]!.version : version }
    }
    const userId = principal.userId as string
    let next = version
    let examined = 0
    let ended = false
    const items = await pageFiltered<StoredChange>(
      wanted,
      {
        read: async () => {
          if (ended || examined >= PAGE_SCAN_BUDGET) return null
          const want = Math.min(CHANGES_STORAGE_PAGE, PAGE_SCAN_BUDGET - examined)
          const rows = await this.storage.changesSince(next, want)
          if (rows.length < want) ended = true
          return rows
        },
        examined: (row) => {
          next = row.version
          examined++
        },
      },
      // [FEED5] Readable now, and not withheld: no Denied that kept this record from the reader
      // has gone since (examined all the same, so `next` moves past it).
      (row) => this.access.has(principal, row.path, 'Read') && !(row.withheld && this.access.namesUser(userId, row.withheld)),
    )
    return { items: items.map(recordOf), next }
  }
}

/** [FEED5] What a reader gets of a record: never whom it is withheld from. */
function recordOf(row: StoredChange): ChangeRecord {
  return row.withheld ? { version: row.version, path: row.path, nodeType: row.nodeType, kind: row.kind } : row
}
