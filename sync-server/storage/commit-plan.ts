import { createHash } from 'node:crypto'
import { MeshChangeKind } from '../../shared/enums.js'
import { WeftError } from '../../shared/errors.js'
import { isJsonObject, isUint } from '../../shared/json.js'
import { parseNodePath } from '../../shared/path.js'
import type { NodePath } from '../../shared/index.js'
import type { RowJson } from './row-parts.js'
import type { CommitInput, MoveInput } from './types.js'
import type { ItemResult } from './group-commit.js'

/** What a batch needs to know about a node that already exists. */
export interface ExistingNode {
  nodeType: string
  createdBy: string
  createdAt: string
  /** The row's version ([SCALE19]). */
  version: number
}

/** What a writer needs of a commit: everything but the content object (it writes the content's JSON text). */
export type CommitHeader = Omit<CommitInput, 'content'>

/** `foldDoc` as a group-commit item: the node's whole Yjs log becomes this one full-state snapshot. */
export interface PreparedFold {
  fold: { path: NodePath; state: Uint8Array }
}

/** `writeContent` as a group-commit item: the row's content, stored after deferred commits ([STO5]). */
export interface PreparedContent {
  rowContent: { path: NodePath; json: RowJson; baseVersion?: number }
}

/** Folds travel in the same queue as an adapter's commits, so they keep their place among them. */
export function isFold<C extends object>(item: C | PreparedFold | PreparedContent): item is PreparedFold {
  return 'fold' in item
}

export function isRowContent<C extends object>(item: C | PreparedFold | PreparedContent): item is PreparedContent {
  return 'rowContent' in item
}

/** A commit that passed validation against the state the batch sees, ready to write. */
export interface PlannedCommit {
  input: CommitHeader
  /** The row before this commit (null for Created). */
  existing: ExistingNode | null
  /** The node type recorded in the change feed: kept from creation for Updated and Deleted. */
  nodeType: string
}

/**
 * Refuses malformed input synchronously, before it is queued: a bad input must never join (and
 * fail) a batch of good ones.
 */
export function validateCommitInput(input: CommitInput): void {
  if (parseNodePath(input.path) !== input.path) {
    throw new WeftError('invalid_path', `Storage expects a normalised path, got ${JSON.stringify(input.path)}.`)
  }
  if (!MeshChangeKind.isMember(input.kind)) {
    throw new WeftError('invalid_request', `Unknown change kind ${JSON.stringify(input.kind)}.`)
  }
  if (typeof input.nodeType !== 'string' || input.nodeType.length === 0) {
    throw new WeftError('invalid_request', 'A commit needs a node type.')
  }
  if (typeof input.at !== 'string' || Number.isNaN(Date.parse(input.at))) {
    throw new WeftError('invalid_request', 'A commit needs an ISO time `at`.')
  }
  if (input.clients !== undefined) {
    const ok = Array.isArray(input.clients) && input.clients.every((b) => isUint(b?.client) && typeof b.principal === 'string' && b.principal.length > 0)
    if (!ok) throw new WeftError('invalid_request', 'Client bindings must be { client: a non-negative integer, principal: a name }.')
  }
  if (input.tombstoneDigest !== undefined && input.tombstoneDigest !== null && !(typeof input.tombstoneDigest === 'string' && /^[0-9a-f]{64}$/.test(input.tombstoneDigest))) {
    throw new WeftError('invalid_request', 'A tombstone digest is the SHA-256 of the tombstone, in hex, or null.')
  }
  if (input.tombstoneBase !== undefined && !isUint(input.tombstoneBase)) throw new WeftError('invalid_request', 'A tombstone base is a version: a non-negative integer.')
  if (input.withhold !== undefined) {
    // [FEED5] A subject is a user id or a group path: never a newline, the column's separator.
    const ok = Array.isArray(input.withhold) && input.withhold.every((w) => parseNodePath(w?.scope) === w.scope && typeof w.subject === 'string' && w.subject.length > 0 && !w.subject.includes('\n'))
    if (!ok) throw new WeftError('invalid_request', 'A withholding is { scope: a normalised path, subject: a user id or a group path }.')
  }
  if (input.deniedFrom !== undefined && !(typeof input.deniedFrom === 'string' && input.deniedFrom.length > 0 && !input.deniedFrom.includes('\n'))) {
    throw new WeftError('invalid_request', 'A Denied\'s start names its subject: a user id or a group path.')
  }
  if (input.kind === 'Deleted') return
  if (!isJsonObject(input.content)) throw new WeftError('invalid_content', 'Node content must be a JSON object.')
  if (input.update !== null && !(input.update instanceof Uint8Array)) {
    throw new WeftError('invalid_request', 'A commit update must be a Uint8Array or null.')
  }
  if (input.deferContent && (input.kind !== 'Updated' || !input.update)) {
    throw new WeftError('invalid_request', 'Only an Updated commit with a Yjs update may defer its content.')
  }
}

/**
 * Decides each commit of a batch against the stored rows and the commits before it in the same
 * batch (a Created then Updated of one path in one batch is fine; two Created are not). Refused
 * items get their own error and write nothing; the rest of the batch proceeds. `stored` holds the
 * rows of the batch's paths as read inside the batch's transaction.
 */
