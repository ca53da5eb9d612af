import { afterEach, describe, expect, it } from 'vitest'
import pino from 'pino'
import { EngineOwner, type EngineOwnerOptions, type MemberStore } from '../../sync-server/cluster/engine-owner.js'
import type { Lease, LeaseBusy } from '../../sync-server/engines/index.js'
import type { NodeService } from '../../sync-server/nodes/index.js'
import { waitFor } from '../helpers/index.js'
import { Rng } from '../sim/rng.js'

/**
 * [SCALE17] The balance of engine partitions between instances, as logic: several EngineOwners on
 * one in-memory lease table (the PostgreSQL one runs in cluster-failover.pg.test.ts). Each call
 * to the table takes a random few milliseconds, so instances' steps interleave; an instance
 * "crashes" by losing the table (every call fails), which is also what a lost database looks like.
 */

const SEED = Number(process.env.ENGINE_OWNER_SEED ?? 1705)
const PARTITIONS = ['activities', 'subscriptions', 'threads']
const TTL = 240

class MemoryLeases implements MemberStore {
  readonly leases = new Map<string, { holder: string | null; fence: number; expires: number }>()
  readonly members = new Map<string, number>()
  readonly cut = new Set<string>()
  constructor(private readonly random: () => number) {}

  private async call(holder: string): Promise<number> {
    await new Promise((r) => setTimeout(r, Math.floor(this.random() * 4)))
    if (this.cut.has(holder)) throw new Error('the database did not answer')
    return Date.now()
  }

  async acquire(name: string, holder: string, ttlMs: number, graceMs = 0): Promise<Lease | LeaseBusy | null> {
    const now = await this.call(holder)
    const l = this.leases.get(name)
    if (l && l.expires > now - graceMs) return { busy: true, freeInMs: l.expires + graceMs - now }
    const next = { holder, fence: (l?.fence ?? 0) + 1, expires: now + ttlMs }
    this.leases.set(name, next)
    return { holder, fence: next.fence, expiresAt: next.expires }
  }

  async renew(name: string, lease: Lease, ttlMs: number): Promise<Lease | null> {
    const now = await this.call(lease.holder)
    const l = this.leases.get(name)
    if (!l || l.holder !== lease.holder || l.fence !== lease.fence || l.expires <= now) return null
    l.expires = now + ttlMs
    return { holder: lease.holder, fence: l.fence, expiresAt: l.expires }
  }

  async release(name: string, lease: Lease): Promise<void> {
    const now = await this.call(lease.holder)
    const l = this.leases.get(name)
    if (l && l.holder === lease.holder && l.fence === lease.fence) Object.assign(l, { holder: null, expires: now })
  }

  async census(holder: string, ttlMs: number): Promise<number> {
    const now = await this.call(holder)
    this.members.set(holder, now + ttlMs)
    return [...this.members].filter(([h, until]) => h === holder || until > now).length
  }

  async holders(): Promise<Map<string, string>> {
    const now = Date.now()
    return new Map([...this.leases].filter(([, l]) => l.holder && l.expires > now).map(([name, l]) => [name, l.holder!]))
  }

  async leave(holder: string): Promise<void> {
    await this.call(holder)
    this.members.delete(holder)
  }
}

const silent = pino({ level: 'silent' })

/** An EngineOwner on the in-memory table: the options every test gives alike, then its own. */
function ownerOn(store: MemoryLeases, o: Pick<EngineOwnerOptions, 'instanceId' | 'partitions' | 'announce'>): EngineOwner {
  return new EngineOwner({ ...o, context: { users: {} as never, log: silent }, nodes: {} as NodeService, store, ttlMs: TTL, log: silent, catchUp: async () => undefined })
}

interface Instance {
  id: string
  owner: EngineOwner
  state: 'up' | 'cut' | 'stopped'
}

