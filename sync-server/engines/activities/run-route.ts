import { z } from 'zod'
import {
  ACTIVITY_SEGMENT,
  SYSTEM,
  WeftError,
  activityParentPath,
  isJsonObject,
  mergeInputs,
  missingInputs,
  parseNodePath,
  partitionName,
  partitionPath,
  type JsonObject,
  type NodePath,
  type Principal,
} from '../../../shared/index.js'
import type { NodeApi } from '../../nodes/types.js'
import type { Route, RouteRequest } from '../../http/route.js'

const RunBody = z.object({
  inputs: z.record(z.string(), z.unknown()).optional(),
  start: z.boolean().optional(),
})

let seq = 0

/** A sortable, unique activity id: time first, so a parent's activities list in run order. */
export function newActivityId(): string {
  seq = (seq + 1) % 1_000_000
  return `${Date.now().toString(36)}-${seq.toString(36).padStart(4, '0')}-${Math.random().toString(36).slice(2, 8)}`
}

export interface RunRequest {
  inputs?: JsonObject
  start?: boolean
}

/**
 * [ACT1] Creates the activity of a run of a Code node, as system, for `caller` (who needs
 * Execute on the Code node). The creator gets an Editor assignment on the activity: with the
 * ActivityLog's field rules that reaches RequestedStatus and Inputs only ([ACT10]).
 */
export async function runCode(nodes: NodeApi, caller: Principal, codePath: NodePath, body: RunRequest): Promise<{ path: NodePath }> {
  if (caller.kind !== 'user') throw new WeftError('forbidden', 'Runs are made by users.')
  const code = await nodes.get(caller, codePath)
  if (!code) throw new WeftError('not_found', `No node at ${codePath}.`)
  if (code.nodeType !== 'Code') throw new WeftError('invalid_request', `${codePath} is a ${code.nodeType}, not a Code node.`)
  if (!nodes.permissions(caller, codePath).has('Execute')) throw new WeftError('forbidden', `${caller.userId} lacks Execute on ${codePath}.`)
  if (code.content.IsExecutable === false) throw new WeftError('invalid_request', `${codePath} is not executable.`)
  const inputs = mergeInputs(code.content, body.inputs)
  const start = body.start !== false
  const missing = missingInputs(code.content, inputs)
  if (start && missing.length > 0) throw new WeftError('invalid_request', `Required inputs are missing: ${missing.join(', ')}.`)
  // [ACT6] The partition's definition is read now, so a change to it applies to the next run.
  const partition = await nodes.get(SYSTEM, parseNodePath(partitionPath(partitionName(codePath))))
  const parent = parseNodePath(activityParentPath(codePath, code.content, partition?.nodeType === 'Partition' ? partition.content : null, caller.userId))
  // Runs land in the Code node's partition or in the caller's own home, nowhere else: an author
  // of a Code node cannot make the system write into someone else's space.
  const home = caller.userId as string
  const root = partitionName(parent)
  if (root !== partitionName(codePath) && root !== home) {
    throw new WeftError('forbidden', `Activities of ${codePath} may land in its partition or in your home, not in ${parent}.`)
  }
  const path = parseNodePath(`${parent}/${ACTIVITY_SEGMENT}/${newActivityId()}`)
  const content: JsonObject = {
    Category: 'Script',
    CodePath: codePath,
    Inputs: inputs,
    Messages: [],
    CreatedBy: caller.userId,
  }
  if (start) content.RequestedStatus = 'Running'
  // The grant first: by the time anyone sees the activity its owner can already steer it.
  await nodes.update(SYSTEM, parseNodePath(`${path}/_Access/${caller.userId}_Access`), () => ({ nodeType: 'AccessAssignment', content: { Subject: caller.userId, Role: 'Editor' } }), 'engine')
  await nodes.create(SYSTEM, path, { nodeType: 'ActivityLog', name: `${code.name} run`, content }, 'http')
  await nodes.patch(SYSTEM, codePath, { LastActivityPath: path }, 'engine')
  return { path }
}

function caller(r: RouteRequest): Principal {
  if (!r.principal) throw new WeftError('unauthorized', 'Sign in first.')
  return r.principal
}

export function activityRoutes(nodes: NodeApi, onCreated: (path: NodePath) => void): Route[] {
  return [
    {
      method: 'POST',
      pattern: /^\/api\/nodes\/(?<path>.+)\/run\/?$/,
      async handler(r) {
        const codePath = parseNodePath(r.params.path ?? '')
        // An empty body is a run with the declared defaults.
        const empty = (r.req.headers['content-length'] ?? '0') === '0' && !r.req.headers['transfer-encoding']
        const raw = empty ? {} : await r.json()
        const parsed = RunBody.safeParse(raw ?? {})
        if (!parsed.success || (parsed.data.inputs !== undefined && !isJsonObject(parsed.data.inputs))) {
          throw new WeftError('invalid_request', 'The body is { inputs?: object, start?: boolean }.')
        }
        const out = await runCode(nodes, caller(r), codePath, parsed.data as RunRequest)
        onCreated(out.path)
        return { status: 201, body: out }
      },
    },
  ]
}
