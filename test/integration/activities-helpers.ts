import type { JsonObject, MeshNode } from '../../shared/index.js'
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

/** Waits until the activity's Status satisfies `pred` (read as system-equivalent: the given token). */
export async function waitForStatus(url: string, token: string, path: string, pred: (s: unknown) => boolean, timeoutMs = 10_000): Promise<MeshNode> {
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