describe('[SCALE17] engine partitions balanced between instances', () => {
  const instances: Instance[] = []
  afterEach(async () => {
    for (const i of instances) if (i.state === 'up') await i.owner.stop()
    instances.length = 0
  })

  it(`never two holders of a partition; every partition held and each instance within its share after each step (seed ${SEED})`, { timeout: 120_000 }, async () => {
    const rng = new Rng(SEED)
    const random = () => rng.next()
    const store = new MemoryLeases(random)
    // Which instances' engines run, per partition, right now. An engine whose lease has lapsed may
    // still be stopping when another instance's starts (its timer can fire late under load, on any
    // machine): it can write nothing then, since every write checks the lease first. So the double
    // owner is an engine started while another instance still *holds* the partition's lease, and
    // a lapsed engine must be stopped by the time the step settles.
    const running = new Map<string, Set<string>>(PARTITIONS.map((p) => [p, new Set<string>()]))
    const doubles: string[] = []
    let n = 0
    const add = () => {
      const id = `i${++n}`
      const owner: EngineOwner = ownerOn(store, {
        instanceId: id,
        partitions: PARTITIONS.map((name) => ({
          name,
          factory: () => ({
            name,
            start: async () => {
              for (const other of running.get(name)!) {
                const o = instances.find((i) => i.id === other)!
                if (o.owner.held().includes(name)) doubles.push(`${name}: started on ${id} while ${other} holds it and runs it`)
              }
              running.get(name)!.add(id)
            },
            stop: async () => {
              running.get(name)!.delete(id)
            },
          }),
        })),
        announce: (name) => {
          for (const other of instances) if (other.id !== id && other.state === 'up') other.owner.released(name)
        },
      })
      instances.push({ id, owner, state: 'up' })
      owner.start()
    }
    // The invariant sampled every few milliseconds: at most one instance holds each partition.
    const overlaps: string[] = []
    const sampler = setInterval(() => {
      for (const p of PARTITIONS) {
        const holders = instances.filter((i) => i.owner.held().includes(p)).map((i) => i.id)
        if (holders.length > 1) overlaps.push(`${p}: ${holders.join(', ')}`)
      }
    }, 3)
    const settled = async (step: string) => {
      const up = instances.filter((i) => i.state === 'up')
      const share = Math.ceil(PARTITIONS.length / up.length)
      await waitFor(
        () => {
          const held = up.map((i) => i.owner.held())
          return held.flat().sort().join() === [...PARTITIONS].sort().join() && held.every((h) => h.length <= share) && PARTITIONS.every((p) => running.get(p)!.size === 1 && up.some((i) => running.get(p)!.has(i.id) && i.owner.held().includes(p)))
        },
        { timeoutMs: 20_000, description: `after ${step}: every partition held by one of ${up.map((i) => i.id).join(', ')}, at most ${share} each` },
      )
    }

    try {
      add()
      await settled('the first instance')
      const steps: string[] = []
      for (let s = 0; s < 10; s++) {
        const up = instances.filter((i) => i.state === 'up')
        const r = random()
        if (up.length < 2 || (r < 0.45 && up.length < 5)) {
          add()
          steps.push('add')
        } else if (r < 0.75) {
          const victim = up[Math.floor(random() * up.length)]!
          victim.state = 'cut'
          store.cut.add(victim.id)
          steps.push(`cut ${victim.id}`)
        } else {
          const leaving = up[Math.floor(random() * up.length)]!
          leaving.state = 'stopped'
          await leaving.owner.stop()
          // What cluster.ts does on close: the leases it gave up are announced.
          for (const p of PARTITIONS) for (const other of instances) if (other.state === 'up') other.owner.released(`engines:${p}`)
          steps.push(`stop ${leaving.id}`)
        }
        await settled(steps.join(' → '))
      }
      expect(steps.length).toBe(10)
    } finally {
      clearInterval(sampler)
      for (const i of instances) if (i.state === 'cut') await i.owner.stop()
    }
    expect(overlaps).toEqual([])
    expect(doubles).toEqual([])
  })
})

describe('[SCALE17] an engine whose lease lapses while it starts', () => {
  it('has its signal aborted at once, not when its start (a reconcile) ends', { timeout: 120_000 }, async () => {
    const store = new MemoryLeases(() => 0)
    let signal: AbortSignal | null = null
    let finishStart!: () => void
    const startEnds = new Promise<void>((r) => (finishStart = r))
    let startEnded = false
    const owner = ownerOn(store, {
      instanceId: 'i1',
      partitions: [
        {
          name: 'activities',
          factory: (ctx) => {
            signal = ctx.signal
            return {
              name: 'activities',
              // A reconcile that outlasts the lease: it ends only when the test lets it.
              start: async () => {
                await startEnds
                startEnded = true
              },
              stop: async () => undefined,
            }
          },
        },
      ],
      announce: () => undefined,
    })
    owner.start()
    try {
      await waitFor(() => signal, { description: 'the engine built under the lease' })
      store.cut.add('i1')
      await waitFor(() => signal!.aborted, { description: "the engine's signal aborted once its lease lapsed" })
      expect(owner.held()).toEqual([])
      expect(startEnded).toBe(false)
    } finally {
      finishStart()
      await owner.stop()
    }
  })
})
