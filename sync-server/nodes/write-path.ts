import * as Y from 'yjs'
import {
  ALL_PERMISSIONS,
  CONTENT_MAP,
  WeftError,
  applyMergePatch,
  applyPatchToDoc,
  applyPatchToJson,
  assertJsonContent,
  assertNodeName,
  assertNewText,
  assertMergePatch,
  docToJson,
  isPermissiveContent,
  isContainerSegment,
  isSystem,
  isDeclaredTextField,
  isInTrash,
  lastSegment,
  nodeTypeDef,
  parentPath,
  partitionPlace,
  principalName,
  replaceDocContent,
  replaceDocContentForward,
  replaceJsonContent,
  setDocFields,
  SYSTEM,
  validateAppend,
  validateContent,
  validateFields,
  textPolicyFor,
  withFieldsFromDoc,
  type ChangeRecord,
  type JsonObject,
  type JsonValue,
  type MergePatch,
  type MeshChangeKind,
  type MeshNode,
  type NodePath,
  type Permission,
  type Principal,
  type WriteRule,
} from '../../shared/index.js'
import { MAX_QUERY_LIMIT, clocksOf, elsewhereRefusal, replayLog, tombstoneDigest, tombstoneOfDoc, type MoveInput, type StorageAdapter, type StoredDoc } from '../storage/index.js'
import { ACCESS_NODE_TYPES, ACCESS_SEGMENT, isAccessType, type AccessService } from '../access/index.js'
import { admitUpdate, type ClientBinding } from '../admission/index.js'
import type { ChangeToCommit, CommitFeed } from './commit-feed.js'
import { writeFence } from './fence.js'
import { stepOf } from './commit-step.js'
import type { ContentFlush } from './content-flush.js'
import { DocCorrupted, type LoadedNode, type RoomConnection } from './loaded-node.js'
import type { NodeCache } from './node-cache.js'
import type { AppendOptions, ChangeOrigin, ClusterLink, CommitAttachment, NodeDraft, UpdateFn } from './types.js'
import { allowsRule, buildsDocOnCreate, changedFields, checkFieldRules, checkInvariants, checkNoopWrite, checkPlacement, keepUnwritable, ownerOf, type WriteRules } from './write-policy.js'

/** The result of a write: the node after it, once durable. */
type Written = Promise<MeshNode | null>

/**
 * The write path: the eight write verbs, each through the same checks (access, field rules,
 * the type's write rule, schema, invariants; write-policy.ts) before it is applied to the loaded
 * copy and committed (commit-feed.ts).
 *
 * Concurrency: a write's checks, its application to the doc and its enqueueing in storage run
 * in ONE synchronous stretch after the node is loaded, so no other write to the node can
 * interleave: an update function's re-check is a real claim. Storage keeps commits in call
 * order, so versions follow application order.
 */
export class WritePath {
  /** Subtrees whose cascade delete is under way: nothing new may be created inside them. */
  private readonly deleting = new Set<NodePath>()
  /** [MOVE2] Subtrees being moved (source and destination): no write inside them meanwhile. */
  private readonly moving = new Set<NodePath>()

  constructor(
    private readonly storage: StorageAdapter,
    private readonly access: AccessService,
    private readonly cache: NodeCache,
    private readonly feed: CommitFeed,
    private readonly flush: ContentFlush,
    private readonly rules: WriteRules,
    /** Deepest JSON a client may write (MAX_JSON_DEPTH). */
    private readonly maxJsonDepth: number,
    /**
     * [SCALE1] With other instances every write goes through the node's Y.Doc, so each change
     * carries a Yjs update that another instance's open doc can apply (a JSON-only write could
     * not reach a room on another instance without each rebuilding it differently).
     */
    private readonly cluster: ClusterLink,
  ) {}


  private requirePermission(principal: Principal, path: NodePath, permission: Permission): void {
    if (!this.access.has(principal, path, permission)) {
      throw new WeftError('forbidden', `${principalName(principal)} lacks ${permission} on ${path}.`)
    }
  }

  private allows(principal: Principal, path: NodePath, rule: WriteRule): boolean {
    return allowsRule(principal, () => this.access.permissions(principal, path), rule)
  }

  /** Invariants across nodes (write-policy.ts), against the access indexes as they are now. */
  private checkInvariants(before: MeshNode | null, after: MeshNode | null, cascading = false): void {
    checkInvariants(before, after, cascading, (scope) => this.access.adminsOf(scope))
  }

  /** The one place a write commits (commit-feed.ts). */
  private commitChange(
    ln: LoadedNode,
    principal: Principal,
    before: MeshNode | null,
    after: MeshNode | null,
    kind: MeshChangeKind,
    update: Uint8Array | null,
    origin: ChangeOrigin,
    deferContent = false,
    clients?: readonly ClientBinding[],
    attach?: CommitAttachment,
    tombs?: Pick<ChangeToCommit, 'tombstone' | 'startedFrom' | 'tombstoneBase' | 'withhold'>,
  ): Written {
    return this.feed.commit(ln, { principal, before, after, kind, update, origin, deferContent, clients, attach, ...tombs })
  }

  /**
   * [TOMB1] The tombstone at a path about to get a new node (its caller checks again, after this
   * await, that the path is still free).
   */
  private async tombstoneAt(ln: LoadedNode): Promise<Uint8Array | null> {
    if (ln.leftTombstone !== undefined) return ln.leftTombstone
    const stored = await this.storage.loadTombstone(ln.path)
    // A create and a delete on this copy while storage was read: that delete's tombstone is newer.
    return ln.leftTombstone !== undefined ? ln.leftTombstone : stored
  }

  private acquireForWrite(path: NodePath): Promise<LoadedNode> {
    return this.cluster.hooks ? this.cache.acquireDoc(path) : this.cache.acquire(path)
  }

