import { filter, firstValueFrom } from 'rxjs'
import { SYSTEM, userPrincipal, type MeshNode, type NodePath, type UserId } from '../../shared/index.js'
import { assignmentLabel } from '../../sync-server/access/access-service.js'
import { createActivitiesEngine, runCode, type ActivitiesEngine } from '../../sync-server/engines/activities/index.js'
import type { NodeApi } from '../../sync-server/nodes/types.js'
import type { SimEngineFactory, SimMesh } from './mesh.js'

export const RECONCILE_MS = 30_000
export const alice = userPrincipal('alice' as UserId)

/** The activities engine on the mesh's clock and perturbed feed (no templates: nothing to seed). */
export const activitiesOnSim: SimEngineFactory = (ctx, deps) =>
  createActivitiesEngine({
    clock: deps.clock,
    changes$: deps.changes$,
    seedTemplates: false,
    timeoutMs: 10_000,
    memoryMb: 16,
    cancelGraceMs: 300,
    watchdogMs: 600_000,
    spares: 1,
    maxConcurrent: 4,
    cpuSlots: 0,
    reconcileIntervalMs: RECONCILE_MS,
  })(ctx)

export function activities(mesh: SimMesh): ActivitiesEngine {
  return mesh.engine<ActivitiesEngine>('activities')
}

/** Space S, alice its Editor, and a Code node S/{name} with `source`. */
export async function codeNode(nodes: NodeApi, name: string, source: string): Promise<NodePath> {
  if (!(await nodes.get(SYSTEM, 'S' as NodePath))) {
    await nodes.put(SYSTEM, 'S' as NodePath, { nodeType: 'Space', name: 'S', content: {} })
    await nodes.put(SYSTEM, `S/_Access/${assignmentLabel('alice')}` as NodePath, { nodeType: 'AccessAssignment', name: 'alice', content: { Subject: 'alice', Role: 'Editor' } })
  }
  const path = `S/${name}` as NodePath
  await nodes.put(SYSTEM, path, { nodeType: 'Code', name, content: { Language: 'javascript', Source: source, IsExecutable: true } })
  return path
}

/** alice runs the code (as the run route does, without its kick: only the feed tells the engine). */
export async function runAs(nodes: NodeApi, code: NodePath, start = true): Promise<NodePath> {
  return (await runCode(nodes, alice, code, { start })).path
}

export function until(nodes: NodeApi, path: NodePath, pred: (n: MeshNode) => boolean): Promise<MeshNode> {
  return firstValueFrom(nodes.node$(path).pipe(filter((n): n is MeshNode => n !== null && pred(n))))
}

export function lines(n: MeshNode | null): { Level: string; Text: string }[] {
  return (n?.content.Messages ?? []) as { Level: string; Text: string }[]
}

export const isTerminal = (s: unknown) => s === 'Succeeded' || s === 'Warning' || s === 'Failed' || s === 'Cancelled'
