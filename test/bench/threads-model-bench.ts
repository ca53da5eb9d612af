/**
 * [THR26] The thread model's reading of a long thread of MESSAGES posted and ingested messages
 * (their ids in `UserMessageIds`, `IngestedMessageIds` and `Posted`):
 *  - `restingWithInputMs`: what the engine's watch runs for every change of a resting thread, with
 *    nothing waiting (the common case, and the whole scan: nothing short-cuts it);
 *  - `roundInputsMs` / `claimedContentMs`: what the thread page and the claim read, with two more
 *    posted and waiting, one of them missing from `UserMessageIds` (a merge cut it).
 * Median of 15 timed calls after 5 warm ones.
 *
 * Run alone: `npx tsx test/bench/threads-model-bench.ts` prints JSON.
 */
import { performance } from 'node:perf_hooks'
import { pathToFileURL } from 'node:url'
import { roundInputs, type JsonObject, type NodePath } from '../../shared/index.js'
import { claimedContent, restingWithInput } from '../../sync-server/engines/threads/model.js'

const MESSAGES = Number(process.env.THREADS_MODEL_MESSAGES ?? 10_000)
const T = 'S/t' as NodePath

function median(fn: () => unknown): number {
  for (let i = 0; i < 5; i++) fn()
  const times: number[] = []
  for (let i = 0; i < 15; i++) {
    const t0 = performance.now()
    fn()
    times.push(performance.now() - t0)
  }
  times.sort((a, b) => a - b)
  return Number(times[7]!.toFixed(3))
}

export async function benchThreadsModel(): Promise<Record<string, number>> {
  const ids = Array.from({ length: MESSAGES }, (_, i) => `m${i}`)
  const c: JsonObject = {
    Status: 'Idle',
    UserMessageIds: [...ids, 'w1'],
    IngestedMessageIds: ids,
    Posted: Object.fromEntries([...ids.map((id, i) => [id, i] as const), ['w1', MESSAGES], ['w2', MESSAGES]]),
    PendingUserMessages: [`${T}/w1`],
    HasPending: true,
  }
  const inputs = roundInputs(T, c)
  if (inputs.length !== 2) throw new Error(`Invariant: two inputs expected, got ${inputs.length}`)
  const settled: JsonObject = { Status: 'Idle', UserMessageIds: ids, IngestedMessageIds: ids, Posted: Object.fromEntries(ids.map((id, i) => [id, i] as const)), PendingUserMessages: [], HasPending: false }
  if (restingWithInput(settled)) throw new Error('Invariant: a settled thread needs no dispatch')
  return {
    messages: MESSAGES,
    restingWithInputMs: median(() => restingWithInput(settled)),
    roundInputsMs: median(() => roundInputs(T, c)),
    claimedContentMs: median(() => claimedContent(T, c, new Date(0).toISOString())),
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  console.log(JSON.stringify(await benchThreadsModel(), null, 2))
}