  /**
   * A write refused because another instance changed its path a moment ago (the refusal names
   * this path), made once more after this instance has caught up with every change committed so
   * far; its copy was dropped, so it is made from what storage holds now:
   *  - [SCALE18] a create whose tombstone is no longer the path's (a node was deleted there since);
   *  - [SCALE19] a delete whose tombstone may lack a change committed elsewhere since;
   *  - [SCALE20] with `gone`, a put made on a copy of a node another instance deleted a moment ago
   *    (storage has no node there): the put creates it. A patch is not made again: it was meant
   *    for the node that is gone.
   * Never with a contextual outcome attached (that commit's outcome was not recorded, and its
   * caller decides), never an update function (it may have acted on what it saw: engines
   * reconcile instead), and not once an engine's lease is lost ([SCALE7]).
   */
  private async againAfterElsewhere<T>(path: NodePath, attach: CommitAttachment | undefined, write: () => Promise<T>, gone = false): Promise<T> {
    try {
      return await write()
    } catch (err) {
      const refusal = elsewhereRefusal(err)
      if (attach || refusal?.path !== path || (refusal.retry === 'gone' && !gone)) throw err
      await this.cluster.hooks?.freshen()
      const holds = writeFence.getStore()
      if (holds && !holds()) throw new WeftError('unavailable', 'This server no longer owns the engines (its lease expired); another server has taken them over.')
      return write()
    }
  }

  put(principal: Principal, path: NodePath, draft: NodeDraft, origin: ChangeOrigin = 'http', attach?: CommitAttachment): Promise<{ node: MeshNode; created: boolean }> {
    return this.againAfterElsewhere(path, attach, () => this.putOnce(principal, path, draft, origin, attach), true)
  }

  private async putOnce(principal: Principal, path: NodePath, draft: NodeDraft, origin: ChangeOrigin, attach?: CommitAttachment): Promise<{ node: MeshNode; created: boolean }> {
    await this.requireParent(principal, path)
    const ln = await this.acquireForWrite(path)
    if (!ln.node) {
      const tombstone = await this.tombstoneAt(ln)
      if (!ln.node) return { node: (await this.createIn(ln, principal, draft, origin, attach, tombstone))!, created: true }
    }
    return { node: (await this.replaceIn(ln, principal, draft, origin, attach))!, created: false }
  }

  create(principal: Principal, path: NodePath, draft: NodeDraft, origin: ChangeOrigin = 'http', attach?: CommitAttachment): Promise<MeshNode> {
    return this.againAfterElsewhere(path, attach, () => this.createOnce(principal, path, draft, origin, attach))
  }

  private async createOnce(principal: Principal, path: NodePath, draft: NodeDraft, origin: ChangeOrigin, attach?: CommitAttachment): Promise<MeshNode> {
    await this.requireParent(principal, path)
    const ln = await this.acquireForWrite(path)
    if (ln.node) throw new WeftError('already_exists', `A node already exists at ${path}.`)
    const tombstone = await this.tombstoneAt(ln)
    if (ln.node) throw new WeftError('already_exists', `A node already exists at ${path}.`)
    return (await this.createIn(ln, principal, draft, origin, attach, tombstone))!
  }

  async patch(principal: Principal, path: NodePath, patch: MergePatch, origin: ChangeOrigin = 'http', attach?: CommitAttachment): Promise<MeshNode> {
    // [STO10] Its text is checked against the stored content in writeContent.
    assertMergePatch(patch, this.maxJsonDepth, false)
    const ln = await this.acquireForWrite(path)
    const before = this.existing(ln, principal)
    const next = applyMergePatch(before.content, patch) as JsonObject
    return (await this.writeContent(ln, principal, before, before.name, next, patch, origin, attach))!
  }

  async update(principal: Principal, path: NodePath, fn: UpdateFn, origin: ChangeOrigin = 'engine', attach?: CommitAttachment): Promise<MeshNode | null> {
    const ln = await this.acquireForWrite(path)
    const tombstone = ln.node ? null : await this.tombstoneAt(ln)
    const current = ln.node
    const result = fn(current)
    if (result === undefined || result === current) return current
    if (result === null) {
      if (!current) return null
      await this.deleteIn(ln, principal, origin, false, attach)
      return null
    }
    if (!current) return this.createIn(ln, principal, result, origin, attach, tombstone)
    return this.replaceIn(ln, principal, result, origin, attach)
  }

  delete(principal: Principal, path: NodePath, origin: ChangeOrigin = 'http', attach?: CommitAttachment): Promise<void> {
    return this.againAfterElsewhere(path, attach, () => this.deleteOnce(principal, path, origin, attach))
  }

  private async deleteOnce(principal: Principal, path: NodePath, origin: ChangeOrigin, attach?: CommitAttachment): Promise<void> {
    const ln = await this.cache.acquire(path)
    this.existing(ln, principal)
    await this.deleteIn(ln, principal, origin, false, attach)
  }

  /** A client's Yjs update (sockets): inspected before it may touch the authoritative doc. */
  async applyClientUpdate(principal: Principal, path: NodePath, update: Uint8Array, conn: RoomConnection | null, origin: ChangeOrigin): Promise<MeshNode | null> {
    return this.applyClientUpdateLoaded(await this.cache.acquireDoc(path), principal, update, conn, origin)
  }

