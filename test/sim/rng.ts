import { readFileSync } from 'node:fs'
import { relative } from 'node:path'
import { fileURLToPath } from 'node:url'
import { expect } from 'vitest'

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
 * A kept seed (test/sim/seeds.json): a seed that once failed, or found an interleaving worth
 * keeping, replayed first by the seeded test of that name on every run (CI included). `why` says
 * what it caught; extra fields (`kind`, `steps`) are the test's own.
 */
export interface KeptSeed {
  seed: number
  why: string
  [field: string]: unknown
}

export const SEEDS_FILE = fileURLToPath(new URL('./seeds.json', import.meta.url))

/** Every kept seed, by the name of the seeded test that replays it. */
export function loadKeptSeeds(file = SEEDS_FILE): Record<string, KeptSeed[]> {
  const raw = JSON.parse(readFileSync(file, 'utf8')) as unknown
  if (!raw || typeof raw !== 'object' || Array.isArray(raw)) throw new Error(`${file}: expected an object of test name → kept seeds`)
  const out: Record<string, KeptSeed[]> = {}
  for (const [name, list] of Object.entries(raw as Record<string, unknown>)) {
    if (name.startsWith('$')) continue // "$comment" and the like
    if (!Array.isArray(list)) throw new Error(`${file}: "${name}" must be a list of { seed, why }`)
    out[name] = list.map((k, i) => {
      const e = k as Partial<KeptSeed>
      if (!Number.isSafeInteger(e.seed) || typeof e.why !== 'string' || e.why.trim() === '') throw new Error(`${file}: "${name}"[${i}] needs an integer seed and a non-empty why`)
      return e as KeptSeed
    })
  }
  return out
}

/** The kept seeds of one seeded test (none when WEFT_SIM_SEED pins one seed to replay). */
function keptSeeds(name: string, file = SEEDS_FILE): KeptSeed[] {
  if (process.env.WEFT_SIM_SEED) return []
  return loadKeptSeeds(file)[name] ?? []
}

/** The one-line command that replays `seed` of the test running now. */
function replayCommand(seed: number, env = 'WEFT_SIM_SEED'): string {
  const state = expect.getState()
  const file = state.testPath ? relative(process.cwd(), state.testPath) : 'test/sim/'
  // -t is a regular expression: the title's own brackets and parentheses are escaped.
  const title = state.currentTestName?.split(' > ').pop()?.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')
  return `${env}=${seed} npx vitest run ${file}${title ? ` -t ${JSON.stringify(title)}` : ''}`
}

/**
 * Runs `body` for the test's kept seeds (seeds.json, first) and then `list`. A failing seed is
 * printed with the one-line command that replays it and how to keep it; the seeds and seeded
 * steps covered are reported on one console line.
 */
export async function forEachSeed(name: string, list: readonly number[], body: (seed: number) => Promise<number>, file = SEEDS_FILE): Promise<void> {
  const kept = keptSeeds(name, file).map((k) => k.seed)
  const all = [...kept, ...list.filter((s) => !kept.includes(s))]
  let steps = 0
  for (const seed of all) {
    try {
      steps += await body(seed)
    } catch (err) {
      console.log(
        `[sim] ${name}: seed ${seed} FAILED${kept.includes(seed) ? ' (a kept seed: a regression)' : ''}.\n` +
          `  replay: ${replayCommand(seed)}\n` +
          `  keep it: add { "seed": ${seed}, "why": "<what it caught>" } under ${JSON.stringify(name)} in test/sim/seeds.json (test/sim/README.md)`,
      )
      throw err
    }
  }
  console.log(`[sim] ${name}: ${all.length} seeds (${kept.length} kept), ${steps} seeded steps`)
}
