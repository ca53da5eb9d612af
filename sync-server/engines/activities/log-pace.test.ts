import { describe, expect, it } from 'vitest'
import { LogPace } from './log-pace.js'
import { Rng } from '../../../test/sim/rng.js'

/** [ACT21] The log pace's buckets, on a clock the test moves. */
describe('LogPace [ACT21]', () => {
  const paced = (perSecond: number, burst: number) => {
    let t = 1_000_000
    const pace = new LogPace(perSecond, burst, () => t)
    return { pace, advance: (ms: number) => (t += ms) }
  }

  it('a run alone: a full bucket takes `burst` lines at once, then each line past it waits for the pace', () => {
    const { pace } = paced(1_000, 500)
    expect(pace.reserve('a', 200)).toBe(0)
    expect(pace.reserve('a', 200)).toBe(0)
    expect(pace.reserve('a', 100)).toBe(0)
    // Past the burst: 200 more lines at 1,000 a second are 200 ms away, the next 200 at 400.
    expect(pace.reserve('a', 200)).toBeCloseTo(200)
    expect(pace.reserve('a', 200)).toBeCloseTo(400)
  })

  it('refills at the pace, and never holds more than the burst', () => {
    const { pace, advance } = paced(1_000, 500)
    pace.reserve('a', 700) // 200 lines past the burst: paid 200 ms from now
    advance(200)
    expect(pace.reserve('a', 0)).toBe(0)
    advance(100) // 100 lines earned
    expect(pace.reserve('a', 100)).toBe(0)
    expect(pace.reserve('a', 50)).toBeCloseTo(50)
    // A long quiet spell saves up the burst, not more.
    advance(60_000)
    expect(pace.reserve('a', 500)).toBe(0)
    expect(pace.reserve('a', 1)).toBeCloseTo(1)
  })

  it('runs logging at once share the pace evenly; a run logging a line now and then never waits behind a flood', () => {
    const { pace, advance } = paced(1_000, 500)
    pace.reserve('a', 0)
    pace.reserve('b', 0)
    expect(pace.active).toBe(2)
    // Two floods, each with half the pace (and half the burst: 250 lines).
    expect(pace.reserve('a', 250)).toBe(0)
    expect(pace.reserve('a', 100)).toBeCloseTo(200)
    expect(pace.reserve('b', 250)).toBe(0)
    expect(pace.reserve('b', 100)).toBeCloseTo(200)
    // A third run's single lines: its own bucket is full, whatever the floods owe.
    for (let i = 0; i < 10; i++) {
      expect(pace.reserve('quiet', 1)).toBe(0)
      pace.reserve('a', 200)
      advance(100)
    }
  })

  it('a run that sent nothing for a second, or ended, takes no share any more', () => {
    const { pace, advance } = paced(1_000, 500)
    pace.reserve('a', 0)
    pace.reserve('gone', 0)
    pace.reserve('ended', 0)
    pace.forget('ended')
    expect(pace.active).toBe(2)
    advance(1_001)
    // 'gone' owes nothing and was quiet for a second: 'a' has the whole pace again.
    expect(pace.reserve('a', 500)).toBe(0)
    expect(pace.active).toBe(1)
    expect(pace.reserve('a', 100)).toBeCloseTo(100)
  })

  it('0 lines a second is no pace', () => {
    const { pace } = paced(0, 0)
    for (let i = 0; i < 100; i++) expect(pace.reserve('a', 10_000)).toBe(0)
  })

  it('a line costs one per started 1,024 characters of its text', () => {
    expect(LogPace.cost([])).toBe(0)
    expect(LogPace.cost([{ text: '' }, { text: 'x' }, { text: 'x'.repeat(1024) }])).toBe(3)
    expect(LogPace.cost([{ text: 'x'.repeat(1025) }, { text: 'x'.repeat(10_000) }])).toBe(2 + 10)
  })

  it('seeded property: whatever the runs send and when, the lines taken by any moment never exceed the burst plus the pace since the start, and a run within its share never waits', () => {
    let checked = 0
    const failures: string[] = []
    for (let seed = 1; seed <= 200; seed++) {
      const rng = new Rng(seed)
      const perSecond = rng.pick([500, 2_000, 10_000, 50_000])
      // The host's bucket holds at least 1,000 lines (LOG_BURST_MIN).
      const burst = rng.int(1_000, 5_000)
      const runs = rng.int(1, 5)
      let t = 0
      const pace = new LogPace(perSecond, burst, () => t)
      // The runs and a quiet one, all logging from the start and at least every 200 ms (so the
      // set sharing the pace stays the same): each batch is taken when it is paid for.
      const names = [...Array.from({ length: runs }, (_, i) => `r${i}`), 'quiet']
      for (const n of names) pace.reserve(n, 0)
      const taken: { at: number; cost: number }[] = []
      for (let step = 0; step < 200; step++) {
        t += rng.pick([0, 0, rng.next() * 5, rng.next() * 50, rng.next() * 200])
        for (const n of rng.shuffle(names)) {
          // The quiet run logs one line a step: far under its share (at least 500 / 6 a second).
          const cost = n === 'quiet' ? (step % 4 === 0 ? 1 : 0) : rng.int(0, 400)
          const wait = pace.reserve(n, cost)
          if (wait < 0 || (n === 'quiet' && wait > 0)) failures.push(`seed ${seed}: ${n} waits ${wait} ms`)
          taken.push({ at: t + wait, cost })
        }
      }
      taken.sort((a, b) => a.at - b.at)
      let sum = 0
      for (const batch of taken) {
        sum += batch.cost
        // By the moment a batch is taken, everything taken so far: at most burst + pace × time.
        if (sum > burst + (perSecond * batch.at) / 1000 + 1e-6) failures.push(`seed ${seed}: ${sum} lines by ${batch.at} ms`)
        checked++
      }
    }
    expect(failures.slice(0, 5)).toEqual([])
    expect(checked).toBeGreaterThan(100_000)
  })
})