  /**
   * [ACC10] The synchronous part (admission, checks, application, enqueueing) happens before
   * this returns, so a socket's updates apply in arrival order; the returned promise settles once
   * durable. All or nothing: a refused update leaves the doc, the stored log and the room exactly
   * as they were.
   */
  applyClientUpdateLoaded(ln: LoadedNode, principal: Principal, update: Uint8Array, conn: RoomConnection | null, origin: ChangeOrigin): Written {
    const before = this.existing(ln, principal)
    if (!ln.hasDoc) throw new WeftError('internal', `${ln.path} was not opened for sync; reconnect.`)
    const perms = isSystem(principal) ? null : this.access.permissions(principal, ln.path)
    // The `owner` of a node (a run's creator) may change the fields the owner rule gives them; the
    // field rules below decide which.
    const mayWrite = perms === null || perms.has('Update') || (principal.kind === 'user' && ownerOf(before) === principal.userId)
    const admission = admitUpdate(ln.doc, update, { maxDepth: this.maxJsonDepth, mayWriteStructure: mayWrite })
    if (!admission.ok) {
      if (admission.code === 'forbidden') throw new WeftError('forbidden', `${principalName(principal)} may not change ${ln.path} (no Update permission).`)
      throw new WeftError(admission.code, `${admission.message} (${ln.path}; reload the node.)`)
    }
    if (!admission.update) return Promise.resolve(before)
    // [ACC12] Nobody writes under a client id another principal wrote with in this node.
    const bindings = ln.clientBindings.claim(principalName(principal), admission.clients, ln.path)
    const fields = admission.fields
    this.authorizeFields(principal, before, fields)
    // Types with a schema (or a write rule): the touched fields are checked on the shadow before
    // the doc sees anything.
    let added: JsonObject | undefined
    const check = isPermissiveContent(before.nodeType) && !this.rules.has(before.nodeType)
      ? null
      : (result: Y.Doc) => {
          const next = withFieldsFromDoc(before.content, result, fields)
          // [CTX57] The type's write rule first, as on every other write path (create, replace,
          // patch, append): its named refusal (contextual_invalid_definition) is the answer on the
          // sync socket too, not the schema's generic invalid_content.
          added = this.rules.fields(principal, before.nodeType, before.path, before, next, origin)
          validateFields(before.nodeType, next, fields)
          this.checkInvariants(before, { ...before, content: next })
        }
    let applied: Uint8Array | null
    try {
      applied = ln.applyAdmitted(admission.update, conn, check)
    } catch (e) {
      if (!(e instanceof DocCorrupted)) throw e
      // Yjs failed half-way (the gate should have refused it): this copy is dropped and the next
      // use reloads what storage holds, which never saw the update.
      this.cache.dropCorrupted(ln, e)
      throw new WeftError('invalid_update', `The update to ${ln.path} could not be applied; reload the node.`)
    }
    if (!applied) return Promise.resolve(before)
    ln.clientBindings.record(bindings)
    const next = withFieldsFromDoc(before.content, ln.doc, fields)
    const written = this.commitChange(ln, principal, before, { ...before, content: next, updatedAt: now() }, 'Updated', applied, origin, true, bindings)
    if (!added) return written
    // The write rule's fields, as system, in this same synchronous stretch: no write (and no
    // engine's claim) can come between the user's change and them. Relayed to every client.
    const amended = ln.node!
    const extra = added
    const system = ln.capture(() => applyPatchToDoc(ln.doc, extra, 'system', textPolicyFor(amended.nodeType)))
    const also = this.commitChange(ln, SYSTEM, amended, { ...amended, content: applyMergePatch(amended.content, extra) as JsonObject, updatedAt: now() }, 'Updated', system, 'system')
    return Promise.all([written, also]).then(([, n]) => n)
  }

