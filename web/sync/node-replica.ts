import * as Y from 'yjs'
import * as encoding from 'lib0/encoding'
import * as decoding from 'lib0/decoding'
import * as random from 'lib0/random'
import * as syncProtocol from 'y-protocols/sync'
import * as awarenessProtocol from 'y-protocols/awareness'
import { BehaviorSubject, Subject, type Subscription } from 'rxjs'
import { applyPatchToDoc, applyTextDiff, CONTENT_MAP, contentFieldOrder, convertToText, docToJson, plainTextFields, type MergePatch } from '../../shared/merge-patch.js'
import { textPolicyFor, type TextPolicy } from '../../shared/text-fields.js'
import { nodeTypeDef } from '../../shared/node-types.js'
import { WeftError } from '../../shared/errors.js'
import { baseText, mergeTextEdits, rebaseTextEdit, textBaseOf, type TextSplice } from './text-rebase.js'
import { MuxType, YMessage, type MuxFrame } from '../../shared/protocol.js'
import { permissionsFromMask, type PermissionSet } from '../../shared/access-policy.js'
import type { JsonObject } from '../../shared/json.js'
import { liveStoreQuery, newNodeDoc, type IndexRow, type NodeStore } from '../store/index.js'
import { isFinalCloseCode, type MuxConnection, type RoomHandler } from './mux-connection.js'
import { background } from './background.js'
import { colorsToAvoid, presenceColor } from './presence-color.js'

/**
 * Where a change to a replica's doc came from (STYLE.md: tag every change with its origin).
 *  - local: this tab's own merge patch (already written with its outbox entry);
 *  - remote: from the server (persisted here);
 *  - tab: another tab of this app, which persisted it already;
 *  - load: read from IndexedDB;
 *  - rebuild: a replayed outbox patch on a doc rebuilt from the server's state.
 * Besides these tags, a text editor bound with `bindTextEditor` writes with origins of its own
 * (objects: y-codemirror.next's YSyncConfig, a Y.UndoManager); those transactions are this
 * tab's edits and are recorded and sent exactly like a 'local' patch.
 */
export type ChangeOrigin = 'local' | 'remote' | 'tab' | 'load' | 'rebuild'

/**
 * An editor's hold on one text field (`NodeReplica.bindTextEditor`): while it lasts, a
 * transaction on `text` whose origin is one of the editor's is a local edit of `key`.
 */
export interface TextEditorBinding {
  readonly key: string
  readonly text: Y.Text
  /** Stops treating the editor's origins as local edits. The editor must not write into `text` after this. */
  dispose(): void
}

/** Something with a length and a string, e.g. a CodeMirror `Text` (its length is in UTF-16 units). */
export interface TextLike {
  readonly length: number
  toString(): string
}

export interface PresenceUser {
  id: string
  name: string
}

export interface RoomDenial {
  closeCode: number
  code: string
  message: string
}

export interface ReplicaState {
  joined: boolean
  permissions: PermissionSet | null
  denied: RoomDenial | null
  rebuilding: boolean
}

/** Messages between tabs of the same user (BroadcastChannel). */
export type TabMessage =
  | { kind: 'update'; path: string; update: Uint8Array }
  /** The sender rebuilt the node: reload it from IndexedDB. */
  | { kind: 'reload'; path: string }

export interface ReplicaDeps {
  store: NodeStore
  conn: MuxConnection
  broadcast: (msg: TabMessage) => void
  /** Called when the replica may be disposable (pending reached zero, room denied). */
  onIdle: (path: string) => void
  /** The server's limit on one change (bytes); an edit over it is refused before it is stored. */
  maxPayloadBytes?: () => number
  /**
   * [SYNC22] Learns the node at the path from the server (a rebuild asks before it replays): edits
   * made on a node deleted since, another made at its path, are refused then, not replayed into it.
   */
  confirmNode?: (path: string) => Promise<void>
}

/** How long after converting a plain string a competing conversion is looked for (well above a round trip). */
const CONVERSION_RACE_MS = 30_000

/** Temporary seqs (frames sent ahead of their outbox write) start here; outbox ids stay below. */
const TEMP_SEQ_BASE = 2 ** 40

/** Room for the frame around an update (type, path, seq) under the server's payload limit. */
const FRAME_OVERHEAD_BYTES = 1024

/** A size as people read it: 820 bytes, 14 KB, 3.1 MB. */
export function formatBytes(n: number): string {
  if (n >= 1024 * 1024) return `${(n / (1024 * 1024)).toFixed(1)} MB`
  if (n >= 1024) return `${Math.round(n / 1024)} KB`
  return `${n} bytes`
}

/** `payload_too_large` with the sizes a person needs: how big the edit is and what the server takes. */
function tooLargeError(size: number, limit: number): WeftError {
  return new WeftError('payload_too_large', `This change is ${formatBytes(size)}; the server accepts at most ${formatBytes(limit)} per change. It was not saved.`, { size, limit })
}

type Step2Tag = 'normal' | 'rebuild'

/**
 * One node, kept in sync over the shared socket. The doc is the server's state plus the
 * outbox patches applied optimistically. Every local patch travels as its own `Update` frame
 * (seq = outbox id) and is acked or refused individually. After a refusal the doc is rebuilt
 * from the server's full state and the surviving outbox patches are replayed on it, because
 * later updates may reference structs the server never accepted (DESIGN.md).
 */
export class NodeReplica implements RoomHandler {
  doc: Y.Doc
  readonly awareness: awarenessProtocol.Awareness
  readonly changed$ = new Subject<void>()
  readonly state$ = new BehaviorSubject<ReplicaState>({ joined: false, permissions: null, denied: null, rebuilding: false })
  readonly presence$ = new BehaviorSubject<PresenceUser[]>([])
  readonly ready: Promise<void>
  private syncing = false
  private disposed = false
  /**
   * Outbox ids sent on the current socket with their current bytes. An entry is sent once per
   * connection (and again only after a rebuild gave it new bytes): sending the same refused
   * bytes twice would turn a replayable refusal into a final one.
   */
  private readonly inFlight = new Map<number, Uint8Array>()
  /** A refusal is being recorded: hold every send until we know whether to rebuild. */
  private refusalsSettling = 0
  private step2Queue: Step2Tag[] = []
  private rebuildDoc: Y.Doc | null = null
  private needsRebuild = false
  /**
   * [WEB100] Counts the asks for a rebuild (a refusal landed, edits settled unsent, a discard): one
   * made while a rebuild runs may come after it read the outbox, so it is not met by that rebuild.
   */
  private rebuildAsks = 0
  private selfUserId: string | null = null
  private syncedOnce: () => void = () => {}
  /** Resolves once the doc has received the server's state after a join. */
  readonly synced: Promise<void> = new Promise<void>((resolve) => (this.syncedOnce = resolve))

