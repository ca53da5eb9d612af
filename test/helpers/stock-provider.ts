import * as Y from 'yjs'
import WebSocket from 'ws'
import * as authProtocol from 'y-protocols/auth'
import { WebsocketProvider, messageAuth } from 'y-websocket'
import { CONTENT_MAP, docToJson, type JsonObject } from '../../shared/index.js'

/** `http://host:port` → `ws://host:port` (and https → wss). */
export function toWsUrl(url: string): string {
  return url.replace(/^http/, 'ws').replace(/\/+$/, '')
}

export interface CloseInfo {
  code: number
  reason: string
}

/**
 * An unmodified y-websocket 3.1 `WebsocketProvider` on `/sync/{path}?token=`, as any third-party
 * client would run it, plus what tests need to observe: the permission-denied reasons the server
 * sent (y-protocols auth messages) and the close codes it used.
 */
export interface StockClient {
  readonly provider: WebsocketProvider
  readonly doc: Y.Doc
  /** The node's content map (`content`, see shared/merge-patch.ts). */
  readonly content: Y.Map<unknown>
  /** Reasons of every permission-denied auth message received, in order. */
  readonly denied: string[]
  /** Every server-side close of the socket (not the ones we initiated), in order. */
  readonly closes: CloseInfo[]
  /** Resolves once the provider has synced with the server (sync step 2 received). */
  synced(timeoutMs?: number): Promise<void>
  /** The node's content as JSON. */
  json(): JsonObject
  destroy(): void
}

export interface StockProviderOptions {
  /** Connect immediately (default true). */
  connect?: boolean
  /** Default true (the stock policy: retry unless the close code is in 4400–4499); false never retries. */
  reconnect?: boolean
}

/**
 * `room = path`: y-websocket builds `${serverUrl}/${roomname}?${params}` without encoding the
 * room, so a path's `/` separators reach the server as URL path separators, as intended.
 */
export function stockProvider(url: string, path: string, token: string, doc = new Y.Doc(), opts: StockProviderOptions = {}): StockClient {
  const denied: string[] = []
  const closes: CloseInfo[] = []
  const provider = new WebsocketProvider(`${toWsUrl(url)}/sync`, path, doc, {
    // The `ws` class is API-compatible with the browser WebSocket the provider expects.
    WebSocketPolyfill: WebSocket as unknown as typeof globalThis.WebSocket,
    disableBc: true,
    params: { token },
    connect: opts.connect ?? true,
    maxBackoffTime: 500,
    shouldReconnect: (event) => (opts.reconnect ?? true) && !(event.code >= 4400 && event.code < 4500),
  })
  // The stock handler only logs a permission-denied message; record it (same decoding).
  provider.messageHandlers[messageAuth] = (_encoder, decoder) => {
    authProtocol.readAuthMessage(decoder, doc, (_doc, reason) => {
      denied.push(reason)
    })
  }
  provider.on('connection-close', (event) => {
    if (event) closes.push({ code: event.code, reason: event.reason })
  })
  const synced = (timeoutMs = 60_000) =>
    new Promise<void>((resolve, reject) => {
      if (provider.synced) return resolve()
      const timer = setTimeout(() => {
        provider.off('sync', onSync)
        reject(new Error(`provider for ${path} did not sync within ${timeoutMs} ms (closes: ${JSON.stringify(closes)}, denied: ${JSON.stringify(denied)})`))
      }, timeoutMs)
      const onSync = (isSynced: boolean) => {
        if (!isSynced) return
        clearTimeout(timer)
        provider.off('sync', onSync)
        resolve()
      }
      provider.on('sync', onSync)
    })
  return {
    provider,
    doc,
    content: doc.getMap(CONTENT_MAP),
    denied,
    closes,
    synced,
    json: () => docToJson(doc),
    destroy: () => {
      provider.destroy()
      doc.destroy()
    },
  }
}