  async append(
    principal: Principal,
    path: NodePath,
    field: string,
    items: readonly JsonValue[],
    origin: ChangeOrigin = 'engine',
    opts: AppendOptions = {},
    attach?: CommitAttachment,
  ): Promise<MeshNode> {
    assertMergePatch({ [field]: items as JsonValue[] })
    let ln = await this.cache.acquire(path)
    // Refused (missing, unreadable) before a doc is built for it.
    let before = this.existing(ln, principal)
    if (items.length === 0 && !opts.patch) return this.unchanged(principal, before, [field])
    if (!ln.hasDoc) {
      ln = await this.cache.acquireDoc(path)
      before = this.existing(ln, principal)
    }
    let patch = opts.patch ? opts.patch(before) : {}
    if (patch === undefined) return this.unchanged(principal, before, [field])
    assertMergePatch(patch, this.maxJsonDepth, false)
    if (Object.prototype.hasOwnProperty.call(patch, field)) throw new WeftError('invalid_patch', `An append to ${field} cannot also patch ${field}.`)
    const set = opts.set && Object.keys(opts.set).length > 0 ? opts.set : null
    if (set) {
      assertJsonContent(set, this.maxJsonDepth, false)
      const both = Object.keys(set).find((k) => k === field || Object.prototype.hasOwnProperty.call(patch, k))
      if (both !== undefined) throw new WeftError('invalid_patch', `${both} is both set and patched (or appended to) in one write.`)
    }
    // The set fields as they will read back (a copy, nulls kept), made once.
    const setJson = set ? replaceJsonContent(set, 'checked by the caller') : null
    const withSet = (content: JsonObject): JsonObject => (setJson ? { ...content, ...setJson } : content)
    const setKeys = setJson ? Object.keys(setJson) : []
    let patched = [...Object.keys(patch), ...setKeys]
    if (items.length === 0 && patched.length === 0) return this.unchanged(principal, before, [field])
    const prev = before.content[field]
    if (prev !== undefined && prev !== null && !Array.isArray(prev)) {
      throw new WeftError('invalid_patch', `${field} of ${path} is not an array; nothing can be appended to it.`)
    }
    this.admit(attach)
    this.authorizeFields(principal, before, items.length > 0 ? [field, ...patched] : patched)
    // The type's write rule, as on every other user write: it may refuse, or add system fields.
    if (!isSystem(principal) && this.rules.has(before.nodeType)) {
      const grown = items.length > 0 ? { [field]: [...(Array.isArray(prev) ? prev : []), ...items] } : {}
      const added = this.rules.fields(principal, before.nodeType, before.path, before, { ...withSet(applyMergePatch(before.content, patch) as JsonObject), ...grown }, origin)
      if (added) {
        patch = { ...patch, ...added }
        patched = [...Object.keys(patch), ...setKeys]
      }
    }
    // The array this copy of the node owns (grown in place); another array is copied once.
    let array = Array.isArray(prev) ? prev : []
    if (items.length > 0 && this.flush.appendable.get(array) !== ln) {
      array = [...array]
      this.flush.appendable.set(array, ln)
    }
    const merged = withSet(applyMergePatch(before.content, patch) as JsonObject)
    // [STO10] The patch's text where it changes the content (the items were checked whole).
    assertNewText(before.content, merged, 'invalid_patch')
    if (items.length > 0) validateAppend(before.nodeType, field, items, () => ({ ...merged, [field]: [...array, ...items] }))
    if (patched.length > 0) validateFields(before.nodeType, merged, patched)
    this.checkInvariants(before, { ...before, content: merged })
    const doc = ln.doc
    const update = ln.capture(() =>
      doc.transact(() => {
        if (items.length > 0) {
          const map = doc.getMap(CONTENT_MAP)
          const current = map.get(field)
          if (current instanceof Y.Array) {
            // [ACT12] At the end by index (a search marker finds it in O(1), push walks the whole
            // list), after a placeholder inserted and deleted: at the transaction's end Yjs merges
            // a new item into its left neighbour by clock when they are adjacent, and merging
            // ContentAny concatenates the arrays, copying the whole log on every append.
            const at = current.length
            current.insert(at, [null])
            current.delete(at, 1)
            current.insert(at, [...items])
          } else {
            const yarray = new Y.Array<unknown>()
            yarray.push([...(Array.isArray(current) ? current : []), ...items])
            map.set(field, yarray)
          }
        }
        if (Object.keys(patch).length > 0) applyPatchToDoc(doc, patch, origin, textPolicyFor(before.nodeType), 'checked by the caller')
        if (set) setDocFields(doc, set, origin, textPolicyFor(before.nodeType), 'checked by the caller')
      }, origin),
    )
    this.flush.noteAppended(array, items)
    for (const item of items) array.push(item)
    const next = patched.length > 0 ? withFieldsFromDoc(before.content, doc, patched) : { ...before.content }
    if (items.length > 0) next[field] = array
    // [STO5] The row's JSON is written later, coalesced: a line costs its Yjs insert, not the log.
    return (await this.commitChange(ln, principal, before, { ...before, content: next, updatedAt: now() }, 'Updated', update, origin, true, undefined, attach))!
  }

  /**
   * [MOVE2] Moves the subtree at `from` to `to` (the caller checked the rules, move-service.ts):
   * writes inside either subtree wait it out (refused with `conflict`), the subtree's pending
   * commits settle first, storage moves every row in one transaction, then, in one synchronous
   * stretch, the access index follows the moved assignments, clients of the old paths are told
   * where it went (closed with `moved`) and the feed publishes a Deleted and a Created per node.
   * [SCALE21] Several instances: refused (`conflict` naming `from`) when another instance changed
   * the subtree, or a new path's tombstone, since its tombstones were worked out; the move service
   * catches up and makes the whole move again, its checks included.
   */
  async relocate(principal: Principal, from: NodePath, to: NodePath, extra: Pick<MoveInput, 'redirect' | 'trash' | 'restore'>, origin: ChangeOrigin = 'http'): Promise<ChangeRecord[]> {
    if (this.underMove(from) || this.underMove(to) || this.deleting.has(from)) throw new WeftError('conflict', `${from} is being moved or deleted; retry in a moment.`)
    for (const p of this.moving) if (p.startsWith(`${from}/`) || p.startsWith(`${to}/`)) throw new WeftError('conflict', `Part of ${from} is being moved; retry in a moment.`)
    this.moving.add(from)
    this.moving.add(to)
    try {
      await this.cache.settleUnder(from)
      // [TOMB1] And the destination: a delete there still committing leaves the tombstone read below.
      await this.cache.settleUnder(to)
      // The access nodes the move carries: the index drops the old paths and takes the new ones.
      // [ACC14] The moved node itself too: a Membership moved to another group, or trashed (the
      // app's Delete), kept its member in the old group until a restart.
      const carried: MeshNode[] = []
      const root = await this.storage.getNode(from)
      if (root && isAccessType(root.nodeType)) carried.push(root)
      // [ACC16] Every one of them, page by page: one page of a query's most left the rest of a
      // subtree holding more assignments or memberships at their old paths in the index.
      for (const nodeType of ACCESS_NODE_TYPES) {
        for (let after: string | undefined; ;) {
          const page = await this.storage.queryNodes({ nodeType, limit: MAX_QUERY_LIMIT, ...(after !== undefined ? { after } : {}) }, { from: `${from}/`, to: `${from}0` })
          carried.push(...page)
          if (page.length < MAX_QUERY_LIMIT) break
          after = page[page.length - 1]!.path
        }
      }
      // [SCALE21] Several instances: every change up to this version is in the logs read next.
      const tombstoneBase = this.cluster.hooks ? await this.storage.lastVersion() : undefined
      const { tombstones, arrivals, arrivalsSeen, movedCount } = await this.tombstonesOfMove(from, to)
      const records = await this.storage.moveSubtree({
        from,
        to,
        at: now(),
        ...extra,
        tombstones,
        arrivals,
        // [FEED5] The Denied assignments the subtree takes away from where they stood.
        withhold: this.access.deniedWithin(from),
        ...(tombstoneBase !== undefined ? { tombstoneBase, arrivalsSeen, movedCount } : {}),
      })
      const moved = new Map<NodePath, MeshNode | null>()
      await Promise.all(records.filter((r) => r.kind === 'Created').map(async (r) => moved.set(r.path, await this.storage.getNode(r.path))))
      // From here on synchronous: no read or write sees half of it in memory.
      this.cache.dropMoved(from, to)
      for (const node of carried) this.access.observe(node, moved.get(`${to}${node.path.slice(from.length)}` as NodePath) ?? null)
      const by = principalName(principal)
      for (const r of records) this.feed.publish({ ...r, node: r.kind === 'Created' ? (moved.get(r.path) ?? null) : null, by, origin })
      return records
    } finally {
      this.moving.delete(from)
      this.moving.delete(to)
    }
  }

