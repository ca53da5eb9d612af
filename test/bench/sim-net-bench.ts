/**
 * The sim net's throughput (issue 17, [SIM1]): seeded steps per second of sync on the simulated
 * network, `/sync` and `/mux`, the runs test/sim/net/sync-sim.test.ts makes (the same seeds and
 * steps per seed). A step is one seeded choice (an edit, one message delivered, a storage turn, a
 * disconnect or reconnect) with the invariants checked after it. Run: `BENCH_ONLY=sim-net npm run
 * bench` (`SIM_BENCH_SEEDS`, `SIM_BENCH_STEPS` change the size).
 */
import { loadavg } from 'node:os'
import { runSim } from '../sim/net/run-sim.js'

const SEEDS = Number(process.env.SIM_BENCH_SEEDS ?? 4)
const STEPS = Number(process.env.SIM_BENCH_STEPS ?? 2000)

export async function benchSimNet(): Promise<Record<string, number>> {
  const figures: Record<string, number> = { seedsPerTransport: SEEDS, stepsPerSeed: STEPS, loadAvg1m: Number((loadavg()[0] ?? 0).toFixed(2)) }
  for (const kind of ['sync', 'mux'] as const) {
    let steps = 0
    let ms = 0
    for (let i = 0; i < SEEDS; i++) {
      const r = await runSim({ kind, seed: 1000 + i, steps: STEPS })
      steps += r.steps
      ms += r.ms
    }
    figures[`${kind}StepsPerSec`] = Math.round(steps / (ms / 1000))
  }
  return figures
}