  constructor(
    readonly path: string,
    private readonly deps: ReplicaDeps,
  ) {
    this.doc = newNodeDoc(path)
    this.awareness = new awarenessProtocol.Awareness(newNodeDoc(`${path}#presence`))
    this.awareness.setLocalState(null)
    this.awareness.on('update', this.onAwarenessUpdate)
    this.ready = this.load()
  }

  private async load(): Promise<void> {
    const [doc, flag] = await Promise.all([this.deps.store.loadDoc(this.path), this.deps.store.isMarkedForRebuild(this.path)])
    this.needsRebuild = !!flag
    if (this.disposed) return
    this.swapDoc(doc)
  }

  get content(): JsonObject {
    return docToJson(this.doc)
  }

  /** Top-level field names in their stable order (first set first, the same on every replica). */
  get fieldOrder(): string[] {
    return contentFieldOrder(this.doc)
  }

  /** The Y.Text behind a top-level field, when it is one (text fields after their first write). */
  textOf(key: string): Y.Text | null {
    const v = this.doc.getMap(CONTENT_MAP).get(key)
    return v instanceof Y.Text ? v : null
  }

  private textPolicy: TextPolicy | null = null
  /** Y.Texts this replica made from a plain string, recently: another replica may have made its own at once. */
  private readonly converted = new Map<string, { text: Y.Text; base: string; last: string; at: number }>()

  private noteConverted(key: string, text: Y.Text, base: string): void {
    const entry = { text, base, last: text.toString(), at: Date.now() }
    text.observe(() => (entry.last = text.toString()))
    this.converted.set(key, entry)
  }

  /**
   * A remote Y.Text replaced one this replica had just made from the same plain string (two
   * conversions at once: the map entry keeps one). What was typed into ours is merged onto
   * theirs as a normal edit, so the conversion race loses nothing.
   */
  /** The doc whose content map onContentChange observes (none until the first swapDoc). */
  private observedDoc: Y.Doc | null = null
  private readonly onContentChange = (event: Y.YMapEvent<unknown>) => {
    if (event.transaction.origin !== 'remote' && event.transaction.origin !== 'tab') return
    for (const key of event.keysChanged) {
      const mine = this.converted.get(key)
      if (!mine) continue
      const now = event.target.get(key)
      if (now === mine.text) continue
      this.converted.delete(key)
      if (!(now instanceof Y.Text) || Date.now() - mine.at > CONVERSION_RACE_MS || mine.last === mine.base) continue
      const ours = mine.last
      background(
        this.patch(() => {
          const current = this.doc.getMap(CONTENT_MAP).get(key)
          const theirs = current instanceof Y.Text ? current.toString() : typeof current === 'string' ? current : null
          return theirs === null ? {} : { [key]: mergeTextEdits(mine.base, ours, theirs) }
        }).catch((e: unknown) => console.warn(`[weft] could not carry over text typed into ${this.path}.${key}`, e)),
      )
    }
  }
  /** Seqs of frames sent before their outbox entry was written, above every outbox id. */
  private nextTempSeq = TEMP_SEQ_BASE
  private readonly tempSeqs = new Map<number, Promise<number | null>>()

  /** The outbox id a server's Ack/Refused names (null: a temporary seq this replica does not know). */
  private async outboxIdOf(seq: number): Promise<number | null> {
    if (seq < TEMP_SEQ_BASE) return seq
    const p = this.tempSeqs.get(seq)
    if (!p) return null
    this.tempSeqs.delete(seq)
    return p
  }
  private migrated = false
  /** This node's row in the local index, live. */
  private indexRow$() {
    return liveStoreQuery(this.deps.store.db, ['nodes'], () => this.deps.store.getIndexRow(this.path))
  }

  /** Waits for the node's index row (its type) before text fields are converted. */
  private typeWait: Subscription | null = null

  /**
   * Once the doc has the server's state, text fields still stored as plain strings become
   * Y.Text, before anyone types: two people whose first keystrokes each turned the string
   * into their own Y.Text would race, and one Y.Text (with its typing) would lose. Only a
   * replica that may write does it (a Viewer's conversion would only be refused).
   */
  private async migrateText(): Promise<void> {
    if (this.migrated || this.disposed || !this.state$.value.permissions?.has('Update')) return
    this.migrated = true
    // Only once the node's type is known here: an activity opened before its index row arrived
    // was taken for a Document, and every string of it (CodePath, Status...) was "converted" into
    // a Y.Text the server refuses (forbidden_field): the phantom "1 refused" after runs. Unknown
    // now: tried again once the row is stored.
    let known: boolean
    try {
      known = isKnownType(await this.deps.store.getIndexRow(this.path))
    } catch (err) {
      // The store closed under a disposed replica (sign-out, a test's teardown): nothing to do.
      this.migrated = false
      if (this.disposed) return
      throw err
    }
    if (this.disposed) return
    if (!known) {
      this.migrated = false
      this.typeWait ??= this.indexRow$().subscribe({
        next: (row) => {
          if (!isKnownType(row) || this.disposed) return
          this.typeWait?.unsubscribe()
          this.typeWait = null
          background(this.migrateText())
        },
        // A closed store ends the wait; the next open of the node tries again.
        error: () => {
          this.typeWait = null
        },
      })
      return
    }
    const isText = await this.policy()
    const patch = plainTextFields(this.doc, isText)
    if (Object.keys(patch).length === 0) return
    try {
      await this.patch(() => plainTextFields(this.doc, isText), 'to-text')
    } catch (e) {
      console.warn(`[weft] could not convert the text fields of ${this.path}`, e)
    }
  }

  /** Reads the node's type ahead of the first edit, so an editor's first keystroke does not wait on it. */
  warmPolicy(): void {
    background(this.policy().then(() => undefined))
  }

  /** Which strings are merging text (by the node's type, from the local index; Document until known). */
  private async policy(): Promise<TextPolicy> {
    if (this.textPolicy) return this.textPolicy
    const row = await this.deps.store.getIndexRow(this.path)
    const known = isKnownType(row)
    const policy = textPolicyFor(known ? row.nodeType : 'Document')
    if (known) {
      this.textPolicy = policy
      this.hasOwner = nodeTypeDef(row.nodeType).ownerField !== undefined
    }
    return policy
  }

  /** Whether the node's type gives an owner rights of its own (null: its type is not known yet). */
  private hasOwner: boolean | null = null

  /**
   * [WEB42] The server told this socket the role cannot write the node (a Joined mask without
   * Update) and no owner rule could let it (a run's creator changes its RequestedStatus without
   * Update): an edit sent now is refused for certain. Never judged by a mask of an earlier socket,
   * which may be stale (the role may have changed while offline).
   */
  private get mayNotWrite(): boolean {
    const { joined, permissions } = this.state$.value
    return joined && permissions !== null && !permissions.has('Update') && this.hasOwner === false
  }

