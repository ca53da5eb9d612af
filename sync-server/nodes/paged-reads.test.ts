import { describe, expect, it } from 'vitest'
import { pageFiltered, type PagedSource } from './paged-reads.js'

/** A source over 0..n-1 in pages of at most `page`, recording what it was asked and shown. */
function numbers(n: number, page: number): PagedSource<number> & { asked: number[]; seen: number[] } {
  let next = 0
  const asked: number[] = []
  const seen: number[] = []
  return {
    asked,
    seen,
    read: async (want) => {
      if (next >= n) return null
      asked.push(want)
      const rows = Array.from({ length: Math.min(want, page, n - next) }, (_, i) => next + i)
      next += rows.length
      return rows
    },
    examined: (row) => void seen.push(row),
  }
}

describe('pageFiltered: the one filtered pager of queries and the feed', () => {
  it('keeps the readable rows until it has enough, asking each read only for what is missing', async () => {
    const src = numbers(100, 7)
    expect(await pageFiltered(5, src, (n) => n % 3 === 0)).toEqual([0, 3, 6, 9, 12])
    // Never examines a row past the last one it needed: the position a cursor continues from.
    expect(src.seen.at(-1)).toBe(12)
    expect(src.asked[0]).toBe(5)
  })

  it('stops at the end of the source, or when the source says its budget is spent', async () => {
    expect(await pageFiltered(10, numbers(4, 2), () => true)).toEqual([0, 1, 2, 3])
    let reads = 0
    const budgeted: PagedSource<number> = { read: async (want) => (reads++ < 2 ? Array.from({ length: want }, () => 1) : null) }
    expect(await pageFiltered(10, budgeted, () => false)).toEqual([])
    expect(reads).toBe(3)
  })
})
