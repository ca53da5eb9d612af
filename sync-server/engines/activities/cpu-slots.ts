/**
 * [ACT15] CPU slots: scripts run on at most `slots` cores at once, so the server's event loop
 * always has a core of its own (default: one core less than the machine has). A script worker
 * holds a slot while its interpreter runs; a script that waits (sleep, Mesh) holds none. A
 * worker that has held its slot for a time slice while another waits hands it on, so every
 * running script keeps making progress: two CPU-bound scripts on one slot each get half a core,
 * and the event loop keeps the other.
 *
 * The state is one SharedArrayBuffer (Int32 cells), shared by the host and every worker:
 *   [0]                       generation: bumped on every release and acquisition (waiters wait on it)
 *   [1 .. slots]              the worker id holding each slot, 0 = free
 *   [1 + slots .. + workers]  1 while that worker id waits for a slot
 * Only compare-and-swap moves a slot, so a slot is never held twice; the host frees the cells of a
 * worker that exited (terminated mid-slice, crashed), so a dead worker holds nothing.
 */

const GEN = 0
/** How long a worker that handed its slot on waits for a waiter to take it, in slices. */
const STEP_BACK_SLICES = 5

export interface CpuSlotsInit {
  sab: SharedArrayBuffer
  slots: number
  workers: number
  /** This worker's id (1-based); 0 = not scheduled (ids ran out): the worker runs unlimited. */
  id: number
  sliceMs: number
}

/** The host's half: hands out worker ids and cleans up after workers that are gone. */
export class CpuSlots {
  private readonly view: Int32Array
  private readonly freeIds: number[] = []

  constructor(
    readonly slots: number,
    readonly workers: number,
    readonly sliceMs = 10,
  ) {
    this.view = new Int32Array(new SharedArrayBuffer(4 * (1 + Math.max(0, slots) + workers)))
    for (let id = workers; id >= 1; id--) this.freeIds.push(id)
  }

  /** What a new worker needs to take part (id 0 when scheduling is off or every id is in use). */
  allocate(): CpuSlotsInit {
    const id = this.slots > 0 ? (this.freeIds.pop() ?? 0) : 0
    return { sab: this.view.buffer as SharedArrayBuffer, slots: this.slots, workers: this.workers, id, sliceMs: this.sliceMs }
  }

  /** The worker with this id has exited: whatever it held or waited for is released. */
  free(id: number): void {
    if (id <= 0) return
    for (let i = 1; i <= this.slots; i++) Atomics.compareExchange(this.view, i, id, 0)
    Atomics.store(this.view, this.slots + id, 0)
    Atomics.add(this.view, GEN, 1)
    Atomics.notify(this.view, GEN)
    this.freeIds.push(id)
  }

  /** Slots held right now (tests, diagnostics). */
  held(): number {
    let n = 0
    for (let i = 1; i <= this.slots; i++) if (Atomics.load(this.view, i) !== 0) n++
    return n
  }
}

/** The worker's half: take a slot before the interpreter runs, give it back when it stops. */
export class CpuTurn {
  private readonly view: Int32Array | null
  private heldCell = 0
  private heldSince = 0

  constructor(private readonly init: CpuSlotsInit | null) {
    this.view = init && init.id > 0 && init.slots > 0 ? new Int32Array(init.sab) : null
  }

  get holding(): boolean {
    return this.view === null || this.heldCell !== 0
  }

  private tryTake(): boolean {
    const view = this.view!
    const { slots, id } = this.init!
    for (let i = 1; i <= slots; i++) {
      if (Atomics.compareExchange(view, i, 0, id) === 0) {
        this.heldCell = i
        this.heldSince = performance.now()
        Atomics.store(view, slots + id, 0)
        Atomics.add(view, GEN, 1)
        Atomics.notify(view, GEN)
        return true
      }
    }
    return false
  }

  /**
   * Blocks this thread until it holds a slot. `giveUp` is asked between waits (a deadline that
   * passed): when it answers true the wait ends without a slot and this returns false.
   */
  acquire(giveUp: () => boolean = () => false): boolean {
    const view = this.view
    if (!view || this.heldCell !== 0) return true
    const { slots, id } = this.init!
    for (;;) {
      const gen = Atomics.load(view, GEN)
      if (this.tryTake()) return true
      Atomics.store(view, slots + id, 1)
      // Looked at again after announcing ourselves: a release in between bumped the generation.
      if (this.tryTake()) return true
      Atomics.wait(view, GEN, gen, 20)
      if (giveUp()) {
        Atomics.store(view, slots + id, 0)
        return false
      }
    }
  }

  release(): void {
    const view = this.view
    if (!view || this.heldCell === 0) return
    Atomics.compareExchange(view, this.heldCell, this.init!.id, 0)
    this.heldCell = 0
    Atomics.add(view, GEN, 1)
    Atomics.notify(view, GEN)
  }

  private someoneWaits(): boolean {
    const view = this.view!
    const { slots, workers, id } = this.init!
    for (let w = 1; w <= workers; w++) if (w !== id && Atomics.load(view, slots + w) === 1) return true
    return false
  }

  /**
   * Called often while the interpreter runs (QuickJS's interrupt handler). After a full slice,
   * with another worker waiting, the slot is released and this worker steps back until a waiter
   * has taken it (an immediate re-take would starve it: on a loaded machine a woken low-priority
   * thread may take milliseconds to be scheduled), for at most STEP_BACK_SLICES slices, then
   * waits its turn.
   */
  maybeYield(giveUp: () => boolean = () => false): boolean {
    const view = this.view
    if (!view || this.heldCell === 0) return true
    if (performance.now() - this.heldSince < this.init!.sliceMs || !this.someoneWaits()) return true
    this.release()
    const until = performance.now() + STEP_BACK_SLICES * this.init!.sliceMs
    for (;;) {
      const gen = Atomics.load(view, GEN)
      const left = until - performance.now()
      if (left <= 0 || !this.someoneWaits() || !this.slotFree() || giveUp()) break
      Atomics.wait(view, GEN, gen, Math.min(left, 5))
    }
    return this.acquire(giveUp)
  }

  private slotFree(): boolean {
    const view = this.view!
    for (let i = 1; i <= this.init!.slots; i++) if (Atomics.load(view, i) === 0) return true
    return false
  }
}
