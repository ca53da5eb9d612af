import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import pino from 'pino'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { AccessService } from '../access/index.js'
import { NodeService } from '../nodes/index.js'
import { openStorage, type StorageAdapter } from '../storage/index.js'
import { AuthService } from './auth-service.js'
import { LoginThrottle } from './login-throttle.js'

/**
 * [AUTH7] Two instances over one database, each with its own memory of tokens: a logout on one
 * whose message to the other is lost still ends the token there, once it is read again.
 */
describe('[AUTH7] a token kept in memory is read again', () => {
  let dir = ''
  let storage: StorageAdapter
  let nodes: NodeService
  let clock = 1_000_000
  const now = () => clock
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'weft-auth-'))
    storage = await openStorage({ dataDir: dir })
    nodes = new NodeService(storage, new AccessService(), { idleUnloadMs: 60_000, log: pino({ level: 'silent' }) })
    await nodes.boot()
  })
  afterAll(async () => {
    await nodes.close()
    await storage.close()
    await rm(dir, { recursive: true, force: true })
  })

  it('a logout elsewhere, its message lost, ends the token here within the recheck, and what holds it is told', async () => {
    const one = new AuthService(storage, nodes, 3_600_000, new LoginThrottle(), now)
    const two = new AuthService(storage, nodes, 3_600_000, new LoginThrottle(), now)
    const { userId, token } = await one.signup({ email: 'ada@example.com', password: 'long enough password', name: 'Ada' })
    expect(await two.authenticate(token)).toBe(userId)
    const told: string[] = []
    two.onRevoked((hash) => told.push(hash))
    await one.logout(token)
    expect(await one.authenticate(token)).toBeNull()
    // Within the recheck the other instance still trusts what it read (the bound the peers' message removes).
    clock += 1_000
    expect(await two.authenticate(token)).toBe(userId)
    expect(told).toEqual([])
    clock += 5_000
    expect(await two.authenticate(token)).toBeNull()
    expect(told).toHaveLength(1)
  })
})
