import { join } from 'node:path'
import pino from 'pino'
import { expect } from 'vitest'
import { SYSTEM, isWeftError, userPrincipal, type NodePath, type UserId } from '../../shared/index.js'
import { AccessService } from '../../sync-server/access/access-service.js'
import { ContextualService, OUTCOME_RETENTION_MS, SETTLED_RETENTION_MS, contextualWriteRule, type WorkItem } from '../../sync-server/contextual/index.js'
import { VirtualClock } from '../../sync-server/engines/kit/index.js'
import { NodeService } from '../../sync-server/nodes/node-service.js'
import { openSqliteStorage, type ContextualAttachment, type ReactTruth, type StorageAdapter } from '../../sync-server/storage/index.js'
import { makeTempDir, removeDir } from '../helpers/index.js'
import { Rng } from './rng.js'

/**
 * The contextual service over the real node service and real storage (a SQLite file, or a
 * PostgreSQL schema), on a virtual clock; `crash()` drops all memory and boots again over the same
 * storage. Used by the seeded interleavings on both storages ([CTX34]).
 */
export const log = pino({ level: 'silent' })
export const USER = 'u1' as UserId
export const ME = userPrincipal(USER)
export const SUB = 'P/sub' as NodePath

export type OpenStorage = () => Promise<StorageAdapter>

export function sqliteStorageIn(dir: string): OpenStorage {
  return async () => openSqliteStorage({ file: join(dir, 'weft.db'), log, writer: 'inline' })
}

export class Harness {
  storage!: StorageAdapter
  nodes!: NodeService
  service!: ContextualService
  access!: AccessService
  constructor(
    readonly open: OpenStorage,
    readonly clock: VirtualClock,
    private readonly cleanup: () => Promise<void> = async () => undefined,
  ) {}

  /** A harness on a SQLite file in a temporary folder of its own, removed by stop(). */
  static async sqlite(clock = new VirtualClock()): Promise<Harness> {
    const dir = await makeTempDir('weft-ctx-sim-')
    return new Harness(sqliteStorageIn(dir), clock, () => removeDir(dir)).boot()
  }

  async boot(): Promise<this> {
    this.storage = await this.open()
    const access = (this.access = new AccessService())
    this.nodes = new NodeService(this.storage, access, { idleUnloadMs: 60_000, log })
    await this.nodes.boot()
    this.nodes.registerWriteRule('ContextualSubscription', contextualWriteRule())
    this.service = new ContextualService({ nodes: this.nodes, access, storage: this.storage, log, clock: this.clock })
    this.service.start()
    return this
  }

  async crash(): Promise<void> {
    await this.stop()
    await this.boot()
  }

  async stop(): Promise<void> {
    this.service.stop()
    await this.nodes.close()
    await this.storage.close()
  }

  async close(): Promise<void> {
    await this.stop()
    await this.cleanup()
  }
}

/** A harness booted by `boot`, closed after `fn` (a seeded round's own storage). */
export async function withHarness<T>(boot: () => Promise<Harness>, fn: (h: Harness) => Promise<T>): Promise<T> {
  const h = await boot()
  try {
    return await fn(h)
  } finally {
    await h.close()
  }
}

/** A space P where u1 is an Editor, P/in, and a subscription over Documents created under it (a patch reaction). */
export async function seedMesh(h: Harness, leaseSeconds = 5, maxInFlight = 2): Promise<void> {
  await h.nodes.put(SYSTEM, 'P' as NodePath, { nodeType: 'Space', content: {} })
  await h.nodes.put(SYSTEM, 'P/_Access/u1_Access' as NodePath, { nodeType: 'AccessAssignment', content: { Subject: USER, Role: 'Editor' } })
  await h.nodes.put(SYSTEM, 'P/in' as NodePath, { nodeType: 'Document', content: {} })
  await h.nodes.put(ME, SUB, {
    nodeType: 'ContextualSubscription',
    content: {
      Operation: 'annotate',
      Events: { NodeTypes: ['Document'], Kinds: ['Created'], PathPrefix: 'P/in' },
      Reactions: { annotate: { Command: 'patch', Target: '{event.path}', Parameters: { Note: { Type: 'string' } } } },
      Limits: { LeaseSeconds: leaseSeconds, MaxInFlight: maxInFlight, MaxAttempts: 4 },
    },
  })
}

