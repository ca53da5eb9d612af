import { z } from 'zod'
import {
  JsonObjectInput,
  DEFAULT_MAX_JSON_DEPTH,
  WeftError,
  assertMergePatch,
  isJsonObject,
  parseNodePath,
  type JsonObject,
  type NodePath,
  type NodeQuery,
  type Principal,
} from '../../shared/index.js'
import { ConsumerRequest, ExtendRequest, FenceRequest, MineRequest, NackRequest, NextRequest, ReactRequest, type ContextualService } from '../contextual/index.js'
import { absentNode } from '../http/index.js'
import { MAX_CURSOR_LENGTH, isSealedCursor, type HttpNodeApi } from '../nodes/index.js'
import { runCode } from '../engines/activities/index.js'

/** What the tools call: the same services the HTTP routes call, nothing of their own. */
export interface McpDeps {
  contextual: ContextualService
  nodes: HttpNodeApi
  /** DESIGN.md's MAX_JSON_DEPTH: a tool's arguments may nest a few levels past it (the patch inside them), no more. */
  maxJsonDepth: number
  /** Told the path of each activity `weft_run` creates (the activities engine starts it at once). */
  onRunCreated?(path: NodePath): void
}

export interface ToolAnnotations {
  readOnlyHint?: boolean
  destructiveHint?: boolean
  idempotentHint?: boolean
  openWorldHint?: boolean
}

/** One MCP tool: its name, the zod schema of its arguments, and the service call it makes as the caller. */
export interface WeftTool {
  readonly name: string
  readonly title: string
  readonly description: string
  readonly input: z.ZodObject
  readonly annotations: ToolAnnotations
  /** `signal`: the call was cancelled or its connection closed ([CTX43]); only a long poll waits on it. */
  run(principal: Principal, args: Record<string, unknown>, deps: McpDeps, signal: AbortSignal): Promise<object>
}

/** A string field bound: paths are checked exactly by parseNodePath (as on HTTP); this only caps what is read. */
const Text = (max: number) => z.string().max(max)
const PATH_FIELD_MAX = 4096

const GetInput = z.strictObject({ path: Text(PATH_FIELD_MAX).describe('The node path, e.g. "space/inbox/doc1".') })

const QueryInput = z.strictObject({
  parent: Text(PATH_FIELD_MAX).optional().describe('Only the children of this path ("" for the top level).'),
  nodeType: Text(200).optional().describe('Only nodes of this type, e.g. "Document".'),
  where: z.record(Text(200), Text(4096)).optional().describe('Content fields that must equal these values (as strings).'),
  // [MCP9] Any integer from 1, as `GET /api/nodes?limit=` reads it (z.int() stops at 2^53 - 1:
  // 1e21 was refused here and capped there); the node API caps the page for both.
  limit: z.number().min(1).refine(Number.isInteger, 'Expected an integer').meta({ type: 'integer' }).optional().describe('At most this many nodes (the server caps a page, as on HTTP).'),
  after: Text(MAX_CURSOR_LENGTH).optional().describe("The previous page's `next`, to continue."),
})

const PatchInput = z.strictObject({
  path: Text(PATH_FIELD_MAX).describe('The node to change.'),
  patch: JsonObjectInput.describe('An RFC 7396 merge patch of the node content: null removes a field.'),
})

const RunInput = z.strictObject({
  path: Text(PATH_FIELD_MAX).describe('The Code node to run.'),
  inputs: JsonObjectInput.optional().describe("The run's inputs (the Code node's declared inputs)."),
  start: z.boolean().optional().describe('false: create the run as a draft without starting it (default true).'),
})

/** The same conversion `GET /api/nodes` makes of its query string. */
function nodeQuery(args: z.infer<typeof QueryInput>): NodeQuery {
  const query: NodeQuery = {}
  if (args.parent !== undefined) query.parent = args.parent === '' ? ('' as NodePath) : parseNodePath(args.parent)
  if (args.nodeType) query.nodeType = args.nodeType
  if (args.limit !== undefined) query.limit = args.limit
  if (args.after) query.after = isSealedCursor(args.after) ? args.after : parseNodePath(args.after)
  if (args.where && Object.keys(args.where).length) query.where = args.where
  return query
}

const FENCE_HELP = 'Pass consumerId, and the eventId, leaseToken and attempt of the work item exactly as `weft_contextual_next` returned them.'

/**
 * [MCP2] The tools. Each one is a call of the service its HTTP route calls, as the caller: the
 * contextual tools take the service's own request schemas (the service parses them again), the
 * mesh tools call the node API as `GET/PATCH /api/nodes` and `POST /api/nodes/{path}/run` do.
 */
