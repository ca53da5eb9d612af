import type { Logger } from 'pino'
import * as Y from 'yjs'
import type { ChangeRecord, MeshChangeKind, NodePath } from '../../shared/index.js'
import { EarlyUpdate, type ChangeOrigin, type NodeService } from '../nodes/index.js'
import type { ClientBinding, StorageAdapter, StoredDoc } from '../storage/index.js'
import type { BusMessage } from './redis-bus.js'

/** Changes read per catch-up query. */
const CATCH_UP_PAGE = 1000
/**
 * [SCALE12] An update taken early whose change message has not come by then is looked for in the
 * database (ms); one still not there at three times it is held lost.
 */
const EARLY_CONFIRM_MS = 10_000
/** [SCALE14] The longest a refusal waits for this instance to catch up before it is decided (ms). */
const FRESHEN_MAX_MS = 5_000

/** `work`, or nothing once `ms` have passed (the work goes on; nobody waits for it). */
function withinMs(work: Promise<void>, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined
  const late = new Promise<void>((resolve) => {
    timer = setTimeout(resolve, ms)
    timer.unref()
  })
  return Promise.race([work, late]).finally(() => clearTimeout(timer))
}

export interface FanOutOptions {
  instanceId: string
  nodes: NodeService
  storage: StorageAdapter
  log: Logger
  publish: (m: BusMessage) => void
  /** After a hole in the versions, how long to wait for the missing messages before reading them (ms). */
  gapWaitMs?: number
  /** How often the database's last version is compared with the last one seen (ms): a lost last message is found this way. */
  pollMs?: number
  /** [SCALE12] See EARLY_CONFIRM_MS. */
  earlyConfirmMs?: number
}

/**
 * [SCALE1] [SCALE2] [SCALE4] Updates between instances. Every instance's durable changes go to
 * Redis with their version (one global, gap-free sequence: postgres-schema.ts); each instance
 * applies the others' in one serial queue (a doc sees a node's updates in order) and keeps the
 * highest version up to which it has seen every change. A hole in the versions (a lost
 * message), a Redis reconnect, or the database's last version ahead of it (polled) makes it
 * read the missing changes from PostgreSQL: Redis is the fast path, PostgreSQL the truth.
 */
export class FanOut {
  /** Every version up to this one is applied (or was this instance's own). */
  private applied = 0
  /** Versions above `applied` already applied. */
  private readonly seen = new Set<number>()
  private queue: Promise<void> = Promise.resolve()
  private gapTimer: NodeJS.Timeout | null = null
  private pollTimer: NodeJS.Timeout | null = null
  private catchingUp = false
  /** [SCALE14] The freshen under way, and the one its later callers share. */
  private freshenRunning: Promise<void> | null = null
  private freshenNext: Promise<void> | null = null
  /** [SCALE2] The database's last version at the previous poll. */
  private polledHead = 0
  private closed = false
  /**
   * [SCALE12] The others' updates sent early and not yet confirmed durable, by key: whether a copy
   * here took it (`update`), and the bytes, for a copy that did not (its change message names it only).
   */
  private readonly early = new Map<string, EarlyEntry>()
  /** [SCALE12] Keys of this instance's early updates. */
  private earlySeq = 0

  constructor(private readonly o: FanOutOptions) {}

  async start(): Promise<void> {
    this.applied = await this.o.storage.lastVersion()
    this.o.nodes.connectCluster({
      committed: (change, update, clients, early) => {
        this.mark(change.version)
        this.o.publish({
          t: 'change',
          from: this.o.instanceId,
          version: change.version,
          path: change.path,
          nodeType: change.nodeType,
          kind: change.kind,
          by: change.by,
          origin: change.origin,
          // [SCALE12] An update sent early is not sent again: its key stands for it.
          ...(early ? { early } : update ? { update: Buffer.from(update).toString('base64') } : {}),
          ...(!early && clients && clients.length > 0 ? { clients: [...clients] } : {}),
          // [SCALE9] What a copy kept loaded elsewhere needs beside the update (its content is the doc's).
          ...(change.node ? { name: change.node.name, at: change.node.updatedAt } : {}),
        })
      },
      accepted: (path, update, clients) => {
        const key = `${this.o.instanceId}:${++this.earlySeq}`
        this.o.publish({ t: 'update', from: this.o.instanceId, key, path, update: Buffer.from(update).toString('base64'), ...(clients && clients.length > 0 ? { clients: [...clients] } : {}) })
        return key
      },
      acceptedFailed: (path, key) => this.o.publish({ t: 'failed', from: this.o.instanceId, key, path }),
      presence: (path, update) => this.o.publish({ t: 'presence', from: this.o.instanceId, path, update: Buffer.from(update).toString('base64') }),
      watermark: () => this.applied,
      freshen: () => this.freshen(),
      presenceOpened: (path) => this.o.publish({ t: 'presence?', from: this.o.instanceId, path }),
    })
    const poll = this.o.pollMs ?? 1000
    this.pollTimer = setInterval(() => void this.poll(), poll)
    this.pollTimer.unref()
  }