  /**
   * [WEB42] Settles every pending edit as refused here, unsent (mayNotWrite), and rebuilds the doc
   * from the server's state: the edits' structs must leave it, as a server refusal's do.
   */
  private async refuseUnwritable(): Promise<void> {
    const n = await this.deps.store.refuseAllPending(this.path, 'forbidden', `Your role no longer lets you change ${this.path}: this change was not sent. Copy it from here.`)
    if (n === 0 || this.disposed) return
    await this.deps.store.markRebuild(this.path)
    this.rebuildAsks++
    this.needsRebuild = true
    this.startRebuild()
    this.deps.onIdle(this.path)
  }

  private get limit(): number {
    return (this.deps.maxPayloadBytes?.() ?? 1024 * 1024) - FRAME_OVERHEAD_BYTES
  }

  /** Starts syncing over the socket (the coordinator holds it back while a create is queued). */
  startSync(): void {
    if (this.syncing || this.disposed || this.state$.value.denied) return
    this.syncing = true
    background(this.ready.then(() => {
      if (!this.disposed) this.deps.conn.join(this.path, this)
    }))
  }

  get isSyncing(): boolean {
    return this.syncing
  }

  /**
   * Announces who holds this node (null: nobody in this tab). The state is `{ user: { id, name,
   * color, colorLight } }` plus what editors add (y-codemirror.next's `cursor`): a view that
   * acquires the node again only refreshes `user`, so an editor's caret is not wiped by it.
   */
  setPresence(user: PresenceUser | null): void {
    this.selfUserId = user?.id ?? this.selfUserId
    if (!user) {
      this.awareness.setLocalState(null)
      return
    }
    const shown = { ...user, ...this.freeColor(user.id) }
    if (this.awareness.getLocalState()) this.awareness.setLocalStateField('user', shown)
    else this.awareness.setLocalState({ user: shown })
  }

  private freeColor(userId: string) {
    const states = this.awareness.getStates() as Map<number, { user?: { id?: unknown; color?: unknown } }>
    return presenceColor(userId, colorsToAvoid({ clientId: this.awareness.clientID, userId }, states))
  }

  /** Someone with a lower client id now shows our colour (or stopped): take the free one. */
  private refreshOwnColor(): void {
    const user = (this.awareness.getLocalState() as { user?: PresenceUser & { color?: string } } | null)?.user
    if (!user || typeof user.id !== 'string') return
    const next = this.freeColor(user.id)
    if (next.color !== user.color) this.awareness.setLocalStateField('user', { ...user, ...next })
  }

  /** Editor origins (bindTextEditor) and the field each one writes. */
  private readonly editorOrigins = new Map<unknown, { key: string; text: Y.Text; onError: (e: unknown) => void }>()

  /**
   * Lets an editor write into a text field's Y.Text in transactions of its own origins (a
   * CodeMirror binding cannot use 'local': y-codemirror.next tells its own writes apart by
   * origin). Each such transaction is treated exactly like a local patch: its update is sent
   * (early, with a temporary seq, when the socket is open), stored in the outbox with the merge
   * patch `{ [key]: text }` as intent (so a refusal rebuild replays it as a text diff), and
   * broadcast to the other tabs. `onError` hears a failed outbox write.
   *
   * The binding ends with the doc: a swap (rebuild, reload from another tab) drops every
   * binding before `changed$` fires, and the editor must bind again to `textOf(key)`. An
   * editor that writes into a Y.Text without a binding would write into nothing that is stored
   * or sent, so `text` must be the field's current Y.Text.
   */
  bindTextEditor(key: string, text: Y.Text, origins: readonly unknown[], onError: (e: unknown) => void = () => {}): TextEditorBinding {
    if (this.textOf(key) !== text) throw new Error(`[weft] ${this.path}.${key}: bindTextEditor needs the field's current Y.Text`)
    const target = { key, text, onError }
    for (const o of origins) {
      if (typeof o === 'string' || o === null || o === undefined) throw new Error(`[weft] an editor origin must be an object of the editor's, not ${String(o)}`)
      this.editorOrigins.set(o, target)
    }
    return {
      key,
      text,
      dispose: () => {
        for (const o of origins) if (this.editorOrigins.get(o) === target) this.editorOrigins.delete(o)
      },
    }
  }

  /**
   * Null when the field `key` may hold `value`; else the error an edit leaving it so would be
   * refused with: every edit's intent is the whole field, which must fit the server's change
   * limit. An editor asks before it applies a keystroke (nothing over the limit reaches the doc).
   */
  textRefusal(key: string, value: TextLike): WeftError | null {
    // JSON takes at most 6 bytes per UTF-16 unit (\u0000): short texts need no encoding.
    if (value.length * 6 + key.length + 8 <= this.limit) return null
    const size = jsonBytes({ [key]: value.toString() })
    return size > this.limit ? tooLargeError(size, this.limit + FRAME_OVERHEAD_BYTES) : null
  }

  /** A registered editor's transaction: stored and sent like a patch (bindTextEditor). */
  private recordEditorEdit(target: { key: string; text: Y.Text; onError: (e: unknown) => void }, update: Uint8Array, start: { text: Y.Text; before: string } | undefined): void {
    // The intent is the field as this edit left it, read now, with the field as the edit found
    // it ([WEB53]). A Y.Text no longer in the map (replaced meanwhile) has no field to replay
    // onto: the update is still sent, so this client's clocks stay contiguous on the server,
    // with an empty intent.
    const current = this.textOf(target.key) === target.text
    const patch: MergePatch = current ? { [target.key]: target.text.toString() } : {}
    const base = current && start?.text === target.text ? { [target.key]: start.before } : undefined
    // No size check here: the editor refused an oversized keystroke before it reached the doc
    // (textRefusal). An update over the limit that got here anyway is refused by sendEntry
    // and kept as a refused edit, copyable, like any stored change over the limit.
    background(this.tracked(this.record(patch, update, base)).catch((e: unknown) => target.onError(e)))
  }

  /**
   * [WEB48] Local edits begun (a patch asked for, an editor's transaction) whose outbox write has
   * not settled, and how many have begun in all. A doc swap shows the new doc only when none is
   * under way and none began while it read the store: an edit begun then was applied to the old
   * doc (or is about to read an input the swap resets) and is missing from what was read.
   */
  private readonly unstored = new Set<Promise<unknown>>()
  private editsBegun = 0
  /**
   * [WEB48] [WEB51] Remote updates whose append to the store has not settled (a read waits for
   * them: one read before it lacked the server's state), and those that arrive while a read runs
   * (carried onto what it read). They never start the read again: with others typing there was
   * always one, and the doc stayed "rebuilding", sending nothing, while they typed.
   */
  private readonly unstoredRemote = new Set<Promise<unknown>>()
  private readonly remoteDuringReads = new Set<Uint8Array[]>()

