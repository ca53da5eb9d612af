import type { Observable } from 'rxjs'
import type * as Y from 'yjs'
import type { Awareness } from 'y-protocols/awareness'
import type {
  ChangeRecord,
  JsonObject,
  JsonValue,
  MergePatch,
  MeshNode,
  NodePath,
  NodeQuery,
  PermissionSet,
  Principal,
} from '../../shared/index.js'
import type { ClientBinding, ContextualAttachment } from '../storage/index.js'

/** What an update function may return. */
export interface NodeDraft {
  nodeType: string
  name?: string
  content: JsonObject
}

/**
 * `update(principal, path, fn)`: `fn` sees the node's current state (null when absent) and runs
 * while no other write to that node can interleave (one writer per node, serialised per path),
 * so a claim is a re-check INSIDE fn. Return:
 *  - `undefined`, or the very node object it was given: nothing is written;
 *  - `null` (for an existing node): the node is deleted;
 *  - a NodeDraft: the node is created, or its content is changed by the minimal merge patch.
 */
export type UpdateFn = (current: MeshNode | null) => NodeDraft | MeshNode | null | undefined

/**
 * A node type's rule over a whole write by a user, beyond its field rules, registered by the
 * engine that owns the type (NodeApi.registerWriteRule). It runs on every transport, on create,
 * replace, patch and Yjs update alike, after the field rules passed and before anything is
 * applied: it may refuse the write (throw a WeftError: nothing is written), and it may return
 * fields for `system` to write with it, in the same synchronous stretch, so no reader sees the
 * write without them (an activity's StartedBy beside the RequestedStatus that started it).
 */
export type WriteRuleHook = (write: {
  principal: Extract<Principal, { kind: 'user' }>
  /** The node written. */
  path: NodePath
  /** The node before the write; null when it creates the node. */
  before: MeshNode | null
  /** The content the write leaves (before any returned fields). */
  after: JsonObject
  /**
   * How the write came: `engine` is an engine's work done for the principal (a script's Mesh call,
   * an agent's tool, a contextual reaction), with the principal's rights but not by her hand; the
   * other origins are her own request (HTTP, MCP, a Yjs update).
   */
  origin: ChangeOrigin
}) => JsonObject | undefined

/**
 * [CTX26] An attachment for the next commit of a write (NodeApi.attaching): the contextual
 * reaction's outcome and causation record commit with the command's mutation, or neither does.
 * Only the first commit carries it; it is null once taken.
 */
export interface CommitAttachment {
  attachment: ContextualAttachment | null
  /**
   * [CTX25] The reaction's authority, checked again at the command's admission: called by the
   * write that carries the attachment, synchronously with that write's own access check and
   * before anything is applied, so no other write (a revocation, a delete) can land between the
   * check and the commit. Throws to refuse the write whole.
   */
  admit?: () => void
  /** Set when the commit that carried the attachment is durable: its version (the outcome row's). */
  version?: number
  /** [CTX50] Set once any commit that carried this holder (a fenced step, or the outcome) is durable. */
  landed?: boolean
  /** [CTX50] Told when `landed` is set (a step's holder tells the command's). */
  onLanded?: () => void
}

/**
 * [SCALE1] [SCALE2] [SCALE3] How this instance reaches the others (sync-server/cluster/), given
 * by NodeService.connectCluster. With them, every write goes through the node's Y.Doc (so each
 * change carries a Yjs update another instance's open doc can apply), and a node's Yjs log holds
 * all its content.
 */
export interface ClusterHooks {
  /** This instance's own durable changes, for the others (changes applied from another instance do not go there). */
  committed: (change: LiveChange, update: Uint8Array | null, clients: readonly ClientBinding[] | undefined, early?: string) => void
  /**
   * [SCALE12] An update this instance accepted, sent before it is durable (as its own clients get
   * it): the others' copies take it at once. Returns its key, which `committed` (or
   * `acceptedFailed`) then carries; the committed message no longer carries the update.
   */
  accepted: (path: NodePath, update: Uint8Array, clients: readonly ClientBinding[] | undefined) => string
  /** [SCALE12] The commit of an update sent by `accepted` failed: the copies that took it drop it. */
  acceptedFailed: (path: NodePath, early: string) => void
  /** Presence made here (by this instance's clients, or their leaving). */
  presence: (path: NodePath, update: Uint8Array) => void
  /** A room's presence was created here (its first client): ask the others for theirs. */
  presenceOpened: (path: NodePath) => void
  /** [SCALE2] Every change up to this version (any instance's) is applied here. */
  watermark: () => number
  /**
   * [SCALE14] Applies here every change committed (by any instance) before the call (bounded in
   * time): a refusal decided before it is decided again after it.
   */
  freshen: () => Promise<void>
}