  /**
   * [TOMB1] A move's tombstones, from the stored logs (every write under `from` has settled, and
   * writes there wait for the move): what each node leaves at its old path, and what it takes of
   * the tombstone at its new one.
   */
  private async tombstonesOfMove(from: NodePath, to: NodePath): Promise<Required<Pick<MoveInput, 'tombstones' | 'arrivals' | 'arrivalsSeen' | 'movedCount'>>> {
    const paths = [from, ...(await this.storage.descendants(from))]
    const tombstones: { path: NodePath; state: Uint8Array }[] = []
    const arrivals = new Map<NodePath, Uint8Array>()
    /** [SCALE21] The tombstones found at the new paths, by digest. */
    const arrivalsSeen = new Map<NodePath, string>()
    // A trash entry's path is never used again: it leaves nothing (a restore from the trash reads
    // only the logs of nodes arriving over a tombstone).
    const leaving = !isInTrash(from)
    for (let i = 0; i < paths.length; i += 16) {
      const part = paths.slice(i, i + 16)
      const moved = part.map((p) => `${to}${p.slice(from.length)}` as NodePath)
      const there = await Promise.all(moved.map((p) => this.storage.loadTombstone(p)))
      const logs = await Promise.all(part.map((p, j) => (leaving || there[j] ? this.storage.loadDoc(p) : null)))
      for (const [j, path] of part.entries()) {
        const stored = logs[j] ?? null
        const arriving = there[j]
        if (arriving) {
          arrivalsSeen.set(moved[j]!, tombstoneDigest(arriving))
          const take = await this.arrivalOf(path, stored, arriving)
          if (take) arrivals.set(moved[j]!, take)
        }
        const state = stored && leaving ? await this.storage.tombstoneOf(stored.snapshot, stored.updates) : null
        if (state) tombstones.push({ path, state })
      }
    }
    return { tombstones, arrivals, arrivalsSeen, movedCount: paths.length }
  }

  /**
   * [TOMB1] What a node moving onto a tombstone takes into its log: the tombstone whole when it
   * shares no client with it (another node's history), nothing when its own log covers it (its
   * own history coming back). Both at once (it came back to a path where another node lived
   * since, built over its tombstone) is taken whole, then the node's content is written again in
   * one system transaction under a fresh client id, as a restore writes a node forward: the
   * tombstone deletes the node's own items, which a stale copy of that other node would delete
   * too.
   */
  private async arrivalOf(path: NodePath, stored: StoredDoc | null, tombstone: Uint8Array): Promise<Uint8Array | null> {
    const own = stored ? clocksOf(Y.mergeUpdates(stored.snapshot ? [stored.snapshot, ...stored.updates] : stored.updates)) : new Map<number, number>()
    const theirs = clocksOf(tombstone)
    if (![...theirs.keys()].some((c) => own.has(c))) return tombstone
    if ([...theirs].every(([c, clock]) => (own.get(c) ?? 0) >= clock)) return null
    const node = await this.storage.getNode(path)
    const doc = new Y.Doc()
    try {
      if (stored) replayLog(doc, stored.snapshot, stored.updates)
      const before = Y.encodeStateVector(doc)
      const content = docToJson(doc)
      Y.applyUpdate(doc, tombstone)
      replaceDocContentForward(doc, content, textPolicyFor(node?.nodeType ?? 'Document'))
      return Y.encodeStateAsUpdate(doc, before)
    } finally {
      doc.destroy()
    }
  }

  /**
   * [MOVE8] Renames: the name changes, the path (and every link to it) stays. Needs Update.
   * [WEB62] A profile's name is its person's name: renaming a User node writes its FullName too
   * (what presence, members and invites show), so a person never has two names.
   */
  async rename(principal: Principal, path: NodePath, name: string, origin: ChangeOrigin = 'http'): Promise<MeshNode> {
    const ln = await this.acquireForWrite(path)
    const before = this.existing(ln, principal)
    if (before.nodeType === 'User' && before.content.FullName !== name) {
      return (await this.writeContent(ln, principal, before, name, { ...before.content, FullName: name }, { FullName: name }, origin, undefined, ['FullName']))!
    }
    return (await this.writeContent(ln, principal, before, name, before.content, {}, origin, undefined, []))!
  }

  // ---------------------------------------------------------------- write internals

  /** A caller creates under an existing node (reserved segments like `_Access` are not nodes). */
  private async requireParent(principal: Principal, path: NodePath): Promise<void> {
    if (isSystem(principal)) return
    let parent = parentPath(path)
    // A reserved place that holds nodes without being one (`_Access`, `_Activity`, `_Trash`) is
    // passed over; a node the engine makes at a reserved segment (a sub-thread `_sub.{id}`, a
    // response `_r.{id}`) must be there: a person could plant a message under a sub-thread before
    // its delegation made it, and the delegation then failed (stop 42).
    while (parent && isContainerSegment(lastSegment(parent))) parent = parentPath(parent)
    if (!parent) return
    // [ACC11] Whether the parent exists is told only to someone who may read it, or who holds a
    // right at the path itself (a partition's Admin writes under Admin/Partition without reading
    // it): the same refusal under an unreadable parent whether it is there or not.
    if (!this.access.has(principal, parent, 'Read') && this.access.permissions(principal, path).size === 0) {
      this.requirePermission(principal, parent, 'Read')
    }
    if (!(await this.cache.exists(parent))) throw new WeftError('not_found', `Cannot create ${path}: its parent ${parent} does not exist.`)
    // [ACT11] A partition is defined for an existing top-level node; told only to someone with a
    // right at the definition's path (the rest are refused by the create's own check).
    const place = partitionPlace(path)
    if (place && 'name' in place && this.access.permissions(principal, path).size > 0 && !(await this.cache.exists(place.name as NodePath))) {
      throw new WeftError('invalid_path', `${path} would define the partition of ${place.name}, and there is no top-level node ${place.name}.`)
    }
  }