  /** Counts `edit` as begun now (in the caller's synchronous stretch) until it settles. */
  private tracked<T>(edit: Promise<T>): Promise<T> {
    this.editsBegun++
    const settled: Promise<unknown> = edit.then(
      () => this.unstored.delete(settled),
      () => this.unstored.delete(settled),
    )
    this.unstored.add(settled)
    return edit
  }

  /**
   * [WEB48] Reads the store (`read`) at a moment no local edit is under way, again until no edit
   * began while it read. The caller swaps in the same task the read resolves in, so every edit
   * made on the old doc is in what it read, and every later one is made on the new doc. Null:
   * `stillWanted` turned false meanwhile. Ends as soon as the person pauses for one read.
   */
  private async readAtRest<T>(read: () => Promise<T>, stillWanted: () => boolean): Promise<{ value: T; remote: Uint8Array[] } | null> {
    for (;;) {
      while (this.unstored.size > 0 || this.unstoredRemote.size > 0) await Promise.all([...this.unstored, ...this.unstoredRemote])
      if (!stillWanted()) return null
      const begun = this.editsBegun
      const remote: Uint8Array[] = []
      this.remoteDuringReads.add(remote)
      let value: T
      try {
        value = await read()
      } finally {
        this.remoteDuringReads.delete(remote)
      }
      if (!stillWanted()) return null
      if (begun === this.editsBegun && this.unstored.size === 0) return { value, remote }
    }
  }

  /** Applies a merge patch locally and records it as intent; it is sent when the room is joined. */
  /**
   * `patch` may be a function, read after the doc is ready and right before it is applied in
   * the same task: a text editor passes its current value, which then reflects every remote
   * edit applied to it meanwhile (a value captured earlier would diff those edits away).
   */
  patch(patchOrRead: MergePatch | (() => MergePatch), mode: 'merge' | 'to-text' = 'merge'): Promise<void> {
    // [WEB48] Under way from this call: an input's keystroke is read when it applies, and a swap
    // meanwhile would reset the input first.
    return this.tracked(this.applyAndRecord(patchOrRead, mode))
  }

  private async applyAndRecord(patchOrRead: MergePatch | (() => MergePatch), mode: 'merge' | 'to-text'): Promise<void> {
    await this.ready
    const isText = await this.policy()
    if (this.disposed) return
    const patch = typeof patchOrRead === 'function' ? patchOrRead() : patchOrRead
    // Known before it is stored or sent: a change over the server's limit would be refused
    // (or, by an older server, close the socket on every retry).
    const size = jsonBytes(patch)
    if (size > this.limit) throw tooLargeError(size, this.limit + FRAME_OVERHEAD_BYTES)
    let captured: Uint8Array | null = null
    const capture = (update: Uint8Array, origin: unknown) => {
      if (origin === 'local') captured = update
    }
    const doc = this.doc
    const map = doc.getMap(CONTENT_MAP)
    const plainBefore: [string, string][] = []
    // [WEB53] Each text field the patch edits as it is now: what the edit changed is replayed.
    const textBefore: [string, Y.Text, string][] = []
    for (const k of Object.keys(patch)) {
      const v = map.get(k)
      if (typeof v === 'string') plainBefore.push([k, v])
      else if (v instanceof Y.Text && typeof patch[k] === 'string' && mode === 'merge') textBefore.push([k, v, v.toString()])
    }
    doc.on('update', capture)
    try {
      if (mode === 'to-text') convertToText(doc, patch, 'local')
      else applyPatchToDoc(doc, patch, 'local', isText)
    } finally {
      doc.off('update', capture)
    }
    for (const [k, base] of plainBefore) {
      const t = map.get(k)
      if (t instanceof Y.Text) this.noteConverted(k, t, base)
    }
    if (!captured) return // a no-op patch is not an intent
    const update: Uint8Array = captured
    let base: Record<string, string> | undefined
    for (const [k, t, before] of textBefore) if (map.get(k) === t) (base ??= {})[k] = before
    await this.record(patch, update, base)
  }

  /**
   * Stores and sends one local edit already applied to the doc (a patch, or an editor's
   * transaction): its `update` with `patch` as intent.
   */
  private async record(patch: MergePatch, update: Uint8Array, base?: Record<string, string>): Promise<void> {
    // Sent before the outbox write commits (a keystroke then reaches others in one round trip,
    // not after an IndexedDB transaction). Nothing can be lost: if this tab dies before the
    // write, the server has the edit and the next sync brings it back. The frame carries a
    // temporary seq; its Ack or Refused waits for the outbox id (IndexedDB runs the write's
    // transaction before any later one, so the settlement finds the row).
    let early: { seq: number; socket: number; resolve: (id: number | null) => void } | null = null
    if (!this.state$.value.denied && !this.mayNotWrite && this.canSend() && update.byteLength <= this.limit) {
      const seq = this.nextTempSeq++
      if (this.deps.conn.send({ type: MuxType.Update, path: this.path, seq, update })) {
        let resolve: (id: number | null) => void = () => {}
        this.tempSeqs.set(seq, new Promise<number | null>((r) => (resolve = r)))
        early = { seq, socket: this.deps.conn.opens, resolve }
      }
    }
    let id: number
    try {
      id = await this.deps.store.recordLocalPatch(this.path, patch, update, base && textBases(patch, base))
    } catch (e) {
      early?.resolve(null)
      throw e
    }
    this.deps.broadcast({ kind: 'update', path: this.path, update })
    const denied = this.state$.value.denied
    if (early) {
      early.resolve(id)
      // Still the socket it went out on: it is in flight there. A new socket resends it.
      if (early.socket === this.deps.conn.opens && this.deps.conn.isOpen) this.inFlight.set(id, update)
      else if (this.canSend()) this.sendEntry(id, update)
      return
    }
    // The room was refused for good: this edit can never be sent; say so rather than leave it pending.
    if (denied) {
      await this.deps.store.refuse(id, denied.code, denied.message)
      await this.markForRebuild()
    } else if (this.mayNotWrite) await this.refuseUnwritable()
    else if (this.canSend()) this.sendEntry(id, update)
  }

  applyFromTab(msg: TabMessage): void {
    // After the load: applied to the doc the load replaces, an update read too early by the
    // load would be lost.
    background(
      this.ready.then(async () => {
        if (this.disposed) return
        if (msg.kind === 'update') {
          Y.applyUpdate(this.doc, msg.update, 'tab')
          if (this.rebuildDoc) Y.applyUpdate(this.rebuildDoc, msg.update, 'tab')
          return
        }
        await this.reloadNow()
      }),
    )
  }

  /**
   * Replaces the doc with what the store holds. Awaitable: a caller that starts the sync next
   * (a refused offline create) must wait for it, or the server's state, applied to the old doc,
   * is swapped away by the reload and the page stays empty.
   */
  async reload(): Promise<void> {
    await this.ready
    if (!this.disposed) await this.reloadNow()
  }

