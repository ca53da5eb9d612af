import { Observable, Subject } from 'rxjs'
import { WeftError, principalName, type MeshChangeKind, type MeshNode, type NodePath, type Principal } from '../../shared/index.js'
import type { ClientBinding } from '../admission/index.js'
import { deniedBegun, deniedEnded, type AccessService } from '../access/index.js'
import { tombstoneDigest, type FeedWithhold, type StorageAdapter } from '../storage/index.js'
import type { ContentFlush } from './content-flush.js'
import type { LoadedNode } from './loaded-node.js'
import type { NodeCache } from './node-cache.js'
import type { ChangeOrigin, ClusterLink, CommitAttachment, LiveChange } from './types.js'

/** One change to commit: the node before and after (null: absent), and how it came. */
export interface ChangeToCommit {
  principal: Principal
  before: MeshNode | null
  after: MeshNode | null
  kind: MeshChangeKind
  update: Uint8Array | null
  origin: ChangeOrigin
  /** Leave the row's content to the content flush ([STO5]); only an update with a Yjs log entry can. */
  deferContent?: boolean
  /** [ACC12] The client ids a client's update binds; absent for the server's own writes. */
  clients?: readonly ClientBinding[]
  /** [CTX26] Carried into this commit's transaction, if still there (the first commit takes it). */
  attach?: CommitAttachment
  /** [TOMB1] Deleted: the tombstone it leaves; Created: `'taken'` when its update holds the path's tombstone. */
  tombstone?: Uint8Array | 'taken' | null
  /** [SCALE18] Created: the tombstone the new node started from (null: none). */
  startedFrom?: Uint8Array | null
  /** [SCALE19] Deleted, several instances: the version up to which its tombstone (or its lack of one) holds every change. */
  tombstoneBase?: number
  /** [FEED5] Denied assignments this commit ends besides its own node's (a subtree's delete: every one it held). */
  withhold?: readonly FeedWithhold[]
}

/**
 * Commit and feed: the one place a change is committed (memory first, so the next write sees it;
 * storage enqueued in the same synchronous stretch) and published once durable, to the whole
 * feed (`changes$`) and to the watchers of its node (`node$`).
 */
export class CommitFeed {
  private readonly changesSubject = new Subject<LiveChange>()
  /** Per-path feeds for node$: a watcher sees its node's changes only, not the whole mesh's. */
  private readonly pathSubjects = new Map<NodePath, Subject<LiveChange>>()
  readonly changes$: Observable<LiveChange> = this.changesSubject.asObservable()
  /** [OPS3] Told how long each commit took to become durable, in seconds (the metrics' histogram). */
  onCommitted: ((seconds: number) => void) | null = null

  constructor(
    private readonly storage: StorageAdapter,
    private readonly access: AccessService,
    private readonly cache: NodeCache,
    private readonly flush: ContentFlush,
    /**
     * [SCALE1] [SCALE2] The other instances: this instance's own durable changes go to them too
     * (changes applied from another instance do not), each commit with the watermark.
     */
    private readonly cluster: ClusterLink,
  ) {}

