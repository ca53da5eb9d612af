import { createHash, randomBytes, scrypt as scryptCb, timingSafeEqual } from 'node:crypto'
import { promisify } from 'node:util'
import { z } from 'zod'
import { SYSTEM, WeftError, parseUserId, principalName, type MeshNode, type NodePath, type UserId } from '../../shared/index.js'
import type { Account, StorageAdapter } from '../storage/index.js'
import type { NodeApi } from '../nodes/index.js'
import type { UserDirectory } from './types.js'
import { LoginThrottle } from './login-throttle.js'

const scrypt = promisify(scryptCb) as (password: string, salt: Buffer, keylen: number, opts: { N: number; r: number; p: number; maxmem: number }) => Promise<Buffer>

/**
 * scrypt N=2^14, r=8: ~16 MiB and ~40 ms per hash here; the OWASP floor for scrypt. A server may
 * be told a lower N (PASSWORD_SCRYPT_N, a test suite's thousands of sign-ups); each stored hash
 * names its own N, so a password is verified with the N it was hashed with.
 */
export const DEFAULT_SCRYPT_N = 16384
/** The lowest N a server takes (PASSWORD_SCRYPT_N): 2^10, for tests only. */
export const MIN_SCRYPT_N = 1024
const SCRYPT = { r: 8, p: 1, maxmem: 64 * 1024 * 1024 }
const KEY_LEN = 32
const TOKEN_CACHE_MAX = 10_000
/**
 * [AUTH7] How long a token this instance read is trusted without reading it again (ms): with
 * several instances a logout on another is told over Redis at once, and this bounds it when that
 * message is lost.
 */
const TOKEN_RECHECK_MS = 5_000
/** A token's hash as `hashToken` makes it (what another instance's revocation names). */
const TOKEN_HASH = /^[0-9a-f]{64}$/

/** [AUTH7] Revocations told to and heard from the other instances (cluster/cluster.ts). */
export interface TokenPeers {
  publish(tokenHash: string): void
  onRevoked(handler: (tokenHash: string) => void): void
}
/**
 * Ids no account gets: top-level places of the server (`admin`, `api`) and the names the server
 * writes for itself where a user id stands (`system` as CreatedBy or a change's author, `agent` as
 * a response's Author): a person with one of them would pass for the server.
 */
const RESERVED_USER_IDS: ReadonlySet<string> = new Set(['admin', 'api', 'system', 'agent'])

/** [ACC44] The longest account address: what sign-up takes, and so what an invite may name. */
export const MAX_EMAIL_LENGTH = 320

export const SignupBody = z.object({
  email: z.string().trim().toLowerCase().email().max(MAX_EMAIL_LENGTH),
  password: z.string().min(8, 'Use a password of at least 8 characters.').max(1024),
  name: z.string().trim().min(1).max(200),
})
export const LoginBody = z.object({
  email: z.string().trim().toLowerCase().max(320),
  password: z.string().max(1024),
})

async function hashPassword(password: string, N: number): Promise<string> {
  const salt = randomBytes(16)
  const key = await scrypt(password, salt, KEY_LEN, { ...SCRYPT, N })
  return `scrypt$${N}$${SCRYPT.r}$${SCRYPT.p}$${salt.toString('base64')}$${key.toString('base64')}`
}

async function verifyPassword(password: string, stored: string): Promise<boolean> {
  const [kind, n, r, p, salt, key] = stored.split('$')
  if (kind !== 'scrypt' || !salt || !key) return false
  const expected = Buffer.from(key, 'base64')
  const actual = await scrypt(password, Buffer.from(salt, 'base64'), expected.length, { N: Number(n), r: Number(r), p: Number(p), maxmem: SCRYPT.maxmem })
  return timingSafeEqual(expected, actual)
}

function hashToken(token: string): string {
  return createHash('sha256').update(token).digest('hex')
}

/**
 * Accounts and bearer tokens. Tokens are random 256-bit strings; only their SHA-256 is stored,
 * so a leaked database holds no usable token. Revocation deletes the hash (and the cache entry).
 */
/** A signed-in session behind a token: what a socket needs to end when the token does. */
export interface Session {
  userId: UserId
  /** SHA-256 of the token: the key revocation is announced by. */
  tokenHash: string
  expiresAt: number
}

export interface AuthServiceOptions {
  /** How long a session token lives (config `tokenTtlMs`). */
  tokenTtlMs: number
  /** Sign-in attempts per account and address (a fresh one by default). */
  throttle?: LoginThrottle
  /** The clock (tests move it). */
  now?: () => number
  /** [AUTH9] scrypt's N for new password hashes (config `passwordScryptN`; default 2^14). */
  scryptN?: number
}

export class AuthService implements UserDirectory {
  private readonly tokenCache = new Map<string, { userId: UserId; expiresAt: number; checkedAt: number }>()
  private peers: TokenPeers | null = null
  private readonly revokedListeners = new Set<(tokenHash: string) => void>()

