import { z } from 'zod'
import {
  nodeTypeDef,
  JsonObjectInput,
  SYSTEM,
  WeftError,
  lastSegment,
  parseNodePath,
  userPrincipal,
  type JsonObject,
  type JsonValue,
  type MeshNode,
  type NodePath,
  type Permission,
  type UserId,
} from '../../../shared/index.js'
import { checkFieldRules, ownerOf, type NodeApi } from '../../nodes/index.js'
import { cutText } from '../../../shared/storable-text.js'

/**
 * [THR11] The mesh tools of a round, as the round's authority: a call is allowed only when EVERY
 * author of the round's messages (and each principal in `also`, e.g. the person who approved it)
 * could make it themselves — the same access and field checks a person's own write meets — so no
 * message borrows another author's rights. The write itself is then made as the first author,
 * through the node API (which checks again). A refusal is a WeftError; nothing is done.
 */

/** The arguments each tool takes (what the model is told, and what a call is checked against). */
export const TOOL_ARGS = {
  read: z.object({ path: z.string().describe('The node path to read, e.g. "space/notes/today".') }),
  query: z.object({
    parent: z.string().optional().describe('List the children of this path.'),
    nodeType: z.string().optional(),
    where: z.record(z.string(), z.string()).optional().describe('Equality on top-level content fields.'),
    limit: z.number().int().min(1).max(100).optional(),
  }),
  patch: z.object({ path: z.string(), patch: JsonObjectInput.describe('A JSON merge patch of the content.') }),
  create: z.object({ path: z.string(), nodeType: z.string(), name: z.string().optional(), content: JsonObjectInput }),
  run: z.object({ codePath: z.string().describe('The path of a Code node.'), inputs: JsonObjectInput.optional() }),
  delegate: z.object({ task: z.string().min(1).describe('The task for a sub-thread.') }),
} as const

export type ToolName = keyof typeof TOOL_ARGS

export const TOOL_DESCRIPTIONS: Record<ToolName, string> = {
  read: 'Read one node of the mesh (its type, name and JSON content).',
  query: 'List nodes of the mesh by parent, node type and field values.',
  patch: 'Change fields of a node (JSON merge patch of its content).',
  create: 'Create a node.',
  run: 'Run a Code node as an activity and get its result.',
  delegate: 'Hand a task to a sub-thread with the same agent and wait for its answer.',
}

export function isToolName(t: string): t is ToolName {
  return Object.prototype.hasOwnProperty.call(TOOL_ARGS, t)
}

/** The most characters of a tool's result the model is given (and the cell keeps). */
export const MAX_RESULT_CHARS = 20_000

function parseArgs<T extends ToolName>(tool: T, args: unknown): z.infer<(typeof TOOL_ARGS)[T]> {
  const parsed = TOOL_ARGS[tool].safeParse(args)
  if (!parsed.success) throw new WeftError('invalid_request', `Bad arguments for ${tool}: ${parsed.error.issues.map((i) => `${i.path.join('.') || 'args'} ${i.message}`).join('; ')}.`)
  return parsed.data as z.infer<(typeof TOOL_ARGS)[T]>
}

function asJson(node: MeshNode | null): JsonValue {
  return node ? ({ path: node.path, nodeType: node.nodeType, name: node.name, content: node.content } as unknown as JsonValue) : null
}

/** A result cut to MAX_RESULT_CHARS of JSON (a note says so), so one call cannot flood the round. */
export function bounded(v: JsonValue): JsonValue {
  const s = JSON.stringify(v) ?? 'null'
  return s.length <= MAX_RESULT_CHARS ? v : { truncated: true, json: cutText(s, MAX_RESULT_CHARS) }
}

export interface RoundToolDeps {
  delegate(task: string, signal: AbortSignal, key: string): Promise<{ answer: string; question: string | null }>
  run(codePath: NodePath, inputs: JsonObject, principals: readonly UserId[], signal: AbortSignal): Promise<JsonValue>
}

export class RoundTools {
  private delegations = 0

  constructor(
    private readonly nodes: NodeApi,
    private readonly authors: readonly UserId[],
    private readonly deps: RoundToolDeps,
  ) {}

  private principals(also: readonly string[]): UserId[] {
    if (this.authors.length === 0) throw new WeftError('forbidden', 'Nobody behind this round may use a tool.')
    return [...new Set([...this.authors, ...also.filter((a) => a !== 'system')])] as UserId[]
  }

  private need(who: readonly UserId[], permission: Permission, path: NodePath): void {
    for (const u of who) {
      if (!this.nodes.permissions(userPrincipal(u), path).has(permission)) {
        throw new WeftError('forbidden', `${u} lacks ${permission} on ${path}; the round acts only with the rights every author holds.`)
      }
    }
  }

