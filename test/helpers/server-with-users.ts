import { afterAll, beforeAll } from 'vitest'
import { signup, type TestUser } from './api.js'
import { startTestServer, type TestServer } from './test-server.js'

/** One file's server and `count` signed-up users: made before its tests, the server removed after. */
export interface ServerWithUsers {
  ts: TestServer
  users: TestUser[]
}

export function serverWithUsers(count: number): ServerWithUsers {
  const env = { users: [] as TestUser[] } as unknown as ServerWithUsers
  beforeAll(async () => {
    env.ts = await startTestServer()
    for (let i = 0; i < count; i++) env.users.push(await signup(env.ts.url))
  }, 120_000)
  afterAll(() => env.ts?.cleanup())
  return env
}
