import {
  readChangeKind,
  readSubscriptionStatus,
  readTriggerType,
  type JsonObject,
  type JsonValue,
  type MeshChangeKind,
  type MeshNode,
} from '../../../shared/index.js'

/**
 * The runner's in-memory view of one PENDING subscription: only what the live paths need to
 * route an event to it (index key, timer, watch). The node stays the source of truth: the
 * content is re-read inside the claim before anything is written.
 */
export type Trigger =
  | { type: 'NodeChange'; nodeType: string; kind: MeshChangeKind; field: string | null; value: string | null }
  | { type: 'Timer'; fireAt: number }
  | {
      type: 'NodeStatus'
      watchPath: string
      statusField: string
      restingValues: readonly string[]
      requireActiveFirst: boolean
      observedActive: boolean
      /**
       * [THR23] A resting status does not count while this field of the watched node is one of
       * `holdValues` (a thread resting on a question: Disposition AwaitingInput). null: no hold.
       */
      holdField: string | null
      holdValues: readonly string[]
    }

export interface PendingEntry {
  id: string
  path: string
  trigger: Trigger
  /** ms since epoch; NaN when the node does not say. */
  createdAt: number
}

/** What a subscription node means to the runner right now. */
export type Classified =
  | { state: 'pending'; entry: PendingEntry }
  | { state: 'terminal' }
  /** Pending, but something this build cannot run: end it Failed with the reason. */
  | { state: 'invalid'; reason: string }

const DEFAULT_STATUS_FIELD = 'Status'
/** The field names a node query accepts (storage/query.ts). */
const FIELD_NAME = /^[A-Za-z0-9_]+$/

export function triggerSignature(t: Trigger): string {
  switch (t.type) {
    case 'NodeChange':
      return `NC|${t.nodeType}|${t.kind}|${t.field ?? ''}|${t.value ?? ''}`
    case 'Timer':
      return `T|${t.fireAt}`
    case 'NodeStatus':
      return `NS|${t.watchPath}|${t.statusField}|${t.restingValues.join(',')}|${t.requireActiveFirst}|${t.holdField ?? ''}|${t.holdValues.join(',')}`
    default:
      return t satisfies never
  }
}

/**
 * Reads a subscription node without a schema pass: at boot this runs for every pending
 * subscription (100,000 invites), so it reads the few trigger fields directly. The full schema
 * check happens when a subscription fires.
 */
export function classifySubscription(node: MeshNode): Classified {
  const content = node.content as JsonObject
  const status = readSubscriptionStatus(content.Status ?? 'Pending')
  if (!status.known) return { state: 'invalid', reason: `Unknown ${status.described}.` }
  if (status.value !== 'Pending') return { state: 'terminal' }
  const trigger = readTrigger(content)
  if ('reason' in trigger) return { state: 'invalid', reason: trigger.reason }
  const createdAt = typeof content.CreatedAt === 'string' ? Date.parse(content.CreatedAt) : NaN
  return { state: 'pending', entry: { id: idFromPath(node.path), path: node.path, trigger, createdAt } }
}

const str = (v: JsonValue | undefined): string | null => (typeof v === 'string' && v !== '' ? v : null)

function readTrigger(c: JsonObject): Trigger | { reason: string } {
  const type = readTriggerType(c.TriggerType)
  if (!type.known) return { reason: `Unknown ${type.described}: this build cannot run that trigger.` }
  switch (type.value) {
    case 'NodeChange': {
      const nodeType = str(c.TriggerNodeType)
      if (!nodeType) return { reason: 'A NodeChange subscription needs TriggerNodeType.' }
      const kind = readChangeKind(c.TriggerKind ?? 'Created')
      if (!kind.known) return { reason: `Unknown ${kind.described}.` }
      const field = str(c.MatchField)
      const value = c.MatchValue
      if (field !== null && !FIELD_NAME.test(field)) return { reason: `MatchField ${JSON.stringify(field)} is not a content field name (letters, digits and _).` }
      if (field !== null && (value === null || value === undefined || typeof value === 'object')) {
        return { reason: `MatchField ${field} needs a MatchValue.` }
      }
      return { type: 'NodeChange', nodeType, kind: kind.value, field, value: field === null ? null : String(value) }
    }
    case 'Timer': {
      const fireAt = Date.parse(str(c.FireAt) ?? '')
      if (!Number.isFinite(fireAt)) return { reason: `A Timer subscription needs a valid FireAt (got ${JSON.stringify(c.FireAt ?? null)}).` }
      return { type: 'Timer', fireAt }
    }
    case 'NodeStatus': {
      const watchPath = str(c.WatchPath)
      if (!watchPath) return { reason: 'A NodeStatus subscription needs WatchPath.' }
      const resting = Array.isArray(c.RestingValues) ? c.RestingValues.filter((v): v is string => typeof v === 'string') : []
      if (resting.length === 0) return { reason: 'A NodeStatus subscription needs RestingValues.' }
      const holdField = str(c.HoldField)
      const holdValues = Array.isArray(c.HoldValues) ? c.HoldValues.filter((v): v is string => typeof v === 'string') : []
      if (holdField !== null && !FIELD_NAME.test(holdField)) return { reason: `HoldField ${JSON.stringify(holdField)} is not a content field name (letters, digits and _).` }
      if (holdField !== null && holdValues.length === 0) return { reason: `HoldField ${holdField} needs HoldValues.` }
      return {
        type: 'NodeStatus',
        watchPath,
        statusField: str(c.StatusField) ?? DEFAULT_STATUS_FIELD,
        restingValues: resting,
        requireActiveFirst: c.RequireActiveFirst === true,
        observedActive: Boolean(c.ObservedActiveAt),
        holdField,
        holdValues: holdField === null ? [] : holdValues,
      }
    }
    default:
      return type.value satisfies never
  }
}

export function idFromPath(path: string): string {
  const i = path.lastIndexOf('/')
  return i < 0 ? path : path.slice(i + 1)
}

/** Field names compare case-insensitively (the seed's `MatchField = "email"` meets `Email`). */
export function readFieldInsensitive(content: JsonObject, field: string): unknown {
  if (Object.prototype.hasOwnProperty.call(content, field)) return content[field]
  const lower = field.toLowerCase()
  for (const key of Object.keys(content)) if (key.toLowerCase() === lower) return content[key]
  return undefined
}

/** Scalars match by their string form, case-insensitively; objects and arrays never match. */
export function matchKey(value: unknown): string | null {
  if (typeof value === 'string') return value.trim().toLowerCase()
  if (typeof value === 'number' || typeof value === 'boolean') return String(value).toLowerCase()
  return null
}

export function isResting(value: unknown, restingValues: readonly string[]): boolean {
  const key = matchKey(value)
  return key !== null && restingValues.some((r) => r.trim().toLowerCase() === key)
}