  private async reloadNow(): Promise<void> {
    // [WEB48] The stored doc holds every local edit only once none is being written.
    const read = await this.readAtRest(() => this.deps.store.loadDoc(this.path), () => !this.disposed)
    if (!read) return
    const doc = read.value
    // [WEB51] What the server sent while the store was read (appended to it, maybe after the read).
    for (const u of read.remote) Y.applyUpdate(doc, u, 'remote')
    this.swapDoc(doc)
    // Joined already: what the server sent the old doc may not be in the store yet; ask for
    // what the new one lacks.
    if (this.state$.value.joined && !this.rebuildDoc) this.requestState('normal')
  }

  dispose(): void {
    this.typeWait?.unsubscribe()
    this.typeWait = null
    this.creationWait?.unsubscribe()
    this.creationWait = null
    if (this.disposed) return
    this.awareness.setLocalState(null)
    this.disposed = true
    if (this.rejoinTimer) clearTimeout(this.rejoinTimer)
    // A closed node is stored as one row: the next open (or a thousand of them) reads and
    // applies a single update.
    if (this.appendedSinceLoad > 0) background(this.deps.store.compact(this.path))
    this.deps.conn.leave(this.path)
    this.awareness.off('update', this.onAwarenessUpdate)
    this.awareness.destroy()
    this.doc.off('update', this.onDocUpdate)
    this.doc.off('beforeTransaction', this.onBeforeTransaction)
    this.editorOrigins.clear()
    this.changed$.complete()
  }

  // ---- RoomHandler ----

  onSocketOpen(): void {
    this.inFlight.clear()
    this.step2Queue = []
    // Pipelined behind the Join: the server runs a room's frames after its join completes, so
    // the outbox need not wait for Joined and the server's step 1 (one round trip per node
    // less after a reconnect). A refused join answers Denied and drops them unapplied.
    background(this.sendPending(true))
  }

  onSocketClose(): void {
    this.inFlight.clear()
    // Frames still unanswered on that socket never will be; their entries are resent by id.
    this.tempSeqs.clear()
    this.step2Queue = []
    if (this.rebuildDoc) {
      this.rebuildDoc = null
      this.needsRebuild = true
    }
    // Forget other clients outright (state AND clock): removeAwarenessStates would bump their
    // clock, and their unchanged state re-sent after the reconnect would then be ignored.
    const others = [...this.awareness.getStates().keys()].filter((c) => c !== this.awareness.clientID)
    for (const c of others) {
      this.awareness.states.delete(c)
      this.awareness.meta.delete(c)
    }
    if (others.length) this.awareness.emit('change', [{ added: [], updated: [], removed: others }, 'remote'])
    this.onAwarenessUpdate({ added: [], updated: [], removed: others }, 'remote')
    this.setState({ joined: false, rebuilding: false })
  }

  onFrame(frame: MuxFrame): void {
    switch (frame.type) {
      case MuxType.Joined:
        // [WEB43] Joined again on a joined room: the role changed (the server sends the new mask);
        // the page follows it, and edits the role can no longer make are kept as refused.
        if (this.state$.value.joined) {
          this.setState({ permissions: permissionsFromMask(frame.permissions) })
          if (this.mayNotWrite) background(this.sendPending())
          return
        }
        this.rejoinAttempts = 0
        this.setState({ joined: true, permissions: permissionsFromMask(frame.permissions), denied: null })
        this.requestState('normal')
        // A new clock, so peers that timed us out while we were away accept the state again.
        if (this.awareness.getLocalState()) this.awareness.setLocalState(this.awareness.getLocalState())
        if (this.needsRebuild) this.startRebuild()
        return
      case MuxType.Denied:
        this.onDenied(frame.closeCode, frame.code, frame.message)
        return
      case MuxType.Sync:
        this.onSyncMessage(frame.message)
        return
      case MuxType.Ack:
        background(this.outboxIdOf(frame.seq).then(async (id) => {
          if (id !== null) await this.deps.store.ack(id)
          this.deps.onIdle(this.path)
        }))
        return
      case MuxType.Refused:
        // Synchronously: a patch made from now on must not be sent on top of refused structs.
        this.refusalsSettling++
        background(this.outboxIdOf(frame.seq).then((id) => (id === null ? undefined : this.onRefused(id, frame.code, frame.message))).finally(() => {
          this.refusalsSettling--
          if (this.refusalsSettling > 0) return
          // Several refusals often arrive together (later updates depend on the refused one):
          // the doc is rebuilt once, after the last of them has landed, however slow the store.
          if (this.needsRebuild) setTimeout(() => this.startRebuild(), 20)
          background(this.sendPending())
        }))
        return
      case MuxType.Join:
      case MuxType.Leave:
      case MuxType.Update:
      case MuxType.Error:
      case MuxType.Changed:
        return // not sent by a server to a room
      default:
        frame satisfies never
    }
  }

  // ---- internals ----

  private rejoinAttempts = 0
  private rejoinTimer: ReturnType<typeof setTimeout> | null = null

  /**
   * 4400–4499 is final for this room (no access, no such node): shown, unsent edits become
   * refused, never retried. Anything else (1011 "joining failed", 4409 "not joined") is
   * transient: leave and join again after a growing delay.
   */
  private onDenied(closeCode: number, code: string, message: string): void {
    this.deps.conn.leave(this.path)
    this.inFlight.clear()
    const transient = !isFinalCloseCode(closeCode) || code === 'not_joined'
    if (transient) {
      this.setState({ joined: false })
      const delay = Math.min(30_000, 500 * 2 ** this.rejoinAttempts++)
      this.rejoinTimer = setTimeout(() => {
        this.rejoinTimer = null
        if (!this.disposed) this.deps.conn.join(this.path, this)
      }, delay)
      return
    }
    this.setState({ joined: false, denied: { closeCode, code, message } })
    this.syncing = false
    background(this.deps.store.refuseAllPending(this.path, code, message).then(async (n) => {
      // [WEB81] The refused edits' structs are in the doc: rebuilt from the server's state when
      // the room is joined again (access given back), never shown as if saved.
      if (n > 0) await this.markForRebuild()
      this.deps.onIdle(this.path)
    }))
    // [TOMB1] Moved away (a trash is a move) leaves the path free too: a node made there later is joined.
    if (code === 'not_found' || code === 'moved') this.awaitCreation()
  }

  /** Watches the node's index row after a join refused `not_found` (awaitCreation). */
  private creationWait: Subscription | null = null