  receive(m: BusMessage): void {
    if (this.closed || m.from === this.o.instanceId) return
    switch (m.t) {
      case 'change': {
        // Durable: whatever here waits on it may go on.
        const sent = m.early !== undefined ? this.settleEarly(m.early, null) : undefined
        if (m.version <= this.applied || this.seen.has(m.version)) return
        const change = {
          version: m.version,
          path: m.path as NodePath,
          nodeType: m.nodeType,
          kind: m.kind as MeshChangeKind,
          by: m.by,
          origin: m.origin as ChangeOrigin,
          update: m.update ? new Uint8Array(Buffer.from(m.update, 'base64')) : (sent?.bytes ?? null),
          ...(m.clients ? { clients: m.clients } : sent ? { clients: sent.clients } : {}),
          ...(m.name !== undefined ? { name: m.name } : {}),
          ...(m.at !== undefined ? { at: m.at } : {}),
          ...(m.early !== undefined ? { early: m.early } : {}),
        }
        this.enqueue(async () => {
          if (change.version <= this.applied || this.seen.has(change.version)) return
          await this.o.nodes.applyRemote(change)
          this.mark(change.version)
        })
        return
      }
      case 'update': {
        const early = new EarlyUpdate(Date.now())
        const bytes = new Uint8Array(Buffer.from(m.update, 'base64'))
        const clients = m.clients ?? []
        const taken = this.o.nodes.applyEarly(m.path as NodePath, m.key, bytes, clients, early)
        this.early.set(m.key, { path: m.path as NodePath, at: early.at, update: taken ? early : null, bytes, clients })
        return
      }
      case 'failed':
        this.settleEarly(m.key, new Error('not committed'))
        return
      case 'presence':
        this.o.nodes.applyRemotePresence(m.path as NodePath, new Uint8Array(Buffer.from(m.update, 'base64')))
        return
      case 'presence?': {
        const mine = this.o.nodes.localPresence(m.path as NodePath)
        if (mine) this.o.publish({ t: 'presence', from: this.o.instanceId, path: m.path, update: Buffer.from(mine).toString('base64') })
        return
      }
      case 'lease-released':
      case 'mcp-cancel':
      case 'contextual-wake':
      case 'token-revoked':
        return // engine ownership's, the MCP endpoint's, the contextual service's and auth's, not the fan-out's (cluster.ts)
      default:
        m satisfies never
    }
  }

  /** [SCALE12] An early update's commit is durable (`failed` null), or failed or never came: a copy that took it then goes. Returns what the message carried. */
  private settleEarly(key: string, failed: Error | null): { bytes: Uint8Array; clients: ClientBinding[] } | undefined {
    const e = this.early.get(key)
    if (!e) return undefined
    this.early.delete(key)
    if (!failed) e.update?.confirm()
    else if (e.update) {
      e.update.fail(failed)
      this.o.nodes.dropEarly(e.path, key)
    }
    return e
  }

  /** [SCALE4] Redis came back: whatever was published meanwhile is read from the database. */
  reconnected(): void {
    this.catchUp()
  }

  private mark(version: number): void {
    if (version <= this.applied) return
    this.seen.add(version)
    while (this.seen.delete(this.applied + 1)) this.applied++
    if (this.seen.size > 0 && !this.gapTimer && !this.closed) {
      this.gapTimer = setTimeout(() => {
        this.gapTimer = null
        if (this.seen.size > 0) this.catchUp()
      }, this.o.gapWaitMs ?? 150)
      this.gapTimer.unref()
    }
  }

  private async poll(): Promise<void> {
    this.settleLateEarly()
    if (this.closed || this.catchingUp) return
    try {
      const last = await this.o.storage.lastVersion()
      // The head the previous poll saw, still not applied: its message is lost, not in flight.
      if (this.polledHead > this.applied) this.catchUp()
      this.polledHead = last
    } catch (err) {
      this.o.log.warn({ err }, 'cluster: could not read the last version')
    }
  }