/** The cluster hooks, shared by reference by every part of the node store (null: a lone instance); read at each use. */
export interface ClusterLink {
  hooks: ClusterHooks | null
}

/** Where a change came from; behaviour branches on it exhaustively (STYLE.md "Tag every change"). */
export type ChangeOrigin = 'http' | 'sync' | 'mux' | 'engine' | 'system'

/** What an append writes beside its items (NodeApi.append). */
export interface AppendOptions {
  /** Other top-level fields, patched in the same transaction; undefined = write nothing. */
  patch?: (current: MeshNode) => MergePatch | undefined
  /** Fields set whole with the patch, null members kept (a merge patch strips them); only when the patch is written. */
  set?: JsonObject
}

export interface LiveChange extends ChangeRecord {
  /** The node after the change; null when Deleted. */
  node: MeshNode | null
  /** Who wrote it. */
  by: string
  origin: ChangeOrigin
}

/**
 * The server-side node API every transport and engine uses. Every method checks access for the
 * given principal (system passes everything), validates content against the node type, and
 * acknowledges only durable writes.
 */
export interface NodeApi {
  /** The one access check (DESIGN.md): what the principal may do on the path right now. */
  permissions(principal: Principal, path: NodePath): PermissionSet
  get(principal: Principal, path: NodePath): Promise<MeshNode | null>
  /**
   * [CTX16] A write of the node accepted but not durable yet: what `get` returns of it may then be
   * ahead of every committed version. Resolves once none is in flight; null when none is now.
   */
  committing?(path: NodePath): Promise<void> | null
  /**
   * [CTX25] Whether this instance's copy of the node holds it (false once a delete of it is
   * applied, before that delete is durable); null when no copy is in memory. No access check:
   * it says whether, never what.
   */
  applied?(path: NodePath): boolean | null
  /** Like `get`, but keeps the node loaded: for a read that a write to the same node follows. */
  read(principal: Principal, path: NodePath): Promise<MeshNode | null>
  query(principal: Principal, query: NodeQuery): Promise<MeshNode[]>
  /** Emits the current node (null when absent), then every committed change. Never errors for absence. */
  node$(path: NodePath): Observable<MeshNode | null>
  /** Every committed change, live, in version order. */
  readonly changes$: Observable<LiveChange>
  changesSince(principal: Principal, version: number, limit?: number): Promise<ChangeRecord[]>
  /** The latest committed version (the change log's head); engines replay the latest changes from it at start. */
  headVersion?(): Promise<number>

  /** Create or replace (PUT). Returns the node and whether it was created. */
  put(principal: Principal, path: NodePath, draft: NodeDraft, origin?: ChangeOrigin): Promise<{ node: MeshNode; created: boolean }>
  /** Create; fails with `already_exists` when present. */
  create(principal: Principal, path: NodePath, draft: NodeDraft, origin?: ChangeOrigin): Promise<MeshNode>
  patch(principal: Principal, path: NodePath, patch: MergePatch, origin?: ChangeOrigin): Promise<MeshNode>
  update(principal: Principal, path: NodePath, fn: UpdateFn, origin?: ChangeOrigin): Promise<MeshNode | null>
  /** Deletes the node and its descendants. */
  delete(principal: Principal, path: NodePath, origin?: ChangeOrigin): Promise<void>
  /**
   * Appends `items` to the array field `field` (an activity's Messages): one Yjs array insert on
   * the wire, whatever the array's length. Same field rules as a patch of `field`. `opts.patch`
   * patches other top-level fields in the same transaction (undefined = write nothing).
   */
  append(principal: Principal, path: NodePath, field: string, items: readonly JsonValue[], origin?: ChangeOrigin, opts?: AppendOptions): Promise<MeshNode>
  /** Registers the write rule of a node type (one per type; engines register theirs at start-up). */
  registerWriteRule(nodeType: string, rule: WriteRuleHook): void
  /** Whether a node type has a write rule (it may record who writes: a message's Author, a run's StartedBy). */
  hasWriteRule(nodeType: string): boolean
  /**
   * [CTX26] This API, whose writes carry `holder`'s attachment into the first commit they make
   * (the holder's attachment is null afterwards: whether it was carried).
   */
  attaching(holder: CommitAttachment): NodeApi
}