  /**
   * [CTX25] The attachment's admission check, for the write that will carry it: called after the
   * write's last await and before anything is applied, in the same synchronous stretch as the
   * write's own access check and its commit.
   */
  private admit(attach: CommitAttachment | undefined): void {
    if (attach?.attachment && attach.admit) attach.admit()
  }

  private writable(ln: LoadedNode): void {
    if (ln.poisoned) throw new WeftError('unavailable', `A change to ${ln.path} could not be saved; retry in a moment.`)
    if (this.moving.size > 0 && this.underMove(ln.path)) throw new WeftError('conflict', `${ln.path} is being moved; retry in a moment.`)
  }

  private underMove(path: NodePath): boolean {
    for (let p: NodePath | null = path; p; p = parentPath(p)) if (this.moving.has(p)) return true
    return false
  }

  private existing(ln: LoadedNode, principal: Principal): MeshNode {
    this.writable(ln)
    if (!ln.node) {
      // Never reveal absence to someone who could not read the node anyway.
      this.requirePermission(principal, ln.path, 'Read')
      throw new WeftError('not_found', `No node at ${ln.path}.`)
    }
    this.requirePermission(principal, ln.path, 'Read')
    return ln.node
  }

  private createIn(ln: LoadedNode, principal: Principal, draft: NodeDraft, origin: ChangeOrigin, attach?: CommitAttachment, tombstone: Uint8Array | null = null): Written {
    this.admit(attach)
    this.writable(ln)
    const path = ln.path
    for (let p = parentPath(path); p; p = parentPath(p)) {
      if (this.deleting.has(p)) throw new WeftError('conflict', `Cannot create ${path}: ${p} is being deleted.`)
    }
    const def = nodeTypeDef(draft.nodeType)
    let content = draft.content ?? {}
    assertJsonContent(content, this.maxJsonDepth)
    if (draft.name !== undefined) assertNodeName(draft.name)
    checkPlacement(principal, path, draft.nodeType)
    const parent = parentPath(path)
    if (!parent) {
      if (!isSystem(principal) && draft.nodeType !== 'Space') {
        throw new WeftError('forbidden', `Only a Space may be created at the top level (${path} is a ${draft.nodeType}).`)
      }
    } else {
      // A path the caller cannot read gets the refusal an existing unreadable node gets ([ACC11]).
      if (!isSystem(principal)) this.requirePermission(principal, path, 'Read')
      if (!this.allows(principal, path, def.create)) {
        throw new WeftError('forbidden', `${principalName(principal)} may not create a ${draft.nodeType} at ${path}.`)
      }
    }
    // Creating writes every field it names: the same rules as a patch ([ACC7]). The creator of a
    // top-level space becomes its Admin, so it may write whatever an Admin may.
    if (!isSystem(principal) && parent) {
      checkFieldRules(principal, this.access.permissions(principal, path), draft.nodeType, path, Object.keys(content))
    } else if (!isSystem(principal)) {
      checkFieldRules(principal, ALL_PERMISSIONS, draft.nodeType, path, Object.keys(content))
    }
    const added = this.rules.fields(principal, draft.nodeType, path, null, content, origin)
    if (added) content = { ...content, ...added }
    // [THR26] The type's created-with fields; a person's content cannot name them (system fields).
    if (def.createdWith) content = { ...def.createdWith, ...content }
    validateContent(draft.nodeType, content)
    this.checkInvariants(null, { path, nodeType: draft.nodeType, content } as MeshNode)
    let update: Uint8Array | null = null
    let stored: JsonObject
    // A new doc has no log to read: cheap to build now for a node a client will likely open. Over
    // a tombstone, always: the new node's first update must hold it ([TOMB1]).
    if (!ln.hasDoc && (tombstone || buildsDocOnCreate(origin))) ln.setDoc(new Y.Doc({ guid: path }))
    if (ln.hasDoc) {
      const doc = ln.doc
      // [WEB3] Text fields become Y.Text on the server's writes too, so they merge from the start.
      // [PATCH4] The content is set, not patched: a null member is kept, as it was sent.
      // [TOMB1] Over a tombstone the doc first covers every struct the path's old node had: a
      // stale copy of it adds nothing old here, and is told to delete what it holds.
      update =
        ln.capture(() => {
          if (tombstone) Y.applyUpdate(doc, tombstone)
          replaceDocContent(doc, content, 'system', textPolicyFor(draft.nodeType))
        }) ?? Y.encodeStateAsUpdate(doc)
      stored = docToJson(doc)
    } else {
      // [DOC1] No doc built: the JSON the doc would hold; it is built (and caught up) when a client opens the node.
      stored = replaceJsonContent(content)
    }
    const at = now()
    const node: MeshNode = {
      path,
      nodeType: draft.nodeType,
      name: draft.name ?? lastSegment(path),
      content: stored,
      createdBy: principalName(principal),
      createdAt: at,
      updatedAt: at,
      version: 0,
      state: 'Active',
    }
    ln.leftTombstone = null
    const written = this.commitChange(ln, principal, null, node, 'Created', update, origin, false, undefined, attach, { tombstone: tombstone ? 'taken' : null, startedFrom: tombstone })
    if (!parent && draft.nodeType === 'Space' && !isSystem(principal)) {
      // The creator of a space becomes its Admin (DESIGN.md "Identity and access").
      const grantPath = `${path}/${ACCESS_SEGMENT}/${principal.userId}_Access` as NodePath
      const grant = this.update(
        SYSTEM,
        grantPath,
        () => ({ nodeType: 'AccessAssignment', content: { Subject: principal.userId, Role: 'Admin' } }),
        'system',
      )
      return Promise.all([written, grant]).then(
        ([n]) => n,
        async (err: unknown) => {
          // A space without its Admin could be read or fixed by nobody: take it back. And an Admin
          // grant for a space that was refused would be the Admin of whoever makes it next: that too.
          await grant.catch(() => undefined)
          await this.delete(SYSTEM, path, 'system').catch(() => undefined)
          await this.delete(SYSTEM, grantPath, 'system').catch(() => undefined)
          throw err
        },
      )
    }
    return written
  }

