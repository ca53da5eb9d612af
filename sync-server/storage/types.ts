import type { RowJson } from './row-parts.js'
import type { ChangeRecord, JsonObject, JsonValue, MeshChangeKind, MeshNode, NodePath, NodeQuery, PathRange } from '../../shared/index.js'
import type { SearchHit, SearchPlan } from './search-plan.js'
import type { ContextualAttachment, ContextualCall } from './contextual-store.js'
import type { FeedWithhold, StoredChange } from './feed-withhold.js'

/**
 * The narrow storage interface every adapter (SQLite, PostgreSQL) implements. One contract
 * suite (`test/integration/storage-contract.ts`) runs against each adapter.
 *
 * Invariants:
 *  - `commit` is atomic: the node's update-log entry, its materialised row and its change-feed
 *    record are written in one transaction, or none of them is.
 *  - A promise returned by `commit` resolves only once the transaction is durable (fsync'd).
 *    Adapters may group concurrent commits into one transaction (group commit); each caller
 *    still gets its own version.
 *  - Versions are one global, strictly increasing sequence across all nodes.
 */
/** [ACC12] A Yjs client id of a node, bound to the principal that first wrote under it. */
export interface ClientBinding {
  client: number
  /** A principal name (a user id, `system`), or the server doc's marker (admission/client-bindings.ts). */
  principal: string
}

export interface CommitInput {
  path: NodePath
  kind: MeshChangeKind
  nodeType: string
  name: string
  /** Materialised content after this change (ignored for Deleted). */
  content: JsonObject
  /** The principal that created the node (kept from the first commit on updates). */
  createdBy: string
  /** ISO time of the change. */
  at: string
  /** The Yjs update of this change; null for Deleted (the log is dropped with the node). */
  update: Uint8Array | null
  /**
   * [STO5] Updated with an update only: log the update and the change, but leave the row's
   * content as it is, marked stale (a small edit to a big node must not rewrite the whole row).
   * The writer later stores the content with `writeContent`; until then, and after a crash, a
   * read of the row rebuilds its content from the node's Yjs log.
   */
  deferContent?: boolean
  /**
   * [ACC12] Yjs client ids this commit's update is the first to write under in the node, bound
   * to their writer in the same transaction (an Ack never stands for an update whose binding
   * could be lost). An id already bound keeps its binding. Ignored for Deleted: a node's
   * bindings go with it.
   */
  clients?: readonly ClientBinding[]
  /**
   * [SCALE2] Several instances: the version up to which the writer has applied every change of
   * every instance. When the row is past it (a change this content may lack), the row's content
   * is marked stale: reads rebuild it from the Yjs log, which holds every instance's updates.
   * Adapters for one instance may ignore it.
   */
  baseVersion?: number
  /**
   * [SCALE16] Updated and Deleted: the creation time of the node this change was made for (its
   * identity at the path). When the stored node's differs, the path holds another node now
   * (deleted and created again, on another instance): the commit is refused with `conflict` and
   * writes nothing. Several instances only; absent, nothing is checked.
   */
  nodeCreatedAt?: string
  /**
   * [TOMB1] Deleted: what the node leaves at its path (storage/tombstone.ts), written in the
   * commit's transaction in place of any earlier one. Created: `'taken'` when the new node's first
   * update holds the path's tombstone, which is then dropped in the same transaction.
   */
  tombstone?: Uint8Array | 'taken' | null
  /**
   * [SCALE18] Created, several instances: the SHA-256 (hex) of the tombstone the new node started
   * from, null when it started from none. When the path's tombstone in the commit's transaction
   * differs (another instance deleted a node there since this one looked), the commit is refused
   * with `conflict` and writes nothing. Adapters for one instance may ignore it.
   */
  tombstoneDigest?: string | null
  /**
   * [SCALE19] Deleted, several instances: every change of the node up to this version is in its
   * tombstone. When the row is past it (another instance changed the node since, and this
   * tombstone may lack that), the commit is refused with `conflict` and writes nothing; the writer
   * catches up and deletes again. Adapters for one instance may ignore it.
   */
  tombstoneBase?: number
  /**
   * [FEED5] Denied assignments this commit ends (the assignment deleted or no longer Denied, or the
   * last commit of a subtree's delete): the records of each scope and below, up to and including
   * this commit's, are withheld from its subject, in this commit's transaction.
   */
  withhold?: readonly FeedWithhold[]
  /**
   * [FEED8] The subject a Denied begins standing for with this commit (of its own assignment node):
   * this commit's record is marked so, the lower bound of what the Denied's end will withhold.
   */
  deniedFrom?: string
  /**
   * [CTX26] A contextual reaction's outcome, committed in this commit's transaction after its
   * lease is re-checked there; a lease no longer held (or an outcome already there) refuses the
   * whole commit with `stale_lease`.
   */
  contextual?: ContextualAttachment
}