export interface Held {
  consumerId: string
  item: WorkItem
}

export async function attempt<T>(fn: () => Promise<T>): Promise<{ ok: true; value: T } | { ok: false; code: string }> {
  try {
    return { ok: true, value: await fn() }
  } catch (err) {
    if (isWeftError(err)) return { ok: false, code: err.code }
    throw err
  }
}

export const fenceOf = (held: Held) => ({ consumerId: held.consumerId, eventId: held.item.event.eventId, leaseToken: held.item.leaseToken, attempt: held.item.attempt })

/**
 * [CTX34] One seed of interleavings: pulls, reactions (some racing), acks, nacks, extends, the
 * clock moving past leases, crashes between operations; the invariants checked as it goes and at
 * the end. Returns the steps run.
 */
export async function leaseInterleavings(h: Harness, seed: number, steps = 60): Promise<number> {
  const rng = new Rng(seed)
  const clock = h.clock
  await seedMesh(h)
  const next = () => h.service.next(ME, { subscription: SUB, consumer: 'c' })
  const { consumerId } = await next()
  // The model: the latest lease handed out per event, acks, reactions committed.
  const latest = new Map<string, { token: string; attempt: number; expiresAt: number }>()
  const acked = new Set<string>()
  /** [CTX60] The lease (token and attempt) each event was settled under: an ack repeated with it is told it is settled. */
  const ackedUnder = new Map<string, string>()
  const leaseOf = (held: Held) => `${held.item.leaseToken}:${held.item.attempt}`
  const committed = new Map<string, number>()
  const paths = new Map<string, string>()
  const workers: Held[][] = [[], [], []]
  const isCurrent = (held: Held) => {
    const l = latest.get(held.item.event.eventId)
    return !!l && l.token === held.item.leaseToken && l.attempt === held.item.attempt && clock.now() < l.expiresAt && !acked.has(held.item.event.eventId)
  }
  // After a sweep an acked event may be gone from storage ([CTX45]).
  let swept = false
  /** A lease handed out (by `next`, or [CTX52] by a reaction that asked for the next item): checked against the model, held by the worker. */
  const took = (got: { consumerId: string; item: WorkItem | null }, held: Held[]) => {
    if (!got.item) return
    const e = got.item.event.eventId
    expect(acked.has(e), 'an acked event was leased again').toBe(false)
    const prev = latest.get(e)
    expect(got.item.attempt).toBe((prev?.attempt ?? 0) + 1)
    if (prev) expect(clock.now() >= prev.expiresAt || prev.token === '', 'leased while another lease held').toBe(true)
    latest.set(e, { token: got.item.leaseToken, attempt: got.item.attempt, expiresAt: Date.parse(got.item.expiresAt) })
    paths.set(e, got.item.event.path)
    held.push({ consumerId: got.consumerId, item: got.item })
  }
  const react = async (held: Held, note: string, into: Held[]) => {
    const tokenOk = isCurrent(held)
    const e = held.item.event.eventId
    // [CTX47] Some reactions settle their item in their own transaction; [CTX52] some of those take the next item too.
    const settle = rng.next() < 0.4
    const andNext = settle && rng.next() < 0.5
    const r = await attempt(() =>
      h.service.react(ME, { causationToken: held.item.reactions[0]!.causationToken, params: { Note: note }, ...(settle ? { ack: true } : {}), ...(andNext ? { next: true } : {}) }),
    )
    if (r.ok && !r.value.repeated) {
      // A new commit only with the current lease.
      expect(tokenOk, 'a reaction committed under a stale lease').toBe(true)
      committed.set(e, (committed.get(e) ?? 0) + 1)
    }
    if (r.ok && !settle) expect(r.value.acked).toBeUndefined()
    if (r.ok && settle) {
      // A new commit settles its item; a repeat settles it only under the lease its token was
      // sealed for (still held), never another attempt's, and reports an item settled already.
      if (!r.value.repeated) expect(r.value.acked, 'a commit asked to settle left its item unsettled').toBe(true)
      // Also after a sweep deleted the settled row ([CTX45]).
      else expect(r.value.acked, `a repeat asked to settle (${tokenOk ? 'current' : 'stale'} token${swept ? ', after a sweep' : ''})`).toBe(tokenOk || acked.has(e))
      if (r.value.acked) {
        acked.add(e)
        if (!ackedUnder.has(e)) ackedUnder.set(e, leaseOf(held))
      }
    }
    if (r.ok && andNext) {
      expect(r.value.nextError).toBeUndefined()
      took(r.value.next!, into)
    }
    if (r.ok && !andNext) expect(r.value.next).toBeUndefined()
    if (!r.ok) expect(r.code).toBe('reaction_denied')
  }
  let docs = 0
  for (let step = 0; step < steps; step++) {
    const w = rng.int(0, workers.length - 1)
    const held = workers[w]!
    const roll = rng.next()
    if (roll < 0.15 && docs < 8) {
      const path = `P/in/d${docs++}`
      await h.nodes.put(ME, path as NodePath, { nodeType: 'Document', content: { N: docs } })
    } else if (roll < 0.35) {
      took(await next(), held)
    } else if (roll < 0.5 && held.length > 0) {
      await react(rng.pick(held), `w${w}-${step}`, held)
    } else if (roll < 0.58) {
      // Two workers race their reactions for the same event.
      const all = workers.flatMap((x) => x)
      if (all.length > 0) {
        const e = rng.pick(all).item.event.eventId
        const mine = all.filter((x) => x.item.event.eventId === e)
        await Promise.all(mine.map((x, i) => react(x, `race-${step}-${i}`, held)))
      }
    } else if (roll < 0.78 && held.length > 0) {
      const x = rng.pick(held)
      const op = rng.pick(['ack', 'nack', 'extend'] as const)
      const current = isCurrent(x)
      const r = await attempt<unknown>(() =>
        op === 'ack' ? h.service.ack(ME, fenceOf(x)) : op === 'nack' ? h.service.nack(ME, { ...fenceOf(x), delaySeconds: rng.int(0, 3) }) : h.service.extend(ME, { ...fenceOf(x), seconds: 5 }),
      )
      const e = x.item.event.eventId
      // [CTX60] The same ack again (the lease the item was settled under): told it is settled,
      // or (its row swept, or settled by a reaction, which clears the token) stale.
      const again = op === 'ack' && !current && ackedUnder.get(e) === leaseOf(x)
      if (again && r.ok) expect((r.value as { repeated: boolean }).repeated, 'a repeated ack').toBe(true)
      else expect(r.ok, `${op} with ${current ? 'current' : 'stale'} evidence`).toBe(current)
      if (!r.ok) expect(r.code).toBe('stale_lease')
      if (r.ok) {
        if (op === 'ack') {
          acked.add(e)
          if (!ackedUnder.has(e)) ackedUnder.set(e, leaseOf(x))
        }
        if (op === 'nack') latest.set(e, { ...latest.get(e)!, token: '', expiresAt: 0 })
        if (op === 'extend') latest.set(e, { ...latest.get(e)!, expiresAt: Date.parse((r.value as { expiresAt: string }).expiresAt) })
      }
    } else if (roll < 0.93) {
      await clock.advance(rng.int(0, 4000))
    } else if (roll < 0.97) {
      // [CTX45] The sweep of settled events, as if a day had passed (give or take a few seconds):
      // what it deletes is never leased again, and a repeated reaction still finds its outcome.
      await h.service.prune(clock.now() + SETTLED_RETENTION_MS + rng.int(-5000, 5000))
      // [CTX51] And of outcomes past their retention (every outcome here is old enough): only those
      // whose event is settled or gone may go; one an open event still needs going would let a
      // redelivery commit again, which the count of commits per event below catches.
      await h.service.pruneOutcomes(clock.now() + OUTCOME_RETENTION_MS)
      swept = true
    } else {
      await h.crash()
    }
  }
  // Each event: at most one commit, and its outcome in storage agrees with the mutation (one transaction).
  const changes = await h.storage.changesSince(0, 10_000)
  for (const [e, path] of paths) {
    const updates = changes.filter((c) => c.path === path && c.kind === 'Updated').length
    expect(committed.get(e) ?? 0).toBeLessThanOrEqual(1)
    expect(updates, `event ${e}: mutations committed`).toBe(committed.get(e) ?? 0)
  }
  // [CTX45] Acked events the sweep deleted still count.
  expect((await h.service.status(ME, { consumerId })).acked).toBe(acked.size)
  return steps
}

