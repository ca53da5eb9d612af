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
  let longest = 0
  for (const a of appends) {
    entries++
    log += a.size
    pendingGrowth += a.grows
    appended += a.size
    longest = Math.max(longest, entries)
    if (compactionDue(entries, log, snapshot)) {
      snapshot += pendingGrowth
      rewritten += snapshot
      log = 0
      entries = 0
      pendingGrowth = 0
    }
  }
  return { appended, rewritten, longest, entries }
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
          expect(r.longest).toBeLessThanOrEqual(Math.max(COMPACT_MAX_UPDATES, (start + r.appended) / 64) + 1)
          // Each compaction but the ones the entry cap forces found a log of at least a share of
          // the snapshot it rewrote (less the log's own growth): what it rewrote is at most
          // (share + 1) times what was appended since, plus the first snapshot once. The cap
          // cannot bite within 3,000 appends.
          expect(r.rewritten).toBeLessThanOrEqual((COMPACT_LOG_SHARE + 1) * r.appended + start)
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
    expect(compactionDue(COMPACT_MAX_UPDATES + 1, 1, 100_000)).toBe(true)
    // A 10 MB log of 100-byte lines: the entry cap grows with the snapshot, so bytes decide.
    expect(compactionDue(20_000, 20_000 * 100, 10_000_000)).toBe(false)
    expect(compactionDue(25_000, 25_000 * 100, 10_000_000)).toBe(true)
    expect(compactionDue(160_000, 160_000, 10_000_000)).toBe(true)
  })

  it('a token stream into one cell rewrites a constant number of bytes per token, however long it grows', () => {
    const tokens = (n: number) => Array.from({ length: n }, () => ({ size: 25, grows: 6 }))
    const perToken = (n: number) => stream(0, tokens(n)).rewritten / n
    // At every 200 entries it was ~n * 6 / 400 per token: 10 times the tokens, 10 times the cost.
    const long = perToken(20_000)
    const longer = perToken(200_000)
    expect(longer / long).toBeLessThan(1.5)
    expect(longer).toBeLessThanOrEqual((COMPACT_LOG_SHARE + 1) * 25)
  })
})
