import { combineLatest, defer, from, map, Observable, startWith, switchMap } from 'rxjs'
import type { JsonObject } from '../../shared/index.js'
import { lastKnownPermissions, liveStoreQuery, type IndexRow, type KnownPermissions, type LocalQuery, type OutboxRow } from '../store/index.js'
import { NO_PERMISSIONS } from '../../shared/access-policy.js'
import { type PresenceUser, type ReplicaState, type SyncClient, type SyncStatus } from '../sync/index.js'
import { background } from '../sync/background.js'

/** What a view sees of a node: the local doc's content plus the local index's facts. */
export interface NodeView {
  path: string
  nodeType: string
  name: string
  content: JsonObject
  /** Top-level field names in their stable order (first set first; the same on every replica). */
  fields: string[]
  updatedAt: string
  /** Unsent patches of this node. */
  pending: number
  refused: number
  localOnly: boolean
}

/**
 * RxJS streams over the local store, kept live by sync. Subscribing to a node holds its
 * replica (so its room is joined and presence announced); unsubscribing releases it.
 */
export class NodeStreams {
  constructor(readonly client: SyncClient) {}

  /**
   * Emits the node as stored locally (null while nothing is known of it), then every change.
   * `listed`: an item of a list whose parent is watched (a thread's cells): the parent's listing
   * keeps its row fresh (no request per item) and it says no "here" in its room.
   */
  node$(path: string, opts: { listed?: boolean } = {}): Observable<NodeView | null> {
    return new Observable<NodeView | null>((sub) => {
      const replica = this.client.acquire(path, !opts.listed)
      if (!opts.listed) background(this.client.refreshNode(path))
      const content$ = defer(() => from(replica.ready)).pipe(
        switchMap(() => replica.changed$.pipe(startWith(null))),
        map(() => ({ content: replica.content, fields: replica.fieldOrder })),
      )
      const row$ = liveStoreQuery(this.client.store.db, ['nodes'], () => this.client.store.getIndexRow(path))
      const s = combineLatest([content$, row$])
        .pipe(map(([c, row]) => toView(path, c.content, c.fields, row)))
        .subscribe(sub)
      return () => {
        s.unsubscribe()
        this.client.release(path)
      }
    })
  }

  /** Nodes of the local index; refreshes `parent` from the server when online. */
  query$(q: LocalQuery): Observable<IndexRow[]> {
    return new Observable<IndexRow[]>((sub) => {
      const unwatch = q.parent !== undefined ? this.client.watchParent(q.parent) : () => {}
      const s = liveStoreQuery(this.client.store.db, ['nodes'], () => this.client.store.query(q)).subscribe(sub)
      return () => {
        s.unsubscribe()
        unwatch()
      }
    })
  }

  /** Outbox entries of a node (pending and refused), oldest first. */
  outbox$(path: string): Observable<OutboxRow[]> {
    return liveStoreQuery(this.client.store.db, ['outbox'], () => this.client.store.outboxFor(path))
  }

  presence$(path: string): Observable<PresenceUser[]> {
    return new Observable<PresenceUser[]>((sub) => {
      const replica = this.client.acquire(path)
      const s = replica.presence$.subscribe(sub)
      return () => {
        s.unsubscribe()
        this.client.release(path)
      }
    })
  }

  /**
   * The node's room state (joined, the caller's permissions); `listed` as node$: no "here" said.
   * [WEB85] Until the room has told the role (offline, a first visit), `permissions` is the one
   * this device last learned for the node or its nearest ancestor (`known: 'remembered'`), null
   * when none (`known: 'unknown'`: offer nothing the person may well not have). [WEB86] A room
   * whose access is denied grants nothing, whatever its last mask was.
   */
  access$(path: string, opts: { listed?: boolean } = {}): Observable<AccessState> {
    return new Observable<AccessState>((sub) => {
      const replica = this.client.acquire(path, !opts.listed)
      const remembered$ = from(lastKnownPermissions(this.client.store.db, path).catch(() => null))
      const s = combineLatest([replica.state$, remembered$]).pipe(map(([st, known]) => accessState(st, known))).subscribe(sub)
      return () => {
        s.unsubscribe()
        this.client.release(path)
      }
    })
  }

  get status$(): Observable<SyncStatus> {
    return this.client.status$
  }
}

/** What a view may rely on of a node's access: the room's state, filled in from memory until the room tells. */
export interface AccessState extends ReplicaState {
  /** Where `permissions` comes from: the room, this device's memory of it (or an ancestor's), or nowhere yet. */
  known: 'room' | 'remembered' | 'unknown'
}

function accessState(st: ReplicaState, known: KnownPermissions | null): AccessState {
  if (st.denied) return { ...st, permissions: NO_PERMISSIONS, known: 'room' }
  if (st.permissions) return { ...st, known: 'room' }
  if (known) return { ...st, permissions: known.permissions, known: 'remembered' }
  return { ...st, known: 'unknown' }
}

/**
 * The type a reserved place implies (DESIGN.md: runs live at `{parent}/_Activity/{id}`, access at
 * `{scope}/_Access/{subject}_Access`, a Code node's check at `{code}/_Check`), for a node whose
 * index row has not arrived yet: a run must not be shown as a Document with editable fields.
 */
function typeFromPath(path: string): string | null {
  const segments = path.split('/')
  const parent = segments.at(-2)
  if (parent === '_Activity') return 'ActivityLog'
  if (parent === '_Access') return 'AccessAssignment'
  if (segments.at(-1) === '_Check') return 'CodeCheck'
  return null
}

function toView(path: string, content: JsonObject, fields: string[], row: IndexRow | undefined): NodeView | null {
  if (!row && Object.keys(content).length === 0) return null
  return {
    path,
    nodeType: row?.nodeType ?? typeFromPath(path) ?? 'Document',
    name: row?.name ?? path.split('/').pop() ?? path,
    content,
    fields,
    updatedAt: row?.updatedAt ?? '',
    pending: row?.pending ?? 0,
    refused: row?.refused ?? 0,
    localOnly: !!row?.localOnly,
  }
}
