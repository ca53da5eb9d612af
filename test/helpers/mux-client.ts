import * as Y from 'yjs'
import WebSocket from 'ws'
import * as encoding from 'lib0/encoding'
import * as decoding from 'lib0/decoding'
import * as syncProtocol from 'y-protocols/sync'
import * as authProtocol from 'y-protocols/auth'
import {
  CONTENT_MAP,
  MuxType,
  YMessage,
  applyPatchToDoc,
  decodeMuxFrame,
  docToJson,
  encodeMuxFrame,
  type JsonObject,
  type MergePatch,
  type MuxFrame,
} from '../../shared/index.js'
import { toWsUrl, type CloseInfo } from './stock-provider.js'

export type JoinResult =
  | { ok: true; path: string; permissions: number }
  | { ok: false; path: string; closeCode: number; code: string; message: string }

export type UpdateResult =
  | { ok: true; seq: number; version: number }
  | { ok: false; seq: number; code: string; message: string }

/** Marks updates that came from the server, so they are never echoed back. */
const REMOTE = Symbol('mux-remote')

interface PendingJoin {
  resolve(result: JoinResult): void
  joined?: { permissions: number }
  waitSynced: boolean
}

/**
 * A minimal `/mux` client over `ws` speaking shared/protocol.ts, for tests and benchmarks. It
 * keeps one Y.Doc per joined path, applies the server's Sync frames with y-protocols, and sends
 * local edits as `Update` frames whose `Ack`/`Refused` answer resolves a promise.
 *
 * It deliberately has no rebase/outbox logic: after a refusal, its local doc still holds the
 * refused edit (the server's does not), which is exactly what tests of refusals want to see.
 */
export class MuxClient {
  readonly socket: WebSocket
  readonly docs = new Map<string, Y.Doc>()
  /** Every frame received, in order (tests assert on Denied / Error frames). */
  readonly frames: MuxFrame[] = []
  /** Permission-denied reasons carried in Sync frames (y-protocols auth), per path. */
  readonly deniedReasons = new Map<string, string[]>()
  /** Resolves when the socket closes, with the server's code and reason. */
  readonly closed: Promise<CloseInfo>
  private seq = 0
  private readonly pendingJoins = new Map<string, PendingJoin>()
  private readonly pendingUpdates = new Map<number, { path: string; resolve(r: UpdateResult): void }>()
  private readonly syncedPaths = new Set<string>()
  private readonly listeners = new Set<(frame: MuxFrame) => void>()

  private constructor(socket: WebSocket) {
    this.socket = socket
    this.closed = new Promise((resolve) => {
      socket.on('close', (code, reason) => {
        for (const [seq, p] of this.pendingUpdates) p.resolve({ ok: false, seq, code: 'closed', message: `socket closed ${code}` })
        this.pendingUpdates.clear()
        for (const [path, p] of this.pendingJoins) p.resolve({ ok: false, path, closeCode: code, code: 'closed', message: `socket closed ${code}` })
        this.pendingJoins.clear()
        resolve({ code, reason: reason.toString() })
      })
    })
    socket.on('message', (data: Buffer) => this.receive(new Uint8Array(data.buffer, data.byteOffset, data.byteLength)))
  }

  /** Opens `${url}/mux?token=` and resolves once the socket is open (rejects if it never opens). */
  static async connect(url: string, token: string): Promise<MuxClient> {
    const socket = new WebSocket(`${toWsUrl(url)}/mux?token=${encodeURIComponent(token)}`)
    const client = new MuxClient(socket)
    await new Promise<void>((resolve, reject) => {
      socket.once('open', () => resolve())
      socket.once('error', reject)
      socket.once('close', (code) => reject(new Error(`mux socket closed before open: ${code}`)))
    })
    socket.on('error', () => {
      // Errors are followed by 'close'; `closed` reports them.
    })
    return client
  }

  get isOpen(): boolean {
    return this.socket.readyState === WebSocket.OPEN
  }

  /** The Y.Doc of `path` (created empty on first use). */
  doc(path: string): Y.Doc {
    let doc = this.docs.get(path)
    if (!doc) {
      doc = new Y.Doc()
      this.docs.set(path, doc)
    }
    return doc
  }

  /** The content of `path` as JSON (shared/merge-patch.ts layout). */
  json(path: string): JsonObject {
    return docToJson(this.doc(path))
  }

  content(path: string): Y.Map<unknown> {
    return this.doc(path).getMap(CONTENT_MAP)
  }

  /** Calls `listener` for every frame received from now on; returns an unsubscribe function. */
  onFrame(listener: (frame: MuxFrame) => void): () => void {
    this.listeners.add(listener)
    return () => this.listeners.delete(listener)
  }

  send(frame: MuxFrame): void {
    this.socket.send(encodeMuxFrame(frame))
  }

  /** Sends bytes as they are (for malformed-frame tests). */
  sendRaw(bytes: Uint8Array): void {
    this.socket.send(bytes)
  }

  /**
   * Joins `path`. Resolves on `Joined` (after the initial sync when `waitSynced`, the default)
   * or on `Denied`. After `Joined` the client sends its sync step 1, as a stock provider does on
   * open, so the server answers with its state (step 2).
   */
  join(path: string, opts: { waitSynced?: boolean } = {}): Promise<JoinResult> {
    this.doc(path)
    const result = new Promise<JoinResult>((resolve) => {
      this.pendingJoins.set(path, { resolve, waitSynced: opts.waitSynced ?? true })
    })
    this.send({ type: MuxType.Join, path })
    return result
  }

