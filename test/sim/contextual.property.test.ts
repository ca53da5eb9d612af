import { afterEach, describe, it } from 'vitest'
import { VirtualClock } from '../../sync-server/engines/kit/index.js'
import { rm } from 'node:fs/promises'
import { Harness, leaseInterleavings, seedMesh, sqliteStorageIn, staleAttachmentRefused, tempDir } from './contextual-harness.js'
import { forEachSeed, seeds } from './rng.js'

let h: Harness | null = null
afterEach(async () => {
  await h?.close()
  h = null
})

/**
 * [CTX34] Seeded interleavings of pulls, reactions (some racing), acks, nacks, extends, the clock
 * moving past leases, and crashes between operations, on SQLite. Invariants: each event's reaction
 * is committed at most once, and committed iff its outcome says so (the mutation and the outcome
 * are one transaction); no ack, nack or extend succeeds with evidence that is not the current
 * lease; an acked event is never leased again. (contextual.pg.test.ts: the same on PostgreSQL.)
 */
describe('[CTX34] contextual leases under seeded interleavings (SQLite)', () => {
  it('reactions commit at most once; no stale evidence is ever accepted', { timeout: 300_000 }, async () => {
    await forEachSeed('contextual leases', seeds(6, 1900), async (seed) => {
      const dir = await tempDir()
      h = await new Harness(sqliteStorageIn(dir), new VirtualClock(), () => rm(dir, { recursive: true, force: true })).boot()
      const steps = await leaseInterleavings(h, seed)
      await h.close()
      h = null
      return steps
    })
  })

  it('[CTX26] a commit carrying an outcome with stale lease evidence is refused whole', async () => {
    const dir = await tempDir()
    h = await new Harness(sqliteStorageIn(dir), new VirtualClock(), () => rm(dir, { recursive: true, force: true })).boot()
    await seedMesh(h)
    await staleAttachmentRefused(h)
  })
})
