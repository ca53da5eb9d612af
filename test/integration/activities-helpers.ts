import { Observable } from 'rxjs'
import type { JsonObject, MeshNode, NodePath } from '../../shared/index.js'
import { api, expectStatus, nodeUrlPath, waitFor } from '../helpers/index.js'

/** Creates a Code node (the caller needs Create on its parent). */
export async function createCode(url: string, token: string, path: string, source: string, extra: JsonObject = {}): Promise<string> {
  expectStatus(await api(url, token).putNode(path, 'Code', { Language: 'javascript', Source: source, IsExecutable: true, ...extra }), 201)
  return path
}

/** `POST /api/nodes/{codePath}/run`; returns the activity path (throws unless 201). */
export async function run(url: string, token: string, codePath: string, body: JsonObject = {}): Promise<string> {
  const res = expectStatus(await api(url, token).post<{ path: string }>(`/api/nodes/${nodeUrlPath(codePath)}/run`, body), 201)
  return res.body.path
}

/**
 * Waits until the activity's Status satisfies `pred` (read as system-equivalent: the given token).
 * The default bound is generous (a run's start and end waited for with two CPU hogs beside a
 * loaded suite took over 10 s); it costs nothing when the status comes.
 */
export async function waitForStatus(url: string, token: string, path: string, pred: (s: unknown) => boolean, timeoutMs = 60_000): Promise<MeshNode> {
  return waitFor(
    async () => {
      const r = await api(url, token).getNode(path)
      return r.status === 200 && pred(r.body.content.Status) ? (r.body as MeshNode) : null
    },
    { timeoutMs, description: `${path} Status` },
  )
}

export const terminal = (s: unknown) => s === 'Succeeded' || s === 'Warning' || s === 'Failed' || s === 'Cancelled'

export function texts(node: MeshNode): string[] {
  return ((node.content.Messages ?? []) as { Text: string }[]).map((m) => m.Text)
}

/**
 * Counts the live `node$` subscriptions of a node service per path (what a script's
 * Mesh.waitFor holds on the server), and the most seen at once: wraps the instance's method, as
 * the engine calls it through the same object.
 */
export function countNodeWatchers(nodes: { node$(path: NodePath): Observable<MeshNode | null> }): { live(path: string): number; peak(path: string): number } {
  const live = new Map<string, number>()
  const peak = new Map<string, number>()
  const original = nodes.node$.bind(nodes)
  nodes.node$ = (path: NodePath) =>
    new Observable<MeshNode | null>((subscriber) => {
      const n = (live.get(path) ?? 0) + 1
      live.set(path, n)
      peak.set(path, Math.max(peak.get(path) ?? 0, n))
      const sub = original(path).subscribe(subscriber)
      return () => {
        sub.unsubscribe()
        live.set(path, (live.get(path) ?? 1) - 1)
      }
    })
  return { live: (p) => live.get(p) ?? 0, peak: (p) => peak.get(p) ?? 0 }
}

export type ActivityLine = { Level: 'Info' | 'Warning' | 'Error'; Text: string }

export function lines(node: MeshNode): ActivityLine[] {
  return (node.content.Messages ?? []) as ActivityLine[]
}
