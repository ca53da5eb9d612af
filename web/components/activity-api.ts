import { app } from '../app-context.js'

/** `POST /api/nodes/{codePath}/run` (DESIGN.md): the one activity call that is not a node write. */
export async function runCode(codePath: string, body: { inputs?: Record<string, unknown>; start?: boolean } = {}): Promise<string> {
  const url = `/api/nodes/${codePath.split('/').map(encodeURIComponent).join('/')}/run`
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${app().session.token}` },
    body: JSON.stringify(body),
  })
  const json = (await res.json().catch(() => null)) as { path?: string; error?: { message?: string } } | null
  if (res.status !== 201 || !json?.path) throw new Error(json?.error?.message ?? `Run failed (${res.status}).`)
  return json.path
}

/** Patches RequestedStatus: the control plane (start, cancel) is a property, never a verb. */
export function requestStatus(activityPath: string, status: 'Running' | 'Cancelled'): Promise<unknown> {
  return app().client.patch(activityPath, { RequestedStatus: status })
}
