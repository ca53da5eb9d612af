import { z } from 'zod'
import { WeftError } from './errors.js'
import {
  ActivityStatus,
  EventSubscriptionStatus,
  ThreadExecutionStatus,
  Role,
  type Permission,
} from './enums.js'
import type { JsonObject, JsonValue } from './json.js'
import { TYPED_TEXT_FIELDS } from './text-fields.js'
import { ContextualDefinitionSchema } from './contextual.js'

/**
 * Who may write a top-level content field (or create/delete a node) of a node type.
 *  - `system`: only the engines' principal.
 *  - `admin`: system, or a caller holding ManageAccess (the Admin role) on the node.
 *  - `owner`: system, the user the node's `ownerField` names (an ActivityLog's `CreatedBy`), or a
 *    caller holding Update on the node. Lets the creator of a run steer it without any role
 *    (a role would also grant Create under it). On create it is Update.
 *  - a Permission: system, or a caller holding that permission on the node.
 */
export type WriteRule = 'system' | 'admin' | 'owner' | Permission

export interface NodeTypeDef {
  readonly name: string
  /** Validates the whole content after a write; unknown fields are kept (additive evolution). */
  readonly content: z.ZodType<unknown>
  /** Rule for fields without an entry in `fields`. */
  readonly defaultWrite: WriteRule
  readonly fields: Readonly<Record<string, WriteRule>>
  /** Who may create a node of this type (checked on the node's own path, i.e. inherited from its parent). */
  readonly create: WriteRule
  readonly delete: WriteRule
  /** The content field naming the user the `owner` rule admits (a user id string). */
  readonly ownerField?: string
  /**
   * Top-level fields whose strings are text that merges by character (a Y.Text in the doc).
   * Permissive types treat every string as text; see shared/text-fields.ts.
   */
  readonly textFields?: ReadonlySet<string>
  /**
   * System fields every node of the type is created with (these values, unless the creator is
   * system and names its own), kept through a replace that leaves them out. [THR26] A Thread's
   * `Posted` map: made once at creation, every later enqueue adds a key to that one map, where two
   * maps made by two first enqueues at once would merge into one and lose the other's keys.
   */
  readonly createdWith?: Readonly<JsonObject>
}

const anyObject = z.looseObject({})
const isoDate = z.string().min(1)

function def(
  name: string,
  content: z.ZodType<unknown>,
  opts: Partial<Omit<NodeTypeDef, 'name' | 'content'>> = {},
): NodeTypeDef {
  return {
    name,
    content,
    defaultWrite: opts.defaultWrite ?? 'Update',
    fields: opts.fields ?? {},
    create: opts.create ?? 'Create',
    delete: opts.delete ?? 'Delete',
    ownerField: opts.ownerField,
    createdWith: opts.createdWith,
    textFields: opts.textFields ?? new Set(Object.prototype.hasOwnProperty.call(TYPED_TEXT_FIELDS, name) ? TYPED_TEXT_FIELDS[name] : []),
  }
}

const enumName = <T extends readonly [string, ...string[]]>(members: T) => z.enum(members)

export const EventDeliverySchema = z.looseObject({
  SubscriptionId: z.string(),
  SubjectId: z.string().nullable().optional(),
  At: isoDate,
  CreatedBy: z.string().nullable().optional(),
})

