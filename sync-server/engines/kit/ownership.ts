import type { Logger } from 'pino'
import { realClock, type CancelTimer, type Clock } from './clock.js'
import type { Lease } from './lease.js'

/**
 * [SCALE6] Where engine-partition leases live across instances (a PostgreSQL table:
 * sync-server/cluster/pg-leases.ts). Every operation is one atomic statement on the database:
 *  - `acquire`: take the lease when it is free or expired, raising its fence (never lowered);
 *  - `renew`: extend it, only while this holder still holds it with this fence;
 *  - `release`: give it up (the fence stays).
 * [SCALE17] `acquire`'s `graceMs`: take it only when it has been free (expired or given up) for at
 * least that long, so an instance already holding its share leaves a free partition to one that
 * holds less, and takes it itself only when nobody else did.
 */
/** A lease another holds (or within its grace): free in about this long, by the database's clock. */
export interface LeaseBusy {
  busy: true
  freeInMs: number
}

export interface LeaseStore {
  /** The lease, or when it is not free: how soon it will be (null: unknown). */
  acquire(name: string, holder: string, ttlMs: number, graceMs?: number): Promise<Lease | LeaseBusy | null>
  renew(name: string, lease: Lease, ttlMs: number): Promise<Lease | null>
  release(name: string, lease: Lease): Promise<void>
}

export interface OwnershipOptions {
  name: string
  holder: string
  store: LeaseStore
  /** How long a lease lasts unless renewed (ENGINE_LEASE_MS). Renewed every third of it. */
  ttlMs: number
  log: Logger
  /** The timers of the loop (default: the wall clock). The lease's validity is measured on performance.now() regardless. */
  clock?: Clock
  /** [SCALE17] How long the lease must have been free before this instance takes it (default 0). */
  graceMs?: () => number
  /** This instance now owns the partition (the fence is the lease's): start the work. */
  acquired: (lease: Lease) => Promise<void>
  /** The lease is lost or given up: stop the work before anything more is done under it. */
  lost: (lease: Lease) => Promise<void>
}

/**
 * [SCALE6] [SCALE7] One active owner per partition. Each instance runs this loop: try to take
 * the lease (every third of its time), then renew it. The owner's lease is valid here only until
 * `sent + ttl` by this process's monotonic clock, counted from when the last successful renewal
 * was SENT: past that (a renewal failed, the process stalled) `holds()` is false at once, and the
 * work is stopped, before the database can hand the lease to another instance.
 */
export class Ownership {
  private lease: Lease | null = null
  private validUntil = 0
  private timer: CancelTimer | null = null
  private expiry: CancelTimer | null = null
  private stopped = false
  private stepping = false
  private poked = false
  private started = false
  /** When the last try found the lease busy: how soon it falls free. */
  private freeInMs: number | null = null
  private busy: Promise<void> = Promise.resolve()

  private readonly clock: Clock

  /** The lease's name (the partition's). */
  get name(): string {
    return this.o.name
  }

  constructor(private readonly o: OwnershipOptions) {
    this.clock = o.clock ?? realClock
  }

  /** Whether this instance holds the lease right now (checked before every write under it). */
  holds(): boolean {
    return this.lease !== null && performance.now() < this.validUntil
  }

  /** Starts the loop (once; a second call does nothing). */
  start(): void {
    if (this.started || this.stopped) return
    this.started = true
    this.tick()
  }

  private schedule(): void {
    if (this.stopped) return
    if (this.poked) {
      this.poked = false
      if (!this.lease) return this.tick()
    }
    const every = Math.max(50, Math.floor(this.o.ttlMs / 3))
    const free = this.lease ? null : this.freeInMs
    this.freeInMs = null
    this.timer = this.clock.setTimeout(() => this.tick(), free !== null && free >= 0 && free < every ? Math.max(10, free + 10) : every)
  }

  private tick(): void {
    this.stepping = true
    this.busy = this.step().finally(() => {
      this.stepping = false
      this.schedule()
    })
  }

  /**
   * [PROD2] The holder said it gave the lease up: try to take it now rather than at the next
   * tick. Only a hint: the database decides, and a step already under way is left to finish.
   */
  poke(why = 'engine lease given up by its holder; trying to take it'): void {
    // Before start, the loop's first step tries anyway; a tick here would be a second loop.
    if (!this.started || this.stopped || this.lease) return
    this.o.log.info({ partition: this.o.name }, why)
    if (this.stepping) {
      this.poked = true
      return
    }
    this.timer?.()
    this.tick()
  }

  private async step(): Promise<void> {
    const sent = performance.now()
    try {
      if (this.lease) {
        const renewed = await this.o.store.renew(this.o.name, this.lease, this.o.ttlMs)
        if (this.stopped) return
        if (renewed && this.lease) this.hold(renewed, sent)
        else if (this.lease) await this.lose('renewal refused')
        return
      }
      const lease = await this.o.store.acquire(this.o.name, this.o.holder, this.o.ttlMs, this.o.graceMs?.() ?? 0)
      if (lease && 'busy' in lease) {
        // [SCALE17] Tried again as it falls free (a dead holder's lease is taken at its expiry, not
        // up to a third of its time later).
        this.freeInMs = lease.freeInMs
        return
      }
      if (!lease) return
      if (this.stopped) {
        // Taken just as the loop stopped: given back at once, not left to expire unowned.
        await this.o.store.release(this.o.name, lease).catch(() => undefined)
        return
      }
      this.hold(lease, sent)
      this.o.log.info({ partition: this.o.name, fence: lease.fence }, 'engine lease acquired')
      // Not awaited: starting the work (a reconcile) may take longer than the lease, which is renewed meanwhile.
      this.o.acquired(lease).catch((err: unknown) => this.o.log.error({ err, partition: this.o.name }, 'engines failed to start under the lease'))
    } catch (err) {
      this.o.log.warn({ err, partition: this.o.name }, 'engine lease: the database did not answer')
    }
  }

  private hold(lease: Lease, sent: number): void {
    this.lease = lease
    this.validUntil = sent + this.o.ttlMs
    this.expiry?.()
    this.expiry = this.clock.setTimeout(() => {
      if (this.lease && !this.holds()) void this.lose('not renewed in time')
    }, Math.max(0, this.validUntil - performance.now()) + 1)
  }

  private async lose(why: string): Promise<void> {
    const lease = this.lease
    if (!lease) return
    this.lease = null
    this.validUntil = 0
    this.o.log.warn({ partition: this.o.name, fence: lease.fence, why }, 'engine lease lost; engines stopped')
    await this.o.lost(lease)
  }

  /**
   * [SCALE17] Gives the lease up and keeps competing (the balance of partitions between
   * instances): the work is stopped first, then the lease released, so nothing more is done under
   * it by the time another instance can take it.
   */
  async giveUp(why: string): Promise<boolean> {
    const lease = this.lease
    if (!lease || this.stopped) return false
    this.lease = null
    this.validUntil = 0
    this.expiry?.()
    this.o.log.info({ partition: this.o.name, fence: lease.fence, why }, 'engine lease given up')
    await this.o.lost(lease)
    await this.o.store.release(this.o.name, lease).catch(() => undefined)
    return true
  }

  /** Stops the loop; the owner stops its work and gives the lease up so another takes over at once. */
  async stop(): Promise<void> {
    this.stopped = true
    this.timer?.()
    this.expiry?.()
    await this.busy.catch(() => undefined)
    const lease = this.lease
    if (!lease) return
    this.lease = null
    await this.o.lost(lease)
    await this.o.store.release(this.o.name, lease).catch(() => undefined)
  }
}
