import { must } from '../shared/errors.js'
import { NodeStreams } from './streams/index.js'
import { SyncClient, type Session } from './sync/index.js'
import { background } from './sync/background.js'

/**
 * The session's services. Components read them here instead of receiving them through
 * properties: there is one session per page, and a component tree rebuilds on sign-in.
 */
export interface AppContext {
  session: Session
  client: SyncClient
  streams: NodeStreams
}

let current: AppContext | null = null

export async function startAppContext(session: Session, baseUrl = location.origin): Promise<AppContext> {
  current?.client.stop()
  const client = new SyncClient({ session, baseUrl })
  // Not awaited: the first render's queries wait for the open inside Dexie (see start()).
  background(client.start())
  current = { session, client, streams: new NodeStreams(client) }
  performance.mark('weft:context-ready')
  // Tests and benchmarks drive the store through this handle.
  ;(globalThis as { __weft?: AppContext }).__weft = current
  return current
}

export function stopAppContext(): void {
  current?.client.stop()
  current = null
}

export function app(): AppContext {
  return must(current, 'the app context is started before any page renders')
}