  commit(ln: LoadedNode, c: ChangeToCommit): Promise<MeshNode | null> {
    const { principal, before, after, kind, update, origin, clients } = c
    const target = after ?? before!
    // Only an update with a Yjs log entry can leave the row's content to a later write.
    const deferred = c.deferContent === true && kind === 'Updated' && update !== null
    if (deferred) this.flush.markContentDirty(ln)
    // Every other commit writes the whole row (or removes it).
    else ln.contentDirty = false
    if (kind !== 'Updated') ln.generation++
    ln.node = after
    ln.lastUsed = Date.now()
    this.access.observe(before, after)
    ln.commitStarted(true)
    const holder = c.attach
    const taken = holder?.attachment ?? undefined
    // [CTX50] Past the command's own delete of the source row, its later commits check the rest.
    const contextual = taken?.source && taken.sourceGone?.value ? { ...taken, source: undefined } : taken
    const carrier = contextual ? holder : undefined
    // [CTX50] A step's fence stays for the command's next commits; an outcome is carried once.
    if (holder && !contextual?.fenceOnly) holder.attachment = null
    const started = this.onCommitted ? performance.now() : 0
    // [SCALE12] The update goes to the other instances now, as it went to this room's clients:
    // its commit is under way, and its change message confirms it once durable.
    const early = update && kind === 'Updated' ? this.cluster.hooks?.accepted(ln.path, update, clients) : undefined
    // What this doc holds from the others that is not durable yet: this commit may build on it.
    let builtOn: Promise<void>[] | null = null
    for (const e of ln.early.values()) if (!e.done) (builtOn ??= []).push(e.settled)
    // [FEED5] A Denied this commit ends: the records it kept from its subject stay withheld from them.
    const ended = deniedEnded(before, after)
    const withhold = ended ? [...(c.withhold ?? []), ended] : c.withhold
    // [FEED8] A Denied this commit begins: its record is the lower bound of what its end withholds.
    const begun = deniedBegun(before, after)
    const committed = this.storage.commit({
      contextual,
      path: ln.path,
      kind,
      nodeType: target.nodeType,
      name: target.name,
      content: target.content,
      createdBy: target.createdBy,
      at: target.updatedAt,
      update,
      deferContent: deferred || undefined,
      ...(c.tombstone ? { tombstone: c.tombstone } : {}),
      ...(withhold?.length ? { withhold } : {}),
      ...(begun !== null ? { deniedFrom: begun } : {}),
      // [ACC12] Stored with the update that introduces them; the server doc's own id with its first write.
      // [SCALE2] Several instances: every change up to this version is in this copy.
      ...(this.cluster.hooks ? { baseVersion: this.cluster.hooks.watermark() } : {}),
      // [SCALE16] Several instances: the node this change was made for, checked in the commit's
      // transaction (another instance may have deleted it and created another at the path).
      ...(this.cluster.hooks && before && kind !== 'Created' ? { nodeCreatedAt: before.createdAt } : {}),
      // [SCALE18] Several instances: the tombstone this node started from, checked in the commit's
      // transaction (another instance may have deleted a node at the path since it was read).
      ...(this.cluster.hooks && kind === 'Created' ? { tombstoneDigest: c.startedFrom ? tombstoneDigest(c.startedFrom) : null } : {}),
      // [SCALE19] Several instances: a tombstone made without a change another instance committed
      // since is refused in the commit's transaction (the writer catches up and deletes again).
      ...(this.cluster.hooks && kind === 'Deleted' && c.tombstoneBase !== undefined ? { tombstoneBase: c.tombstoneBase } : {}),
      clients: clients !== undefined ? (clients.length > 0 ? clients : undefined) : update && ln.hasDoc ? ln.clientBindings.serverBinding() : undefined,
    })
    const done = committed.then(
      (record) => {
        if (this.onCommitted) this.onCommitted((performance.now() - started) / 1000)
        if (carrier) {
          if (kind === 'Deleted' && contextual?.source?.path === ln.path && contextual.sourceGone) contextual.sourceGone.value = true
          carrier.landed = true
          carrier.onLanded?.()
          if (!contextual?.fenceOnly) carrier.version = record.version
        }
        this.cache.settledWrite(ln.path)
        this.cache.commitLanded(ln, true)
        const versioned = after ? { ...after, version: record.version } : null
        if (ln.node === after) ln.node = versioned
        const change: LiveChange = {
          version: record.version,
          path: record.path,
          nodeType: record.nodeType,
          kind: record.kind,
          node: versioned,
          by: principalName(principal),
          origin,
        }
        this.publish(change, update, clients, early)
        return versioned
      },
      (err: unknown) => {
        if (early) this.cluster.hooks?.acceptedFailed(ln.path, early)
        this.cache.settledWrite(ln.path)
        this.access.observe(after, before)
        this.cache.commitFailed(ln, err, true)
        throw err instanceof WeftError ? err : new WeftError('internal', 'The change could not be saved.')
      },
    )
    if (!builtOn) return done
    // [SCALE12] Acknowledged once what it may build on is durable where it was made.
    return done.then((node) =>
      Promise.all(builtOn).then(
        () => node,
        () => {
          throw new WeftError('unavailable', `A change ${ln.path} held from another server was not saved there; reload the node.`)
        },
      ),
    )
  }

  /** Publishes a durable change of this instance to the whole feed, the watchers of its node and the other instances. */
  publish(change: LiveChange, update: Uint8Array | null = null, clients?: readonly ClientBinding[], early?: string): void {
    this.publishLocal(change)
    this.cluster.hooks?.committed(change, update, clients, early)
  }

  /** Publishes a durable change to the local feed and the watchers of its node only (a change another instance made). */
  publishLocal(change: LiveChange): void {
    this.changesSubject.next(change)
    this.pathSubjects.get(change.path)?.next(change)
  }

  /** [SCALE9] Whether anything here watches the changes of `path` (the whole feed, or that node's). */
  wants(path: NodePath): boolean {
    return this.changesSubject.observed || this.pathSubjects.has(path)
  }

  /** The node as `read` gives it, then each of its committed changes (never an older one). */
  node$(path: NodePath, read: () => Promise<MeshNode | null>): Observable<MeshNode | null> {
    return new Observable<MeshNode | null>((subscriber) => {
      // Subscribe to the feed first so no change between the read and the subscription is lost.
      let current: MeshNode | null | undefined
      const buffered: LiveChange[] = []
      const emit = (c: LiveChange) => {
        if (current && c.node && c.version <= current.version) return
        current = c.node
        subscriber.next(c.node)
      }
      let subject = this.pathSubjects.get(path)
      if (!subject) this.pathSubjects.set(path, (subject = new Subject<LiveChange>()))
      const feed = subject
      const sub = feed.subscribe((c) => {
        if (current === undefined) buffered.push(c)
        else emit(c)
      })
      read().then(
        (node) => {
          current = node
          subscriber.next(node)
          for (const c of buffered.splice(0)) emit(c)
        },
        (err) => subscriber.error(err),
      )
      return () => {
        sub.unsubscribe()
        if (!feed.observed && this.pathSubjects.get(path) === feed) this.pathSubjects.delete(path)
      }
    })
  }

  close(): void {
    this.changesSubject.complete()
    for (const s of this.pathSubjects.values()) s.complete()
    this.pathSubjects.clear()
  }
}
