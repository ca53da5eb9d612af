import { describe, expect, it } from 'vitest'
import { LogPace } from './log-pace.js'
import { Rng } from '../../../test/sim/rng.js'

/** [ACT21] The log pace's bucket, on a clock the test moves. */
describe('LogPace [ACT21]', () => {
  const paced = (perSecond: number, burst: number) => {
    let t = 1_000_000
    const pace = new LogPace(perSecond, burst, () => t)
    return { pace, advance: (ms: number) => (t += ms) }
  }

  it('a full bucket takes `burst` lines at once, then charges the pace for each line past it', () => {
    const { pace } = paced(1_000, 500)
    expect(pace.reserve(200)).toBe(0)
    expect(pace.reserve(200)).toBe(0)
    expect(pace.reserve(100)).toBe(0)
    // Past the burst: 200 more lines at 1,000 a second are 200 ms away, the next 200 at 400.
    expect(pace.reserve(200)).toBeCloseTo(200)
    expect(pace.reserve(200)).toBeCloseTo(400)
  })

  it('refills at the pace, and never holds more than the burst', () => {
    const { pace, advance } = paced(1_000, 500)
    pace.reserve(700) // 200 lines past the burst: paid 200 ms from now
    advance(200)
    expect(pace.reserve(0)).toBe(0)
    advance(100) // 100 lines earned
    expect(pace.reserve(100)).toBe(0)
    expect(pace.reserve(50)).toBeCloseTo(50)
    // A long quiet spell saves up the burst, not more.
    advance(60_000)
    expect(pace.reserve(500)).toBe(0)
    expect(pace.reserve(1)).toBeCloseTo(1)
  })

  it('0 lines a second is no pace', () => {
    const { pace } = paced(0, 0)
    for (let i = 0; i < 100; i++) expect(pace.reserve(10_000)).toBe(0)
  })

  it('a line costs one per started KiB of its text', () => {
    expect(LogPace.cost([])).toBe(0)
    expect(LogPace.cost([{ text: '' }, { text: 'x' }, { text: 'x'.repeat(1024) }])).toBe(3)
    expect(LogPace.cost([{ text: 'x'.repeat(1025) }, { text: 'x'.repeat(10_000) }])).toBe(2 + 10)
  })

  it('seeded property: whatever the batches and their timing, the lines taken by any moment never exceed the burst plus the pace since the start', () => {
    for (let seed = 1; seed <= 200; seed++) {
      const rng = new Rng(seed)
      const perSecond = rng.pick([500, 2_000, 10_000, 50_000])
      const burst = rng.int(1, 5_000)
      let t = 0
      const pace = new LogPace(perSecond, burst, () => t)
      // Each batch is taken when it is paid for (`at`); paid in the order reserved.
      const taken: { at: number; cost: number }[] = []
      for (let i = 0; i < 300; i++) {
        t += rng.pick([0, 0, rng.next() * 5, rng.next() * 200, rng.next() * 5_000])
        const cost = rng.int(0, 400)
        const wait = pace.reserve(cost)
        expect(wait).toBeGreaterThanOrEqual(0)
        taken.push({ at: t + wait, cost })
      }
      let sum = 0
      for (let i = 0; i < taken.length; i++) {
        expect(taken[i]!.at).toBeGreaterThanOrEqual(i > 0 ? taken[i - 1]!.at - 1e-9 : 0)
        sum += taken[i]!.cost
        // By the moment batch i is taken, everything up to it was: at most burst + pace × time.
        const allowed = burst + (perSecond * taken[i]!.at) / 1000
        expect(sum, `seed ${seed}, batch ${i}`).toBeLessThanOrEqual(allowed + 1e-6)
      }
    }
  })
})