export function planBatch(
  batch: readonly CommitHeader[],
  stored: ReadonlyMap<NodePath, ExistingNode>,
  /** [SCALE18] The digests of the batch paths' tombstones as read in the transaction (given when a Created carries one). */
  tombstones?: ReadonlyMap<NodePath, string>,
): { plans: (PlannedCommit | null)[]; results: (ItemResult<never> | null)[] } {
  const state = new Map<NodePath, ExistingNode | null>(stored)
  const left = new Map<NodePath, string | null>(tombstones)
  const plans: (PlannedCommit | null)[] = []
  const results: (ItemResult<never> | null)[] = []
  for (const input of batch) {
    const existing = state.has(input.path) ? (state.get(input.path) ?? null) : null
    const refuse = (error: WeftError): void => {
      plans.push(null)
      results.push({ ok: false, error })
    }
    switch (input.kind) {
      case 'Created':
        if (existing) {
          refuse(new WeftError('already_exists', `A node already exists at ${input.path}.`))
          continue
        }
        if (tombstones && input.tombstoneDigest !== undefined && (left.get(input.path) ?? null) !== input.tombstoneDigest) {
          refuse(tombstoneConflict(input.path))
          continue
        }
        left.set(input.path, null)
        state.set(input.path, { nodeType: input.nodeType, createdBy: input.createdBy, createdAt: input.at, version: 0 })
        plans.push({ input, existing: null, nodeType: input.nodeType })
        break
      case 'Updated':
      case 'Deleted':
        if (!existing) {
          refuse(new WeftError('not_found', `No node at ${input.path}.`, { retry: 'gone', path: input.path }))
          continue
        }
        if (input.nodeCreatedAt !== undefined && input.nodeCreatedAt !== existing.createdAt) {
          refuse(new WeftError('conflict', `${input.path} was deleted and created again since this change was made; reload it.`))
          continue
        }
        if (input.kind === 'Deleted' && input.tombstoneBase !== undefined && existing.version > input.tombstoneBase) {
          refuse(new WeftError('conflict', `${input.path} was changed on another server a moment ago; delete it again.`, { retry: 'behind', path: input.path }))
          continue
        }
        if (input.kind === 'Deleted') {
          state.set(input.path, null)
          if (tombstones && input.tombstone instanceof Uint8Array) left.set(input.path, tombstoneDigest(input.tombstone))
        }
        plans.push({ input, existing, nodeType: existing.nodeType })
        break
      default:
        input.kind satisfies never
    }
    results.push(null)
  }
  return { plans, results }
}

/** [SCALE18] The identity of a tombstone a create starts from, as the commit carries it. */
export function tombstoneDigest(state: Uint8Array): string {
  return createHash('sha256').update(state).digest('hex')
}

/** [SCALE18]-[SCALE21] Why a refusal may be made good by trying again, and for which path (from its details). */
export type ElsewhereRefusal = { retry: 'tombstone' | 'behind' | 'gone'; path: string }

/** The refusal's retry detail, when it is one of those: another instance changed `path` a moment ago. */
export function elsewhereRefusal(err: unknown): ElsewhereRefusal | null {
  const d = err instanceof WeftError ? (err.details as Partial<ElsewhereRefusal> | undefined) : undefined
  return d && (d.retry === 'tombstone' || d.retry === 'behind' || d.retry === 'gone') && typeof d.path === 'string' ? { retry: d.retry, path: d.path } : null
}

/** [SCALE18] Another instance deleted a node at the path since this create read its tombstone. */
export function tombstoneConflict(path: NodePath): WeftError {
  return new WeftError('conflict', `A node at ${path} was deleted on another server a moment ago; create it again.`, { retry: 'tombstone', path })
}

/** [SCALE21] Whether a move carries what it was worked out on (several instances), to be checked by `checkMoveBasis`. */
export function movesOnBasis(input: Pick<MoveInput, 'tombstoneBase' | 'arrivalsSeen' | 'movedCount'>): boolean {
  return input.tombstoneBase !== undefined || input.arrivalsSeen !== undefined || input.movedCount !== undefined
}

/**
 * [SCALE21] A move made on what storage held when its tombstones were worked out, checked in its
 * transaction: `rows` are the moved rows (locked), `there` the digests of the tombstones at their
 * new paths now.
 */
export function checkMoveBasis(input: Pick<MoveInput, 'from' | 'tombstoneBase' | 'arrivalsSeen' | 'movedCount'>, rows: readonly { path: string; version: number }[], there: ReadonlyMap<string, string>, arriving: readonly string[]): void {
  const behind = (why: string) => new WeftError('conflict', `${why} on another server a moment ago; move it again.`, { retry: 'behind', path: input.from })
  const changed = input.tombstoneBase === undefined ? undefined : rows.find((r) => r.version > input.tombstoneBase!)
  if (changed) throw behind(`${changed.path} was changed`)
  if (input.movedCount !== undefined && rows.length !== input.movedCount) throw behind(`A node under ${input.from} was deleted or moved`)
  const seen = input.arrivalsSeen
  if (seen && arriving.some((p) => (there.get(p) ?? null) !== (seen.get(p as NodePath) ?? null))) {
    throw new WeftError('conflict', `A node where ${input.from} is going was deleted on another server a moment ago; move it again.`, { retry: 'tombstone', path: input.from })
  }
}

export function batchPaths(batch: readonly CommitHeader[]): NodePath[] {
  return [...new Set(batch.map((c) => c.path))]
}