  /** Structural rules of reserved places. */
  private replaceIn(ln: LoadedNode, principal: Principal, draft: NodeDraft | MeshNode, origin: ChangeOrigin, attach?: CommitAttachment): Written {
    const before = this.existing(ln, principal)
    if (draft.nodeType !== before.nodeType) {
      throw new WeftError('conflict', `${ln.path} is a ${before.nodeType}; it cannot become a ${draft.nodeType} (delete it first).`)
    }
    const content = keepUnwritable(principal, () => this.access.permissions(principal, ln.path), before, keepCreatedWith(before, draft.content ?? {}))
    // [STO10] The text it brings is checked in writeContent.
    assertJsonContent(content, this.maxJsonDepth, false)
    // [PATCH4] A replace sets the content (a merge patch could not set a member to null).
    return this.writeContent(ln, principal, before, draft.name ?? before.name, content, null, origin, attach)
  }

  private writeContent(
    ln: LoadedNode,
    principal: Principal,
    before: MeshNode,
    name: string,
    next: JsonObject,
    /** null: `next` replaces the content whole ([PATCH4]). */
    patch: MergePatch | null,
    origin: ChangeOrigin,
    attach?: CommitAttachment,
    changed: readonly string[] = changedFields(before.content, next),
  ): Written {
    if (changed.length === 0 && name === before.name) return Promise.resolve(this.unchanged(principal, before, Object.keys(patch ?? next)))
    if (name !== before.name) assertNodeName(name)
    this.admit(attach)
    this.authorizeFields(principal, before, changed)
    if (name !== before.name && !this.allows(principal, ln.path, 'Update')) {
      throw new WeftError('forbidden', `${principalName(principal)} may not rename ${ln.path}.`)
    }
    const added = this.rules.fields(principal, before.nodeType, before.path, before, next, origin)
    if (added) {
      next = { ...next, ...added }
      // A replace (patch null) stays a replace of the amended content.
      if (patch) patch = { ...patch, ...added }
    }
    // [STO10] The text this write brings (the rule's fields included); what it keeps is not refused.
    assertNewText(before.content, next, patch ? 'invalid_patch' : 'invalid_content')
    validateContent(before.nodeType, next)
    this.checkInvariants(before, { ...before, content: next })
    let update: Uint8Array | null = null
    let content: JsonObject
    if (ln.hasDoc) {
      const isText = textPolicyFor(before.nodeType)
      update = ln.capture(() => (patch ? applyPatchToDoc(ln.doc, patch, origin, isText, 'checked by the caller') : replaceDocContent(ln.doc, next, origin, isText, 'checked by the caller')))
      content = docToJson(ln.doc)
    } else {
      // [DOC1] JSON only until a client opens the node; the same merge the doc would apply.
      content = patch ? applyPatchToJson(before.content, patch, 'checked by the caller') : replaceJsonContent(next, 'checked by the caller')
    }
    const after: MeshNode = { ...before, name, content, updatedAt: now() }
    // [STO5] A patch of a typed node's declared text fields only (an answer streamed into its
    // cell, a script's Source): the row's JSON is written later, coalesced, as a person's typing
    // is. Rewritten at every write, a streamed answer cost its whole length each time.
    const textOnly = update !== null && patch !== null && name === before.name && changed.every((f) => isDeclaredTextField(before.nodeType, f))
    return this.commitChange(ln, principal, before, after, 'Updated', update, origin, textOnly, undefined, attach)
  }

  /** A write that changes nothing, answered with the node only to whom could have written what it names. */
  private unchanged(principal: Principal, node: MeshNode, named: readonly string[]): MeshNode {
    if (!isSystem(principal)) checkNoopWrite(principal, this.access.permissions(principal, node.path), node.nodeType, node.path, named, ownerOf(node))
    return node
  }

  private authorizeFields(principal: Principal, node: MeshNode, fields: Iterable<string>): void {
    if (isSystem(principal)) return
    const perms = this.access.permissions(principal, node.path)
    if (!perms.has('Read')) throw new WeftError('forbidden', `${principalName(principal)} cannot read ${node.path}.`)
    checkFieldRules(principal, perms, node.nodeType, node.path, fields, ownerOf(node))
  }

