import { z } from 'zod'

/**
 * Contextual agent subscriptions (issue 19, DESIGN.md "Contextual agent subscriptions
 * (contract)", docs/SPEC.md [CTX1]–[CTX40]): the content of a `ContextualSubscription` node.
 * The schema checks shapes; the bounds below are checked by the compiler
 * (sync-server/contextual/definition.ts), which refuses a broken bound with its own named error.
 */

/** [CTX3] Bounds of a definition. */
export const CONTEXTUAL_BOUNDS = {
  maxHydrationQueries: 16,
  maxReactions: 32,
  maxRowsPerQuery: 100,
  maxParameters: 16,
  maxEventTypes: 16,
  leaseSeconds: { min: 5, max: 900, default: 60 },
  maxInFlight: { min: 1, max: 8, default: 1 },
  maxAttempts: { min: 1, max: 100, default: 10 },
  /** A nack's delay is at most this (seconds). */
  maxNackDelaySeconds: 900,
  /** A long poll waits at most this (seconds). */
  maxWaitSeconds: 60,
  /** A definition's JSON (its compile runs on every write of it, and it is kept compiled). */
  maxDefinitionBytes: 64 * 1024,
  /** The JSON of a work item's event node and hydration results together. */
  maxContextBytes: 2 * 1024 * 1024,
} as const

export const ContextualCommands = ['create', 'patch', 'delete', 'request_activity_status', 'post_thread_message'] as const
export type ContextualCommand = (typeof ContextualCommands)[number]

export const ContextualEventKinds = ['Created', 'Updated', 'Deleted'] as const

/**
 * [CTX57] An identifier (Operation, a reaction, parameter or hydration name): letters and digits
 * of any script and _, starting with a letter, at most 64 characters (combining marks allowed
 * after the first, as Devanagari or Thai words need them). No protocol needs them ASCII: MCP tool
 * names are fixed (weft_contextual_*) and a reaction's name is an argument's value; gRPC carries
 * them as strings. Node paths stay ASCII ([PATH]), so a Target is a template of those.
 */
export const CONTEXTUAL_NAME = /^\p{L}[\p{L}\p{M}\p{N}_]{0,63}$/u

const Name = z
  .string()
  .regex(CONTEXTUAL_NAME, 'use letters and digits of any script and _ (start with a letter, at most 64)')
  // A name every JavaScript object has (constructor, toString, ...): an optional parameter so named
  // made every call that left it out fail (the schema read the object's inherited member).
  .refine((n) => !(n in Object.prototype), 'is a name every object has already (constructor, toString, valueOf, ...); choose another')
/** A path template: `{event.path}`, `{event.parent}`, `{event.name}`, `{param.NAME}` are replaced. */
const Template = z.string().min(1).max(1000)

const ParameterSpec = z.strictObject({
  Type: z.enum(['string', 'number', 'boolean', 'json']),
  Required: z.boolean().optional(),
  MaxLength: z.number().int().min(1).max(100_000).optional(),
})

const HydrationSpec = z.union([
  z.strictObject({ Get: Template }),
  z.strictObject({
    Children: Template,
    NodeType: z.string().min(1).max(100).optional(),
    Limit: z.number().int().min(1),
  }),
])

const ReactionSpec = z.strictObject({
  Command: z.enum(ContextualCommands),
  Target: Template,
  /** For `create`: the new node's type. */
  NodeType: z.string().min(1).max(100).optional(),
  Parameters: z.record(Name, ParameterSpec).optional(),
  /** Declared business-rejection outcomes: error codes of the command that end as an outcome. */
  Rejections: z.array(z.string().regex(/^[a-z_]{1,64}$/)).max(16).optional(),
})

/**
 * [WEB134] The fields of a ContextualSubscription its definition hash covers (the server's
 * canonical definition, sync-server/contextual/definition.ts; a unit test holds the two together):
 * a change of any of them makes a new definition, and its consumers new ones. Other fields (a
 * description) are not the definition.
 */
export const CONTEXTUAL_DEFINITION_FIELDS: readonly string[] = ['Operation', 'Events', 'Parameters', 'Hydration', 'Reactions', 'Limits']

export const ContextualDefinitionSchema = z.looseObject({
  Operation: Name,
  Events: z.strictObject({
    NodeTypes: z.array(z.string().min(1).max(100)).min(1),
    Kinds: z.array(z.enum(ContextualEventKinds)).min(1).max(3),
    PathPrefix: z.string().min(1).max(1000),
  }),
  Parameters: z.record(Name, ParameterSpec).optional(),
  Hydration: z.record(Name, HydrationSpec).optional(),
  Reactions: z.record(Name, ReactionSpec),
  Limits: z
    .strictObject({
      LeaseSeconds: z.number().int().optional(),
      MaxInFlight: z.number().int().optional(),
      MaxAttempts: z.number().int().optional(),
    })
    .optional(),
  /** The compiled identity (sha-256 of the canonical definition), written by system on every write. */
  Hash: z.string().optional(),
})

export type ContextualDefinitionContent = z.infer<typeof ContextualDefinitionSchema>
export type ContextualParameterSpec = z.infer<typeof ParameterSpec>
export type ContextualHydrationSpec = z.infer<typeof HydrationSpec>
export type ContextualReactionSpec = z.infer<typeof ReactionSpec>