/** [MOVE2] A subtree's move: every row, log entry and client binding under `from` goes under `to`. */
export interface MoveInput {
  from: NodePath
  to: NodePath
  /** ISO time of the move. */
  at: string
  /** [MOVE3] Remember `from -> to`, so a read of an old path can say where it went (a plain move). */
  redirect: boolean
  /** [TOMB1] What each moved node leaves at its old path, written in the move's transaction. */
  tombstones?: readonly { path: NodePath; state: Uint8Array }[]
  /**
   * [TOMB1] By new path: the tombstone there a moved node takes into its log (tombstone.ts
   * `tombstoneForArrival`). Every tombstone at a new path is dropped, taken or not.
   */
  arrivals?: ReadonlyMap<NodePath, Uint8Array>
  /**
   * [SCALE21] Several instances: the storage's last version when the moved nodes' logs were read
   * for the tombstones above. A moved node changed since (its row past it: another instance's
   * edit the tombstone may lack) refuses the move with `conflict`; the mover catches up and moves
   * again. Adapters for one instance may ignore it.
   */
  tombstoneBase?: number
  /**
   * [SCALE21] Several instances: by new path, the SHA-256 (hex) of the tombstone found there when
   * the arrivals were worked out (a path absent: none found). A tombstone there that differs now
   * refuses the move with `conflict`.
   */
  arrivalsSeen?: ReadonlyMap<NodePath, string>
  /**
   * [SCALE21] Several instances: how many nodes the tombstones were worked out for. Fewer rows to
   * move now (one deleted or moved away by another instance since: the tombstone the move would
   * write at its path is older than the one there) refuses the move with `conflict`. (A node
   * created there since is refused by `tombstoneBase`.)
   */
  movedCount?: number
  /** [MOVE5] A trash: `to` is the trash entry; this is what a restore needs. */
  trash?: { originalPath: NodePath; deletedBy: string }
  /** [MOVE6] A restore: `from` is a trash entry, dropped in the same transaction. */
  restore?: boolean
  /**
   * [FEED5] The Denied assignments the subtree carries away from their scopes (under `from`): the
   * records there, up to and including the move's, are withheld from each subject, in the move's
   * transaction.
   */
  withhold?: readonly FeedWithhold[]
}

/** [MOVE5] A trashed subtree: its root now at `path` (`{top}/_Trash/{id}`). */
export interface TrashEntry {
  path: NodePath
  originalPath: NodePath
  name: string
  nodeType: string
  deletedBy: string
  /** The display name of who deleted it (null: system, or an account without a profile); set by MoveService. */
  deletedByName?: string | null
  deletedAt: string
}

export interface StoredDoc {
  /** Compacted state (a Yjs update) or null, followed by the updates logged since. */
  snapshot: Uint8Array | null
  updates: Uint8Array[]
}

export interface Account {
  userId: string
  email: string
  passwordHash: string
  createdAt: string
}

