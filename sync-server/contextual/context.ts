import { CONTEXTUAL_BOUNDS, WeftError, lastSegment, type Hydrated, parentPath, tryParseNodePath, type ChangeRecord, type JsonObject, type JsonValue, type MeshNode, type NodePath, type Principal } from '../../shared/index.js'
import { assignmentScope, isAccessType, membershipOf } from '../access/index.js'
import type { NodeApi } from '../nodes/index.js'
import type { StorageAdapter, LeasedEvent } from '../storage/index.js'
import type { CompiledDefinition } from './definition.js'
import { PLACEHOLDER } from './template.js'

/** [CTX17] Fills a path template from the event and the consumer's canonical parameters; null when it is not a path. */
export function resolveTemplate(template: string, event: Pick<LeasedEvent, 'path'>, params: JsonObject): NodePath | null {
  let broken = false
  const text = template.replace(PLACEHOLDER, (_, key: string) => {
    const path = event.path as NodePath
    if (key === 'event.path') return path
    if (key === 'event.parent') return parentPath(path) ?? ((broken = true), '')
    if (key === 'event.name') return lastSegment(path)
    const v: JsonValue | undefined = params[key.slice('param.'.length)]
    if (typeof v === 'string' || typeof v === 'number') return String(v)
    broken = true
    return ''
  })
  return broken ? null : tryParseNodePath(text)
}

export type { Hydrated }

/**
 * [CTX18] The bytes of a work item's context (its event node and hydration results): rows are
 * bounded per query, and this bounds what they weigh together. Over it, the item cannot be
 * delivered: `contextual_too_many_rows`, and the caller nacks it (a dead letter after the last
 * attempt, its reason kept).
 */
class ContextBudget {
  private bytes = 0
  add(node: MeshNode | null): void {
    if (!node) return
    this.bytes += Buffer.byteLength(JSON.stringify(node.content)) + node.path.length + 200
    if (this.bytes > CONTEXTUAL_BOUNDS.maxContextBytes) {
      throw new WeftError(
        'contextual_too_many_rows',
        `The context of this event is over ${CONTEXTUAL_BOUNDS.maxContextBytes / (1024 * 1024)} MB of JSON (its node and hydration results); read fewer or smaller nodes (a lower Limit, a NodeType).`,
      )
    }
  }
}

/** How many times a hydration is re-read when a commit to what it read lands while it reads. */
const SNAPSHOT_TRIES = 4
/** The commits landed during one read that are looked through; more than this: read again. */
const WINDOW_CHANGES = 512

/** What a hydration read: the paths got, the parents whose children were listed. */
interface ReadSet {
  paths: Set<string>
  parents: Set<string>
}

/**
 * Whether a commit can change what a read of `read` returns: a path read (found or not), a child
 * of a parent listed, or a rule of who reads what (an assignment or a membership, anywhere: they
 * change what the caller's reads may return).
 */
function touches(c: ChangeRecord, read: ReadSet): boolean {
  if (read.paths.has(c.path) || isAccessType(c.nodeType) || assignmentScope(c.path) || membershipOf(c.path)) return true
  const parent = parentPath(c.path)
  return parent !== null && read.parents.has(parent)
}

/**
 * [CTX16] Whether no commit in `(head, after]` touches `read`: then every node read holds as of
 * `after`, whatever else the database took meanwhile. Any write anywhere used to count: on a
 * loaded server (reads slowed, others writing) a pull was refused `unavailable` now and then.
 */
async function untouched(storage: Pick<StorageAdapter, 'changesSince'>, head: number, after: number, read: ReadSet): Promise<boolean> {
  const changes = await storage.changesSince(head, WINDOW_CHANGES)
  const seen = changes.filter((c) => c.version <= after)
  // The window's commits not all seen (more than the page): assume one touches the read.
  if (seen.length === changes.length && changes.length === WINDOW_CHANGES) return false
  return !seen.some((c) => touches(c, read))
}

/**
 * [CTX15]–[CTX18] Every hydration query of the definition, as `principal` (the caller, checked now:
 * what they cannot read is null or absent, exactly as a read of theirs), in one consistent view:
 * the storage head is read before and after; a commit landing meanwhile to a node read, to a child
 * of a parent listed or to an access rule re-reads the lot (any other commit does not). Returns
 * the head after as `contextHead` (≥ the event's version: the event came from the durable log):
 * what was read is the committed state as of it. With no hydration query there is one read, the
 * event's node, consistent by itself: no head is read, and `contextHead` is the larger of the
 * event's version and that node's.
 */
export async function hydrate(
  nodes: NodeApi,
  storage: Pick<StorageAdapter, 'lastVersion' | 'changesSince'>,
  principal: Principal,
  def: CompiledDefinition,
  event: LeasedEvent,
  params: JsonObject,
): Promise<{ contextHead: number; event: MeshNode | null; results: Hydrated }> {
  const readEvent = () => (event.kind === 'Deleted' ? null : nodes.get(principal, event.path as NodePath).catch(() => null))
  /** The writes in flight of the nodes read: a node read while one is may hold it before it is durable. */
  const inFlight = (got: ReadonlyArray<MeshNode | null>): Promise<void>[] =>
    got.flatMap((n) => {
      const p = n ? nodes.committing?.(n.path) : null
      return p ? [p] : []
    })
  // With no query the event's node is the one read, consistent by itself: no head is read.
  const headed = def.hydration.length > 0
  for (let attempt = 1; ; attempt++) {
    const head = headed ? await storage.lastVersion() : null
    const node = await readEvent()
    const budget = new ContextBudget()
    budget.add(node)
    const read: ReadSet = { paths: new Set([event.path]), parents: new Set() }
    const results: Hydrated = {}
    for (const { name, spec } of def.hydration) {
      const path = resolveTemplate('Get' in spec ? spec.Get : spec.Children, event, params)
      if (!path) {
        results[name] = 'Get' in spec ? null : []
        continue
      }
      if ('Get' in spec) {
        read.paths.add(path)
        budget.add((results[name] = await nodes.get(principal, path).catch(() => null)))
      } else {
        read.parents.add(path)
        const rows = await nodes.query(principal, { parent: path, ...(spec.NodeType ? { nodeType: spec.NodeType } : {}), limit: spec.Limit }).catch(() => [])
        for (const row of rows) budget.add(row)
        results[name] = rows
      }
    }
    // Checked before the head is read again: a write in flight now that lands before that read
    // moves the head; one still in flight then is seen here.
    const waits = inFlight([node, ...Object.values(results).flatMap((r) => (Array.isArray(r) ? r : [r]))])
    const after = headed ? await storage.lastVersion() : null
    if (waits.length === 0) {
      if (after === head) return { contextHead: Math.max(event.version, head ?? node?.version ?? 0), event: node, results }
      if (head !== null && after !== null && (await untouched(storage, head, after, read))) return { contextHead: Math.max(event.version, after), event: node, results }
    }
    if (attempt >= SNAPSHOT_TRIES) throw new WeftError('unavailable', 'The context kept changing while it was read; pull again.')
    await Promise.all(waits)
  }
}