export const TOOLS: readonly WeftTool[] = [
  {
    name: 'weft_contextual_next',
    title: 'Pull one contextual work item',
    description:
      'Leases at most one event of a ContextualSubscription to your consumer (made on first use) and returns it with fresh hydration and the reactions you may run now, each with an opaque causationToken. `item` is null when nothing is pending after `waitSeconds` (0–60, a long poll). Worker order: next → inspect → weft_contextual_react (with ack: true when it is all the item asks for) or your own idempotent work → weft_contextual_ack; weft_contextual_nack to retry later. Never ack before the work is durable; never build a lease or token yourself.',
    input: NextRequest,
    annotations: { readOnlyHint: false, idempotentHint: false, openWorldHint: false },
    run: (p, args, d, signal) => d.contextual.next(p, args, signal),
  },
  {
    name: 'weft_contextual_ack',
    title: 'Acknowledge a work item',
    description: `Settles the work item once its effect is durable. ${FENCE_HELP} A stale lease (expired, re-leased or settled) is refused with stale_lease: pull again.`,
    input: FenceRequest,
    annotations: { readOnlyHint: false, idempotentHint: false, openWorldHint: false },
    run: (p, args, d) => d.contextual.ack(p, args),
  },
  {
    name: 'weft_contextual_nack',
    title: 'Return a work item for a retry',
    description: `Gives the work item back to be delivered again after delaySeconds (0–900), or to the dead letters after its last attempt. ${FENCE_HELP} error (≤ 2000 characters) says why.`,
    input: NackRequest,
    annotations: { readOnlyHint: false, idempotentHint: false, openWorldHint: false },
    run: (p, args, d) => d.contextual.nack(p, args),
  },
  {
    name: 'weft_contextual_extend',
    title: 'Extend a lease',
    description: `A heartbeat for long work: the lease runs \`seconds\` (5–900, default the subscription's lease) from now. ${FENCE_HELP}`,
    input: ExtendRequest,
    annotations: { readOnlyHint: false, idempotentHint: true, openWorldHint: false },
    run: (p, args, d) => d.contextual.extend(p, args),
  },
  {
    name: 'weft_contextual_status',
    title: 'Status of your consumer',
    description: 'Pending, leased, acked, skipped and dead counts, cursor, head, lag and the last dead letters of one of your consumers.',
    input: ConsumerRequest,
    annotations: { readOnlyHint: true, openWorldHint: false },
    run: (p, args, d) => d.contextual.status(p, args),
  },
  {
    // [CTX67] What `POST /api/contextual/mine` answers, through the same service function: only the caller's own.
    name: 'weft_contextual_mine',
    title: 'Your consumers',
    description:
      "Lists your own consumers over every subscription (never anyone else's), a page at a time: consumerId, subscription, name, createdAt and current (false: its subscription was deleted, changed to another definition or hidden from you, so it gets no more work). Use a consumerId with weft_contextual_status; total counts all you have (at most 1,000); pass next as after for the next page (limit 1–100).",
    input: MineRequest,
    annotations: { readOnlyHint: true, openWorldHint: false },
    run: (p, args, d) => d.contextual.mine(p, args),
  },
  {
    name: 'weft_contextual_react',
    title: 'Run a declared reaction',
    description:
      "Runs one reaction a work item offered, by its causationToken, with params that fit the reaction's declared parameters. Exactly once in effect: a repeat returns the persisted outcome (repeated: true); a repeat with other params than the committed ones also says paramsDiffer: true with a message (yours were not applied). outcome.status is committed or rejected (a declared business rejection, with its code); reaction_denied means it may not commit now (also with less than 1 s left on the lease: extend it first). With ack: true the work item is also settled in the same transaction (acked: true in the answer), so no weft_contextual_ack is needed after it: use it when the reaction is all the item asks for. With ack: true and next: true the answer also holds your consumer's next work item (next, as weft_contextual_next returns it, waiting up to waitSeconds), so the loop is one call per item; nextError instead says why that pull failed (the reaction stands).",
    input: ReactRequest,
    // Its effect is idempotent; with next: true a repeat leases another item (MaxInFlight above 1).
    annotations: { readOnlyHint: false, idempotentHint: false, openWorldHint: false },
    run: (p, args, d, signal) => d.contextual.react(p, args, signal),
  },
  {
    name: 'weft_get',
    title: 'Read a node',
    description: 'Reads one node (path, nodeType, name, content, version) that you may read.',
    input: GetInput,
    annotations: { readOnlyHint: true, openWorldHint: false },
    async run(p, args, d) {
      const path = parseNodePath((args as z.infer<typeof GetInput>).path)
      const node = await d.nodes.get(p, path)
      if (!node) throw await absentNode(d.nodes, p, path)
      return node
    },
  },
  {
    name: 'weft_query',
    title: 'Find nodes',
    description: 'Lists the nodes you may read under a parent, of a type, with content fields equal to values; `next` continues a long listing.',
    input: QueryInput,
    annotations: { readOnlyHint: true, openWorldHint: false },
    async run(p, args, d) {
      const page = await d.nodes.queryPage(p, nodeQuery(args as z.infer<typeof QueryInput>))
      return page.next === null ? { items: page.items } : { items: page.items, next: page.next }
    },
  },
  {
    name: 'weft_patch',
    title: 'Change a node',
    description: "Applies a merge patch to a node's content (the fields you may write; null removes a field) and returns the node.",
    input: PatchInput,
    annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: true, openWorldHint: false },
    async run(p, args, d) {
      const { path, patch } = args as z.infer<typeof PatchInput>
      const target = parseNodePath(path)
      // [STO10] Its text is checked against the stored content by the write path.
      assertMergePatch(patch, DEFAULT_MAX_JSON_DEPTH, false)
      return d.nodes.patch(p, target, patch, 'http')
    },
  },
  {
    name: 'weft_run',
    title: 'Run a Code node',
    description: "Starts a run of a Code node you may execute, as you; returns the new activity's path (read it with weft_get for Status and Result).",
    input: RunInput,
    annotations: { readOnlyHint: false, idempotentHint: false, openWorldHint: true },
    async run(p, args, d) {
      const { path, inputs, start } = args as z.infer<typeof RunInput>
      if (inputs !== undefined && !isJsonObject(inputs)) throw new WeftError('invalid_request', 'inputs must be a JSON object.')
      const out = await runCode(d.nodes, p, parseNodePath(path), { ...(inputs ? { inputs: inputs as JsonObject } : {}), ...(start !== undefined ? { start } : {}) })
      d.onRunCreated?.(out.path)
      return out
    },
  },
]

/** [MCP1] Underscores only: the contract's tool names. */
export const TOOL_NAMES: readonly string[] = TOOLS.map((t) => t.name)
