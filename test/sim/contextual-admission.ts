import { expect } from 'vitest'
import { SYSTEM, type NodePath, type UserId } from '../../shared/index.js'
import { ContextualService } from '../../sync-server/contextual/index.js'
import type { CommitAttachment, NodeApi } from '../../sync-server/nodes/index.js'
import { ME, USER, attempt, fenceOf, log, type Harness } from './contextual-harness.js'
import { Rng } from './rng.js'

const SUB = 'P/asub' as NodePath
const IN = 'P/in'
const OUT = 'P/out'
export const OTHER = 'u2' as UserId
export const MY_GRANT = 'P/_Access/u1_Access' as NodePath

/** What lands while a reaction runs, and whether it touches the caller's authority over the event. */
const INTERFERENCE = {
  none: { touches: false },
  revokeRole: { touches: true },
  raiseRole: { touches: true },
  hideSource: { touches: true },
  deleteSource: { touches: true },
  /** Deleted and made again at the same path: another row than the event's. */
  recreateSource: { touches: true },
  grantSomeoneElse: { touches: false },
  editSource: { touches: false },
} as const
type Interference = keyof typeof INTERFERENCE
/** Where: while react reads the source (after its first checks), or as the command's write starts. */
const POINTS = ['source read', 'command start'] as const
type Point = (typeof POINTS)[number]
/** The write to land (`run`) and where (`at`, cleared once it ran), for the round's `source`. */
interface Hook {
  at: Point | null
  run: () => Promise<void>
  source: string
}

async function interfere(h: Harness, kind: Interference, source: NodePath, n: number): Promise<void> {
  switch (kind) {
    case 'none':
      return
    case 'revokeRole':
      await h.nodes.put(SYSTEM, MY_GRANT, { nodeType: 'AccessAssignment', content: { Subject: USER, Role: 'Viewer' } })
      return
    case 'raiseRole':
      await h.nodes.put(SYSTEM, MY_GRANT, { nodeType: 'AccessAssignment', content: { Subject: USER, Role: 'Admin' } })
      return
    case 'hideSource':
      await h.nodes.put(SYSTEM, `${source}/_Access/u1_Access` as NodePath, { nodeType: 'AccessAssignment', content: { Subject: USER, Role: 'Viewer', Denied: true } })
      return
    case 'deleteSource':
      await h.nodes.delete(SYSTEM, source)
      return
    case 'recreateSource':
      await h.nodes.delete(SYSTEM, source)
      await h.nodes.put(SYSTEM, source, { nodeType: 'Document', content: { N: n, Again: true } })
      return
    case 'grantSomeoneElse':
      await h.nodes.put(SYSTEM, `P/_Access/u2_${n}_Access` as NodePath, { nodeType: 'AccessAssignment', content: { Subject: `${OTHER}_${n}`, Role: 'Editor' } })
      return
    case 'editSource':
      await h.nodes.patch(SYSTEM, source, { Edited: n })
      return
  }
}

/**
 * The node API the service under test uses: the real node service, with a hook that lets a test
 * land a write at one of react's await points.
 */
function hooked(nodes: NodeApi, hook: Hook): NodeApi {
  const fire = async (point: Point) => {
    if (hook.at !== point) return
    hook.at = null
    await hook.run()
  }
  return new Proxy(nodes, {
    get(target, prop) {
      if (prop === 'get') {
        return async (...args: Parameters<NodeApi['get']>) => {
          const read = await target.get(...args)
          if (args[1] === hook.source) await fire('source read')
          return read
        }
      }
      if (prop === 'attaching') {
        return (holder: CommitAttachment) => {
          const api = target.attaching(holder)
          return { ...api, create: async (...args: Parameters<NodeApi['create']>) => (await fire('command start'), api.create(...args)) }
        }
      }
      const value = Reflect.get(target, prop, target) as unknown
      return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value
    },
  })
}

/**
 * [CTX25] The guarantee: a reaction commits only under the authority its token was offered under.
 * Whatever lands while `react` runs (between its first checks and its command's write), a reaction
 * commits if and only if nothing touched the caller's authority over the event: a role revoked or
 * changed, the source hidden, deleted or deleted and made again all give `reaction_denied` with
 * nothing written (neither the command's node nor an outcome), and a write that touches none of it
 * (another user's grant, an edit of the source) lets it commit. One seed of rounds on a fresh harness (the real node
 * service over SQLite or PostgreSQL); returns the rounds run.
 */