  /**
   * [SYNC14] A join refused with `not_found` (or `moved`) is final for THAT node: none is there. A node made
   * a moment later (an engine's answer cell, listed before it is created) is a new node at the
   * same path: once a row for it from the server arrives in the local index (a listing, a
   * refresh), the room is joined again. Without this a view that opened the path a moment too
   * early held an empty replica for good ("Loading the message…").
   */
  private awaitCreation(): void {
    if (this.creationWait || this.disposed) return
    let first = true
    let before: string | null = null
    this.creationWait = this.indexRow$().subscribe({
      next: (row) => {
        const seen = isKnownType(row) && !row.localOnly ? `${row.version}|${row.updatedAt}` : null
        // The row as it was when the join was refused says nothing new: only a later one counts.
        if (first) {
          first = false
          before = seen
          return
        }
        if (seen === null || seen === before || this.disposed) return
        this.creationWait?.unsubscribe()
        this.creationWait = null
        const code = this.state$.value.denied?.code
        if (code !== 'not_found' && code !== 'moved') return
        this.setState({ denied: null })
        this.startSync()
      },
      // A closed store ends the wait; the next open of the node joins again.
      error: () => {
        this.creationWait = null
      },
    })
  }

  private appendedSinceLoad = 0

  /**
   * [WEB53] The text of an editor's field as each of its transactions found it, read as the
   * transaction starts: with the text as the transaction left it (read as it ends), what the edit
   * changed, both of the same Y.Text at the same moment (a remote change is never in one of them only).
   */
  private readonly editorBases = new WeakMap<Y.Transaction, { text: Y.Text; before: string }>()
  private readonly onBeforeTransaction = (tr: Y.Transaction) => {
    const editor = this.editorOrigins.get(tr.origin)
    if (editor) this.editorBases.set(tr, { text: editor.text, before: editor.text.toString() })
  }

  private readonly onDocUpdate = (update: Uint8Array, origin: unknown, _doc: Y.Doc, tr: Y.Transaction) => {
    const editor = this.editorOrigins.get(origin)
    if (origin === 'remote' || origin === 'local' || editor) this.appendedSinceLoad++
    if (origin === 'remote') {
      // [WEB48] Waited for by a read of the store: a reload reading it before this append lands
      // swapped in a doc without the server's state (seed 43 of the swap-typing test), and a
      // keystroke then made a second Y.Text of the field, which lost to the first. [WEB51] Not
      // an edit begun: it does not start the read again; one arriving during it is carried over.
      for (const r of this.remoteDuringReads) r.push(update)
      const appended = this.deps.store.appendUpdate(this.path, update)
      const settled: Promise<unknown> = appended.then(
        () => this.unstoredRemote.delete(settled),
        () => this.unstoredRemote.delete(settled),
      )
      this.unstoredRemote.add(settled)
      background(appended)
      this.deps.broadcast({ kind: 'update', path: this.path, update })
    }
    if (editor) this.recordEditorEdit(editor, update, this.editorBases.get(tr))
    this.changed$.next()
  }

  private swapDoc(doc: Y.Doc): void {
    this.doc.off('update', this.onDocUpdate)
    this.doc.off('beforeTransaction', this.onBeforeTransaction)
    // The constructor's placeholder doc was never observed: Yjs logs an error for unobserving a
    // handler it does not hold (a console error on every node opened).
    if (this.observedDoc === this.doc) this.doc.getMap(CONTENT_MAP).unobserve(this.onContentChange)
    this.converted.clear()
    // Their Y.Texts belong to the old doc; editors bind again on the changed$ below.
    this.editorOrigins.clear()
    this.doc = doc
    doc.on('update', this.onDocUpdate)
    doc.on('beforeTransaction', this.onBeforeTransaction)
    doc.getMap(CONTENT_MAP).observe(this.onContentChange)
    this.observedDoc = doc
    this.changed$.next()
  }

  private setState(patch: Partial<ReplicaState>): void {
    const prev = this.state$.value
    if ((Object.keys(patch) as (keyof ReplicaState)[]).every((k) => prev[k] === patch[k])) return
    this.state$.next({ ...prev, ...patch })
  }

  private canSend(beforeJoined = false): boolean {
    return (beforeJoined || this.state$.value.joined) && !this.rebuildDoc && !this.needsRebuild && this.refusalsSettling === 0
  }

  private sendEntry(id: number, update: Uint8Array): void {
    if (this.inFlight.has(id)) return
    if (update.byteLength > this.limit) {
      // Stored before the limit was known (or the server lowered it): refused here, once,
      // instead of a frame that closes the socket on every reconnect.
      // Settled as the server's Refused would be, rebuild included (later edits build on it).
      this.inFlight.set(id, update)
      const err = tooLargeError(update.byteLength, this.limit + FRAME_OVERHEAD_BYTES)
      this.onFrame({ type: MuxType.Refused, path: this.path, seq: id, code: err.code, message: err.message })
      return
    }
    if (this.deps.conn.send({ type: MuxType.Update, path: this.path, seq: id, update })) this.inFlight.set(id, update)
  }

  private async sendPending(beforeJoined = false): Promise<void> {
    if (!this.canSend(beforeJoined) || !this.deps.conn.isOpen) return
    if (!beforeJoined) await this.policy()
    if (this.mayNotWrite) return this.refuseUnwritable()
    const entries = await this.deps.store.pendingEntries(this.path)
    if (!this.canSend(beforeJoined) || !this.deps.conn.isOpen) return
    if (this.mayNotWrite) return this.refuseUnwritable()
    // [WEB42] Before Joined only the first entry goes (behind the Join): the role may have been
    // lowered while this device was offline, and every entry sent to a node the role cannot
    // write costs a refusal of the socket's budget ([SYNC4]). The rest follow the server's step 1.
    for (const e of beforeJoined && !this.state$.value.joined ? entries.slice(0, 1) : entries) this.sendEntry(e.id!, e.update)
  }

  private sendSync(write: (e: encoding.Encoder) => void): void {
    const e = encoding.createEncoder()
    write(e)
    this.deps.conn.send({ type: MuxType.Sync, path: this.path, message: encoding.toUint8Array(e) })
  }

  /** Asks the server for what this doc lacks (rebuild: for everything). Step 2s answer in order. */
  private requestState(tag: Step2Tag): void {
    this.step2Queue.push(tag)
    this.sendSync((e) => {
      encoding.writeVarUint(e, YMessage.Sync)
      syncProtocol.writeSyncStep1(e, tag === 'rebuild' ? newNodeDoc(this.path) : this.doc)
    })
  }