  /**
   * [SCALE12] Early updates whose change message is late. Late is not lost: a commit slowed by a
   * loaded database, or a change message Redis dropped, made writes built on them fail with
   * `unavailable` although they were durable (found beside CPU hogs). So the database is asked
   * first: an update its stored state holds is confirmed; one still not there at three times the
   * wait (the instance that took it died before committing) is held lost. An entry is asked about
   * at most once per wait: reading and merging a node's stored log is not done at every poll.
   */
  private settleLateEarly(): void {
    const wait = this.o.earlyConfirmMs ?? EARLY_CONFIRM_MS
    const now = Date.now()
    const ask = new Map<NodePath, Array<[string, EarlyEntry]>>()
    for (const [key, e] of this.early) {
      if (e.at >= now - wait || e.asking) continue
      if (e.at < now - 3 * wait) {
        this.settleEarly(key, new Error('never confirmed'))
        continue
      }
      if (e.askedAt !== undefined && e.askedAt > now - wait) continue
      const list = ask.get(e.path) ?? []
      list.push([key, e])
      ask.set(e.path, list)
    }
    for (const [path, entries] of ask) {
      for (const [, e] of entries) {
        e.asking = true
        e.askedAt = now
      }
      this.o.storage.loadDoc(path).then(
        (stored) => {
          for (const [key, e] of entries) {
            e.asking = false
            if (this.early.get(key) === e && holdsUpdate(stored, e.bytes)) this.settleEarly(key, null)
          }
        },
        (err: unknown) => {
          for (const [, e] of entries) e.asking = false
          this.o.log.warn({ err, path }, 'cluster: could not look for a late update in the database')
        },
      )
    }
  }

  /**
   * [SCALE14] Applies every change committed before the call (the database's last version, read
   * after it), from Redis or by catching up from the database. Bounded: after FRESHEN_MAX_MS in
   * all (the read included), or a catch-up that makes no progress, it resolves with what it has.
   * A caller decides again afterwards whatever it decided before: whether anything new was
   * applied is not its business (a change may have come over Redis while it waited).
   */
  freshen(): Promise<void> {
    // Callers that ask while one is running share the next one (which starts after their call):
    // a flood of refusals costs one read of the last version at a time, not one each.
    if (this.freshenNext) return this.freshenNext
    const next = (this.freshenRunning ?? Promise.resolve()).then(() => {
      this.freshenNext = null
      const run = withinMs(this.freshenNow(), FRESHEN_MAX_MS)
      this.freshenRunning = run
      return run
    })
    this.freshenNext = next
    return next
  }

  private async freshenNow(): Promise<void> {
    if (this.closed) return
    let head: number
    try {
      head = await this.o.storage.lastVersion()
    } catch (err) {
      this.o.log.warn({ err }, 'cluster: could not read the last version')
      return
    }
    while (this.applied < head && !this.closed) {
      const from = this.applied
      await this.catchUp()
      // A catch-up that failed (logged by enqueue) is not tried again at once: the poll will.
      if (this.applied === from) return
    }
  }

  /** Reads the changes after `applied` from the database and applies those not seen yet. */
  catchUp(): Promise<void> {
    if (this.catchingUp) return this.queue
    this.catchingUp = true
    return this.enqueue(async () => {
      try {
        for (;;) {
          const records: ChangeRecord[] = await this.o.storage.changesSince(this.applied, CATCH_UP_PAGE)
          await this.o.nodes.applyRemotePage(
            records,
            (r) => r.version > this.applied && !this.seen.has(r.version),
            (r) => this.mark(r.version),
          )
          const last = records.at(-1)
          // Versions the change log no longer holds ([STO7] purge) are past: nothing to apply.
          if (last && last.version > this.applied) {
            for (const v of [...this.seen]) if (v <= last.version) this.seen.delete(v)
            this.applied = last.version
            while (this.seen.delete(this.applied + 1)) this.applied++
          }
          if (records.length < CATCH_UP_PAGE) return
        }
      } finally {
        this.catchingUp = false
      }
    })
  }

  private enqueue(job: () => Promise<void>): Promise<void> {
    const next = this.queue.then(job).catch((err: unknown) => this.o.log.error({ err }, 'cluster: applying a change from another instance failed'))
    this.queue = next
    return next
  }

  async close(): Promise<void> {
    this.closed = true
    if (this.gapTimer) clearTimeout(this.gapTimer)
    if (this.pollTimer) clearInterval(this.pollTimer)
    await this.queue
  }
}

interface EarlyEntry {
  path: NodePath
  at: number
  /** Whether a copy here took it. */
  update: EarlyUpdate | null
  bytes: Uint8Array
  clients: ClientBinding[]
  /** The database is being asked whether it holds the update. */
  asking?: boolean
  /** When it was last asked (ms). */
  askedAt?: number
}

/**
 * Whether a node's stored state holds every item an update inserts (its state vector reaches the
 * update's end clock for each client, counted without gaps). An update that only deletes has no
 * clock to prove it by: not held.
 */
export function holdsUpdate(stored: StoredDoc | null, update: Uint8Array): boolean {
  if (!stored) return false
  const { to } = Y.parseUpdateMeta(update)
  if (to.size === 0) return false
  const parts = stored.snapshot ? [stored.snapshot, ...stored.updates] : stored.updates
  if (parts.length === 0) return false
  const have = Y.decodeStateVector(Y.encodeStateVectorFromUpdate(Y.mergeUpdates(parts)))
  for (const [client, clock] of to) if ((have.get(client) ?? 0) < clock) return false
  return true
}
