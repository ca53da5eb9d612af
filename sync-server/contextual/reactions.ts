import { WeftError, type JsonObject, type MeshNode, type NodePath, type Principal } from '../../shared/index.js'
import type { AccessService } from '../access/index.js'
import { ownerOf, stepOf, type CommitAttachment, type NodeApi } from '../nodes/index.js'
import { postMessage, type Clock } from '../engines/threads/index.js'
import type { CompiledReaction } from './definition.js'

/**
 * [CTX19] Is the reaction's command one `principal` may run on `target` now? The same rules as the
 * command itself (the nested command checks again when it runs): Create / Update / Delete on the
 * target, an activity's creator or Update for its RequestedStatus, Thread to post.
 */
export function mayRun(access: Pick<AccessService, 'permissions'>, principal: Principal, reaction: CompiledReaction, target: NodePath, targetNode: MeshNode | null): boolean {
  const perms = access.permissions(principal, target)
  switch (reaction.spec.Command) {
    case 'create':
      return perms.has('Create')
    case 'patch':
      return perms.has('Update')
    case 'delete':
      return perms.has('Delete')
    case 'request_activity_status':
      // The owner rule of RequestedStatus (an ActivityLog's CreatedBy), as the field check applies it.
      return perms.has('Update') || (principal.kind === 'user' && targetNode !== null && ownerOf(targetNode) === principal.userId && perms.has('Read'))
    case 'post_thread_message':
      return perms.has('Thread')
    default:
      reaction.spec.Command satisfies never
      return false
  }
}

export interface CommandResult {
  path: NodePath
  /** The commit's version; null when the command committed nothing new. */
  version: number | null
}

/**
 * [CTX21] Runs the reaction's one command as `principal` through the ordinary node service (every
 * access, field and write rule applies). `messageId` is the derived id a thread post uses.
 * [CTX26] [CTX50] `holder`'s outcome rides the command's last commit: a command that commits more
 * than once (a thread post: the message, then its enqueue; a delete: the children, then the node)
 * and fails half-way has recorded nothing, and its retry completes it (each step is idempotent).
 */
export async function runCommand(plain: NodeApi, holder: CommitAttachment, principal: Principal, reaction: CompiledReaction, target: NodePath, params: JsonObject, messageId: string, clock: Clock): Promise<CommandResult> {
  const nodes = plain.attaching(holder)
  switch (reaction.spec.Command) {
    case 'create': {
      const node = await nodes.create(principal, target, { nodeType: reaction.spec.NodeType!, content: params }, 'engine')
      return { path: node.path, version: node.version }
    }
    case 'patch': {
      const node = await nodes.patch(principal, target, params, 'engine')
      return { path: node.path, version: node.version }
    }
    case 'delete':
      await nodes.delete(principal, target, 'engine')
      return { path: target, version: null }
    case 'request_activity_status': {
      const status = params.Status
      if (status !== 'Running' && status !== 'Cancelled') throw new WeftError('invalid_params', 'request_activity_status takes { Status: "Running" | "Cancelled" }.')
      const node = await nodes.patch(principal, target, { RequestedStatus: status }, 'engine')
      return { path: node.path, version: node.version }
    }
    case 'post_thread_message': {
      const out = await postMessage(plain, principal, target, { id: messageId, text: params.Text }, clock, { cellVia: plain.attaching(stepOf(holder)), enqueueVia: nodes })
      return { path: out.path, version: null }
    }
    default:
      reaction.spec.Command satisfies never
      throw new Error('unreachable')
  }
}
