import type { Logger } from 'pino'
import type { EventSubscription, MeshNode } from '../../../shared/index.js'
import type { NodeApi } from '../../nodes/index.js'

/**
 * A failure with a name: the subscription ends Failed with this message on LastError. Anything
 * else a handler throws is treated as transient and retried a few times first.
 */
export class ContinuationFailure extends Error {
  constructor(message: string) {
    super(message)
    this.name = 'ContinuationFailure'
  }
}

export interface ContinuationInput {
  nodes: NodeApi
  log: Logger
  /** The subscription node as re-read right before firing. */
  node: MeshNode
  subscription: EventSubscription
  /** Who the continuation is about: the triggering node's path (a User's path is its id), or SubjectId. */
  subjectId: string | null
  now: Date
}

/**
 * Every handler MUST be an idempotent create-or-update: live and reconcile may both run it.
 * `touches` (optional) names the nodes a firing will read or write, so that a timer's warm-up
 * loads them before its FireAt; a guess that turns out wrong costs a read, nothing else.
 */
export type ContinuationHandler = ((input: ContinuationInput) => Promise<void>) & {
  touches?: (subscription: EventSubscription, subjectId: string | null) => string[]
  /**
   * [SUB10] Undoes a firing that a revoke (Cancelled) overtook after the handler started. The
   * runner calls it when its claim finds the subscription Cancelled, and at boot or on the feed
   * for a Cancelled subscription with no firing in flight; it must be idempotent.
   */
  /** `at`: the engine clock's now (TakenBackAt). */
  takeBack?: (nodes: NodeApi, subscription: MeshNode, at?: Date) => Promise<void>
}

/**
 * Exactly one owner per continuation type. A second claim is a start-up error naming both, so a
 * module can never silently take over (or double-run) another's continuation.
 */
export class ContinuationRegistry {
  private readonly handlers = new Map<string, { owner: string; handler: ContinuationHandler }>()

  claim(type: string, owner: string, handler: ContinuationHandler): void {
    const existing = this.handlers.get(type)
    if (existing) {
      throw new Error(`Continuation type ${type} is claimed twice: by ${existing.owner} and by ${owner}.`)
    }
    this.handlers.set(type, { owner, handler })
  }

  resolve(type: string): ContinuationHandler | undefined {
    return this.handlers.get(type)?.handler
  }

  ownerOf(type: string): string | undefined {
    return this.handlers.get(type)?.owner
  }

  types(): string[] {
    return [...this.handlers.keys()]
  }
}
