import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import pino from 'pino'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { AccessService } from '../access/index.js'
import { NodeService } from '../nodes/index.js'
import { openStorage, type StorageAdapter } from '../storage/index.js'
import { configFromEnv } from '../config.js'
import { AuthService, DEFAULT_SCRYPT_N, MIN_SCRYPT_N } from './auth-service.js'

/** A SQLite file and its node service for the describe block it is called in. */
function storageForBlock(): { readonly storage: StorageAdapter; readonly nodes: NodeService } {
  let dir = ''
  const held = {} as { storage: StorageAdapter; nodes: NodeService }
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'weft-auth-'))
    held.storage = await openStorage({ dataDir: dir })
    held.nodes = new NodeService(held.storage, new AccessService(), { idleUnloadMs: 60_000, log: pino({ level: 'silent' }) })
    await held.nodes.boot()
  })
  afterAll(async () => {
    await held.nodes.close()
    await held.storage.close()
    await rm(dir, { recursive: true, force: true })
  })
  return held
}

/**
 * [AUTH7] Two instances over one database, each with its own memory of tokens: a logout on one
 * whose message to the other is lost still ends the token there, once it is read again.
 */
describe('[AUTH7] a token kept in memory is read again', () => {
  const db = storageForBlock()
  let clock = 1_000_000
  const now = () => clock

  it('a logout elsewhere, its message lost, ends the token here within the recheck, and what holds it is told', async () => {
    const one = new AuthService(db.storage, db.nodes, { tokenTtlMs: 3_600_000, now })
    const two = new AuthService(db.storage, db.nodes, { tokenTtlMs: 3_600_000, now })
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

/**
 * [AUTH9] scrypt's N for new hashes is the server's setting (PASSWORD_SCRYPT_N, default 2^14);
 * every stored hash names its own N, so a password hashed under one setting signs in under another.
 */
describe('[AUTH9] the password hash cost', () => {
  const db = storageForBlock()

  it('new hashes use the setting (2^14 unless told); a hash made under another setting still signs in, a wrong password does not', async () => {
    const strong = new AuthService(db.storage, db.nodes, { tokenTtlMs: 3_600_000 })
    const cheap = new AuthService(db.storage, db.nodes, { tokenTtlMs: 3_600_000, scryptN: MIN_SCRYPT_N })
    await strong.signup({ email: 'strong@example.com', password: 'long enough password', name: 'Strong' })
    await cheap.signup({ email: 'cheap@example.com', password: 'long enough password', name: 'Cheap' })
    expect((await db.storage.findAccountByEmail('strong@example.com'))?.passwordHash).toMatch(/^scrypt\$16384\$8\$1\$/)
    expect((await db.storage.findAccountByEmail('cheap@example.com'))?.passwordHash).toMatch(/^scrypt\$1024\$8\$1\$/)
    for (const [auth, email] of [[strong, 'cheap@example.com'], [cheap, 'strong@example.com']] as const) {
      await expect(auth.login({ email, password: 'long enough password' })).resolves.toMatchObject({ token: expect.any(String) })
      await expect(auth.login({ email, password: 'not the password' })).rejects.toMatchObject({ code: 'invalid_credentials' })
    }
  })

  it('PASSWORD_SCRYPT_N takes a power of two from 2^10 to 2^20, and names itself when it is anything else', () => {
    expect(configFromEnv({}).passwordScryptN).toBe(DEFAULT_SCRYPT_N)
    expect(configFromEnv({ PASSWORD_SCRYPT_N: '1024' }).passwordScryptN).toBe(1024)
    for (const bad of ['512', '1000', '2097152', '-1024', 'cheap']) expect(() => configFromEnv({ PASSWORD_SCRYPT_N: bad })).toThrow(/PASSWORD_SCRYPT_N/)
  })
})