  /** The field rules each principal meets for writing `fields` of `nodeType` at `path`. */
  private fields(who: readonly UserId[], nodeType: string, path: NodePath, fields: string[], owner?: string): void {
    for (const u of who) {
      const p = userPrincipal(u)
      checkFieldRules(p, this.nodes.permissions(p, path), nodeType, path, fields, owner)
    }
  }

  /**
   * [THR16] A write is made in one person's name (the first author's): a type whose writes record
   * their writer (a write rule stamps a message's Author, a run's StartedBy, who set an agent or
   * answered an approval; an owner field) would record one author for a round of several, and lend
   * her name to the others. Refused, as a run is.
   */
  private oneWriter(who: readonly UserId[], nodeType: string): void {
    if (who.length > 1 && (this.nodes.hasWriteRule(nodeType) || nodeTypeDef(nodeType).ownerField !== undefined)) {
      throw new WeftError('forbidden', `A ${nodeType} records who writes it, and this round speaks for ${who.length} (${who.join(', ')}): ask in a round of your own.`)
    }
  }

  async authorize(tool: string, args: unknown, also: readonly string[]): Promise<void> {
    await this.check(tool, args, also)
  }

  private async check(tool: string, args: unknown, also: readonly string[]): Promise<UserId[]> {
    if (!isToolName(tool)) throw new WeftError('invalid_request', `No tool named ${tool}.`)
    const who = this.principals(also)
    switch (tool) {
      case 'read':
        this.need(who, 'Read', parseNodePath(parseArgs('read', args).path))
        break
      case 'query': {
        const q = parseArgs('query', args)
        if (q.parent !== undefined) this.need(who, 'Read', parseNodePath(q.parent))
        break
      }
      case 'patch': {
        const a = parseArgs('patch', args)
        const path = parseNodePath(a.path)
        const cur = await this.nodes.get(SYSTEM, path)
        this.need(who, 'Read', path)
        if (!cur) throw new WeftError('not_found', `No node at ${path}.`)
        this.need(who, 'Update', path)
        this.fields(who, cur.nodeType, path, Object.keys(a.patch), ownerOf(cur))
        this.oneWriter(who, cur.nodeType)
        break
      }
      case 'create': {
        const a = parseArgs('create', args)
        const path = parseNodePath(a.path)
        this.need(who, 'Create', path)
        this.fields(who, a.nodeType, path, Object.keys(a.content))
        this.oneWriter(who, a.nodeType)
        break
      }
      case 'run':
        this.need(who, 'Execute', parseNodePath(parseArgs('run', args).codePath))
        break
      case 'delegate':
        parseArgs('delegate', args)
        break
      default:
        return tool satisfies never
    }
    return who
  }

  /** `key` names a delegated sub-thread among several of one round (a tool call's id). */
  async call(tool: string, args: unknown, also: readonly string[], signal: AbortSignal, key?: string): Promise<JsonValue> {
    const who = await this.check(tool, args, also)
    signal.throwIfAborted()
    const as = userPrincipal(who[0]!)
    switch (tool as ToolName) {
      case 'read':
        return bounded(asJson(await this.nodes.get(as, parseNodePath(parseArgs('read', args).path))))
      case 'query': {
        const q = parseArgs('query', args)
        const rows = await this.nodes.query(as, {
          ...(q.parent !== undefined ? { parent: parseNodePath(q.parent) } : {}),
          ...(q.nodeType !== undefined ? { nodeType: q.nodeType } : {}),
          ...(q.where !== undefined ? { where: q.where } : {}),
          limit: q.limit ?? 20,
        })
        // Only what every principal reads.
        const seen = rows.filter((n) => who.every((u) => this.nodes.permissions(userPrincipal(u), n.path).has('Read')))
        return bounded(seen.map(asJson))
      }
      case 'patch': {
        const a = parseArgs('patch', args)
        return bounded(asJson(await this.nodes.patch(as, parseNodePath(a.path), a.patch as JsonObject, 'engine')))
      }
      case 'create': {
        const a = parseArgs('create', args)
        const path = parseNodePath(a.path)
        return bounded(asJson(await this.nodes.create(as, path, { nodeType: a.nodeType, name: a.name ?? lastSegment(path), content: a.content as JsonObject }, 'engine')))
      }
      case 'run': {
        const a = parseArgs('run', args)
        return bounded(await this.deps.run(parseNodePath(a.codePath), (a.inputs ?? {}) as JsonObject, who, signal))
      }
      case 'delegate': {
        const out = await this.deps.delegate(parseArgs('delegate', args).task, signal, segmentKey(key ?? String(++this.delegations)))
        return out.question !== null ? { question: out.question } : { answer: out.answer }
      }
    }
  }
}

/** A tool call id made safe for a path segment suffix. */
function segmentKey(key: string): string {
  return key.replace(/[^A-Za-z0-9_-]/g, '_').slice(0, 40) || 'x'
}