/**
 * [CTX26] At the storage safe point: a commit carrying a reaction's outcome whose lease evidence is
 * not the current lease is refused whole (`stale_lease`): neither the node nor the outcome is written.
 */
export async function staleAttachmentRefused(h: Harness): Promise<void> {
  const before = await h.storage.lastVersion()
  const attachment = {
    fence: { consumerId: 'nobody', eventId: '1', token: 'forged', attempt: 1, now: h.clock.now() },
    outcome: { key: 'k-forged', consumerId: 'nobody', eventId: '1', reaction: 'r', attempt: 1, principal: USER, outcome: '{}', causation: '{}', at: new Date(0).toISOString() },
  }
  const r = await attempt(() =>
    h.storage.commit({ path: 'P/forged' as NodePath, kind: 'Created', nodeType: 'Document', name: 'forged', content: {}, createdBy: USER, at: new Date(0).toISOString(), update: null, contextual: attachment }),
  )
  expect(r).toEqual({ ok: false, code: 'stale_lease' })
  expect(await h.storage.getNode('P/forged' as NodePath)).toBeNull()
  expect(await h.storage.lastVersion()).toBe(before)
  expect(await h.storage.contextual({ op: 'outcome', key: 'k-forged' })).toBeNull()
}

/**
 * [CTX26] Commits carrying outcomes in one batch (submitted in one tick, so they share a
 * transaction): each verdict is its own. A held lease commits and its outcome holds that commit's
 * version; forged evidence is refused; a held lease on a commit the batch's plan refuses (an update
 * of a node that is not there) records no outcome, so the reaction can still have one; a plain
 * commit beside them lands.
 */
