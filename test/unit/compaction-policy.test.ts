import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { COMPACT_AFTER_UPDATES, COMPACT_LOG_SHARE, COMPACT_MAX_UPDATES, compactionDue } from '../../sync-server/storage/compaction.js'

/**
 * [STO9] When a node's log is compacted: a stream of appends (each `size` bytes, growing the
 * snapshot by `grows` bytes when folded) against the policy. Logic only; the storage contract
 * tests it on SQLite and PostgreSQL.
 */
function stream(start: number, appends: Array<{ size: number; grows: number }>) {
  let snapshot = start
  let log = 0
  let entries = 0
  let pendingGrowth = 0
  let appended = 0
  let rewritten = 0
  let forced = 0
  let forcedRewritten = 0
  let longest = 0
  for (const a of appends) {
    entries++
    log += a.size
    pendingGrowth += a.grows
    appended += a.size
    longest = Math.max(longest, entries)
    if (compactionDue(entries, log, snapshot)) {
      const byCap = log * COMPACT_LOG_SHARE < snapshot
      snapshot += pendingGrowth
      rewritten += snapshot
      if (byCap) {
        forced++
        forcedRewritten += snapshot
      }
      log = 0
      entries = 0
      pendingGrowth = 0
    }
  }
  return { appended, rewritten, forced, forcedRewritten, longest, entries, count: appends.length }
}

describe('[STO9] the compaction policy', () => {
  it('never lets a log pass its bounds, and rewrites a bounded multiple of what was appended (seeded)', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 2_000_000 }),
        fc.array(fc.record({ size: fc.integer({ min: 1, max: 5_000 }), grows: fc.integer({ min: 0, max: 5_000 }) }), { minLength: 1, maxLength: 3_000 }),
        (start, raw) => {
          // A fold never grows the snapshot by more than the update that made it.
          const appends = raw.map((a) => ({ size: a.size, grows: Math.min(a.grows, a.size) }))
          const r = stream(start, appends)
          expect(r.longest).toBeLessThanOrEqual(COMPACT_MAX_UPDATES + 1)
          // Each compaction the entry cap did not force found a log of at least a share of the
          // snapshot it rewrote: what those rewrote is at most (share + 1) times what was appended.
          expect(r.rewritten - r.forcedRewritten).toBeLessThanOrEqual((COMPACT_LOG_SHARE + 1) * r.appended)
          // The cap forces one compaction per COMPACT_MAX_UPDATES + 1 entries at most.
          expect(r.forced).toBeLessThanOrEqual(Math.floor(r.count / (COMPACT_MAX_UPDATES + 1)))
        },
      ),
      { seed: 1204, numRuns: 300 },
    )
  })

  it('a small node compacts past 200 entries as before; a big one waits for bytes; any waits no longer than the entry cap', () => {
    expect(compactionDue(COMPACT_AFTER_UPDATES, 10_000_000, 0)).toBe(false)
    expect(compactionDue(COMPACT_AFTER_UPDATES + 1, 6_000, 2_000)).toBe(true)
    // A 60 KB answer streamed 6 bytes (~25 logged) a token: not every 200 tokens, but at 15 KB of log.
    expect(compactionDue(201, 201 * 25, 60_000)).toBe(false)
    expect(compactionDue(600, 600 * 25, 60_000)).toBe(true)
    expect(compactionDue(COMPACT_MAX_UPDATES, 1, 100_000)).toBe(false)
    expect(compactionDue(COMPACT_MAX_UPDATES + 1, 1, 100_000)).toBe(true)
  })

  it('a token stream into one cell rewrites a constant number of bytes per token while its log fits the entry cap', () => {
    const tokens = (n: number) => Array.from({ length: n }, () => ({ size: 25, grows: 6 }))
    const perToken = (n: number) => stream(0, tokens(n)).rewritten / n
    // At every 200 entries it was ~n * 6 / 400 per token: twice the tokens, twice the cost.
    // A 16,000-token answer (96 KB) is the largest whose quarter fits 1,000 entries of 25 bytes.
    const long = perToken(8_000)
    const longer = perToken(16_000)
    expect(longer / long).toBeLessThan(1.5)
    expect(longer).toBeLessThanOrEqual((COMPACT_LOG_SHARE + 1) * 25)
    // Past it, the cap: a fold per 1,000 entries, a fifth of what one per 200 cost.
    const capped = stream(0, tokens(100_000))
    expect(capped.rewritten / 100_000).toBeLessThan((600_000 / 1_000) * 1.1)
  })
})