  /** [ACC7] The one field-rule check: patch, replace, Yjs update and create alike. */
  private async deleteIn(ln: LoadedNode, principal: Principal, origin: ChangeOrigin, cascading: boolean, attach?: CommitAttachment): Promise<void> {
    const before = ln.node
    if (!before) return
    if (!cascading && !this.allows(principal, ln.path, nodeTypeDef(before.nodeType).delete)) {
      throw new WeftError('forbidden', `${principalName(principal)} may not delete ${ln.path}.`)
    }
    this.checkInvariants(before, null, cascading)
    // [CTX50] A reaction's delete: its outcome carried by the node's own delete, the last commit
    // (a failure half-way leaves the reaction unrecorded, and its retry finds the children gone);
    // each child's delete is admitted and fenced as a step (checked, nothing recorded).
    const step = attach?.attachment ? stepOf(attach) : undefined
    // Marked before the first await: no child can be created under the subtree meanwhile.
    const marked = !this.deleting.has(ln.path)
    if (marked) this.deleting.add(ln.path)
    // Held across the awaits below: this copy must stay the loaded one until its delete commits.
    ln.holds++
    let tombstone: Uint8Array | null = null
    /** The doc's state vector the tombstone was made from (null: made from the stored log). */
    let madeFrom: Uint8Array | null = null
    /** [SCALE19] Made from the stored log: the version every change up to which it holds (absent: made from the doc at the commit). */
    let tombstoneBase: number | undefined
    // [FEED5] The Denied assignments of the subtree, as they stand before any child goes: the last
    // commit (the node's own) withholds the records they kept from their subjects, everything the
    // delete wrote included.
    const withhold = cascading ? [] : this.access.deniedWithin(ln.path)
    try {
      // Stored children, and those whose creation is applied but not yet durable.
      const prefix = `${ln.path}/`
      const listed = async () => [...new Set([...(await this.storage.descendants(ln.path)), ...this.cache.loadedUnder(prefix)])]
      let children = await listed()
      // [MOVE5] As the trash: a subtree holding nodes the deleter cannot read (a Deny below) is not
      // theirs to delete. Checked on the first list, before any child is deleted.
      if (!cascading && !isSystem(principal) && children.some((child) => !this.access.permissions(principal, child).has('Read'))) {
        throw new WeftError('forbidden', `${ln.path} holds nodes you cannot read; only someone who can read all of it may delete it.`)
      }
      // Children first, so a crash half-way never leaves orphans under a deleted parent. The
      // list is read again until empty: a child committed while the first list was read counts.
      for (let pass = 0; pass < 5; pass++) {
        if (pass > 0) children = await listed()
        if (children.length === 0) break
        children.sort(deepestFirstAccessLast)
        for (const child of children) {
          const cl = await this.cache.acquire(child)
          await this.deleteIn(cl, principal, origin, true, step)
        }
      }
      // [TOMB1] What the node leaves at its path: every struct a client may hold of it, from the
      // doc or the stored log, made off the event loop for a big node (the last await). A trash
      // entry's path is never used again: it leaves nothing.
      if (!isInTrash(ln.path)) {
        if (ln.hasDoc) {
          madeFrom = Y.encodeStateVector(ln.doc)
          tombstone = await this.storage.tombstoneOf(Y.encodeStateAsUpdate(ln.doc), [])
        } else {
          // [SCALE19] Several instances: the stored log holds every change up to here at least.
          tombstoneBase = this.cluster.hooks?.watermark()
          const stored = await this.storage.loadDoc(ln.path)
          tombstone = stored ? await this.storage.tombstoneOf(stored.snapshot, stored.updates) : null
        }
      }
    } finally {
      if (marked) this.deleting.delete(ln.path)
      ln.holds--
    }
    const current = ln.node
    if (!current) return
    // A doc built or written since the tombstone was made holds more: made again, here, in step with the commit.
    if (!isInTrash(ln.path) && ln.hasDoc && !(madeFrom && Buffer.compare(madeFrom, Y.encodeStateVector(ln.doc)) === 0)) {
      tombstone = tombstoneOfDoc(ln.doc)
      tombstoneBase = undefined
    }
    this.admit(attach)
    ln.leftTombstone = tombstone
    // [SCALE19] Made from the doc (now): every change this instance has applied is in it. None is
    // left in the trash.
    if (tombstoneBase === undefined && !isInTrash(ln.path)) tombstoneBase = this.cluster.hooks?.watermark()
    const written = this.commitChange(ln, principal, current, null, 'Deleted', null, origin, false, undefined, attach, {
      tombstone,
      ...(tombstoneBase !== undefined ? { tombstoneBase } : {}),
      ...(withhold.length > 0 ? { withhold } : {}),
    })
    for (const conn of [...ln.connections]) conn.evict(4404, 'not_found', `${ln.path} was deleted.`)
    ln.resetDoc()
    await written
  }
}

/**
 * A subtree's delete order: every node after its descendants (a crash half-way leaves no orphan),
 * and a node's access assignments after the rest of what lies below it ([FEED5]): a Denied keeps
 * out whom it names until nothing it guards is left but the node itself. Descending order of the
 * path with `/_Access/` written as a segment below every other.
 */
function deepestFirstAccessLast(a: string, b: string): number {
  const ka = a.replaceAll(`/${ACCESS_SEGMENT}/`, '/\u0001/')
  const kb = b.replaceAll(`/${ACCESS_SEGMENT}/`, '/\u0001/')
  return ka < kb ? 1 : ka > kb ? -1 : 0
}

let nowMs = 0
let nowIso = ''

/** The time as ISO text, formatted once per millisecond (a burst of writes shares it). */
function now(): string {
  const ms = Date.now()
  if (ms !== nowMs) {
    nowMs = ms
    nowIso = new Date(ms).toISOString()
  }
  return nowIso
}

/**
 * [THR26] A replacement with the type's created-with fields it leaves out taken from `before`:
 * a replace does not drop them (a person could not, they are system fields: a retried PUT of a
 * new Thread would be refused), and one that names them is checked as any field is.
 */
function keepCreatedWith(before: MeshNode, content: JsonObject): JsonObject {
  const kept = nodeTypeDef(before.nodeType).createdWith
  if (!kept) return content
  let out = content
  for (const field of Object.keys(kept)) {
    if (content[field] === undefined && before.content[field] !== undefined) out = { ...out, [field]: before.content[field]! }
  }
  return out
}