  private readonly tokenTtlMs: number
  private readonly throttle: LoginThrottle
  private readonly now: () => number
  /** scrypt's N for new hashes (config `passwordScryptN`). */
  private readonly scryptN: number

  constructor(
    private readonly storage: StorageAdapter,
    private readonly nodes: NodeApi,
    opts: AuthServiceOptions,
  ) {
    this.tokenTtlMs = opts.tokenTtlMs
    this.throttle = opts.throttle ?? new LoginThrottle()
    this.now = opts.now ?? Date.now
    this.scryptN = opts.scryptN ?? DEFAULT_SCRYPT_N
  }

  async signup(raw: unknown): Promise<{ userId: UserId; token: string }> {
    const body = parse(SignupBody, raw)
    const existing = await this.storage.findAccountByEmail(body.email)
    if (existing) {
      // A sign-up cut short between the account and its User node (a crash) is completed by
      // the same person retrying it: same password, no User node yet.
      const userId = parseUserId(existing.userId)
      if (!(await this.hasUserNode(userId)) && (await verifyPassword(body.password, existing.passwordHash))) {
        await this.requireHome(userId, body.email, body.name)
        return { userId, token: await this.issueToken(userId) }
      }
      throw new WeftError('email_taken', `An account for ${body.email} already exists; log in instead.`)
    }
    const passwordHash = await hashPassword(body.password, this.scryptN)
    let userId: UserId | null = null
    for (let attempt = 0; attempt < 5 && !userId; attempt++) {
      const candidate = await this.freeUserId(body.email, attempt)
      try {
        await this.storage.createAccount({ userId: candidate, email: body.email, passwordHash, createdAt: new Date().toISOString() })
      } catch (e) {
        // Either the email was taken meanwhile, or a concurrent signup took the same id: retry.
        if (await this.storage.findAccountByEmail(body.email)) {
          throw new WeftError('email_taken', `An account for ${body.email} already exists; log in instead.`)
        }
        if (attempt === 4) throw e
        continue
      }
      // The id was free when chosen; someone may have made a node there since (a Space at the
      // predictable id, made to become this person's home): then the account gives the id up,
      // before any token for it exists, and takes another.
      if (await this.claimHome(candidate, body.email, body.name)) userId = candidate
      else await this.storage.deleteAccount(candidate, body.email)
    }
    if (!userId) throw new WeftError('unavailable', 'Could not find a free user id for this account; try again.')
    return { userId, token: await this.issueToken(userId) }
  }

  /** `address`: the client's, for the per-address throttle ([AUTH3]). */
  async login(raw: unknown, address = 'local'): Promise<{ userId: UserId; token: string }> {
    const body = parse(LoginBody, raw)
    // [AUTH3] Refused before the password is hashed: a locked key costs the server nothing.
    const attempt = this.throttle.begin(body.email, address)
    let account: Account | null
    let ok: boolean
    try {
      account = await this.storage.findAccountByEmail(body.email)
      // Hash anyway when the account is missing, so timing does not reveal which emails exist.
      ok = account ? await verifyPassword(body.password, account.passwordHash) : (await hashPassword(body.password, this.scryptN), false)
    } catch (err) {
      attempt.abandoned()
      throw err
    }
    if (!account || !ok) {
      attempt.failed()
      throw new WeftError('invalid_credentials', 'Email or password is wrong.')
    }
    attempt.succeeded()
    const userId = parseUserId(account.userId)
    if (!(await this.hasUserNode(userId))) await this.requireHome(userId, account.email, account.email.split('@')[0] ?? userId)
    return { userId, token: await this.issueToken(userId) }
  }

  /** A person's home: the User node the server made at their id (a node anyone else made there is not). */
  private static isHome(node: MeshNode | null): boolean {
    return node !== null && node.nodeType === 'User' && node.createdBy === principalName(SYSTEM)
  }

  private async hasUserNode(userId: UserId): Promise<boolean> {
    return AuthService.isHome(await this.nodes.get(SYSTEM, userId as string as NodePath))
  }

  /**
   * Makes the User node at the account's id unless it is there (creating it is what fires matching
   * subscriptions: invites). False when another node stands there: it is never taken as the home.
   */
  private async claimHome(userId: UserId, email: string, name: string): Promise<boolean> {
    const home = await this.nodes.update(
      SYSTEM,
      userId as string as NodePath,
      (current) => current ?? { nodeType: 'User', name, content: { Email: email, FullName: name, PinnedPaths: [] } },
      'system',
    )
    return AuthService.isHome(home)
  }

  /** An existing account's home, made now if a crash left it out; refused when another node took its place. */
  private async requireHome(userId: UserId, email: string, name: string): Promise<void> {
    if (!(await this.claimHome(userId, email, name))) {
      throw new WeftError('conflict', `The place of your account (${userId}) holds a node someone else made; an operator must move it before you can sign in.`)
    }
  }

  private purgeTimer: NodeJS.Timeout | null = null

  /** Expired tokens leave storage now and then every hour: the table is bounded by live sessions. */
  startPurging(everyMs = 3_600_000): void {
    const purge = () => void this.storage.purgeExpiredTokens(new Date().toISOString()).catch(() => undefined)
    purge()
    this.purgeTimer = setInterval(purge, everyMs)
    this.purgeTimer.unref()
  }