const builtins: NodeTypeDef[] = [
  def(
    'User',
    z.looseObject({
      Email: z.string().email().optional(),
      FullName: z.string().max(500).optional(),
      PinnedPaths: z.array(z.string()).optional(),
    }),
    { fields: { Email: 'system' }, create: 'system', delete: 'system' },
  ),
  def('Space', anyObject, { delete: 'admin' }),
  def('Group', anyObject, { create: 'Create', delete: 'admin' }),
  // A membership grants whatever the group holds: only a group's admins write it.
  def('Membership', anyObject, { defaultWrite: 'admin', create: 'admin', delete: 'admin' }),
  def(
    'AccessAssignment',
    z.looseObject({
      Subject: z.string().min(1),
      Role: enumName(Role.members as unknown as [string, ...string[]]),
      Denied: z.boolean().optional(),
    }),
    { defaultWrite: 'admin', create: 'admin', delete: 'admin' },
  ),
  def('Document', anyObject),
  def('Invitation', anyObject, { defaultWrite: 'admin', create: 'admin', delete: 'admin' }),
  def(
    'EventSubscription',
    z.looseObject({
      Id: z.string().optional(),
      TriggerType: z.string().optional(),
      ContinuationType: z.string().optional(),
      // Unknown members are kept as strings on purpose: the runner ends them Failed by name.
      Status: z.string().optional(),
    }),
    { defaultWrite: 'admin', create: 'admin', delete: 'admin' },
  ),
  // Activities (DESIGN.md "Activities (contract)", issue 11 and 15). The engine is the sole writer
  // of the log and of who and what runs; the run's creator (CreatedBy), or anyone with Update on
  // it, only requests (RequestedStatus) and fills a draft's Inputs.
  def(
    'ActivityLog',
    z.looseObject({
      Category: z.string().optional(),
      CodePath: z.string().optional(),
      Source: z.string().optional(),
      Language: z.enum(['javascript', 'typescript']).optional(),
      Inputs: anyObject.optional(),
      Status: enumName(ActivityStatus.members as unknown as [string, ...string[]]).optional(),
      RequestedStatus: enumName(ActivityStatus.members as unknown as [string, ...string[]]).nullable().optional(),
      Messages: z.array(z.unknown()).optional(),
      Progress: z.looseObject({ Fraction: z.number().min(0).max(1), Text: z.string().optional() }).nullable().optional(),
      Start: isoDate.nullable().optional(),
      End: isoDate.nullable().optional(),
      CreatedBy: z.string().optional(),
      StartedBy: z.string().optional(),
    }),
    {
      ownerField: 'CreatedBy',
      fields: {
        Status: 'system',
        Messages: 'system',
        Progress: 'system',
        Start: 'system',
        End: 'system',
        ReturnValue: 'system',
        Error: 'system',
        CreatedBy: 'system',
        // Who and what runs ([ACT17]): the starter (checked for Execute when they asked), and
        // the code as it was when the activity was made, fixed at creation.
        StartedBy: 'system',
        Source: 'system',
        Language: 'system',
        CodePath: 'system',
        RequestedStatus: 'owner',
        Inputs: 'owner',
      },
    },
  ),
  def(
    'Code',
    z.looseObject({
      Source: z.string().optional(),
      Language: z.enum(['javascript', 'typescript']).optional(),
      IsExecutable: z.boolean().optional(),
      Inputs: anyObject.optional(),
      ActivityParentPath: z.string().optional(),
      LastActivityPath: z.string().optional(),
    }),
    { fields: { LastActivityPath: 'system' } },
  ),
  // {codePath}/_Check: the syntax check of a Code node's Source, owned by the code-check engine
  // (the executor is esbuild's service). Status: Pending → Checking → Passed | Failed. [ACT16]
  def(
    'CodeCheck',
    z.looseObject({
      Status: z.enum(['Pending', 'Checking', 'Passed', 'Failed']),
      SourceHash: z.string().optional(),
      Errors: z.array(z.looseObject({ Line: z.number().int(), Column: z.number().int(), Text: z.string() })).optional(),
      CheckedAt: isoDate.nullable().optional(),
    }),
    { defaultWrite: 'system', create: 'system', delete: 'system' },
  ),
  // Admin/Partition/{name}: a leaf, written by system and the Admins of the existing top-level
  // node {name} other than Admin ([ACT11]; access-service.ts grants those Admins this node only,
  // node-service.ts keeps the place for a Partition and nothing below it).
  def(
    'Partition',
    z.looseObject({ Namespace: z.string().optional(), DefaultActivityParentPath: z.string().optional() }),
    { defaultWrite: 'admin', create: 'admin', delete: 'admin' },
  ),
  // Threads (DESIGN.md "Threads (contract)", issue 18, [THR1]). The threads engine is the sole
  // writer of the round state; people request a cancel (RequestedStatus, Thread permission) and
  // pick the Agent (Update). Cells are ThreadMessage children, listed in Messages by path.
  def(
    'Thread',
    z.looseObject({
      // Approve: the tools whose calls wait for a person's approval ([THR13]; default patch, create, run).
      Agent: z.looseObject({ Kind: z.enum(['builtin', 'script', 'llm']), CodePath: z.string().optional(), Model: z.string().optional(), Approve: z.array(z.string()).optional() }).optional(),
      Status: enumName(ThreadExecutionStatus.members as unknown as [string, ...string[]]).optional(),
      RequestedStatus: z.enum(['Cancelled']).nullable().optional(),
      Disposition: z.enum(['Completed', 'AwaitingInput', 'Failed']).nullable().optional(),
      Messages: z.array(z.string()).optional(),
      UserMessageIds: z.array(z.string()).optional(),
      IngestedMessageIds: z.array(z.string()).optional(),
      PendingUserMessages: z.array(z.string()).optional(),
      // [THR26] Every posted id, with its posting ordinal (a map: concurrent enqueues all survive a merge).
      Posted: z.record(z.string(), z.number()).optional(),
      HasPending: z.boolean().optional(),
      ExecutionStartedAt: isoDate.nullable().optional(),
      LastActivityAt: isoDate.nullable().optional(),
      ParentPath: z.string().nullable().optional(),
      Round: z.looseObject({ Response: z.string(), Inputs: z.array(z.string()) }).nullable().optional(),
      Question: z.string().nullable().optional(),
      // [THR13][THR14] A tool call waiting for a person: the engine's PendingApproval, a person's
      // ApprovalAnswer (Update), and who answered (ApprovalBy, stamped by the write rule).
      PendingApproval: z.looseObject({ Id: z.string(), Tool: z.string(), Args: z.unknown(), Summary: z.string(), RequestedAt: isoDate }).nullable().optional(),
      ApprovalAnswer: z.object({ Id: z.string().min(1).max(200), Decision: z.enum(['Approved', 'Denied']) }).nullable().optional(),
      ApprovalBy: z.string().nullable().optional(),
      // [THR27] Who last changed Agent, and the posting ordinal from which it applies (the write rule's).
      AgentSetBy: z.string().optional(),
      AgentSince: z.number().int().min(0).optional(),
    }),
    {
      fields: {
        ExecutionStatus: 'system',
        Status: 'system',
        Disposition: 'system',
        Messages: 'system',
        UserMessageIds: 'system',
        IngestedMessageIds: 'system',
        PendingUserMessages: 'system',
        Posted: 'system',
        HasPending: 'system',
        ExecutionStartedAt: 'system',
        LastActivityAt: 'system',
        ParentPath: 'system',
        Round: 'system',
        Question: 'system',
        PendingApproval: 'system',
        ApprovalBy: 'system',
        AgentSetBy: 'system',
        AgentSince: 'system',
        ApprovalAnswer: 'Update',
        RequestedStatus: 'Thread',
        Agent: 'Update',
      },
      createdWith: { Posted: {} },
    },
  ),
  // A message of a thread ([THR1]): made by system (the posting route, the engine). A user may
  // create their OWN user cell (offline composing): the write rule holds Role to "user", Author
  // to the writer and refuses any later change; the engine then ingests it by its id.
  def(
    'ThreadMessage',
    z.looseObject({
      Role: z.enum(['user', 'assistant', 'tool']),
      Author: z.string().min(1),
      Text: z.string(),
      OnBehalfOf: z.array(z.string()).optional(),
      ToolCalls: z.array(z.unknown()).optional(),
      Error: z.string().nullable().optional(),
      CreatedAt: isoDate,
      // [WEB71] An agent's cell whose round was stopped (a cancel aborted it), answered or not.
      Stopped: z.boolean().optional(),
      // [THR32] A hand-back's cell: the node it reports on (a sub-thread), for a link to it.
      About: z.string().optional(),
    }),
    { defaultWrite: 'Thread', create: 'Thread', delete: 'system' },
  ),
  def('Post', anyObject),
  // [CTX1] Contextual agent subscriptions (issue 19): a definition, compiled on write by the
  // contextual service's write rule (bounds refused by name; Hash = its identity, system's).
  def('ContextualSubscription', ContextualDefinitionSchema, { fields: { Hash: 'system' } }),
]

