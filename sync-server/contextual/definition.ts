import { z } from 'zod'
import {
  CONTEXTUAL_BOUNDS,
  ContextualDefinitionSchema,
  WeftError,
  tryParseNodePath,
  type ContextualDefinitionContent,
  type ContextualHydrationSpec,
  type ContextualParameterSpec,
  type ContextualReactionSpec,
  type JsonObject,
  type JsonValue,
} from '../../shared/index.js'
import type { EventFilter } from '../storage/index.js'
import { canonicalJson, sha256Hex } from './canonical.js'
import { checkNodeType, checkTemplate } from './template.js'

/**
 * [CTX1]–[CTX4] A ContextualSubscription compiled: validated, bounds checked (each broken bound
 * refused with its own named error), parameter schemas built with zod, and its identity the
 * sha-256 of the canonical definition (the known fields only, keys sorted; `Hash` excluded).
 */
export interface CompiledDefinition {
  readonly hash: string
  readonly operation: string
  /** The events the subscription asks for, as the lease's filter (and the long poll's wake-up test). */
  readonly events: Readonly<EventFilter>
  readonly paramsSchema: z.ZodType<JsonObject>
  readonly hydration: ReadonlyArray<{ readonly name: string; readonly spec: ContextualHydrationSpec }>
  readonly reactions: ReadonlyMap<string, CompiledReaction>
  readonly limits: { readonly leaseMs: number; readonly maxInFlight: number; readonly maxAttempts: number }
}

export interface CompiledReaction {
  readonly name: string
  readonly spec: ContextualReactionSpec
  readonly params: z.ZodType<JsonObject>
  /** The command's id in the idempotency key: the canonical reaction spec's hash. */
  readonly commandId: string
}

function valueSchema(p: ContextualParameterSpec): z.ZodType<JsonValue> {
  switch (p.Type) {
    case 'string':
      return (p.MaxLength ? z.string().max(p.MaxLength) : z.string().max(100_000)) as z.ZodType<JsonValue>
    case 'number':
      return z.number().finite() as z.ZodType<JsonValue>
    case 'boolean':
      return z.boolean() as z.ZodType<JsonValue>
    case 'json':
      // Kept as parsed: z.json() rebuilt objects by assignment and dropped a `__proto__` member,
      // which a PATCH of the same value keeps (the reaction answered committed, the member lost).
      return z.custom<JsonValue>((v) => isJsonValue(v), { message: 'Expected a JSON value' })
    default:
      p.Type satisfies never
      throw new Error('unreachable')
  }
}

/** JSON as a request may carry it: finite numbers, strings, booleans, null, arrays and plain objects (depth is bounded by the request's check). */
function isJsonValue(v: unknown): boolean {
  if (v === null || typeof v === 'string' || typeof v === 'boolean') return true
  if (typeof v === 'number') return Number.isFinite(v)
  if (Array.isArray(v)) return v.every(isJsonValue)
  if (typeof v !== 'object') return false
  const proto = Object.getPrototypeOf(v) as unknown
  return (proto === Object.prototype || proto === null) && Object.values(v as object).every(isJsonValue)
}

/** A strict object schema from declared parameters (unknown keys refused). */
export function paramsSchemaOf(params: Readonly<Record<string, ContextualParameterSpec>> | undefined): z.ZodType<JsonObject> {
  const shape: Record<string, z.ZodType<unknown>> = {}
  for (const [name, p] of Object.entries(params ?? {})) shape[name] = p.Required ? valueSchema(p) : valueSchema(p).optional()
  return z.strictObject(shape) as unknown as z.ZodType<JsonObject>
}

function within(value: number | undefined, b: { min: number; max: number; default: number }, code: ConstructorParameters<typeof WeftError>[0], what: string): number {
  const v = value ?? b.default
  if (v < b.min || v > b.max) throw new WeftError(code, `${what} must be between ${b.min} and ${b.max} (got ${v}).`)
  return v
}

/** The definition's canonical form: what its hash covers. */
function canonicalDefinition(d: ContextualDefinitionContent): string {
  return canonicalJson({
    Operation: d.Operation,
    Events: { ...d.Events, NodeTypes: [...new Set(d.Events.NodeTypes)].sort(), Kinds: [...new Set(d.Events.Kinds)].sort() },
    Parameters: d.Parameters ?? {},
    Hydration: d.Hydration ?? {},
    Reactions: d.Reactions,
    Limits: d.Limits ?? {},
  })
}

/** [CTX58] The checks of a definition being written (see compileDefinition). */
function checkWritten(d: ContextualDefinitionContent, hydration: ReadonlyArray<[string, ContextualHydrationSpec]>, reactions: ReadonlyArray<[string, ContextualReactionSpec]>): void {
  if (!tryParseNodePath(d.Events.PathPrefix)) {
    throw new WeftError('contextual_invalid_definition', `Events.PathPrefix ${JSON.stringify(d.Events.PathPrefix)} is not a node path (segments of the ASCII letters a-z and A-Z, digits and _ . @ -). It need not exist yet.`)
  }
  d.Events.NodeTypes.forEach((t, i) => checkNodeType(t, `Events.NodeTypes.${i}`))
  const params = d.Parameters ?? {}
  for (const [name, spec] of hydration) {
    if ('Get' in spec) checkTemplate(spec.Get, `Hydration.${name}.Get`, params)
    else {
      checkTemplate(spec.Children, `Hydration.${name}.Children`, params)
      if (spec.NodeType !== undefined) checkNodeType(spec.NodeType, `Hydration.${name}.NodeType`)
    }
  }
  for (const [name, r] of reactions) {
    checkTemplate(r.Target, `Reactions.${name}.Target`, params, r.Parameters)
    if (r.NodeType !== undefined) checkNodeType(r.NodeType, `Reactions.${name}.NodeType`)
  }
}

