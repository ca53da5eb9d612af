import fc from 'fast-check'
import { afterEach, describe, expect, it, vi } from 'vitest'
import { CONTENT_FLUSH_MAX_MS, CONTENT_FLUSH_MS, ContentFlush, contentFlushDelay } from '../../sync-server/nodes/content-flush.js'
import type { LoadedNode } from '../../sync-server/nodes/loaded-node.js'
import type { StorageAdapter } from '../../sync-server/storage/index.js'

/**
 * [STO5] The coalesced row write waits in proportion to the row's size, so a token of a long
 * answer costs the same as one of a short answer; closing writes every dirty row at once.
 * Logic with a stand-in storage that records the writes; the figure is in `npm run bench`
 * (threads-scale-bench, stored bytes per token).
 */
function setup(rowParts: boolean) {
  const writes: Array<{ at: number; path: string; bytes: number }> = []
  const storage = {
    rowParts,
    writeContent: async (path: string, content: Record<string, unknown>) => {
      writes.push({ at: Date.now(), path, bytes: JSON.stringify(content).length })
    },
  } as unknown as StorageAdapter
  const flush = new ContentFlush(storage, { commitLanded: () => {}, commitFailed: () => {} }, { hooks: null } as never)
  const node = (path: string, text: () => string) =>
    ({
      path,
      contentDirty: false,
      contentFlushedAt: 0,
      rowBytes: 0,
      poisoned: false,
      get node() {
        return { path, content: { Text: text() } }
      },
      commitStarted() {},
    }) as unknown as LoadedNode
  return { flush, writes, node }
}

afterEach(() => vi.useRealTimers())

describe('[STO5] the content flush', () => {
  it('a small row is written a second after its edit; a big one waits a second per 64 KiB, up to ten; closing writes it at once', async () => {
    vi.useFakeTimers({ now: 1_000_000 })
    for (const rowParts of [true, false]) {
      const { flush, writes, node } = setup(rowParts)
      const small = node('S/small', () => 'x'.repeat(100))
      const big = node('S/big', () => 'x'.repeat(320 * 1024))
      flush.markContentDirty(small)
      flush.markContentDirty(big)
      await vi.advanceTimersByTimeAsync(CONTENT_FLUSH_MS)
      expect(writes.map((w) => w.path).sort()).toEqual(['S/big', 'S/small'])
      writes.length = 0
      // Both edited again at once: the small row a second later, the big one five seconds after its last write.
      flush.markContentDirty(small)
      flush.markContentDirty(big)
      await vi.advanceTimersByTimeAsync(CONTENT_FLUSH_MS)
      expect(writes.map((w) => w.path)).toEqual(['S/small'])
      await vi.advanceTimersByTimeAsync(3_000)
      expect(writes.map((w) => w.path)).toEqual(['S/small'])
      await vi.advanceTimersByTimeAsync(1_100)
      expect(writes.map((w) => w.path)).toEqual(['S/small', 'S/big'])
      flush.markContentDirty(big)
      await flush.close()
      expect(writes.map((w) => w.path)).toEqual(['S/small', 'S/big', 'S/big'])
    }
  })

  it('a small row edited while a big one waits is still written a second later', async () => {
    vi.useFakeTimers({ now: 3_000_000 })
    const { flush, writes, node } = setup(true)
    const small = node('S/small', () => 'x')
    const big = node('S/big', () => 'x'.repeat(640 * 1024))
    flush.markContentDirty(big)
    await vi.advanceTimersByTimeAsync(CONTENT_FLUSH_MS)
    flush.markContentDirty(big)
    await vi.advanceTimersByTimeAsync(CONTENT_FLUSH_MS)
    // The big row now waits ten seconds; the small one is edited meanwhile.
    expect(writes.map((w) => w.path)).toEqual(['S/big'])
    flush.markContentDirty(small)
    await vi.advanceTimersByTimeAsync(CONTENT_FLUSH_MS)
    expect(writes.map((w) => w.path)).toEqual(['S/big', 'S/small'])
    await vi.advanceTimersByTimeAsync(CONTENT_FLUSH_MAX_MS)
    expect(writes.map((w) => w.path)).toEqual(['S/big', 'S/small', 'S/big'])
    await flush.close()
  })

  it('a growing row: writes never closer than its wait, never later than a second past it, and the wait is bounded (seeded)', async () => {
    vi.useFakeTimers({ now: 2_000_000 })
    await fc.assert(
      fc.asyncProperty(fc.integer({ min: 50, max: 4_000 }), fc.integer({ min: 20, max: 400 }), fc.boolean(), async (charsPerTick, tickMs, rowParts) => {
        const { flush, writes, node } = setup(rowParts)
        let text = ''
        const ln = node('S/grow', () => text)
        const start = Date.now()
        while (Date.now() - start < 40_000) {
          text += 'y'.repeat(charsPerTick)
          flush.markContentDirty(ln)
          await vi.advanceTimersByTimeAsync(tickMs)
        }
        await flush.close()
        for (let i = 1; i < writes.length - 1; i++) {
          const gap = writes[i]!.at - writes[i - 1]!.at
          const wait = contentFlushDelay(writes[i - 1]!.bytes)
          expect(gap).toBeGreaterThanOrEqual(wait - 5)
          expect(gap).toBeLessThanOrEqual(Math.min(CONTENT_FLUSH_MAX_MS, wait) + CONTENT_FLUSH_MS + tickMs + 5)
        }
      }),
      { seed: 42, numRuns: 25 },
    )
  })

  it('the wait: a second up to 64 KiB, then in proportion, at most ten', () => {
    expect(contentFlushDelay(0)).toBe(CONTENT_FLUSH_MS)
    expect(contentFlushDelay(64 * 1024)).toBe(1_000)
    expect(contentFlushDelay(128 * 1024)).toBe(2_000)
    expect(contentFlushDelay(100 * 1024 * 1024)).toBe(CONTENT_FLUSH_MAX_MS)
  })
})