const registry = new Map<string, NodeTypeDef>(builtins.map((d) => [d.name, d]))

/** Node types a module registers at start-up; a name can be claimed once. */
export function registerNodeType(defn: NodeTypeDef): void {
  if (registry.has(defn.name)) throw new Error(`Node type ${defn.name} is already registered.`)
  registry.set(defn.name, defn)
}

const NODE_TYPE_NAME = /^[A-Za-z][A-Za-z0-9_.]{0,99}$/

/** Unknown types behave like `Document` (any JSON object): modules may bring their own. */
export function nodeTypeDef(nodeType: string): NodeTypeDef {
  const known = registry.get(nodeType)
  if (known) return known
  if (!NODE_TYPE_NAME.test(nodeType)) {
    throw new WeftError('invalid_node_type', `Invalid node type ${JSON.stringify(nodeType)}: use letters, digits, _ and . (start with a letter).`)
  }
  return { ...def(nodeType, anyObject), name: nodeType }
}

/** True when any JSON object is valid content: a Yjs update then needs no trial application. */
export function isPermissiveContent(nodeType: string): boolean {
  return nodeTypeDef(nodeType).content === anyObject
}

export function knownNodeTypes(): string[] {
  return [...registry.keys()]
}

/** Throws `invalid_content` naming the first offending field. */
export function validateContent(nodeType: string, content: JsonObject): void {
  const result = nodeTypeDef(nodeType).content.safeParse(content)
  if (!result.success) {
    const issue = result.error.issues[0]
    const where = issue && issue.path.length ? issue.path.join('.') : 'content'
    throw new WeftError('invalid_content', `Content of a ${nodeType} is invalid at ${where}: ${issue?.message ?? 'invalid'}.`)
  }
}

