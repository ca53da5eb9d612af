import { z } from 'zod'
import { defineEngine, lightPage } from '../../kit/index.js'
import {
  EventDeliverySchema,
  Role,
  SYSTEM,
  isJsonObject,
  knownNodeTypes,
  registerNodeType,
  tryParseNodePath,
  type EventDelivery,
  type JsonObject,
  type MeshNode,
  type NodePath,
} from '../../../../shared/index.js'
import type { NodeApi } from '../../../nodes/index.js'
import { isAdminOf } from '../access.js'
import { deniedMessage, grantAccess } from '../continuations.js'
import type { ModuleContext, SubscriptionModule } from '../module.js'

/**
 * `TierInvite`: the first DeliverToNode receiver. An Admin of a space writes a TierInvite
 * (`{ Space, Tier, Email }`) and a DeliverToNode subscription pointing at it; when the runner
 * delivers (the invitee signed up), this receiver re-checks that the inviter (the delivery's
 * CreatedBy) is STILL Admin of the space — the firing may come long after the request — and only
 * then grants the tier; otherwise it records the refusal on the node. Outcomes are on the node:
 * `Status` (Waiting | Granted | Refused), `Reason`, `HandledDeliveries`.
 */
export const TIER_INVITE = 'TierInvite'

export function registerTierInviteType(): void {
  if (knownNodeTypes().includes(TIER_INVITE)) return
  registerNodeType({
    name: TIER_INVITE,
    content: z.looseObject({ Space: z.string().optional(), Tier: z.string().optional() }),
    defaultWrite: 'admin',
    // Deliveries and outcomes are the system's to write: nobody can forge a firing or a grant.
    fields: { EventDelivery: 'system', EventDeliveries: 'system', Status: 'system', Reason: 'system', HandledDeliveries: 'system', GrantedTo: 'system' },
    create: 'Create',
    delete: 'admin',
  })
}

function deliveriesOf(node: MeshNode): EventDelivery[] {
  const raw = [...(Array.isArray(node.content.EventDeliveries) ? node.content.EventDeliveries : []), node.content.EventDelivery]
  const out = new Map<string, EventDelivery>()
  for (const d of raw) {
    const parsed = EventDeliverySchema.safeParse(d)
    if (parsed.success) out.set(parsed.data.SubscriptionId, parsed.data)
  }
  return [...out.values()]
}

function handledOf(node: MeshNode): string[] {
  return Array.isArray(node.content.HandledDeliveries) ? node.content.HandledDeliveries.filter((x): x is string => typeof x === 'string') : []
}

/** Decide and act on every unhandled delivery of one TierInvite node. Idempotent. */
export async function processTierInvite(nodes: NodeApi, node: MeshNode): Promise<void> {
  const handled = new Set(handledOf(node))
  for (const delivery of deliveriesOf(node)) {
    if (handled.has(delivery.SubscriptionId)) continue
    const outcome = await decide(nodes, node, delivery)
    await nodes.update(SYSTEM, node.path, (current) => {
      if (!current || handledOf(current).includes(delivery.SubscriptionId)) return undefined
      const content: JsonObject = {
        ...current.content,
        HandledDeliveries: [...handledOf(current), delivery.SubscriptionId],
        Status: outcome.granted ? 'Granted' : 'Refused',
        Reason: outcome.reason,
      }
      if (outcome.granted && delivery.SubjectId) content.GrantedTo = delivery.SubjectId
      return { nodeType: current.nodeType, name: current.name, content }
    }, 'engine')
  }
}

async function decide(nodes: NodeApi, node: MeshNode, delivery: EventDelivery): Promise<{ granted: boolean; reason: string | null }> {
  const space = tryParseNodePath(node.content.Space)
  const tier = node.content.Tier ?? 'Viewer'
  const subject = delivery.SubjectId
  if (!space) return { granted: false, reason: `TierInvite names no valid Space (${JSON.stringify(node.content.Space ?? null)}).` }
  if (!Role.isMember(tier)) return { granted: false, reason: `Unknown tier ${JSON.stringify(tier)}.` }
  if (!subject || subject.includes('/') || !tryParseNodePath(subject)) return { granted: false, reason: 'The delivery names no user to grant.' }
  const inviter = delivery.CreatedBy
  if (!inviter) return { granted: false, reason: 'The delivery records no inviter, so nobody vouches for the grant.' }
  // [SUB13] "system" is a user id like any other: a delivery the system vouched for names nobody.
  if (!isAdminOf(nodes, inviter, space)) {
    return { granted: false, reason: `${inviter} is no longer Admin of ${space}.` }
  }
  if ((await grantAccess(nodes, space, subject, tier)) === 'denied') return { granted: false, reason: deniedMessage(subject, space) }
  return { granted: true, reason: null }
}

/** TierInvite nodes the boot reconcile processes at once: a backlog of 100,000 is a stream, not a stampede. */
const RECONCILE_CONCURRENCY = 16

/**
 * [SUB8] One pass at a time per node, and none lost: a change that arrives while the node is
 * being processed (a second delivery, or the receiver's own write) marks it dirty, and the pass
 * runs again on the node as it is THEN. What is handled is decided by the node's
 * HandledDeliveries (re-read inside the update); the map only coalesces.
 */
export function tierInviteReceiver(nodes: NodeApi, log: ModuleContext['log']): { run(path: NodePath): Promise<void> } {
  /** Path → whether a change arrived during the pass under way. */
  const busy = new Map<NodePath, { dirty: boolean; done: Promise<void> }>()
  const pass = async (path: NodePath, state: { dirty: boolean }) => {
    do {
      state.dirty = false
      try {
        const node = await nodes.get(SYSTEM, path)
        if (node?.nodeType === TIER_INVITE && isJsonObject(node.content)) await processTierInvite(nodes, node)
      } catch (err) {
        log.warn({ err, path }, 'TierInvite receiver failed; the next change or boot retries')
        return
      }
    } while (state.dirty)
  }
  return {
    run(path) {
      const current = busy.get(path)
      if (current) {
        current.dirty = true
        return current.done
      }
      const state = { dirty: false, done: Promise.resolve() }
      state.done = pass(path, state).finally(() => busy.delete(path))
      busy.set(path, state)
      return state.done
    },
  }
}

async function startTierInvites(ctx: ModuleContext): Promise<() => void> {
  const receiver = tierInviteReceiver(ctx.nodes, ctx.log)
  // The kit (issue 17): the feed with gap replay, and a paged boot reconcile (deliveries written
  // while the receiver was down), both through the same receiver, a bounded number at a time.
  const engine = defineEngine(
    {
      name: 'tier invites',
      watch: (c) => (c.nodeType === TIER_INVITE && c.node !== null ? [c.path] : []),
      replays: (r) => r.nodeType === TIER_INVITE && r.kind !== 'Deleted',
      reconcile: { page: lightPage(ctx.nodes, { nodeType: TIER_INVITE }, []), keyOf: (r) => r.path, intervalMs: null },
      handle: (path) => receiver.run(path as NodePath),
      concurrency: RECONCILE_CONCURRENCY,
    },
    { nodes: ctx.nodes, log: ctx.log, changes$: ctx.changes$, ...(ctx.clock ? { clock: ctx.clock } : {}) },
  )
  await engine.start()
  await engine.idle()
  return () => void engine.stop()
}

export const tierInviteModule: SubscriptionModule = {
  name: 'store.tier-invite',
  start: startTierInvites,
}