/**
 * One client's presence in a room (a /sync socket, or one room of a /mux socket), as the node
 * side sees it: it is sent the room's relayed Yjs updates and presence changes (the sync layer
 * frames them for its wire) and can be evicted.
 */
export interface RoomConnection {
  readonly id: number
  readonly principal: Principal
  /** Relays a Yjs update the room's doc integrated (another client's, or a server write). */
  sendUpdate(update: Uint8Array): void
  /** Relays an awareness update (y-protocols/awareness encoding) of the room's presence. */
  sendAwareness(update: Uint8Array): void
  /** Ends the client's membership of the room: node deleted, access lost. */
  evict(closeCode: number, code: string, message: string): void
  /** Awareness client ids this connection controls (removed when it leaves). */
  readonly awarenessIds: Set<number>
}

/** A node opened for sync: what the sockets use of a loaded node. */
export interface SyncRoom {
  readonly path: NodePath
  /** The node now; null when absent (deleted). */
  readonly node: MeshNode | null
  /** The authoritative doc (built: rooms come from `acquireDoc`). */
  readonly doc: Y.Doc
  /** The room's presence, created on first use. */
  readonly awareness: Awareness
  /** The presence if it exists now (null: nobody joined since it was last empty). */
  readonly presence: Awareness | null
  /** The connection whose client owns an awareness client id, if another one already does. */
  awarenessOwner(clientId: number): RoomConnection | null
  join(conn: RoomConnection): void
  leave(conn: RoomConnection): void
}

/** What the HTTP API uses: the node API and its paged reads with their cursors. */
export interface HttpNodeApi extends NodeApi {
  queryPage(principal: Principal, query: NodeQuery): Promise<{ items: MeshNode[]; next: string | null }>
  changesPage(principal: Principal, version: number, limit?: number): Promise<{ items: ChangeRecord[]; next: number }>
  /** [WEB15] What the caller may do on a node (GET /api/permissions/{path}). */
  capabilities(principal: Principal, node: MeshNode): NodeCapabilities
  /** [MOVE8] Renames: the name changes, the path stays. Needs Update. */
  rename(principal: Principal, path: NodePath, name: string, origin?: ChangeOrigin): Promise<MeshNode>
  /** [MOVE3] Where a path that is gone now lives, following recorded moves (null: nowhere known). */
  movedTo(path: NodePath): Promise<NodePath | null>
}

/** [WEB15] What a caller may do on one node (GET /api/permissions/{path}). */
export interface NodeCapabilities {
  permissions: string[]
  /** Each field the type declares or the node holds: may the caller write it. */
  fields: Record<string, boolean>
  /** May the caller add a field the type does not declare. */
  newFields: boolean
  canDelete: boolean
  canCreate: boolean
}

/** What the sockets use: the node API, rooms, and client Yjs updates applied in arrival order. */
export interface SyncNodeApi extends HttpNodeApi {
  /** [SCALE14] Whether the principal may read the path, a refusal decided again on fresh access rules. */
  mayRead(principal: Principal, path: NodePath): Promise<boolean>
  /** The node in memory (no doc built): whether a room may open. */
  acquire(path: NodePath): Promise<SyncRoom>
  /** The node opened for sync (its doc built and caught up). */
  acquireDoc(path: NodePath): Promise<SyncRoom>
  /**
   * [ACC10] Checks and applies a client's update synchronously (so a socket's updates apply in
   * arrival order); the promise settles once durable. Throws a WeftError when refused.
   */
  applyClientUpdateLoaded(room: SyncRoom, principal: Principal, update: Uint8Array, conn: RoomConnection | null, origin: ChangeOrigin): Promise<MeshNode | null>
}
