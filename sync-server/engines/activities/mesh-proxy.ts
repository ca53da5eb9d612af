import { filter, take, timeout, type Subscription } from 'rxjs'
import { WeftError, isJsonObject, parseNodePath, type JsonObject, type JsonValue, type MeshNode, type NodePath, type Principal } from '../../../shared/index.js'
import type { NodeApi } from '../../nodes/index.js'
import type { MeshOp } from './script-protocol.js'

const WAIT_FOR_DEFAULT_MS = 30_000

function object(v: JsonValue | undefined, what: string): JsonObject {
  if (v === undefined || v === null) return {}
  if (!isJsonObject(v)) throw new WeftError('invalid_request', `${what} must be an object.`)
  return v
}

function asJson(node: MeshNode | null): JsonValue {
  return node as unknown as JsonValue
}

/**
 * Each field of a node's content as JSON text, made once per version of the node whoever waits on
 * it: with every waiter stringifying the field again at every change, 256 waits on a 1 MB document
 * made each of its writes 25× slower for everyone (stop 42).
 */
const fieldTexts = new WeakMap<JsonObject, Map<string, string>>()

function fieldText(content: JsonObject, key: string): string {
  let texts = fieldTexts.get(content)
  if (!texts) fieldTexts.set(content, (texts = new Map()))
  let text = texts.get(key)
  if (text === undefined) texts.set(key, (text = JSON.stringify(content[key] ?? null)))
  return text
}

/** What `fields` asks of a node, as JSON text made once per wait. */
function matcher(fields: JsonObject): (node: MeshNode | null) => boolean {
  const wanted = Object.entries(fields).map(([k, v]) => [k, JSON.stringify(v)] as const)
  return (node) => node !== null && wanted.every(([k, text]) => fieldText(node.content, k) === text)
}

const cancelled = () => Object.assign(new Error('The activity was cancelled.'), { code: 'cancelled' })

/**
 * [ACT18] Waits for the node to match, for at most `ms`; the subscription ends with the wait
 * however it ends (matched, timed out, or the run over: `signal` aborts when the run ends, so a
 * run's unawaited waits are unsubscribed with it, never left watching until their timeout).
 */
function waitUntil(nodes: NodeApi, p: NodePath, fields: JsonObject, ms: number, signal: AbortSignal): Promise<MeshNode | null> {
  return new Promise<MeshNode | null>((resolve, reject) => {
    if (signal.aborted) return reject(cancelled())
    let sub: Subscription | null = null
    const onAbort = () => {
      sub?.unsubscribe()
      reject(cancelled())
    }
    signal.addEventListener('abort', onAbort, { once: true })
    const settled = () => signal.removeEventListener('abort', onAbort)
    sub = nodes
      .node$(p)
      .pipe(
        filter(matcher(fields)),
        take(1),
        timeout({ first: ms, with: () => Promise.reject(Object.assign(new Error(`${p} did not reach the awaited state within ${ms} ms.`), { code: 'timeout' })) }),
      )
      .subscribe({
        next: (n) => {
          settled()
          resolve(n)
        },
        error: (err: unknown) => {
          settled()
          reject(err)
        },
      })
  })
}

/**
 * [ACT8] A script's Mesh call, performed as the activity's owner (its CreatedBy): the same checks
 * as a request of theirs made now, so a script can do nothing its owner could not. A refusal
 * rejects with the API's error (its `code` reaches the script).
 */
export async function meshCall(nodes: NodeApi, owner: Principal, op: MeshOp, args: JsonValue[], signal: AbortSignal): Promise<JsonValue> {
  const path = () => parseNodePath(String(args[0] ?? ''))
  switch (op) {
    case 'get':
      return asJson(await nodes.get(owner, path()))
    case 'put': {
      const draft = object(args[1], 'The node')
      if (typeof draft.nodeType !== 'string') throw new WeftError('invalid_request', 'Mesh.put needs { nodeType, content }.')
      const { node } = await nodes.put(
        owner,
        path(),
        { nodeType: draft.nodeType, name: typeof draft.name === 'string' ? draft.name : undefined, content: object(draft.content, 'content') },
        'engine',
      )
      return asJson(node)
    }
    case 'patch':
      return asJson(await nodes.patch(owner, path(), object(args[1], 'The patch'), 'engine'))
    case 'delete':
      await nodes.delete(owner, path(), 'engine')
      return null
    case 'query': {
      const q = object(args[0], 'The query')
      const where = isJsonObject(q.where) ? Object.fromEntries(Object.entries(q.where).map(([k, v]) => [k, String(v)])) : undefined
      const items = await nodes.query(owner, {
        parent: typeof q.parent === 'string' ? parseNodePath(q.parent) : undefined,
        nodeType: typeof q.nodeType === 'string' ? q.nodeType : undefined,
        where,
        limit: typeof q.limit === 'number' ? q.limit : undefined,
        // Keyset paging, as on the HTTP API: results are ordered by path.
        after: typeof q.after === 'string' ? q.after : undefined,
      })
      return items as unknown as JsonValue
    }
    case 'waitFor': {
      const p = path()
      const fields = object(args[1], 'The awaited fields')
      const opts = object(args[2], 'The options')
      const ms = typeof opts.timeoutMs === 'number' && opts.timeoutMs > 0 ? opts.timeoutMs : WAIT_FOR_DEFAULT_MS
      // Read access is checked now; the watch itself reads as system and hands back only this node.
      const first = await nodes.get(owner, p)
      if (matcher(fields)(first)) return asJson(first)
      const node = await waitUntil(nodes, p, fields, ms, signal)
      if (!nodes.permissions(owner, p).has('Read')) throw new WeftError('forbidden', `You can no longer read ${p}.`)
      return asJson(node)
    }
    default:
      throw new WeftError('invalid_request', `Unknown Mesh operation ${String(op satisfies never)}.`)
  }
}
