import type { Observable, Subscription } from 'rxjs'
import type { Logger } from 'pino'
import { SYSTEM, type ChangeRecord } from '../../../shared/index.js'
import type { LiveChange, NodeApi } from '../../nodes/index.js'
import type { CancelTimer, Clock } from './clock.js'

/**
 * Follows the change feed for an engine (issue 17):
 *
 *  - Boot, then live: it subscribes FIRST and holds what arrives while `boot` reads current
 *    state, then delivers what it held, then live events. A change between the read and the
 *    subscription is never lost (it may be seen twice: handlers are idempotent).
 *  - Gap replay: versions are one contiguous sequence; a jump past +1 means the feed lost events
 *    (a lossy fan-out, a slow consumer). The gap is replayed from the durable change log
 *    (`changesSince`), each record delivered with the node as it is NOW (`version: 0`), so a
 *    dropped event costs milliseconds, not a reconcile interval. A drop with no later event
 *    shows no gap: that is the reconciler's to find.
 */
export interface FeedFollowerOptions {
  nodes: Pick<NodeApi, 'changes$' | 'changesSince' | 'get' | 'headVersion'>
  /** The feed; defaults to `nodes.changes$` (the test mesh perturbs it). */
  changes$?: Observable<LiveChange>
  /** Records worth a replay (checked before the node is read). Default: all. */
  interested?: (record: ChangeRecord) => boolean
  onChange: (change: LiveChange) => void
  /**
   * At start, replay this many of the latest change-log records (those `interested` in), after
   * `boot`. An engine that takes over from another instance looks again at what changed just
   * before: a change its predecessor received but had not acted on when it stopped (a merge that
   * cleared a flag the boot pass scans for) is otherwise found only by that node's next change.
   */
  bootReplay?: number
  clock: Clock
  log: Logger
  what: string
}

const REPLAY_PAGE = 10_000

export class FeedFollower {
  private sub: Subscription | null = null
  private held: LiveChange[] | null = []
  private lastVersion = 0
  private readonly gaps: Array<[after: number, before: number]> = []
  private catchUp: CancelTimer | null = null
  private replaying: Promise<void> | null = null
  private stopped = false
  /** Changes replayed from the durable log (tests, diagnostics). */
  replayed = 0

  constructor(private readonly opts: FeedFollowerOptions) {}

  /** Subscribes, runs `boot`, then delivers what arrived meanwhile and goes live. */
  async start(boot: () => Promise<void> = async () => undefined): Promise<void> {
    const feed = this.opts.changes$ ?? this.opts.nodes.changes$
    this.sub = feed.subscribe({
      next: (c) => this.receive(c),
      error: (err: unknown) => this.opts.log.error({ err }, `${this.opts.what}: change feed failed; reconcile remains the safety net`),
    })
    try {
      await boot()
      await this.replayLatest()
    } finally {
      const held = this.held ?? []
      this.held = null
      for (const c of held) this.deliver(c)
    }
  }

  async stop(): Promise<void> {
    this.stopped = true
    this.sub?.unsubscribe()
    this.catchUp?.()
    await this.replaying
  }

  /** A gap replay is running or waiting to. */
  get busy(): boolean {
    return this.replaying !== null || this.gaps.length > 0
  }

  /** Resolves once no gap replay is scheduled or running. */
  async idle(): Promise<void> {
    while (this.replaying || this.gaps.length > 0) {
      if (!this.replaying) this.startReplay()
      await this.replaying
    }
  }

  private receive(change: LiveChange): void {
    if (this.stopped) return
    this.noteVersion(change.version)
    if (this.held) this.held.push(change)
    else this.deliver(change)
  }

  private deliver(change: LiveChange): void {
    if (this.stopped) return
    try {
      this.opts.onChange(change)
    } catch (err) {
      this.opts.log.error({ err, path: change.path }, `${this.opts.what}: change handler failed`)
    }
  }

  private noteVersion(version: number): void {
    if (version === 0) return // a replayed change
    if (this.lastVersion > 0 && version > this.lastVersion + 1) {
      this.gaps.push([this.lastVersion, version])
      this.catchUp ??= this.opts.clock.setTimeout(() => {
        this.catchUp = null
        this.startReplay()
      }, 10)
    }
    if (version > this.lastVersion) this.lastVersion = version
  }

  private startReplay(): void {
    if (this.replaying || this.stopped) return
    this.replaying = this.replayGaps().finally(() => {
      this.replaying = null
      if (this.gaps.length > 0 && !this.stopped) this.startReplay()
    })
  }

  /** `bootReplay`: the latest records, as a gap ending past the head (held with the boot's events). */
  private async replayLatest(): Promise<void> {
    const n = this.opts.bootReplay ?? 0
    if (n <= 0 || !this.opts.nodes.headVersion || this.stopped) return
    try {
      const head = await this.opts.nodes.headVersion()
      if (head > 0) await this.replayRange(Math.max(0, head - n), head + 1)
    } catch (err) {
      this.opts.log.warn({ err }, `${this.opts.what}: could not replay the latest changes at start; reconcile remains the safety net`)
    }
  }

  private async replayGaps(): Promise<void> {
    for (const [after, before] of this.gaps.splice(0)) {
      try {
        await this.replayRange(after, before)
      } catch (err) {
        this.opts.log.warn({ err, after, before }, `${this.opts.what}: could not replay a gap in the change feed; reconcile remains the safety net`)
      }
    }
  }

  /** The records between `after` and `before` (both excluded); a node changed several times is read once (it is replayed as it is now). */
  private async replayRange(after: number, before: number): Promise<void> {
    const seen = new Set<string>()
    let from = after
    while (from < before - 1 && !this.stopped) {
      const records = await this.opts.nodes.changesSince(SYSTEM, from, Math.min(REPLAY_PAGE, before - 1 - from))
      if (records.length === 0) break
      for (const r of records) {
        const key = `${r.kind === 'Deleted' ? '-' : '+'}${r.path}`
        if (r.version >= before || seen.has(key)) continue
        seen.add(key)
        await this.replay(r)
      }
      from = records[records.length - 1]!.version
    }
  }

  private async replay(r: ChangeRecord): Promise<void> {
    if (this.opts.interested && !this.opts.interested(r)) return
    const node = r.kind === 'Deleted' ? null : await this.opts.nodes.get(SYSTEM, r.path)
    // The node as it is now stands in for the node as it was; gone since: nothing to replay.
    if (r.kind !== 'Deleted' && !node) return
    this.replayed++
    const change: LiveChange = { ...r, node, by: 'system', origin: 'system', version: 0 }
    if (this.held) this.held.push(change)
    else this.deliver(change)
  }
}