export async function admissionRounds(h: Harness, seed: number, steps = 14): Promise<number> {
  const rng = new Rng(seed)
  const hook: Hook = { at: null, run: async () => undefined, source: '' }
  const service = new ContextualService({ nodes: hooked(h.nodes, hook), access: h.access, storage: h.storage, log, clock: h.clock })
  service.start()
  await h.nodes.put(SYSTEM, 'P' as NodePath, { nodeType: 'Space', content: {} })
  // P keeps an Admin of its own, so u1's role may go up and come back down.
  await h.nodes.put(SYSTEM, 'P/_Access/boss_Access' as NodePath, { nodeType: 'AccessAssignment', content: { Subject: 'boss', Role: 'Admin' } })
  await h.nodes.put(SYSTEM, MY_GRANT, { nodeType: 'AccessAssignment', content: { Subject: USER, Role: 'Editor' } })
  await h.nodes.put(SYSTEM, IN as NodePath, { nodeType: 'Document', content: {} })
  await h.nodes.put(SYSTEM, OUT as NodePath, { nodeType: 'Document', content: {} })
  await h.nodes.put(ME, SUB, {
    nodeType: 'ContextualSubscription',
    content: {
      Operation: 'file',
      Events: { NodeTypes: ['Document'], Kinds: ['Created'], PathPrefix: IN },
      Reactions: { file: { Command: 'create', Target: `${OUT}/{event.name}`, NodeType: 'Document', Parameters: { Note: { Type: 'string' } } } },
      Limits: { LeaseSeconds: 300, MaxInFlight: 8, MaxAttempts: 10 },
    },
  })
  await service.next(ME, { subscription: SUB, consumer: 'c' })
  const kinds = Object.keys(INTERFERENCE) as Interference[]
  const seen = { committed: 0, denied: 0 }
  for (let n = 0; n < steps; n++) {
    // Each round starts from the same authority: u1 an Editor of P.
    await h.nodes.put(SYSTEM, MY_GRANT, { nodeType: 'AccessAssignment', content: { Subject: USER, Role: 'Editor' } })
    const source = `${IN}/d${n}` as NodePath
    await h.nodes.put(ME, source, { nodeType: 'Document', content: { N: n } })
    // A source made again in an earlier round is an event of its own: acked on the way.
    let got = await service.next(ME, { subscription: SUB, consumer: 'c' })
    while (got.item && got.item.event.path !== source) {
      await service.ack(ME, fenceOf({ consumerId: got.consumerId, item: got.item }))
      got = await service.next(ME, { subscription: SUB, consumer: 'c' })
    }
    expect(got.item?.event.path).toBe(source)
    const item = got.item!
    const token = item.reactions.find((r) => r.name === 'file')!.causationToken
    const kind = rng.pick(kinds)
    const at = rng.pick(POINTS)
    Object.assign(hook, { at, source, run: () => interfere(h, kind, source, n) })
    const r = await attempt(() => service.react(ME, { causationToken: token, params: { Note: `n${n}` } }))
    const made = await h.nodes.get(SYSTEM, `${OUT}/d${n}` as NodePath)
    const what = `seed ${seed} round ${n}: ${kind} at ${at}`
    if (INTERFERENCE[kind].touches) {
      expect(r, what).toEqual({ ok: false, code: 'reaction_denied' })
      expect(made, `${what}: the command's node`).toBeNull()
      seen.denied++
    } else {
      expect(r.ok && r.value.outcome.status, what).toBe('committed')
      expect(made?.content, `${what}: the command's node`).toEqual({ Note: `n${n}` })
      seen.committed++
    }
    // Denied: no outcome was stored, so the same token is still refused (never a stored success).
    if (!r.ok) expect(await attempt(() => service.react(ME, { causationToken: token, params: { Note: 'again' } })), what).toEqual({ ok: false, code: 'reaction_denied' })
    // Done with the item either way: acked under the round's authority, restored first.
    await h.nodes.put(SYSTEM, MY_GRANT, { nodeType: 'AccessAssignment', content: { Subject: USER, Role: 'Editor' } })
    const acked = await attempt(() => service.ack(ME, fenceOf({ consumerId: got.consumerId, item })))
    expect(acked.ok, what).toBe(true)
  }
  expect(seen.committed + seen.denied).toBe(steps)
  service.stop()
  return steps
}