  stop(): void {
    if (this.purgeTimer) clearInterval(this.purgeTimer)
    this.purgeTimer = null
  }

  /** Revokes the token; every open socket signed in with it is closed (4401) at once, on every instance. */
  async logout(token: string): Promise<void> {
    const hash = hashToken(token)
    this.tokenCache.delete(hash)
    await this.storage.revokeToken(hash)
    this.peers?.publish(hash)
    this.revoked(hash)
  }

  /**
   * [AUTH7] With several instances: a logout on one reaches the others at once. Each kept the
   * token it had read in memory, and served it (HTTP, sockets, long polls) until it expired.
   */
  connectPeers(peers: TokenPeers): void {
    this.peers = peers
    peers.onRevoked((hash) => {
      if (TOKEN_HASH.test(hash)) this.revoked(hash)
    })
  }

  /** A token revoked (here or on another instance): forgotten, and whatever holds it is told. */
  private revoked(hash: string): void {
    this.tokenCache.delete(hash)
    for (const listener of this.revokedListeners) listener(hash)
  }

  /** Called with a token's hash when it is revoked; returns the unsubscribe function. */
  onRevoked(listener: (tokenHash: string) => void): () => void {
    this.revokedListeners.add(listener)
    return () => this.revokedListeners.delete(listener)
  }

  /** The user behind a token, or null when it is unknown, revoked or expired. */
  async authenticate(token: string | null | undefined): Promise<UserId | null> {
    return (await this.session(token))?.userId ?? null
  }

  /** The session behind a token (user, token hash, expiry), or null. */
  async session(token: string | null | undefined): Promise<Session | null> {
    if (!token || token.length > 200) return null
    const hash = hashToken(token)
    const now = this.now()
    const cached = this.tokenCache.get(hash)
    if (cached && now - cached.checkedAt < TOKEN_RECHECK_MS) return cached.expiresAt > now ? { userId: cached.userId, tokenHash: hash, expiresAt: cached.expiresAt } : null
    const row = await this.storage.findToken(hash)
    if (!row) {
      // Revoked elsewhere and the message lost: what holds it here is told now.
      if (cached) this.revoked(hash)
      return null
    }
    const expiresAt = Date.parse(row.expiresAt)
    if (!(expiresAt > now)) return null
    if (this.tokenCache.size >= TOKEN_CACHE_MAX) this.purgeCache(now)
    const userId = parseUserId(row.userId)
    this.tokenCache.set(hash, { userId, expiresAt, checkedAt: now })
    return { userId, tokenHash: hash, expiresAt }
  }

  /** Drops expired entries, then the oldest half if still full: the cache never grows past its cap. */
  private purgeCache(now: number): void {
    for (const [hash, entry] of this.tokenCache) if (entry.expiresAt <= now) this.tokenCache.delete(hash)
    if (this.tokenCache.size < TOKEN_CACHE_MAX) return
    let drop = this.tokenCache.size / 2
    for (const hash of this.tokenCache.keys()) {
      if (drop-- <= 0) break
      this.tokenCache.delete(hash)
    }
  }

  async findUserIdByEmail(email: string): Promise<UserId | null> {
    const account = await this.storage.findAccountByEmail(email.trim().toLowerCase())
    return account ? parseUserId(account.userId) : null
  }

  private async issueToken(userId: UserId): Promise<string> {
    const token = randomBytes(32).toString('base64url')
    await this.storage.saveToken(hashToken(token), userId, new Date(Date.now() + this.tokenTtlMs).toISOString())
    return token
  }

  /** A readable id from the email's local part; a suffix when taken (ids are top-level paths). */
  private async freeUserId(email: string, attempt: number): Promise<UserId> {
    if (attempt > 0) {
      const local = (email.split('@')[0] ?? 'user').toLowerCase().replace(/[^a-z0-9]+/g, '-').slice(0, 40)
      return parseUserId(`${local || 'user'}-${randomBytes(3).toString('hex')}`)
    }
    const base = (email.split('@')[0] ?? 'user').toLowerCase().replace(/[^a-z0-9]+/g, '-').replace(/^-+|-+$/g, '').slice(0, 40) || 'user'
    for (let i = 1; i < 1000; i++) {
      const candidate = i === 1 ? base : `${base}-${i}`
      if (RESERVED_USER_IDS.has(candidate)) continue
      if (!(await this.storage.getNode(candidate as NodePath))) return parseUserId(candidate)
    }
    return parseUserId(`${base}-${randomBytes(4).toString('hex')}`)
  }
}

export function parse<T>(schema: z.ZodType<T>, raw: unknown): T {
  const result = schema.safeParse(raw)
  if (!result.success) {
    const issue = result.error.issues[0]
    const where = issue?.path.length ? `${issue.path.join('.')}: ` : ''
    throw new WeftError('invalid_request', `${where}${issue?.message ?? 'invalid request'}`)
  }
  return result.data
}
