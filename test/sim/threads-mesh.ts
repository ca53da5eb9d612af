import { expect } from 'vitest'
import { SYSTEM, userPrincipal, type MeshNode, type NodePath, type UserId } from '../../shared/index.js'
import { assignmentLabel } from '../../sync-server/access/access-service.js'
import { createThreadsEngine, postMessage, roundClockOf, type Agent, type ThreadsEngine } from '../../sync-server/engines/threads/index.js'
import type { NodeApi } from '../../sync-server/nodes/types.js'
import type { SimEngineFactory, SimMesh } from './mesh.js'

export const THREAD_RECONCILE_MS = 30_000
export const alice = userPrincipal('alice' as UserId)
export const bob = userPrincipal('bob' as UserId)
/** A Viewer of the space: reads, never writes a thread. */
export const vic = userPrincipal('vic' as UserId)
/** Nobody in the space. */
export const eve = userPrincipal('eve' as UserId)

/** The threads engine on the mesh's clock and perturbed feed (`agent` replaces the built-in kind's executor). */
export function threadsOnSim(agent?: Agent): SimEngineFactory {
  return (ctx, deps) => createThreadsEngine({ clock: deps.clock, changes$: deps.changes$, llm: null, reconcileIntervalMs: THREAD_RECONCILE_MS, ...(agent ? { agent } : {}) })(ctx)
}

export function threads(mesh: SimMesh): ThreadsEngine {
  return mesh.engine<ThreadsEngine>('threads')
}

/** Space S: alice and bob its Editors, vic its Viewer; a thread S/{name} (built-in agent unless `content` says). */
export async function spaceAndThread(nodes: NodeApi, name: string, content: Record<string, unknown> = {}): Promise<NodePath> {
  if (!(await nodes.get(SYSTEM, 'S' as NodePath))) {
    await nodes.put(SYSTEM, 'S' as NodePath, { nodeType: 'Space', name: 'S', content: {} })
    for (const [who, role] of [['alice', 'Editor'], ['bob', 'Editor'], ['vic', 'Viewer']] as const) {
      await nodes.put(SYSTEM, `S/_Access/${assignmentLabel(who)}` as NodePath, { nodeType: 'AccessAssignment', name: who, content: { Subject: who, Role: role } })
    }
  }
  const path = `S/${name}` as NodePath
  await nodes.put(SYSTEM, path, { nodeType: 'Thread', name, content: { Agent: { Kind: 'builtin' }, ...content } as never })
  return path
}

/** A person posts, as the HTTP route does (the route's function, on the mesh's clock). */
export function postAs(mesh: SimMesh, who: typeof alice, thread: NodePath, id: string, text: string): Promise<{ path: NodePath }> {
  return postMessage(mesh.nodes, who, thread, { id, text }, roundClockOf(mesh.clock))
}

/**
 * Moves virtual time and lets the engine work until `pred` holds of the thread (rounds sleep on
 * the clock; their writes settle on real I/O, so this waits for the engine between steps).
 */
export async function runUntil(mesh: SimMesh, thread: NodePath, pred: (n: MeshNode) => boolean, stepMs = 1_000, steps = 200): Promise<MeshNode> {
  for (let i = 0; i < steps; i++) {
    const n = await mesh.nodes.get(SYSTEM, thread)
    if (n && pred(n)) return n
    await threads(mesh).engine.idle()
    await mesh.clock.advance(stepMs)
  }
  throw new Error(`${thread} never reached the state asked for: ${JSON.stringify((await mesh.nodes.get(SYSTEM, thread))?.content)}`)
}

export const resting = (n: MeshNode) =>
  (n.content.Status === 'Idle' || n.content.Status === 'Cancelled' || n.content.Status === undefined) &&
  n.content.Round === undefined &&
  n.content.RequestedStatus === undefined &&
  ((n.content.PendingUserMessages as string[] | undefined) ?? []).length === 0

/** [THR3] Each id ingested once and in Messages once; each run of user cells followed by exactly one assistant cell. */
export async function expectThreadInvariants(nodes: NodeApi, thread: MeshNode, what: string): Promise<void> {
  const c = thread.content
  const ingested = (c.IngestedMessageIds as string[] | undefined) ?? []
  expect(new Set(ingested).size, `${what}: ingested once`).toBe(ingested.length)
  const messages = (c.Messages as string[] | undefined) ?? []
  expect(new Set(messages).size, `${what}: Messages once`).toBe(messages.length)
  let users = 0
  for (const p of messages) {
    const cell = await nodes.get(SYSTEM, p as NodePath)
    expect(cell, `${what}: ${p} exists`).not.toBeNull()
    if (cell!.content.Role === 'user') users++
    else if (cell!.content.Role === 'assistant') {
      expect(users, `${what}: a response cell answers a round`).toBeGreaterThan(0)
      users = 0
    }
  }
  expect(users, `${what}: every round has its response cell`).toBe(0)
  expect(c.Status, `${what}: nothing stuck claiming`).not.toBe('StartingExecution')
}