export async function outcomesInOneBatch(h: Harness): Promise<void> {
  const pull = () => h.service.next(ME, { subscription: SUB, consumer: 'c' })
  const { consumerId } = await pull()
  await h.nodes.put(ME, 'P/in/a' as NodePath, { nodeType: 'Document', content: {} })
  await h.nodes.put(ME, 'P/in/b' as NodePath, { nodeType: 'Document', content: {} })
  const held = [(await pull()).item!, (await pull()).item!]
  const at = new Date(h.clock.now()).toISOString()
  // [CTX47] Each asks to settle its item with its outcome: only a commit that happens does.
  const attach = (item: WorkItem, key: string, token = item.leaseToken): ContextualAttachment => ({
    fence: { consumerId, eventId: item.event.eventId, token, attempt: item.attempt, now: h.clock.now() },
    outcome: { key, consumerId, eventId: item.event.eventId, reaction: 'annotate', attempt: item.attempt, principal: USER, outcome: '{}', causation: '{}', at },
    settle: true,
  })
  const state = async (item: WorkItem) => ((await h.storage.contextual({ op: 'reactTruth', key: '-', consumerId, eventId: item.event.eventId })) as ReactTruth).lease?.state
  const commit = (path: string, kind: 'Created' | 'Updated', contextual?: ContextualAttachment) =>
    attempt(() => h.storage.commit({ path: path as NodePath, kind, nodeType: 'Document', name: path.split('/').pop()!, content: { Note: 'x' }, createdBy: USER, at, update: null, ...(contextual ? { contextual } : {}) }))
  const before = await h.storage.lastVersion()
  const [kept, forged, unplanned, plain] = await Promise.all([
    commit('P/in/a', 'Updated', attach(held[0]!, 'k-batch-a')),
    commit('P/in/b', 'Updated', attach(held[1]!, 'k-batch-forged', 'forged')),
    commit('P/in/missing', 'Updated', attach(held[1]!, 'k-batch-b')),
    commit('P/in/plain', 'Created'),
  ])
  expect(kept).toMatchObject({ ok: true, value: { kind: 'Updated', path: 'P/in/a' } })
  expect(forged).toEqual({ ok: false, code: 'stale_lease' })
  expect(unplanned.ok).toBe(false)
  expect(plain).toMatchObject({ ok: true, value: { kind: 'Created', path: 'P/in/plain' } })
  const version = kept.ok ? kept.value.version : -1
  expect(await h.storage.lastVersion()).toBe(before + 2)
  expect(await h.storage.contextual({ op: 'outcome', key: 'k-batch-a' })).toMatchObject({ eventId: held[0]!.event.eventId, version })
  expect(await h.storage.contextual({ op: 'outcome', key: 'k-batch-forged' })).toBeNull()
  expect(await h.storage.contextual({ op: 'outcome', key: 'k-batch-b' })).toBeNull()
  expect((await h.storage.getNode('P/in/b' as NodePath))?.content).toEqual({})
  expect(await state(held[0]!)).toBe('acked')
  expect(await state(held[1]!)).toBe('leased')
  // The reaction whose commit did not happen can still have its outcome (and settle its item).
  expect(await h.storage.contextual({ op: 'recordOutcome', attachment: attach(held[1]!, 'k-batch-b') })).toBeNull()
  expect(await state(held[1]!)).toBe('acked')
  // Two commits for one item in one batch, the first settling it: the second finds its lease over.
  await h.nodes.put(ME, 'P/in/c' as NodePath, { nodeType: 'Document', content: {} })
  const c = (await pull()).item!
  const [settles, after] = await Promise.all([commit('P/in/a', 'Updated', attach(c, 'k-batch-c1')), commit('P/in/b', 'Updated', { ...attach(c, 'k-batch-c2'), settle: false })])
  expect(settles.ok).toBe(true)
  expect(after).toEqual({ ok: false, code: 'stale_lease' })
  expect(await h.storage.contextual({ op: 'outcome', key: 'k-batch-c2' })).toBeNull()
  expect(await state(c)).toBe('acked')
}

