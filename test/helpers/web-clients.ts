import { WebSocket as WsWebSocket } from 'ws'
import { filter, firstValueFrom } from 'rxjs'
import { SyncClient, type Session, type SyncStatus } from '../../web/sync/index.js'
import { afterAll, afterEach, beforeAll } from 'vitest'
import { signup } from './api.js'
import { startTestServer, type TestServer } from './test-server.js'

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

/** A base URL nothing listens at: a client made with it is offline. */
export const OFFLINE_URL = 'http://127.0.0.1:9'

/**
 * A test file's real server (started before its tests, removed after) and its web clients
 * (stopped after each test). `server()` is the running server.
 */
export function webServerSuite(dbPrefix: string) {
  let ts: TestServer | undefined
  const server = (): TestServer => {
    if (!ts) throw new Error('the test server is started in beforeAll')
    return ts
  }
  const web = webClients(() => server().url, dbPrefix)
  beforeAll(async () => {
    ts = await startTestServer()
  })
  afterAll(() => ts?.cleanup())
  afterEach(() => web.stopAll())
  return { server, web }
}
