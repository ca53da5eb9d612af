/**
 * The seeded random source of the test mesh: mulberry32, so a seed replays the same choices.
 * `WEFT_SIM_SEED` pins one seed; `WEFT_SIM_SEEDS` sets how many a sweep runs.
 */
export class Rng {
  private s: number
  constructor(readonly seed: number) {
    this.s = seed >>> 0
  }

  /** A float in [0, 1). */
  next(): number {
    this.s = (this.s + 0x6d2b79f5) >>> 0
    let t = this.s
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }

  /** An integer in [lo, hi]. */
  int(lo: number, hi: number): number {
    return lo + Math.floor(this.next() * (hi - lo + 1))
  }

  pick<T>(items: readonly T[]): T {
    return items[Math.floor(this.next() * items.length)]!
  }

  shuffle<T>(items: readonly T[]): T[] {
    const out = [...items]
    for (let i = out.length - 1; i > 0; i--) {
      const j = Math.floor(this.next() * (i + 1))
      ;[out[i], out[j]] = [out[j]!, out[i]!]
    }
    return out
  }
}

/** The seeds a sweep runs: WEFT_SIM_SEED alone, else `count` seeds from a fixed base. */
export function seeds(count: number, base = 20261203): number[] {
  const pinned = process.env.WEFT_SIM_SEED
  if (pinned) return [Number(pinned)]
  const n = Number(process.env.WEFT_SIM_SEEDS ?? count)
  return Array.from({ length: n }, (_, i) => base + i)
}

/**
 * Runs `body` for each seed; a failing seed is printed with the command that replays it (make it a
 * named regression test), and the steps covered are reported on one console line.
 */
export async function forEachSeed(name: string, list: readonly number[], body: (seed: number) => Promise<number>): Promise<void> {
  let steps = 0
  for (const seed of list) {
    try {
      steps += await body(seed)
    } catch (err) {
      console.log(`[sim] ${name}: seed ${seed} FAILED; replay with WEFT_SIM_SEED=${seed}, then keep it as a named regression test`)
      throw err
    }
  }
  console.log(`[sim] ${name}: ${list.length} seeds, ${steps} seeded steps`)
}