/**
 * [CTX47] A reaction asked to settle its item (`ack: true`) commits and settles in one transaction;
 * the item's slot is free at once, a later ack of it is stale, a repeat resolves and says it is
 * settled; a reaction that committed without settling settles on a repeat that asks; a reaction
 * denied (its lease ended, or taken by a later attempt) settles nothing.
 */
export async function reactSettles(h: Harness): Promise<void> {
  await seedMesh(h, 5, 1)
  const pull = () => h.service.next(ME, { subscription: SUB, consumer: 'c' })
  const { consumerId } = await pull()
  for (const d of ['a', 'b', 'c']) await h.nodes.put(ME, `P/in/${d}` as NodePath, { nodeType: 'Document', content: {} })
  const react = (item: WorkItem, ack?: boolean) => h.service.react(ME, { causationToken: item.reactions[0]!.causationToken, params: { Note: `n-${item.event.path}` }, ...(ack !== undefined ? { ack } : {}) })
  const status = () => h.service.status(ME, { consumerId })
  const a = (await pull()).item!
  expect((await pull()).item, 'MaxInFlight 1: a second pull gets nothing while a is leased').toBeNull()
  expect(await react(a, true)).toMatchObject({ repeated: false, acked: true, outcome: { status: 'committed' } })
  expect((await h.storage.getNode('P/in/a' as NodePath))?.content).toEqual({ Note: 'n-P/in/a' })
  expect(await status()).toMatchObject({ acked: 1, leased: 0 })
  expect(await attempt(() => h.service.ack(ME, fenceOf({ consumerId, item: a })))).toEqual({ ok: false, code: 'stale_lease' })
  expect(await react(a, true)).toMatchObject({ repeated: true, acked: true })
  // The slot is free: b is leased at once.
  const b = (await pull()).item!
  expect(b.event.path).toBe('P/in/b')
  expect(await react(b)).toEqual({ repeated: false, outcome: expect.objectContaining({ status: 'committed' }) })
  expect(await status()).toMatchObject({ acked: 1, leased: 1 })
  expect(await react(b, true)).toMatchObject({ repeated: true, acked: true })
  expect(await status()).toMatchObject({ acked: 2, leased: 0 })
  // c: its first lease runs out; the stale token settles nothing, before or after a new attempt.
  const c1 = (await pull()).item!
  await h.clock.advance(6000)
  expect(await attempt(() => react(c1, true))).toEqual({ ok: false, code: 'reaction_denied' })
  const c2 = (await pull()).item!
  expect(c2.attempt).toBe(2)
  expect(await attempt(() => react(c1, true))).toEqual({ ok: false, code: 'reaction_denied' })
  expect(await status()).toMatchObject({ acked: 2, leased: 1 })
  expect(await react(c2, true)).toMatchObject({ repeated: false, acked: true })
  // The stale attempt's token now resolves the outcome, and reports the item settled (by attempt 2).
  expect(await react(c1, true)).toMatchObject({ repeated: true, acked: true })
  expect(await status()).toMatchObject({ acked: 3, leased: 0, pending: 0 })
  // d: reacted without settling; its lease runs out and attempt 2 holds it: the old token's
  // repeat asking to settle resolves the outcome and settles nothing (attempt 2's lease is not its).
  await h.nodes.put(ME, 'P/in/d' as NodePath, { nodeType: 'Document', content: {} })
  const d1 = (await pull()).item!
  expect(await react(d1)).toMatchObject({ repeated: false })
  await h.clock.advance(6000)
  const d2 = (await pull()).item!
  expect(await react(d1, true)).toMatchObject({ repeated: true, acked: false })
  expect(await status()).toMatchObject({ acked: 3, leased: 1 })
  await h.service.ack(ME, fenceOf({ consumerId, item: d2 }))
  // e: reacted without settling, its lease kept past its token's 15 minutes by heartbeats: the
  // expired token resolves the outcome and settles nothing (a settle is a write).
  await h.nodes.put(ME, 'P/in/e' as NodePath, { nodeType: 'Document', content: {} })
  const e = (await pull()).item!
  expect(await react(e)).toMatchObject({ repeated: false })
  for (let i = 0; i < 2; i++) {
    await h.service.extend(ME, { ...fenceOf({ consumerId, item: e }), seconds: 900 })
    await h.clock.advance(600_000)
  }
  expect(await react(e, true)).toMatchObject({ repeated: true, acked: false })
  expect(await status()).toMatchObject({ acked: 4, leased: 1 })
  // [CTX45] A day later the settled rows are swept: a's repeat still says it is settled.
  await h.service.ack(ME, fenceOf({ consumerId, item: e }))
  expect(await h.service.prune(h.clock.now() + SETTLED_RETENTION_MS + 1)).toBeGreaterThanOrEqual(5)
  expect(await react(a, true)).toMatchObject({ repeated: true, acked: true })
  // Its consumer deleted, then made again by a pull: the row is gone for another reason; not settled by this.
  await h.service.delete(ME, { consumerId })
  expect(await react(a, true)).toMatchObject({ repeated: true, acked: false })
  await h.clock.advance(1000)
  expect((await pull()).consumerId).toBe(consumerId)
  expect(await react(a, true)).toMatchObject({ repeated: true, acked: false })
  expect((await h.storage.changesSince(0, 10_000)).filter((x) => x.kind === 'Updated' && x.path.startsWith('P/in/')).length).toBe(5)
}

