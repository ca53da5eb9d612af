import type { JsonObject } from '../../shared/index.js'
import { itemsJson, type RowJson, type RowPart, type StorageAdapter } from '../storage/index.js'
import type { LoadedNode } from './loaded-node.js'
import type { ClusterLink } from './types.js'

/**
 * [STO5] How long the stored row's content may lag a client's Yjs edits. Each edit logs its
 * update and its change at once (durable, acknowledged); the row's content (the whole node's
 * JSON) is written at most this often per node, so a small edit to a 1 MB node costs what it
 * costs on a 1 KB node. A read of a stale row rebuilds its content from the log.
 */
export const CONTENT_FLUSH_MS = 1000

/**
 * [STO5] A big row waits longer: a rewrite costs the row's whole JSON, so a row rewritten every
 * second made each token of a long answer, or each line of a long log, cost more the longer it
 * got (stored bytes per token 1.29× from the 2nd thousand to the 10th). Past 64 KiB a row waits
 * a second per 64 KiB, so its rewrites cost each token the same; at most CONTENT_FLUSH_MAX_MS.
 */
export const CONTENT_FLUSH_BYTES_PER_SEC = 64 * 1024
export const CONTENT_FLUSH_MAX_MS = 10_000

/** How long after its last write a row of `rowBytes` may be written again. */
export function contentFlushDelay(rowBytes: number): number {
  return Math.min(CONTENT_FLUSH_MAX_MS, Math.max(CONTENT_FLUSH_MS, Math.round((rowBytes / CONTENT_FLUSH_BYTES_PER_SEC) * 1000)))
}

/** How a flush write of a copy settles: the commit lifecycle of the node cache. */
export interface FlushSettling {
  commitLanded(ln: LoadedNode): void
  commitFailed(ln: LoadedNode, err: unknown): void
}

/**
 * [STO5] The content flush: the coalesced rewrite of a growing row's content (contentJson),
 * at most once per CONTENT_FLUSH_MS (a big row: contentFlushDelay), for copies whose commits
 * deferred it. Kept as one unit.
 */
export class ContentFlush {
  /** [ACT12] Arrays `append` grows in place, and the copy of the node that owns each. */
  readonly appendable = new WeakMap<object, LoadedNode>()
  /** [ACT12] The JSON of such an array's first `count` items (they never change: items are only added). */
  private readonly appendedJson = new WeakMap<object, { json: string; count: number }>()
  /** [ACT12] How many items of a grown array the storage writer was sent (it keeps their JSON). */
  private readonly rowSent = new WeakMap<object, number>()
  /** [STO5] The length of the JSON of those items (the row's size, for contentFlushDelay). */
  private readonly rowSentBytes = new WeakMap<object, number>()
  /**
   * [ACT12] The JSON of the items appended to a grown array since its row was last written,
   * made by each `append` for its own items (`noteAppended`): a row write then hands over strings,
   * where serialising a second's lines at once (30,000 at a flood's pace) held the event loop
   * for ~25 ms.
   */
  private readonly unsentJson = new WeakMap<object, { from: number; to: number; chunks: string[] }>()
  /** Loaded copies whose stored content lags (deferred commits), written by the next flush. */
  private readonly dirtyContent = new Set<LoadedNode>()
  private flushTimer: NodeJS.Timeout | null = null
  private flushDue = 0
  private closed = false

  constructor(
    private readonly storage: StorageAdapter,
    private readonly settling: FlushSettling,
    /** [SCALE2] Several instances: every change up to the watermark is in this instance's copies; a row past it is not written. */
    private readonly cluster: ClusterLink,
  ) {}

  /** [STO5] Schedules the write of a deferred commit's row content. */
  markContentDirty(ln: LoadedNode): void {
    ln.contentDirty = true
    this.dirtyContent.add(ln)
    this.schedule(CONTENT_FLUSH_MS)
  }

  /** Flushes in `ms`, or sooner if already due sooner (a big row's long wait must not hold a small row's write back). */
  private schedule(ms: number): void {
    if (this.closed) return
    const due = Date.now() + ms
    if (this.flushTimer) {
      if (this.flushDue <= due) return
      clearTimeout(this.flushTimer)
    }
    this.flushDue = due
    this.flushTimer = setTimeout(() => {
      this.flushTimer = null
      void this.flushContent(false)
    }, ms)
    this.flushTimer.unref()
  }