  private onSyncMessage(message: Uint8Array): void {
    const d = decoding.createDecoder(message)
    const kind = decoding.readVarUint(d)
    if (kind === YMessage.Awareness) {
      awarenessProtocol.applyAwarenessUpdate(this.awareness, decoding.readVarUint8Array(d), 'remote')
      return
    }
    if (kind === YMessage.QueryAwareness) {
      this.sendAwareness([...this.awareness.getStates().keys()])
      return
    }
    if (kind !== YMessage.Sync) return // auth messages: the Denied frame carries the refusal
    const syncType = decoding.readVarUint(d)
    switch (syncType) {
      case syncProtocol.messageYjsSyncStep1:
        // Our reply to the server's step 1 is the outbox, one acked Update frame per patch.
        background(this.sendPending())
        return
      case syncProtocol.messageYjsSyncStep2:
      case syncProtocol.messageYjsUpdate: {
        const update = decoding.readVarUint8Array(d)
        if (this.rebuildDoc) Y.applyUpdate(this.rebuildDoc, update, 'remote')
        Y.applyUpdate(this.doc, update, 'remote')
        if (syncType === syncProtocol.messageYjsSyncStep2) {
          if (this.step2Queue.shift() === 'rebuild') background(this.finishRebuild())
          else {
            this.syncedOnce()
            background(this.migrateText())
          }
        }
        return
      }
      default:
        console.warn(`[weft] unknown sync message ${syncType} on ${this.path}`)
    }
  }

  /** [WEB81] The doc is rebuilt from the server's state at the next join (now, if joined). */
  private async markForRebuild(): Promise<void> {
    await this.deps.store.markRebuild(this.path)
    this.rebuildFromServer()
  }

  /**
   * [WEB81] [WEB82] This node's refused entries were discarded or given back to the outbox (the
   * store marked the node, markRebuild): the doc becomes the server's state with the pending
   * entries replayed on it, now if the room is joined, else at its next join.
   */
  rebuildFromServer(): void {
    if (this.disposed) return
    this.rebuildAsks++
    this.needsRebuild = true
    this.startRebuild()
  }

  /**
   * [WEB82] Entries of a room denied for good were given back to the outbox (Try again): access may
   * have come back since, so the room is joined again; denied again, they are refused again.
   */
  rejoinIfDenied(): void {
    if (this.disposed || !this.state$.value.denied) return
    this.creationWait?.unsubscribe()
    this.creationWait = null
    this.setState({ denied: null })
    this.startSync()
  }

  private async onRefused(seq: number, code: string, message: string): Promise<void> {
    // `invalid_update`: the update builds on structs the server never accepted (an earlier
    // refused update of the same client). `client_id_conflict` ([ACC12]): another writer holds
    // this doc's Yjs client id in the node. Either way the intent may be fine: replay it once
    // on a doc rebuilt from the server's state, which has a fresh client id (newNodeDoc).
    // [SYNC21] With the bytes this tab sent: another tab may have sent (and had refused) the same.
    const row = await this.deps.store.refuse(seq, code, message, isReplayable(code), this.inFlight.get(seq))
    if (!row) return // not ours (another tab sent it) or already settled
    // [WEB42] The later edits of the node share this refusal's cause: settled with it (each keeps
    // its text), never replayed into the same refusal again.
    const shared = sharedCause(code, row.patch)
    if (shared !== undefined) await this.deps.store.refuseLaterPending(this.path, seq, code, message, shared)
    // [SYNC21] Another tab's refusal marked the node first: that tab replays its entries.
    if (!row.rebuildHere) return
    // Rebuilt once every refusal that came with this one has settled (the Refused frame's handler).
    this.rebuildAsks++
    this.needsRebuild = true
  }

  private startRebuild(): void {
    if (this.rebuildDoc || !this.state$.value.joined || this.disposed || this.refusalsSettling > 0) return
    this.rebuildDoc = newNodeDoc(this.path)
    // A new Yjs client id, never the old one: the old one may be what the server refused.
    while (this.rebuildDoc.clientID === this.doc.clientID) this.rebuildDoc.clientID = random.uint32()
    this.setState({ rebuilding: true })
    this.requestState('rebuild')
  }

  /**
   * [WEB53] What the last rebuild stores after its swap (its late replays' bytes, the entries it
   * settled). The next rebuild reads the outbox after it: else that write lands after the next
   * rebuild stored its own bytes, and entries went out with the older doc's bytes (refused: they
   * build on structs the server never got), and the edits after them were refused a second time.
   */
  private rebuildStoring: Promise<unknown> = Promise.resolve()

  private async finishRebuild(): Promise<void> {
    const fresh = this.rebuildDoc
    if (!fresh) return
    await this.rebuildStoring
    // [SYNC22] Which node the server's state is of, before the outbox is replayed onto it.
    await this.deps.confirmNode?.(this.path)
    if (this.rebuildDoc !== fresh) return
    // [WEB100] Asks from here on may come after a read below: they rebuild again after the swap.
    const asks = this.rebuildAsks
    const replayed = new Map<number, Uint8Array>()
    // Loop: a patch made while we replay must be replayed too.
    for (;;) {
      const entries = (await this.deps.store.pendingEntries(this.path)).filter((e) => !replayed.has(e.id!))
      if (entries.length === 0) break
      for (const [id, u] of this.replayOnto(fresh, entries)) replayed.set(id, u)
    }
    if (this.rebuildDoc !== fresh) return // the socket dropped meanwhile; redone on the next join
    const seen = new Set(replayed.keys())
    for (const [id, u] of replayed) if (u.length === 0) replayed.delete(id)
    await this.deps.store.replaceState(this.path, Y.encodeStateAsUpdate(fresh), replayed)
    await this.deps.store.clearRebuildMark(this.path)
    if (this.rebuildDoc !== fresh) return
    // [WEB45] Edits made on the old doc after the loop's last read (while the state was stored)
    // are replayed onto the fresh doc before it is shown, in the same task as the swap: an input
    // shown the fresh doc without them would drop them from what is typed next (acked unsent,
    // as they were, they were lost outright). [WEB48] Read when no edit is being stored: one
    // still in its outbox write is missing from the read, and the swap would reset its field.
    // What the server sends meanwhile reaches `fresh` as it comes (onSync).
    const pending = (await this.readAtRest(() => this.deps.store.pendingEntries(this.path), () => this.rebuildDoc === fresh))?.value
    if (!pending) return
    const late = this.replayOnto(fresh, pending.filter((e) => !seen.has(e.id!)))
    this.rebuildDoc = null
    // [WEB100] An edit refused after the outbox was read here (by the server, or settled here) was replayed on
    // `fresh` (and its own call to rebuild found this one running): rebuilt again, as it asked.
    this.needsRebuild = this.rebuildAsks !== asks
    this.swapDoc(fresh)
    this.setState({ rebuilding: false })
    this.inFlight.clear()
    // Entries whose replay was a no-op (the server already has that value) are fulfilled.
    // [WEB48] Counted as an edit being stored: the late replays are in the shown doc but not yet
    // in the store, and a reload reading the store meanwhile would swap them out of the fields.
    const storing = this.tracked(
      (async () => {
        // Settled together (one transaction), not one after another.
        const acks: Promise<void>[] = []
        for (const e of pending) if (seen.has(e.id!) && !replayed.has(e.id!)) acks.push(this.deps.store.ack(e.id!))
        for (const [id, u] of late) {
          if (u.length > 0) continue
          late.delete(id)
          acks.push(this.deps.store.ack(id))
        }
        await Promise.all(acks)
        if (late.size > 0) await this.deps.store.storeReplayed(this.path, late)
        // The mark the ask stored was deleted above with this rebuild's state: stored again.
        if (this.needsRebuild) await this.deps.store.markRebuild(this.path)
      })(),
    )
    this.rebuildStoring = storing.catch(() => {})
    await storing
    this.deps.broadcast({ kind: 'reload', path: this.path })
    if (this.needsRebuild) this.startRebuild()
    await this.sendPending()
    this.deps.onIdle(this.path)
  }