export interface StorageAdapter {
  readonly kind: 'sqlite' | 'postgres'
  commit(input: CommitInput): Promise<ChangeRecord>
  getNode(path: NodePath): Promise<MeshNode | null>
  loadDoc(path: NodePath): Promise<StoredDoc | null>
  /** [ACC12] The node's client-id bindings (empty when none, or when the node does not exist). */
  loadClientBindings(path: NodePath): Promise<ClientBinding[]>
  /** [TOMB1] The tombstone a deleted or moved-away node left at `path`, if any. */
  loadTombstone(path: NodePath): Promise<Uint8Array | null>
  /** [TOMB1] The tombstone of a node's stored log (tombstone.ts), a big one made off the event loop. */
  tombstoneOf(snapshot: Uint8Array | null, updates: readonly Uint8Array[]): Promise<Uint8Array | null>
  /** [TOMB1] `getNode`, and when there is no node, the tombstone at the path: one round trip. */
  getNodeOrTombstone(path: NodePath): Promise<{ node: MeshNode; tombstone: null } | { node: null; tombstone: Uint8Array | null }>
  /**
   * Replaces the node's Yjs log by `state`, a full-state update ([DOC1]: the catch-up of a doc
   * built after JSON-only writes). Ordered with commits: a log entry committed before it is
   * folded in and dropped, one committed after it is kept. No-op when the node does not exist.
   */
  foldDoc(path: NodePath, state: Uint8Array): Promise<void>
  /**
   * [STO5] Stores the node's materialised content (after deferred commits); ordered with commits.
   * No-op when absent. `json`, when given, is `JSON.stringify(content)` already made, or, where
   * `rowParts` is true, the row in parts whose grown arrays carry only their new items ([ACT12]).
   */
  writeContent(path: NodePath, content: JsonObject, json?: RowJson, baseVersion?: number): Promise<void>
  /** [ACT12] `writeContent` takes `RowJson` parts (the writer keeps the arrays' JSON). */
  readonly rowParts?: boolean
  /** [STO5] Paths (after `after`, in path order, at most `limit`) whose row content is stale: what a crash left for the boot to repair. */
  stalePaths(after: string | null, limit: number): Promise<NodePath[]>
  /** `within`: only paths `from <= path < to` ([QUERY1]: the caller's readable regions). */
  queryNodes(query: NodeQuery, within?: PathRange): Promise<MeshNode[]>
  /**
   * [KIT7] A light page of `query`: each row's path, type and the named top-level content fields
   * only (storage projects them; no row's whole content is parsed in JS). What an engine's
   * reconciler reads to find work among nodes that may be large (an activity's 100,000-line log).
   */
  queryFields(query: NodeQuery, fields: readonly string[]): Promise<FieldRow[]>
  /**
   * [FIND1] [FIND2] The full-text matches of `plan`, best first (name equal to the query, name
   * starting with it, name containing it, text only; then the shorter name; then the path),
   * offered to `accept` in that order until `limit` are accepted. The order of matches depends
   * on each node alone, never on the others (no corpus statistics), so rows `accept` refuses
   * cannot move the accepted ones. [FIND4] `within`: the caller's readable regions ([QUERY1]);
   * only rows inside them are examined (`accept` stays the second line of defence).
   */
  searchNodes(plan: SearchPlan, accept: (path: NodePath) => boolean, limit: number, within?: readonly PathRange[]): Promise<SearchHit[]>
  /** Children and all descendants of `path`, excluding itself (for recursive delete). */
  descendants(path: NodePath): Promise<NodePath[]>
  /** The change records after `version`; `withheld` ([FEED5]) is for the feed's filter, never for a client. */
  changesSince(version: number, limit: number): Promise<StoredChange[]>
  /**
   * [MOVE2] Moves a subtree in ONE transaction, or nothing: `not_found` when `from` is absent,
   * `conflict` when `to` or anything under it exists. Each moved node gets a Deleted change of its
   * old path and a Created change of its new one (returned: the Deleted ones first, each in path
   * order); a row keeps its Yjs log, bindings, creator and times. Ordered after earlier commits.
   */
  moveSubtree(input: MoveInput): Promise<ChangeRecord[]>
  /** [MOVE3] The recorded move of the closest of `paths` (a path and its ancestors) that has one. */
  movedFrom(paths: readonly NodePath[]): Promise<{ from: NodePath; to: NodePath } | null>
  /** [MOVE5] The trash entries under `{top}/_Trash/` whose node is still there, newest first. */
  listTrash(top: NodePath): Promise<TrashEntry[]>
  /** [MOVE6] Trash entries (still there) deleted before `before` (an ISO time), at most `limit`. */
  expiredTrash(before: string, limit: number): Promise<NodePath[]>
  lastVersion(): Promise<number>

  createAccount(account: Account): Promise<void>
  /**
   * Removes the account of `userId` made with `email` (both must match): a sign-up whose home was
   * taken before it could claim it gives its id up, before anyone could have used it.
   */
  deleteAccount(userId: string, email: string): Promise<void>
  findAccountByEmail(email: string): Promise<Account | null>
  /** Tokens are stored as hashes only. */
  saveToken(tokenHash: string, userId: string, expiresAt: string): Promise<void>
  findToken(tokenHash: string): Promise<{ userId: string; expiresAt: string } | null>
  revokeToken(tokenHash: string): Promise<void>
  /**
   * [STO7] Drops change records below `below` that a newer record of the same path supersedes:
   * the feed keeps the latest change of every path (a reader that far behind re-reads the node
   * anyway), so the table is bounded by the nodes plus the recent history.
   */
  purgeSupersededChanges(below: number): Promise<void>
  /** Drops every token that expired by `before` (an ISO time): the table does not grow forever. */
  purgeExpiredTokens(before: string): Promise<void>

  /** [CTX5]–[CTX14] Durable contextual consumer state (contextual-store.ts): one transaction per call. */
  contextual(call: ContextualCall): Promise<unknown>

  /** Waits for pending commits, then closes. */
  close(): Promise<void>
}

/** A row of `queryFields`: a missing field is undefined. */
export interface FieldRow {
  path: NodePath
  nodeType: string
  fields: Record<string, JsonValue | undefined>
  /**
   * [STO5] The row's content lags deferred commits (by at most about a second): the fields are
   * the row's, not rebuilt from the Yjs log. An engine re-checks inside its claim anyway.
   */
  stale: boolean
}