  leave(path: string): void {
    this.send({ type: MuxType.Leave, path })
    this.syncedPaths.delete(path)
  }

  /** Sends a Yjs update as an `Update` frame; resolves with its `Ack` or `Refused`. */
  sendUpdate(path: string, update: Uint8Array): Promise<UpdateResult> {
    const seq = ++this.seq
    const result = new Promise<UpdateResult>((resolve) => this.pendingUpdates.set(seq, { path, resolve }))
    this.send({ type: MuxType.Update, path, seq, update })
    return result
  }

  /**
   * Applies `fn` to the local doc of `path` in one transaction and sends the resulting update.
   * The local doc keeps the edit whatever the server answers.
   */
  edit(path: string, fn: (content: Y.Map<unknown>, doc: Y.Doc) => void): Promise<UpdateResult> {
    const doc = this.doc(path)
    const before = Y.encodeStateVector(doc)
    doc.transact(() => fn(doc.getMap(CONTENT_MAP), doc))
    return this.sendUpdate(path, Y.encodeStateAsUpdate(doc, before))
  }

  /** Applies an RFC 7396 patch to the local doc and sends it (see `edit`). */
  patch(path: string, patch: MergePatch): Promise<UpdateResult> {
    const doc = this.doc(path)
    const before = Y.encodeStateVector(doc)
    applyPatchToDoc(doc, patch)
    return this.sendUpdate(path, Y.encodeStateAsUpdate(doc, before))
  }

  /** Closes the socket and waits for the close handshake. */
  async close(): Promise<CloseInfo> {
    if (this.socket.readyState === WebSocket.OPEN || this.socket.readyState === WebSocket.CONNECTING) this.socket.close()
    const info = await this.closed
    for (const doc of this.docs.values()) doc.destroy()
    return info
  }

  private receive(data: Uint8Array): void {
    let frame: MuxFrame
    try {
      frame = decodeMuxFrame(data)
    } catch {
      this.frames.push({ type: MuxType.Error, path: '', code: 'client_decode_error', message: 'undecodable frame from server' })
      return
    }
    this.frames.push(frame)
    switch (frame.type) {
      case MuxType.Sync:
        this.receiveSync(frame.path, frame.message)
        break
      case MuxType.Joined: {
        const pending = this.pendingJoins.get(frame.path)
        this.sendStep1(frame.path)
        if (pending) {
          pending.joined = { permissions: frame.permissions }
          if (!pending.waitSynced || this.syncedPaths.has(frame.path)) this.resolveJoin(frame.path)
        }
        break
      }
      case MuxType.Denied: {
        const pending = this.pendingJoins.get(frame.path)
        this.pendingJoins.delete(frame.path)
        pending?.resolve({ ok: false, path: frame.path, closeCode: frame.closeCode, code: frame.code, message: frame.message })
        break
      }
      case MuxType.Ack: {
        const pending = this.pendingUpdates.get(frame.seq)
        this.pendingUpdates.delete(frame.seq)
        pending?.resolve({ ok: true, seq: frame.seq, version: frame.version })
        break
      }
      case MuxType.Refused: {
        const pending = this.pendingUpdates.get(frame.seq)
        this.pendingUpdates.delete(frame.seq)
        pending?.resolve({ ok: false, seq: frame.seq, code: frame.code, message: frame.message })
        break
      }
      case MuxType.Error:
      case MuxType.Join:
      case MuxType.Leave:
      case MuxType.Update:
      case MuxType.Changed:
        break
      default:
        frame satisfies never
    }
    for (const listener of this.listeners) listener(frame)
  }

  private receiveSync(path: string, message: Uint8Array): void {
    const doc = this.doc(path)
    const decoder = decoding.createDecoder(message)
    const type = decoding.readVarUint(decoder)
    if (type === YMessage.Sync) {
      const reply = encoding.createEncoder()
      encoding.writeVarUint(reply, YMessage.Sync)
      const syncType = syncProtocol.readSyncMessage(decoder, reply, doc, REMOTE)
      if (encoding.length(reply) > 1) this.send({ type: MuxType.Sync, path, message: encoding.toUint8Array(reply) })
      if (syncType === syncProtocol.messageYjsSyncStep2) {
        this.syncedPaths.add(path)
        const pending = this.pendingJoins.get(path)
        if (pending?.joined) this.resolveJoin(path)
      }
    } else if (type === YMessage.Auth) {
      authProtocol.readAuthMessage(decoder, doc, (_doc, reason) => {
        const reasons = this.deniedReasons.get(path) ?? []
        reasons.push(reason)
        this.deniedReasons.set(path, reasons)
      })
    }
    // Awareness and query-awareness are not needed by the tests that use this client.
  }

  private sendStep1(path: string): void {
    const e = encoding.createEncoder()
    encoding.writeVarUint(e, YMessage.Sync)
    syncProtocol.writeSyncStep1(e, this.doc(path))
    this.send({ type: MuxType.Sync, path, message: encoding.toUint8Array(e) })
  }

  private resolveJoin(path: string): void {
    const pending = this.pendingJoins.get(path)
    if (!pending?.joined) return
    this.pendingJoins.delete(path)
    pending.resolve({ ok: true, path, permissions: pending.joined.permissions })
  }
}
