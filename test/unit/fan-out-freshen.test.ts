import fc from 'fast-check'
import pino from 'pino'
import { describe, expect, it, vi } from 'vitest'
import { FanOut } from '../../sync-server/cluster/fan-out.js'
import type { NodeService, RemoteChange } from '../../sync-server/nodes/index.js'
import type { ChangeRecord } from '../../shared/index.js'
import type { StorageAdapter } from '../../sync-server/storage/index.js'

/**
 * [SCALE14] `freshen`: every change committed before the call is applied when it resolves, and
 * callers asking at once share one read of the last version at a time. Logic only (the change
 * log is an array); the two-instance behaviour is cluster-fresh.pg.test.ts.
 */
function setup() {
  const log: ChangeRecord[] = []
  const applied: number[] = []
  const reads = { head: 0, inFlight: 0, maxInFlight: 0 }
  const nodes = {
    connectCluster: () => {},
    applyRemotePage: async (page: readonly RemoteChange[], fresh: (c: RemoteChange) => boolean, done: (c: RemoteChange) => void) => {
      for (const c of page) {
        if (!fresh(c)) continue
        applied.push(c.version)
        done(c)
      }
    },
  } as unknown as NodeService
  const storage = {
    lastVersion: async () => {
      reads.head++
      reads.inFlight++
      reads.maxInFlight = Math.max(reads.maxInFlight, reads.inFlight)
      const head = log.length
      await new Promise((r) => setTimeout(r, 1))
      reads.inFlight--
      return head
    },
    changesSince: async (v: number, limit: number) => log.filter((c) => c.version > v).slice(0, limit),
  } as unknown as StorageAdapter
  const fan = new FanOut({ instanceId: 'here', nodes, storage, log: pino({ level: 'silent' }), publish: () => {}, pollMs: 60_000 })
  const commit = () => log.push({ version: log.length + 1, path: `S/n${log.length}`, nodeType: 'Document', kind: 'Created' } as ChangeRecord)
  return { fan, commit, applied, reads, log }
}

describe('[SCALE14] freshen', () => {
  it('applies what was committed before the call', async () => {
    const { fan, commit, applied } = setup()
    await fan.start()
    await fan.freshen()
    expect(applied).toEqual([])
    commit()
    commit()
    await fan.freshen()
    expect(applied).toEqual([1, 2])
    await fan.close()
  })

  it('is bounded: a database that does not answer, or a catch-up that keeps failing, ends the wait (a refusal is then decided on what is here)', async () => {
    vi.useFakeTimers()
    try {
      const hung = setup()
      ;(hung as unknown as { fan: { o: { storage: { lastVersion: () => Promise<number> } } } }).fan.o.storage.lastVersion = () => new Promise<number>(() => undefined)
      let done = false
      void hung.fan.freshen().then(() => (done = true))
      await vi.advanceTimersByTimeAsync(4_900)
      expect(done).toBe(false)
      await vi.advanceTimersByTimeAsync(200)
      expect(done).toBe(true)
    } finally {
      vi.useRealTimers()
    }
    {
      const failing = setup()
      let reads = 0
      const storage = (failing as unknown as { fan: { o: { storage: { changesSince: () => Promise<never> } } } }).fan.o.storage
      storage.changesSince = () => {
        reads++
        return Promise.reject(new Error('database down'))
      }
      await failing.fan.start()
      failing.commit()
      await failing.fan.freshen()
      // One failed catch-up, not a spin for the whole bound.
      expect(reads).toBe(1)
      expect(failing.applied).toEqual([])
    }
  })

  it('property: any interleaving of commits, waits and concurrent freshens: each caller sees every commit made before its call; one head read at a time', async () => {
    const step = fc.oneof(fc.constant('commit' as const), fc.constant('tick' as const), fc.integer({ min: 1, max: 6 }))
    await fc.assert(
      fc.asyncProperty(fc.array(step, { minLength: 1, maxLength: 30 }), async (steps) => {
        const { fan, commit, applied, reads, log } = setup()
        await fan.start()
        const checks: Promise<void>[] = []
        let calls = 0
        for (const s of steps) {
          if (s === 'commit') commit()
          else if (s === 'tick') await new Promise((r) => setTimeout(r, 1))
          else
            for (let i = 0; i < s; i++) {
              const seen = log.length
              calls++
              checks.push(fan.freshen().then(() => expect(applied.length).toBeGreaterThanOrEqual(seen)))
            }
        }
        await Promise.all(checks)
        expect(applied).toEqual(log.slice(0, applied.length).map((c) => c.version))
        // Callers arriving while a read runs share the next one: never two at once, never more reads than calls.
        expect(reads.maxInFlight).toBeLessThanOrEqual(1)
        expect(reads.head - 1).toBeLessThanOrEqual(calls)
        await fan.close()
      }),
      { seed: 14, numRuns: 150 },
    )
  })
})