/**
 * `write`: the definition is being written ([CTX58]: its templates, prefix and node types are
 * checked too). A stored one is compiled without those checks, so a definition written before
 * them keeps its consumers working.
 */
export function compileDefinition(content: JsonObject, opts: { write?: boolean } = {}): CompiledDefinition {
  const bytes = Buffer.byteLength(JSON.stringify(content))
  if (bytes > CONTEXTUAL_BOUNDS.maxDefinitionBytes) {
    throw new WeftError('contextual_invalid_definition', `A ContextualSubscription is at most ${CONTEXTUAL_BOUNDS.maxDefinitionBytes / 1024} kB of JSON (this one is ${Math.ceil(bytes / 1024)} kB).`)
  }
  const parsed = ContextualDefinitionSchema.safeParse(content)
  if (!parsed.success) {
    const issue = parsed.error.issues[0]
    const where = issue && issue.path.length ? issue.path.join('.') : 'content'
    // A refused name (a record's key) says why, not only "Invalid key in record".
    const why = issue?.code === 'invalid_key' ? issue.issues[0]?.message : issue?.message
    throw new WeftError('contextual_invalid_definition', `ContextualSubscription is invalid at ${where}: ${why ?? 'invalid'}.`)
  }
  const d = parsed.data
  const hydration = Object.entries(d.Hydration ?? {})
  if (hydration.length > CONTEXTUAL_BOUNDS.maxHydrationQueries) {
    throw new WeftError('contextual_too_many_queries', `At most ${CONTEXTUAL_BOUNDS.maxHydrationQueries} hydration queries (got ${hydration.length}).`)
  }
  for (const [name, spec] of hydration) {
    if ('Limit' in spec && spec.Limit > CONTEXTUAL_BOUNDS.maxRowsPerQuery) {
      throw new WeftError('contextual_too_many_rows', `Hydration query ${name} reads at most ${CONTEXTUAL_BOUNDS.maxRowsPerQuery} rows (Limit ${spec.Limit}).`)
    }
  }
  const reactions = Object.entries(d.Reactions)
  if (reactions.length > CONTEXTUAL_BOUNDS.maxReactions) {
    throw new WeftError('contextual_too_many_reactions', `At most ${CONTEXTUAL_BOUNDS.maxReactions} reactions (got ${reactions.length}).`)
  }
  if (reactions.length === 0) throw new WeftError('contextual_invalid_definition', 'A ContextualSubscription declares at least one reaction.')
  if (Object.keys(d.Parameters ?? {}).length > CONTEXTUAL_BOUNDS.maxParameters) {
    throw new WeftError('contextual_invalid_definition', `At most ${CONTEXTUAL_BOUNDS.maxParameters} parameters.`)
  }
  if (d.Events.NodeTypes.length > CONTEXTUAL_BOUNDS.maxEventTypes) {
    throw new WeftError('contextual_invalid_definition', `At most ${CONTEXTUAL_BOUNDS.maxEventTypes} event node types.`)
  }
  for (const [name, r] of reactions) {
    if (Object.keys(r.Parameters ?? {}).length > CONTEXTUAL_BOUNDS.maxParameters) {
      throw new WeftError('contextual_invalid_definition', `Reaction ${name} declares at most ${CONTEXTUAL_BOUNDS.maxParameters} parameters.`)
    }
    if (r.Command === 'create' && !r.NodeType) throw new WeftError('contextual_invalid_definition', `Reaction ${name} creates a node: give its NodeType.`)
  }
  // [CTX58] What can be known wrong at write is refused at write, with the field's path: a reaction
  // or query whose template can never be a path was silently never offered (or always null).
  if (opts.write) checkWritten(d, hydration, reactions)
  const leaseSeconds = within(d.Limits?.LeaseSeconds, CONTEXTUAL_BOUNDS.leaseSeconds, 'contextual_lease_out_of_range', 'Limits.LeaseSeconds')
  const maxInFlight = within(d.Limits?.MaxInFlight, CONTEXTUAL_BOUNDS.maxInFlight, 'contextual_in_flight_out_of_range', 'Limits.MaxInFlight')
  const maxAttempts = within(d.Limits?.MaxAttempts, CONTEXTUAL_BOUNDS.maxAttempts, 'contextual_attempts_out_of_range', 'Limits.MaxAttempts')
  const compiledReactions = new Map<string, CompiledReaction>()
  for (const [name, spec] of reactions) {
    compiledReactions.set(name, { name, spec, params: paramsSchemaOf(spec.Parameters), commandId: sha256Hex(canonicalJson(spec)).slice(0, 32) })
  }
  return {
    hash: sha256Hex(canonicalDefinition(d)),
    operation: d.Operation,
    events: { nodeTypes: [...new Set(d.Events.NodeTypes)], kinds: [...new Set(d.Events.Kinds)], prefix: d.Events.PathPrefix },
    paramsSchema: paramsSchemaOf(d.Parameters),
    hydration: hydration.map(([name, spec]) => ({ name, spec })),
    reactions: compiledReactions,
    limits: { leaseMs: leaseSeconds * 1000, maxInFlight, maxAttempts },
  }
}
