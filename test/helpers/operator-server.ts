import { afterAll, beforeAll } from 'vitest'
import { SYSTEM, type NodePath } from '../../shared/index.js'
import { signup, type TestUser } from './api.js'
import { freshDatabase } from './cluster.js'
import { startTestServer, type TestServer } from './test-server.js'

/** One describe block's server on SQLite or a fresh PostgreSQL database, an operator (Admin of `Admin`) and another user. */
export interface OperatorServer {
  ts: TestServer
  ops: TestUser
  owner: TestUser
}

export function operatorServer(backend: 'sqlite' | 'postgres', dbPrefix = 'weft_ops_'): OperatorServer {
  const env = {} as OperatorServer
  let drop: (() => Promise<void>) | null = null
  beforeAll(async () => {
    const db = backend === 'postgres' ? await freshDatabase(dbPrefix) : null
    drop = db?.drop ?? null
    env.ts = await startTestServer(db ? { config: { databaseUrl: db.url } } : {})
    env.ops = await signup(env.ts.url)
    env.owner = await signup(env.ts.url)
    await env.ts.server.nodes.put(SYSTEM, `Admin/_Access/${env.ops.userId}_Access` as NodePath, { nodeType: 'AccessAssignment', content: { Subject: env.ops.userId, Role: 'Admin' } }, 'system')
  }, 120_000)
  afterAll(async () => {
    await env.ts?.cleanup()
    await drop?.()
  })
  return env
}
