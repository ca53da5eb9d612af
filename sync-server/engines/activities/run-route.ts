import { z } from 'zod'
import {
  JsonObjectInput,
  ACTIVITY_SEGMENT,
  SYSTEM,
  WeftError,
  activityParentPath,
  inputRequirements,
  isJsonObject,
  mergeInputs,
  missingInputs,
  parseNodePath,
  runName,
  partitionPath,
  topLevel,
  tryParseNodePath,
  type JsonObject,
  type NodePath,
  type Principal,
} from '../../../shared/index.js'
import type { NodeApi } from '../../nodes/index.js'
import type { PermissionSource } from '../kit/index.js'
import type { Route, RouteRequest } from '../../http/index.js'
import { request } from '../kit/index.js'

const RunBody = z.object({
  inputs: JsonObjectInput.optional(),
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
 * [ACT1][ACT6][ACT17] Creates the activity of a run of a Code node, as system, for `caller`.
 *
 * As whom: the caller asks (Execute on the Code node, checked now through the kit); a started run
 * records them as `StartedBy` and acts as them. What runs: the Code node's Source and Language,
 * copied onto the activity now. Where: see `routeRun`. The caller gets NO role on the activity:
 * as its `CreatedBy` they steer it through the ActivityLog's `owner` field rule (RequestedStatus,
 * a draft's Inputs) and can create nothing under it.
 */
export async function runCode(nodes: NodeApi, caller: Principal, codePath: NodePath, body: RunRequest): Promise<{ path: NodePath }> {
  if (caller.kind !== 'user') throw new WeftError('forbidden', 'Runs are made by users.')
  const code = await nodes.get(caller, codePath)
  if (!code) throw new WeftError('not_found', `No node at ${codePath}.`)
  if (code.nodeType !== 'Code') throw new WeftError('invalid_request', `${codePath} is a ${code.nodeType}, not a Code node.`)
  request(nodes, caller, 'Execute', codePath)
  if (code.content.IsExecutable === false) throw new WeftError('invalid_request', `${codePath} is not executable.`)
  const inputs = mergeInputs(code.content, body.inputs)
  const start = body.start !== false
  const missing = missingInputs(code.content, inputs)
  if (start && missing.length > 0) throw new WeftError('invalid_request', `Required inputs are missing: ${missing.join(', ')}.`)
  const refused = start ? inputRightsRefusal(nodes, caller, codePath, code.content, inputs) : null
  if (refused) throw refused
  const parent = await routeRun(nodes, caller, codePath, code.content)
  const path = parseNodePath(`${parent}/${ACTIVITY_SEGMENT}/${newActivityId()}`)
  const content: JsonObject = {
    Category: 'Script',
    CodePath: codePath,
    // What runs is the code as it is now: a later edit of the Code node changes no existing run.
    Source: typeof code.content.Source === 'string' ? code.content.Source : '',
    Language: code.content.Language === 'typescript' ? 'typescript' : 'javascript',
    Inputs: inputs,
    Messages: [],
    CreatedBy: caller.userId,
  }
  if (start) {
    content.RequestedStatus = 'Running'
    content.StartedBy = caller.userId
  }
  await nodes.create(SYSTEM, path, { nodeType: 'ActivityLog', name: runName(null, code.name) ?? 'Run', content }, 'http')
  // A shared operation does not tell one user who else ran it: only those who may change the
  // Code node see its last run.
  if (nodes.permissions(caller, codePath).has('Update')) await nodes.patch(SYSTEM, codePath, { LastActivityPath: path }, 'engine')
  return { path }
}

/**
 * [ACT22] The rights a Code node's inputs ask of its starter (`Requires` on a `node` input:
 * ExportJson's `Root` requires `Export`), checked as `principal`: `invalid_request` when the input
 * names no node path, `forbidden` when the role there lacks the permission; null when it may.
 * Asked when a run is requested and again as it starts (activity-engine `authorize`), like
 * Execute on the Code node.
 */
export function inputRightsRefusal(access: PermissionSource, principal: Principal, codePath: string, code: JsonObject, inputs: JsonObject, who = 'you'): WeftError | null {
  for (const { name, permission, path } of inputRequirements(code, inputs)) {
    const at = tryParseNodePath(path)
    if (!at) return new WeftError('invalid_request', `The input ${name} of ${codePath} must name a node (a path), not ${JSON.stringify(path ?? null)}.`)
    if (!access.permissions(principal, at).has(permission)) {
      return new WeftError('forbidden', `${codePath} needs ${permission} on ${at} (its input ${name}), and ${who} lack${who === 'you' ? '' : 's'} it there. Ask an Admin of ${at} for a role that has ${permission}.`)
    }
  }
  return null
}

/**
 * [ACT6] Where a run of `codePath` by `caller` lands: the Code node's ActivityParentPath, else its
 * partition's DefaultActivityParentPath (read now, so a change applies to the next run), else the
 * partition root; `{viewer}` is the caller's home. The activity is created as system, so the
 * place is held to what the caller could reach themselves: inside the Code node's own partition
 * or the caller's home (compared by top-level segment), at a parent that exists, that the caller
 * reads and is not Denied at. Otherwise `forbidden` / `not_found` and nothing is created.
 */
export async function routeRun(nodes: NodeApi, caller: Extract<Principal, { kind: 'user' }>, codePath: NodePath, code: JsonObject): Promise<NodePath> {
  const partition = await nodes.get(SYSTEM, parseNodePath(partitionPath(topLevel(codePath))))
  const raw = activityParentPath(codePath, code, partition?.nodeType === 'Partition' ? partition.content : null, caller.userId)
  const parent = tryParseNodePath(raw)
  if (!parent) throw new WeftError('invalid_request', `${codePath} routes its runs to ${JSON.stringify(raw)}, which is not a node path; fix its ActivityParentPath.`)
  const home = caller.userId as string
  const root = topLevel(parent)
  // An author of a Code node cannot make the system write into someone else's space.
  if (root !== topLevel(codePath) && root !== home) {
    throw new WeftError('forbidden', `Activities of ${codePath} may land in its partition or in your home, not in ${parent}.`)
  }
  // [ACC11] Readable first: whether an unreadable parent exists is nobody's business. A Denied
  // assignment takes Read away, so a Denied subtree refuses here too.
  if (!nodes.permissions(caller, parent).has('Read')) {
    throw new WeftError('forbidden', `Activities of ${codePath} would land under ${parent}, which you cannot read.`)
  }
  if (!(await nodes.get(SYSTEM, parent))) throw new WeftError('not_found', `Activities of ${codePath} would land under ${parent}, which does not exist.`)
  return parent
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
