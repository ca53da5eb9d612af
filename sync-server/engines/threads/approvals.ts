import { filter, firstValueFrom, takeWhile } from 'rxjs'
import { SYSTEM, WeftError, isJsonObject, jsonEqual, type JsonObject, type MeshNode, type NodePath } from '../../../shared/index.js'
import type { NodeApi, WriteRuleHook } from '../../nodes/index.js'
import type { ApprovalRequest } from './builtin-agent.js'
import { nextOrdinal, roundOf, without, type Clock } from './model.js'

/**
 * [THR13][THR14] Approvals. A tool call that needs approval pauses its round: the engine writes
 * `PendingApproval: { Id, Tool, Args, Summary, RequestedAt }` and `Disposition: AwaitingInput`
 * on the thread (system fields); a person with Update answers by patching `ApprovalAnswer: { Id,
 * Decision }`. The thread's write rule stamps who answered (`ApprovalBy`, system) in that same
 * write, so the answer and its author are one fact on the node and survive a restart.
 */

export const APPROVAL_FIELDS = ['PendingApproval', 'ApprovalAnswer', 'ApprovalBy'] as const

function pendingOf(c: JsonObject): JsonObject | null {
  return isJsonObject(c.PendingApproval) ? c.PendingApproval : null
}

/**
 * [THR14] The Thread write rule (every user write, every transport; the field rule, Update, has
 * already passed). Any change of `ApprovalAnswer` by a person must answer the approval pending
 * NOW (same Id), once: an answer to another Id, a second answer (a change of Decision), and a
 * withdrawal (null, or the field left out) are `conflict`, nothing written, so an answer cannot
 * be cleared and given again by someone else. Its writer is recorded as `ApprovalBy` (a system
 * field) in the same write, so the answer and its author are one fact on the node.
 * [THR27] A change of `Agent` stamps `AgentSetBy` (its writer) and `AgentSince` (the posting
 * ordinal from which it applies) in that same write.
 */
export function threadWriteRule(): WriteRuleHook {
  return ({ principal, before, after, origin }) => {
    // [THR27] A change of the agent records who made it and from which posting on it applies.
    const agent: JsonObject | undefined =
      before && !jsonEqual(after.Agent ?? null, before.content.Agent ?? null) ? { AgentSetBy: principal.userId, AgentSince: nextOrdinal(before.content) } : undefined
    const answered = approvalAnswered(principal.userId, before, after)
    // [THR30] An approval is a person's decision: a run or an agent acting for her (a model's patch
    // tool in another round, a script, a contextual reaction) would approve what an agent asked.
    if (answered && origin === 'engine') {
      throw new WeftError('forbidden', 'An approval is answered by a person: a run or an agent cannot answer it, even for someone who may. Answer it in the app or with your own request.')
    }
    return agent || answered ? { ...agent, ...answered } : undefined
  }
}

/** [THR14] The approval answer this write gives, checked: `ApprovalBy` to stamp, or undefined when it gives none. */
function approvalAnswered(userId: string, before: MeshNode | null, after: JsonObject): JsonObject | undefined {
  const answer = after.ApprovalAnswer ?? null
  const prior = before?.content.ApprovalAnswer ?? null
  if (jsonEqual(answer, prior)) return undefined
  const pending = before ? pendingOf(before.content) : null
  if (!isJsonObject(answer)) {
    throw new WeftError('conflict', 'An approval answer cannot be withdrawn; the round clears it when it goes on.')
  }
  if (Object.keys(answer).some((k) => k !== 'Id' && k !== 'Decision')) {
    throw new WeftError('invalid_content', 'An approval answer is exactly { Id, Decision: "Approved" | "Denied" }.')
  }
  const id = answer.Id
  if (!pending || pending.Id !== id) {
    throw new WeftError('conflict', `No approval ${JSON.stringify(id ?? null)} is pending on this thread${pending ? ` (the pending one is ${JSON.stringify(pending.Id)})` : ''}; reload and answer the one shown.`)
  }
  if (prior !== null || (before?.content.ApprovalBy ?? null) !== null) {
    throw new WeftError('conflict', `Approval ${String(id)} has been answered already.`)
  }
  return { ApprovalBy: userId }
}

/**
 * [THR13] Pauses the round of `thread` (whose response cell is `response`) until a person answers
 * `req`. Writes the pending approval unless it is there already (a resumed round waits on the
 * same one); resolves with the answer and clears the three fields and the Disposition in one
 * write. Rejects when `signal` aborts (a cancel: the terminal write clears them).
 */
export async function awaitApproval(
  nodes: NodeApi,
  thread: NodePath,
  response: string,
  req: ApprovalRequest,
  clock: Clock,
  signal: AbortSignal,
): Promise<{ decision: 'Approved' | 'Denied'; by: string }> {
  const ours = (n: MeshNode) => n.content.Status === 'Executing' && roundOf(n.content)?.Response === response
  await nodes.update(SYSTEM, thread, (cur) => {
    if (!cur || !ours(cur) || pendingOf(cur.content)?.Id === req.Id) return undefined
    const content: JsonObject = {
      ...without(cur.content, ...APPROVAL_FIELDS),
      Disposition: 'AwaitingInput',
      PendingApproval: { Id: req.Id, Tool: req.Tool, Args: req.Args, Summary: req.Summary, RequestedAt: clock.now().toISOString() },
    }
    return { nodeType: cur.nodeType, name: cur.name, content }
  }, 'engine')
  const answered = (n: MeshNode): boolean => {
    const a = n.content.ApprovalAnswer
    return isJsonObject(a) && a.Id === req.Id && typeof n.content.ApprovalBy === 'string'
  }
  const aborted = new Promise<never>((_, reject) => {
    if (signal.aborted) reject(signal.reason as Error)
    signal.addEventListener('abort', () => reject(signal.reason as Error), { once: true })
  })
  // Raced below; an abort after the answer arrived is nobody's error.
  aborted.catch(() => undefined)
  const node = await Promise.race([
    firstValueFrom(nodes.node$(thread).pipe(takeWhile((n): n is MeshNode => n !== null && ours(n)), filter(answered)), { defaultValue: null }),
    aborted,
  ])
  if (!node) throw new WeftError('conflict', `The round of ${thread} ended while approval ${req.Id} was pending.`)
  const answer = node.content.ApprovalAnswer as JsonObject
  const decision = answer.Decision === 'Approved' ? 'Approved' : 'Denied'
  const by = String(node.content.ApprovalBy)
  await nodes.update(SYSTEM, thread, (cur) => {
    if (!cur || !ours(cur) || pendingOf(cur.content)?.Id !== req.Id) return undefined
    return { nodeType: cur.nodeType, name: cur.name, content: without(cur.content, ...APPROVAL_FIELDS, 'Disposition') }
  }, 'engine')
  return { decision, by }
}