  /** [ACT12] `append` is about to add `items` to `array` (owned by a copy): their JSON, kept for the row write. */
  noteAppended(array: readonly unknown[], items: readonly unknown[]): void {
    if (items.length === 0 || !this.storage.rowParts) return
    const unsent = this.unsentJson.get(array)
    const json = itemsJson(items)
    if (unsent && unsent.to === array.length) {
      unsent.chunks.push(json)
      unsent.to += items.length
    } else this.unsentJson.set(array, { from: array.length, to: array.length + items.length, chunks: [json] })
  }

  /**
   * Writes the row content of every dirty copy, ordered after the commits it reflects: of each
   * whose wait (contentFlushDelay) is over, or of all (`all`: closing).
   */
  flushContent(all = true): Promise<void> {
    const writes: Promise<void>[] = []
    const now = Date.now()
    let next = Infinity
    for (const ln of this.dirtyContent) {
      if (!ln.contentDirty) {
        this.dirtyContent.delete(ln)
        continue
      }
      const due = ln.contentFlushedAt + contentFlushDelay(ln.rowBytes)
      if (!all && due > now) {
        next = Math.min(next, due - now)
        continue
      }
      this.dirtyContent.delete(ln)
      ln.contentDirty = false
      const node = ln.node
      if (!node || ln.poisoned) continue
      ln.commitStarted()
      ln.contentFlushedAt = now
      writes.push(
        this.storage.writeContent(ln.path, node.content, this.rowJson(ln, node.content), this.cluster.hooks?.watermark()).then(
          () => this.settling.commitLanded(ln),
          (err: unknown) => this.settling.commitFailed(ln, err),
        ),
      )
    }
    if (next !== Infinity) this.schedule(next)
    return Promise.all(writes).then(() => undefined)
  }

  /**
   * [ACT12] The row's JSON for `writeContent`. Where the storage takes parts, an array `append`
   * grows goes as the JSON of the items added since the last write (the writer thread keeps the
   * rest and puts the row together), so a log's coalesced rewrite costs the event loop its new
   * lines, not the log: at 100,000 lines, joining and handing over the whole JSON held the loop
   * for 30–130 ms every second. Elsewhere, the whole row, its arrays' JSON reused.
   */
  private rowJson(ln: LoadedNode, content: JsonObject): RowJson {
    if (!this.storage.rowParts) {
      const json = this.contentJson(content)
      ln.rowBytes = json.length
      return json
    }
    const parts: RowPart[] = []
    let bytes = 0
    for (const key of Object.keys(content)) {
      const value = content[key]
      if (value === undefined) continue
      if (Array.isArray(value) && this.appendable.get(value) === ln) {
        const from = Math.min(this.rowSent.get(value) ?? 0, value.length)
        const unsent = this.unsentJson.get(value)
        // [ACT19] The chunks as they were made: the writer thread joins them.
        const tail = unsent && unsent.from === from && unsent.to === value.length ? unsent.chunks : itemsJson(value.slice(from))
        parts.push({ key, from, tail, count: value.length })
        const sent = (from > 0 ? (this.rowSentBytes.get(value) ?? 0) : 0) + (typeof tail === 'string' ? tail.length : tail.reduce((n, c) => n + c.length, 0))
        this.rowSentBytes.set(value, sent)
        bytes += key.length + sent
        this.rowSent.set(value, value.length)
        this.unsentJson.set(value, { from: value.length, to: value.length, chunks: [] })
      } else {
        const json = JSON.stringify(value)
        bytes += key.length + json.length
        parts.push({ key, json })
      }
    }
    ln.rowBytes = bytes
    return { parts }
  }

  /** The row's JSON, as JSON.stringify would write it, reusing what was serialised of grown arrays (a log's at 100,000 lines took ~100 ms). */
  private contentJson(content: JsonObject): string {
    const parts: string[] = []
    for (const key of Object.keys(content)) {
      const value = content[key]
      if (value === undefined) continue
      let json: string
      if (Array.isArray(value) && this.appendable.has(value)) {
        let cached = this.appendedJson.get(value)
        if (!cached || cached.count > value.length) cached = { json: '', count: 0 }
        if (cached.count < value.length) {
          const tail = itemsJson(value.slice(cached.count))
          cached = { json: cached.count === 0 ? tail : `${cached.json},${tail}`, count: value.length }
          this.appendedJson.set(value, cached)
        }
        json = `[${cached.json}]`
      } else json = JSON.stringify(value)
      parts.push(`${JSON.stringify(key)}:${json}`)
    }
    return `{${parts.join(',')}}`
  }

  /** Stops the timer and writes what is dirty (before storage closes; a crash is covered by the log). */
  close(): Promise<void> {
    this.closed = true
    if (this.flushTimer) clearTimeout(this.flushTimer)
    return this.flushContent()
  }
}
