import { randomUUID } from 'node:crypto'
import { z } from 'zod'
import { SYSTEM, WeftError, lastSegment, parentPath, parseNodePath, type JsonObject, type MeshNode, type NodePath, type Principal } from '../../../shared/index.js'
import type { NodeApi, WriteRuleHook } from '../../nodes/index.js'
import type { Route, RouteRequest } from '../../http/index.js'
import { request } from '../kit/index.js'
import { cellPath, enqueuedContent, isMessageId, type Clock } from './model.js'

/** [THR2] The longest message text a post takes (characters). */
export const MAX_MESSAGE_CHARS = 100_000

/** What a message id may be, said when one is refused. */
const MESSAGE_ID_RULE = 'A message id is 1–64 characters of letters, digits, _ . @ - and starts with a letter or digit.'

const PostBody = z.object({ id: z.string().optional(), text: z.string() })

/** A user cell's content, as the route and an offline device both make it. */
export function userCell(author: string, text: string, at: Date, onBehalfOf?: string[]): JsonObject {
  const cell: JsonObject = { Role: 'user', Author: author, Text: text, CreatedAt: at.toISOString() }
  if (onBehalfOf && onBehalfOf.length > 0) cell.OnBehalfOf = onBehalfOf
  return cell
}

/**
 * [THR2] Ingests cell `id` of `thread` as input: once per id, whoever calls and however often
 * (the re-check is inside `update`). Returns false when the thread is gone or not a Thread.
 */
export async function enqueue(nodes: NodeApi, thread: NodePath, id: string): Promise<boolean> {
  let ok = false
  await nodes.update(SYSTEM, thread, (cur) => {
    if (!cur || cur.nodeType !== 'Thread') return undefined
    ok = true
    const content = enqueuedContent(thread, cur.content, id)
    return content ? { nodeType: cur.nodeType, name: cur.name, content } : undefined
  }, 'engine')
  return ok
}

/**
 * Creates the cell (as system) unless it is there, then enqueues it. A cell already there with
 * another author is a different message under the same id: `conflict`, nothing changes.
 */
export async function postCell(nodes: NodeApi, thread: NodePath, id: string, cell: JsonObject, via: PostVia = {}): Promise<NodePath> {
  const path = cellPath(thread, id)
  let clash: MeshNode | null = null
  await (via.cellVia ?? nodes).update(SYSTEM, path, (cur) => {
    if (cur) {
      if (cur.nodeType !== 'ThreadMessage' || cur.content.Author !== cell.Author || cur.content.Role !== cell.Role) clash = cur
      return undefined
    }
    return { nodeType: 'ThreadMessage', name: id, content: cell }
  }, 'engine')
  if (clash) throw new WeftError('conflict', `${path} is another message already; post with a new id.`)
  if (!(await enqueue(via.enqueueVia ?? nodes, thread, id))) throw new WeftError('not_found', `No thread at ${thread}.`)
  return path
}

/**
 * [CTX50] How a contextual reaction posts: the cell's write through `cellVia` (the reaction's
 * fenced step: admitted, the lease and source checked, nothing recorded), the enqueue through
 * `enqueueVia`, which carries the outcome on the post's last commit. A post that fails half-way
 * records no outcome, and its retry (the same derived id) finds the cell there and enqueues it.
 */
export interface PostVia {
  cellVia?: NodeApi
  enqueueVia?: NodeApi
}

/** [THR2] `POST /api/nodes/{threadPath}/messages { id?, text }` for `caller`. */
export async function postMessage(nodes: NodeApi, caller: Principal, thread: NodePath, raw: unknown, clock: Clock, via: PostVia = {}): Promise<{ path: NodePath }> {
  if (caller.kind !== 'user') throw new WeftError('unauthorized', 'Sign in first.')
  const parsed = PostBody.safeParse(raw)
  if (!parsed.success) throw new WeftError('invalid_request', 'The body is { id?: string, text: string }.')
  const { id = randomUUID(), text } = parsed.data
  if (!isMessageId(id)) throw new WeftError('invalid_request', MESSAGE_ID_RULE)
  if (text.trim() === '') throw new WeftError('invalid_request', 'A message needs some text.')
  if (text.length > MAX_MESSAGE_CHARS) throw new WeftError('payload_too_large', `A message is at most ${MAX_MESSAGE_CHARS} characters.`)
  const node = await nodes.get(caller, thread)
  if (!node) throw new WeftError('not_found', `No thread at ${thread}.`)
  if (node.nodeType !== 'Thread') throw new WeftError('invalid_request', `${thread} is a ${node.nodeType}, not a Thread.`)
  request(nodes, caller, 'Thread', thread)
  return { path: await postCell(nodes, thread, id, userCell(caller.userId, text, clock.now()), via) }
}

/**
 * [THR1] The ThreadMessage write rule for every user write on every transport: a person creates
 * only their OWN user cell (Role "user", Author = them, a plain id), e.g. composed offline; a
 * cell, once made, is changed by system only (the agent's streaming, an error).
 */
export function threadMessageWriteRule(): WriteRuleHook {
  return ({ principal, path, before, after, origin }) => {
    if (before) throw new WeftError('forbidden_field', 'A thread message is written by the server once posted.')
    // [THR29] A message is a person's: one written by a run or an agent for her would be asked of
    // the thread's agent, whose next run could write another, without end (in its own thread, or
    // two threads answering each other).
    if (origin === 'engine') {
      throw new WeftError(
        'forbidden',
        `A run or an agent cannot write a message into a thread (${path}): the thread would ask its agent again, and its answer could do the same, without end. Answer in the round's own response, or post the message yourself.`,
      )
    }
    // The engine ingests a cell by its id: one it would never ingest is refused here, so an
    // offline author sees the refusal instead of a message that silently never gets an answer.
    if (!isMessageId(lastSegment(path))) {
      throw new WeftError('invalid_request', MESSAGE_ID_RULE)
    }
    if (after.Role !== 'user' || after.Author !== principal.userId) {
      throw new WeftError('forbidden_field', 'A person creates only their own user message (Role "user", Author = you).')
    }
    if (after.OnBehalfOf !== undefined || after.Error !== undefined || after.ToolCalls !== undefined) {
      throw new WeftError('forbidden_field', 'OnBehalfOf, Error and ToolCalls are written by the server.')
    }
    // [THR24] The bound of a post, for a message made on a device too (it went past it unchecked).
    if (typeof after.Text === 'string' && after.Text.length > MAX_MESSAGE_CHARS) {
      throw new WeftError('payload_too_large', `A message is at most ${MAX_MESSAGE_CHARS} characters (this one has ${after.Text.length}).`)
    }
    return undefined
  }
}

/** The thread a cell path belongs to. */
export function threadOfCell(cell: NodePath): NodePath | null {
  return parentPath(cell)
}

export function threadRoutes(nodes: NodeApi, clock: Clock): Route[] {
  return [
    {
      method: 'POST',
      pattern: /^\/api\/nodes\/(?<path>.+)\/messages\/?$/,
      async handler(r: RouteRequest) {
        if (!r.principal) throw new WeftError('unauthorized', 'Sign in first.')
        const thread = parseNodePath(r.params.path ?? '')
        const out = await postMessage(nodes, r.principal, thread, await r.json(), clock)
        return { status: 201, body: out }
      },
    },
  ]
}
