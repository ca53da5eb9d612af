import type { JsonObject, MeshNode, NodePath } from '../../../shared/index.js'
import type { NodeApi } from '../../nodes/index.js'
import { claim } from './claim.js'
import type { Clock } from './clock.js'

/**
 * Leases with fencing (issue 17): who holds a piece of work, until when. Three fields on the
 * work's own node, each write a claim (one `update`, re-checked inside):
 *  - `LeaseHolder`: who holds it (absent: free);
 *  - `LeaseFence`: a number raised by every acquire, never lowered, so a holder whose lease
 *    expired and was taken over cannot write with its old fence (`fenced`);
 *  - `LeaseExpiresAt`: ISO time; past it the lease is free to take. Nothing in memory watches
 *    expiry: the engine's reconciler finds expired leases (`isExpired`) and acts.
 */
export interface Lease {
  holder: string
  fence: number
  expiresAt: number
}

type Nodes = Pick<NodeApi, 'update'>

export function leaseOf(content: JsonObject): Lease | null {
  const holder = content.LeaseHolder
  const fence = content.LeaseFence
  const at = typeof content.LeaseExpiresAt === 'string' ? Date.parse(content.LeaseExpiresAt) : NaN
  if (typeof holder !== 'string' || holder === '' || typeof fence !== 'number' || Number.isNaN(at)) return null
  return { holder, fence, expiresAt: at }
}

function fenceOf(content: JsonObject): number {
  return typeof content.LeaseFence === 'number' && Number.isFinite(content.LeaseFence) ? content.LeaseFence : 0
}

/** Held by nobody, or held past its expiry. */
export function isFree(content: JsonObject, now: number): boolean {
  const l = leaseOf(content)
  return l === null || l.expiresAt <= now
}

/** Held, and past its expiry: the reconciler's to take back. */
export function isExpired(content: JsonObject, now: number): boolean {
  const l = leaseOf(content)
  return l !== null && l.expiresAt <= now
}

function holds(node: MeshNode | null, holder: string, fence: number, now: number): node is MeshNode {
  const l = node ? leaseOf(node.content) : null
  return l !== null && l.holder === holder && l.fence === fence && l.expiresAt > now
}

function withLease(node: MeshNode, content: JsonObject) {
  return { nodeType: node.nodeType, name: node.name, content }
}

/** Takes the lease of an existing node when it is free; the answer carries the new fence. */
export async function acquire(nodes: Nodes, path: NodePath, holder: string, ttlMs: number, clock: Clock): Promise<Lease | null> {
  const now = clock.now()
  let lease: Lease | null = null
  const r = await claim(nodes, path, {
    when: (cur) => cur !== null && isFree(cur.content, now),
    write: (cur) => {
      const fence = fenceOf(cur!.content) + 1
      lease = { holder, fence, expiresAt: now + ttlMs }
      return withLease(cur!, { ...cur!.content, LeaseHolder: holder, LeaseFence: fence, LeaseExpiresAt: new Date(lease.expiresAt).toISOString() })
    },
  })
  return r.claimed ? lease : null
}

/** Extends a lease still held with this fence; null when it was lost (expired, taken over). */
export async function renew(nodes: Nodes, path: NodePath, lease: Lease, ttlMs: number, clock: Clock): Promise<Lease | null> {
  const now = clock.now()
  const next: Lease = { ...lease, expiresAt: now + ttlMs }
  const r = await claim(nodes, path, {
    when: (cur) => holds(cur, lease.holder, lease.fence, now),
    write: (cur) => withLease(cur!, { ...cur!.content, LeaseExpiresAt: new Date(next.expiresAt).toISOString() }),
  })
  return r.claimed ? next : null
}

/** Gives the lease up (the fence stays, so an old holder stays fenced out). */
export async function release(nodes: Nodes, path: NodePath, lease: Lease): Promise<boolean> {
  const r = await claim(nodes, path, {
    when: (cur) => {
      const l = cur ? leaseOf(cur.content) : null
      return l !== null && l.holder === lease.holder && l.fence === lease.fence
    },
    write: (cur) => {
      const content = { ...cur!.content }
      delete content.LeaseHolder
      delete content.LeaseExpiresAt
      return withLease(cur!, content)
    },
  })
  return r.claimed
}

/** A write made under a lease: written only while this holder still holds it with this fence. */
export async function fenced(nodes: Nodes, path: NodePath, lease: Lease, clock: Clock, write: (current: MeshNode) => JsonObject): Promise<boolean> {
  const now = clock.now()
  const r = await claim(nodes, path, {
    when: (cur) => holds(cur, lease.holder, lease.fence, now),
    write: (cur) => withLease(cur!, { ...write(cur!), LeaseHolder: lease.holder, LeaseFence: lease.fence, LeaseExpiresAt: cur!.content.LeaseExpiresAt! }),
  })
  return r.claimed
}