/**
 * Validates only the given top-level fields of `content` (a Yjs update that touched those
 * fields): the cost follows the change, not the node. Falls back to the whole content when the
 * type's schema is not a plain object of fields.
 */
export function validateFields(nodeType: string, content: JsonObject, fields: Iterable<string>): void {
  const schema = nodeTypeDef(nodeType).content
  if (!(schema instanceof z.ZodObject)) return validateContent(nodeType, content)
  const shape = schema.shape as Record<string, z.ZodType<unknown>>
  for (const field of fields) {
    if (!Object.prototype.hasOwnProperty.call(shape, field)) continue
    const value = Object.prototype.hasOwnProperty.call(content, field) ? content[field] : undefined
    const result = shape[field]!.safeParse(value)
    if (!result.success) {
      const issue = result.error.issues[0]
      const where = [field, ...(issue?.path ?? [])].join('.')
      throw new WeftError('invalid_content', `Content of a ${nodeType} is invalid at ${where}: ${issue?.message ?? 'invalid'}.`)
    }
  }
}

/**
 * [ACT12] Validates items appended to the array field `field` as if the whole array were checked,
 * at the cost of the items: exact for an element-wise array schema without length bounds (the
 * rest of the array was valid before); anything else checks the whole array, `whole()`.
 */
export function validateAppend(nodeType: string, field: string, items: readonly unknown[], whole: () => JsonObject): void {
  const schema = nodeTypeDef(nodeType).content
  if (!(schema instanceof z.ZodObject)) return validateContent(nodeType, whole())
  if (!Object.prototype.hasOwnProperty.call(schema.shape, field)) return
  let fieldSchema = (schema.shape as Record<string, z.ZodType<unknown>>)[field]
  if (fieldSchema instanceof z.ZodOptional) fieldSchema = fieldSchema.unwrap() as z.ZodType<unknown>
  // An array schema with checks (a length bound, a refinement) is about the whole array.
  const elementWise = fieldSchema instanceof z.ZodArray && !((fieldSchema._def as { checks?: unknown[] }).checks?.length)
  if (!elementWise) return validateFields(nodeType, whole(), [field])
  validateFields(nodeType, { [field]: [...items] as JsonValue[] }, [field])
}

export function fieldRule(nodeType: string, field: string): WriteRule {
  const d = nodeTypeDef(nodeType)
  // Own members only: a field named `constructor` or `__proto__` must not pick up Object.prototype.
  return Object.prototype.hasOwnProperty.call(d.fields, field) ? d.fields[field]! : d.defaultWrite
}

export const SUBSCRIPTION_STATUS_NAMES = EventSubscriptionStatus.members
