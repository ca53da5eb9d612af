import { WebSocket as WsWebSocket } from 'ws'
import { filter, firstValueFrom } from 'rxjs'
import { SyncClient, type Session, type SyncStatus } from '../../web/sync/index.js'
import { signup } from './api.js'

/**
 * The browser's sync client in Node against a real server (`ws` for the WebSocket; the test file
 * imports `fake-indexeddb/auto` first, for IndexedDB): clients made here are stopped by `stopAll`
 * (an `afterEach`). Not in the helpers' index: it loads the web app's store.
 */
export function webClients(serverUrl: () => string, dbPrefix: string) {
  const made: SyncClient[] = []
  let n = 0
  return {
    /** A started client; `dbName` shared by two clients makes them two tabs of one device. */
    async client(session: Session, opts: { baseUrl?: string; dbName?: string } = {}): Promise<SyncClient> {
      const c = new SyncClient({
        session,
        baseUrl: opts.baseUrl ?? serverUrl(),
        dbName: opts.dbName ?? `${dbPrefix}-${++n}`,
        WebSocketImpl: WsWebSocket as unknown as typeof WebSocket,
      })
      made.push(c)
      await c.start()
      return c
    },
    /** A fresh store's name (for tabs that share it). */
    dbName(): string {
      return `${dbPrefix}-${++n}`
    },
    async user(name: string): Promise<Session> {
      const u = await signup(serverUrl(), undefined, undefined, name)
      return { userId: u.userId, token: u.token, name }
    },
    stopAll(): void {
      for (const c of made.splice(0)) c.stop()
    },
  }
}

/** The client's first status that `pred` holds for (the current one included). */
export function statusIs(c: SyncClient, pred: (s: SyncStatus) => boolean): Promise<SyncStatus> {
  return firstValueFrom(c.status$.pipe(filter(pred)))
}
