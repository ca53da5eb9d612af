import type { NodePath } from '../../shared/index.js'

/**
 * [ACT12] A row's JSON in parts, in key order: a field's JSON, or, for an array that only grows
 * (a log's `Messages`), the JSON of its items from `from` on, `count` items in all. The writer
 * keeps the JSON of what it was sent before, so the server's event loop serialises and hands
 * over the new items only; the whole row is put together on the writer's thread. [ACT19] A tail
 * may come as the chunks it was made in (each one append's items), joined by the writer: joining
 * a second of a flood's lines (~2 MB) held the event loop ~15 ms per row write.
 */
export type RowPart = { key: string; json: string } | { key: string; from: number; tail: string | readonly string[]; count: number }

/** The JSON of array items without the brackets, as `JSON.stringify` writes them inside an array. */
export function itemsJson(items: readonly unknown[]): string {
  // One string for the whole array, its brackets cut off (a slice shares the string): an
  // append's lines were a string each and then their join, twice what the row keeps.
  return JSON.stringify(items).slice(1, -1)
}

/** What `writeContent` stores: the row's JSON text, or its parts ([ACT12]). */
export type RowJson = string | { parts: RowPart[] }

/** What a row's arrays were, per field: the JSON of their items in chunks, and how many items. */
interface Grown {
  count: number
  chunks: string[]
  bytes: number
}

/**
 * The writer's side of `RowPart`s: the JSON of each grown array it was sent, per path and field,
 * least recently used first and bounded in bytes. A part whose `from` does not match what is kept
 * (evicted, a restarted writer, a lost write) is a miss: `assemble` returns null and the caller
 * rebuilds the row from the node's Yjs log, which is always right ([STO5]).
 */
export class RowPartsCache {
  private readonly paths = new Map<NodePath, Map<string, Grown>>()
  private bytes = 0

  constructor(private readonly maxBytes = 64 * 1024 * 1024) {}

  /** The row's JSON text, or null when a part continues an array this cache does not hold. */
  assemble(path: NodePath, parts: readonly RowPart[]): string | null {
    const kept = this.paths.get(path)
    for (const part of parts) {
      if ('tail' in part && part.from > 0 && kept?.get(part.key)?.count !== part.from) return null
    }
    const fields = kept ?? new Map<string, Grown>()
    const out: string[] = []
    for (const part of parts) {
      if (!('tail' in part)) {
        out.push(`${JSON.stringify(part.key)}:${part.json}`)
        continue
      }
      let grown = part.from > 0 ? fields.get(part.key)! : undefined
      if (!grown) {
        const old = fields.get(part.key)
        if (old) this.bytes -= old.bytes
        grown = { count: 0, chunks: [], bytes: 0 }
        fields.set(part.key, grown)
      }
      if (part.count > grown.count) {
        for (const chunk of typeof part.tail === 'string' ? [part.tail] : part.tail) {
          if (chunk.length === 0) continue
          grown.chunks.push(chunk)
          grown.bytes += chunk.length
          this.bytes += chunk.length
        }
      }
      grown.count = part.count
      out.push(`${JSON.stringify(part.key)}:[${grown.chunks.join(',')}]`)
    }
    this.paths.delete(path)
    this.paths.set(path, fields)
    this.evict(path)
    return `{${out.join(',')}}`
  }

  /** Keeps the arrays of a row rebuilt from its log, so the next parts continue from them. */
  prime(path: NodePath, content: Record<string, unknown>, keys: readonly string[]): void {
    this.forget(path)
    const fields = new Map<string, Grown>()
    for (const key of keys) {
      const value = content[key]
      if (!Array.isArray(value)) continue
      const json = itemsJson(value)
      fields.set(key, { count: value.length, chunks: json.length > 0 ? [json] : [], bytes: json.length })
      this.bytes += json.length
    }
    this.paths.set(path, fields)
    this.evict(path)
  }

  /** Drops what is kept for a path (the node was deleted). */
  forget(path: NodePath): void {
    const fields = this.paths.get(path)
    if (!fields) return
    for (const g of fields.values()) this.bytes -= g.bytes
    this.paths.delete(path)
  }

  /** Least recently used paths go first; the one just written stays even when it alone is over. */
  private evict(keep: NodePath): void {
    for (const path of this.paths.keys()) {
      if (this.bytes <= this.maxBytes) return
      if (path !== keep) this.forget(path)
    }
  }

  get size(): number {
    return this.bytes
  }
}