/**
 * [CTX22] An outcome with no commit (a business rejection), straight to storage: recorded once
 * under the held lease (no version), a repeat refused as done, forged evidence as a lost lease.
 */
export async function outcomeAloneOnce(h: Harness): Promise<void> {
  const pull = () => h.service.next(ME, { subscription: SUB, consumer: 'c' })
  const { consumerId } = await pull()
  await h.nodes.put(ME, 'P/in/alone' as NodePath, { nodeType: 'Document', content: {} })
  const item = (await pull()).item!
  const fence = { consumerId, eventId: item.event.eventId, token: item.leaseToken, attempt: item.attempt, now: h.clock.now() }
  const outcome = { key: 'k-alone', consumerId, eventId: item.event.eventId, reaction: 'annotate', attempt: item.attempt, principal: USER, outcome: '{}', causation: '{}', at: new Date(0).toISOString() }
  const record = (attachment: ContextualAttachment) => h.storage.contextual({ op: 'recordOutcome', attachment })
  expect(await record({ fence, outcome })).toBeNull()
  expect(await record({ fence, outcome })).toBe('This reaction already has an outcome.')
  expect(await record({ fence: { ...fence, token: 'forged' }, outcome: { ...outcome, key: 'k-forged-alone' } })).toBe('The lease of this work item is no longer held.')
  expect(await h.storage.contextual({ op: 'outcome', key: 'k-alone' })).toMatchObject({ eventId: item.event.eventId, version: null })
  expect(await h.storage.contextual({ op: 'outcome', key: 'k-forged-alone' })).toBeNull()
}