  /**
   * Applies outbox entries' patches to `doc` in order ('rebuild'): each entry's new update
   * (empty: a no-op there). [WEB53] An entry whose update `doc` holds already (the server took
   * it; its Ack is still on its way) is not applied again; one whose bytes the server refused
   * is (structs of those ids there are another writer's, [ACC12]). A text field the entry
   * recorded the base of is given what the edit changed (rebaseTextEdit), not the whole field
   * as its author saw it: what others typed since stays. Entries stored without a base (by an
   * earlier version) set the whole field, as they always did.
   */
  private replayOnto(doc: Y.Doc, entries: readonly { id?: number; patch: MergePatch; base?: Record<string, TextSplice>; update: Uint8Array; bytesRefused?: boolean }[]): Map<number, Uint8Array> {
    const updates = new Map<number, Uint8Array>()
    for (const e of entries) {
      let captured: Uint8Array = new Uint8Array()
      if (e.bytesRefused === true || !holds(doc, e.update)) {
        const capture = (u: Uint8Array) => {
          captured = u
        }
        doc.on('update', capture)
        try {
          doc.transact(() => this.replayEntry(doc, e.patch, e.base), 'rebuild')
        } finally {
          doc.off('update', capture)
        }
      }
      updates.set(e.id!, captured)
    }
    return updates
  }

  private replayEntry(doc: Y.Doc, patch: MergePatch, base: Record<string, TextSplice> | undefined): void {
    const map = doc.getMap(CONTENT_MAP)
    const rest: Record<string, unknown> = { ...(patch as Record<string, unknown>) }
    for (const [key, b] of Object.entries(base ?? {})) {
      const ours = rest[key]
      const text = map.get(key)
      const before = typeof ours === 'string' ? baseText(ours, b) : null
      if (typeof ours !== 'string' || before === null || !(text instanceof Y.Text)) continue
      delete rest[key]
      const current = text.toString()
      const steps = rebaseTextEdit(before, ours, current)
      if (!steps) {
        applyTextDiff(text, mergeTextEdits(before, ours, current))
        continue
      }
      for (const st of steps) {
        if (st.remove > 0) text.delete(st.index, st.remove)
        if (st.insert.length > 0) text.insert(st.index, st.insert)
      }
    }
    if (Object.keys(rest).length > 0) applyPatchToDoc(doc, rest as MergePatch, 'rebuild', this.textPolicy)
  }

  private sendAwareness(clients: number[]): void {
    if (!this.state$.value.joined) return
    const update = awarenessProtocol.encodeAwarenessUpdate(this.awareness, clients)
    this.sendSync((e) => {
      encoding.writeVarUint(e, YMessage.Awareness)
      encoding.writeVarUint8Array(e, update)
    })
  }

  private readonly onAwarenessUpdate = (
    { added, updated, removed }: { added: number[]; updated: number[]; removed: number[] },
    origin: unknown,
  ) => {
    const changed = [...added, ...updated, ...removed]
    if (origin === 'local' && changed.includes(this.awareness.clientID)) this.sendAwareness([this.awareness.clientID])
    if (origin !== 'local') this.refreshOwnColor()
    const users = new Map<string, PresenceUser>()
    for (const [clientId, state] of this.awareness.getStates()) {
      if (clientId === this.awareness.clientID) continue
      const user = (state as { user?: PresenceUser }).user
      if (user && typeof user.id === 'string' && user.id !== this.selfUserId) users.set(user.id, { id: user.id, name: String(user.name ?? user.id) })
    }
    const next = [...users.values()].sort((a, b) => a.name.localeCompare(b.name))
    const prev = this.presence$.value
    if (next.length !== prev.length || next.some((u, i) => u.id !== prev[i]!.id || u.name !== prev[i]!.name)) this.presence$.next(next)
  }
}

/** The row names the node's real type (the server's, or the creator's), not a stand-in's guess. */
function isKnownType(row: IndexRow | undefined): row is IndexRow {
  return row !== undefined && !row.typeUnknown
}

/**
 * [WEB42] Which later pending edits of a node a final refusal settles too: all of them for
 * `forbidden` (the role cannot write the node), those touching the refused edit's fields for
 * `forbidden_field` (undefined: none, the refusal concerns that edit only).
 */
function sharedCause(code: string, patch: MergePatch): readonly string[] | null | undefined {
  if (code === 'forbidden') return null
  if (code === 'forbidden_field') return Object.keys(patch ?? {})
  return undefined
}

/** [WEB53] Each text field's text as the edit found it (`base`), kept as a change of the text it left (`patch`). */
function textBases(patch: MergePatch, base: Record<string, string>): Record<string, TextSplice> | undefined {
  let out: Record<string, TextSplice> | undefined
  for (const [key, before] of Object.entries(base)) {
    const after = (patch as Record<string, unknown>)[key]
    if (typeof after === 'string') (out ??= {})[key] = textBaseOf(after, before)
  }
  return out
}

/**
 * [WEB53] Whether `doc` holds every struct `update` inserts (the server took it: a replay would
 * insert its characters a second time). A delete-only update is never held: its replay takes out
 * only what is still there.
 */
function holds(doc: Y.Doc, update: Uint8Array): boolean {
  if (update.byteLength === 0) return false
  // Each client's clock after the update's last struct: a doc's state per client is contiguous.
  const { to } = Y.parseUpdateMeta(update)
  if (to.size === 0) return false
  for (const [client, clock] of to) if (Y.getState(doc.store, client) < clock) return false
  return true
}

/** Refusals of the bytes, not of the intent: the outbox patch is replayed once on a rebuilt doc. */
function isReplayable(code: string): boolean {
  return code === 'invalid_update' || code === 'client_id_conflict'
}

const encoder = new TextEncoder()

/** UTF-8 size of a patch as JSON; a string's length is a lower bound, so only large ones are encoded. */
function jsonBytes(patch: MergePatch): number {
  const json = JSON.stringify(patch)
  return json.length * 3 < 64 * 1024 ? json.length : encoder.encode(json).byteLength
}
