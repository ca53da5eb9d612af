import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, describe, expect, it, vi } from 'vitest'
import { SEEDS_FILE, forEachSeed, loadKeptSeeds } from './rng.js'

/**
 * [SIM7] Kept seeds: test/sim/seeds.json lists, per seeded test, the seeds that once failed (or
 * found an interleaving worth keeping); each seeded test replays its kept seeds first, on every
 * run, CI included. A failing seed prints the one-line command that replays it and the entry that
 * keeps it.
 */

let dir: string | null = null
afterEach(async () => {
  vi.restoreAllMocks()
  if (dir) await rm(dir, { recursive: true, force: true })
  dir = null
})

async function seedsFile(content: unknown): Promise<string> {
  dir = await mkdtemp(join(tmpdir(), 'weft-seeds-'))
  const file = join(dir, 'seeds.json')
  await writeFile(file, JSON.stringify(content))
  return file
}

describe('[SIM7] kept seeds', () => {
  it('every entry of test/sim/seeds.json names a seeded test that exists, with a seed and why', async () => {
    const kept = loadKeptSeeds()
    // The names the seeded tests run under: forEachSeed's first argument, and the sim net's two.
    const names = new Set(['sim net sync', 'sim net mux'])
    for (const f of await readdir(new URL('.', import.meta.url))) {
      if (!f.endsWith('.test.ts')) continue
      const text = await readFile(new URL(f, import.meta.url), 'utf8')
      for (const m of text.matchAll(/forEachSeed\(\s*'([^']+)'/g)) names.add(m[1]!)
    }
    for (const [name, list] of Object.entries(kept)) {
      expect(names.has(name), `${name} in ${SEEDS_FILE} names no seeded test`).toBe(true)
      expect(list.length).toBeGreaterThan(0)
    }
  })

  it('a seeded test replays its kept seeds first, then its sweep, each once', async () => {
    const file = await seedsFile({ $comment: 'x', 'a test': [{ seed: 42, why: 'caught a thing' }, { seed: 2, why: 'and another' }], other: [{ seed: 7, why: 'not ours' }] })
    const ran: number[] = []
    vi.spyOn(console, 'log').mockImplementation(() => undefined)
    await forEachSeed('a test', [1, 2, 3], async (seed) => {
      ran.push(seed)
      return 1
    }, file)
    expect(ran).toEqual([42, 2, 1, 3])
    expect(console.log).toHaveBeenCalledWith('[sim] a test: 4 seeds (2 kept), 4 seeded steps')
  })

  it('a failing seed prints the one-line replay command of this test file and the entry that keeps it', async () => {
    const file = await seedsFile({})
    const printed: string[] = []
    vi.spyOn(console, 'log').mockImplementation((line: string) => void printed.push(line))
    await expect(
      forEachSeed('a test', [5, 6], async (seed) => {
        if (seed === 6) throw new Error('invariant broken')
        return 1
      }, file),
    ).rejects.toThrow('invariant broken')
    const text = printed.join('\n')
    expect(text).toContain('[sim] a test: seed 6 FAILED')
    expect(text).toContain(`replay: WEFT_SIM_SEED=6 npx vitest run test/sim/seeds.test.ts -t ${JSON.stringify('a failing seed prints the one-line replay command of this test file and the entry that keeps it')}`)
    expect(text).toContain('keep it: add { "seed": 6, "why": "<what it caught>" } under "a test" in test/sim/seeds.json')
  })

  it('an entry without a seed or a why is refused, naming it', async () => {
    await expect(async () => loadKeptSeeds(await seedsFile({ t: [{ seed: 1 }] }))).rejects.toThrow('"t"[0] needs an integer seed and a non-empty why')
    await expect(async () => loadKeptSeeds(await seedsFile({ t: { seed: 1, why: 'x' } }))).rejects.toThrow('"t" must be a list')
  })
})
