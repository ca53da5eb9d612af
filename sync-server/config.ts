import os from 'node:os'
import path from 'node:path'
import { DEFAULT_LOGIN_LIMITS, DEFAULT_SCRYPT_N, MIN_SCRYPT_N } from './auth/index.js'
import { ClientAddresses } from './http/index.js'

export interface ServerConfig {
  port: number
  host: string
  /** SQLite lives in `${dataDir}/weft.db`. */
  dataDir: string
  /** postgres://... switches storage to PostgreSQL. */
  databaseUrl?: string
  /** [SCALE1] redis://... : several instances on one PostgreSQL fan updates out through Redis (needs databaseUrl). */
  redisUrl?: string
  /** [SCALE6] How long the engines' lease lasts unless renewed (ENGINE_LEASE_MS); failover takes about this long. */
  engineLeaseMs: number
  /**
   * [SCALE12] How long an update another instance sent before its commit may wait for word that
   * it is durable before the database is asked (EARLY_CONFIRM_MS); held lost at three times it.
   */
  earlyConfirmMs: number
  /** [SCALE1] This instance's name among the others (INSTANCE_ID; default host name and process id). */
  instanceId: string
  logLevel: string
  /** Largest HTTP body or WebSocket frame accepted, in bytes. */
  maxPayloadBytes: number
  /** A document nobody has used for this long is unloaded from memory. */
  idleUnloadMs: number
  /**
   * Above this many loaded nodes, those no client has open are unloaded sooner, least recently
   * used first (a burst of engine writes must not hold every node it touched for
   * `idleUnloadMs`). Room for a 10,000-timer burst: each warms its subscription and its grant.
   */
  maxLoadedDocs: number
  /** Built web app (vite build output) served at `/`; absent folder = API only. */
  staticDir: string
  tokenTtlMs: number
  /** [MOVE6] How long a trashed subtree can be restored; purged after (TRASH_RETENTION_MS, default 30 days). */
  trashRetentionMs: number
  /** Most rooms one /mux socket may hold at once. */
  maxRoomsPerSocket: number
  /** [SYNC17] A socket's updates waiting to be stored and joins waiting on their node, past which it is not read (MAX_IN_FLIGHT_PER_SOCKET). */
  maxInFlightPerSocket: number
  /** How often a WebSocket is pinged; one that has not answered the last ping by the next is closed (PING_INTERVAL_MS). */
  pingIntervalMs: number
  /** Deepest JSON a client may write, over every transport (MAX_JSON_DEPTH). */
  maxJsonDepth: number
  /** [AUTH3] Login throttling (sync-server/auth/login-throttle.ts). */
  loginFreeFailuresPerAccount: number
  loginFreeFailuresPerAddress: number
  loginLockoutBaseMs: number
  loginLockoutMaxMs: number
  /**
   * [AUTH9] PASSWORD_SCRYPT_N: scrypt's cost for new password hashes, a power of two from 2^10
   * (default 2^14, the OWASP floor). Lower it for a test suite only; stored hashes keep theirs.
   */
  passwordScryptN: number
  /** [CTX20] CONTEXTUAL_SEAL_KEY: 32 bytes, base64, that seal causation tokens; default: a key made once and kept in the database. */
  contextualSealKey?: string
  /** [CTX51] OUTCOME_RETENTION_DAYS: how long a reaction's outcome row is kept once its event is settled (default 30; 0: forever). */
  contextualOutcomeRetentionDays: number
  /** [CTX35] GRPC_PORT: the contextual gRPC service's port (0: any free port); unset, no gRPC server. */
  grpcPort?: number
  /** [OPS1] METRICS_TOKEN: the bearer token `GET /metrics` asks for; unset, /metrics answers 404. */
  metricsToken?: string
  /**
   * [PROD2] SHUTDOWN_TIMEOUT_MS: the bound on a graceful shutdown (SIGTERM / SIGINT). HTTP requests
   * under way get half of it to finish before their connections are cut; past all of it the
   * process exits 1 (what was acknowledged is durable regardless: an ack follows the fsync).
   */
  shutdownTimeoutMs: number
  /** [OPS10] STUCK_RUN_MS: the operator's page lists a run `Running` for longer than this. */
  stuckRunMs: number
  /** [OPS10] OPERATOR_EMAILS: accounts (comma-separated emails) that see the operator's page besides the Admins of `Admin`. */
  operatorEmails: string[]
  /** [AUTH5] TRUSTED_PROXIES: reverse proxies (addresses or CIDR ranges) whose X-Forwarded-For names the client. */
  trustedProxies: string[]
}

function int(value: string | undefined, fallback: number, name: string): number {
  if (value === undefined || value === '') return fallback
  const n = Number(value)
  if (!Number.isInteger(n) || n < 0) throw new Error(`${name} must be a non-negative integer, got ${JSON.stringify(value)}`)
  return n
}

function scryptN(value: string | undefined, fallback: number): number {
  const n = int(value, fallback, 'PASSWORD_SCRYPT_N')
  if (n < MIN_SCRYPT_N || n > 1 << 20 || (n & (n - 1)) !== 0) throw new Error(`PASSWORD_SCRYPT_N must be a power of two from ${MIN_SCRYPT_N} to ${1 << 20}, got ${n}`)
  return n
}

function sealKey(value: string | undefined): string | undefined {
  if (value === undefined || value === '') return undefined
  if (Buffer.from(value, 'base64').length !== 32) throw new Error('CONTEXTUAL_SEAL_KEY must be 32 bytes, base64 (e.g. `openssl rand -base64 32`).')
  return value
}

export function defaultConfig(): ServerConfig {
  return {
    port: 8787,
    host: '0.0.0.0',
    dataDir: path.resolve('data'),
    logLevel: 'info',
    engineLeaseMs: 3_000,
    earlyConfirmMs: 10_000,
    instanceId: `${os.hostname()}-${process.pid}`,
    maxPayloadBytes: 1024 * 1024,
    idleUnloadMs: 30_000,
    maxLoadedDocs: 50_000,
    staticDir: path.resolve('dist'),
    tokenTtlMs: 30 * 24 * 3600 * 1000,
    trashRetentionMs: 30 * 24 * 3600 * 1000,
    contextualOutcomeRetentionDays: 30,
    maxRoomsPerSocket: 20_000,
    maxInFlightPerSocket: 256,
    pingIntervalMs: 30_000,
    maxJsonDepth: 64,
    loginFreeFailuresPerAccount: DEFAULT_LOGIN_LIMITS.freePerAccount,
    loginFreeFailuresPerAddress: DEFAULT_LOGIN_LIMITS.freePerAddress,
    loginLockoutBaseMs: DEFAULT_LOGIN_LIMITS.lockoutBaseMs,
    loginLockoutMaxMs: DEFAULT_LOGIN_LIMITS.lockoutMaxMs,
    passwordScryptN: DEFAULT_SCRYPT_N,
    shutdownTimeoutMs: 10_000,
    stuckRunMs: 15 * 60_000,
    operatorEmails: [],
    trustedProxies: [],
  }
}

/** Configuration from the environment (12-factor); every variable is optional. */
export function configFromEnv(env: NodeJS.ProcessEnv = process.env): ServerConfig {
  const d = defaultConfig()
  return {
    port: int(env.PORT, d.port, 'PORT'),
    host: env.HOST || d.host,
    dataDir: path.resolve(env.DATA_DIR || d.dataDir),
    databaseUrl: env.DATABASE_URL || undefined,
    redisUrl: env.REDIS_URL || undefined,
    engineLeaseMs: Math.max(300, int(env.ENGINE_LEASE_MS, d.engineLeaseMs, 'ENGINE_LEASE_MS')),
    earlyConfirmMs: Math.max(500, int(env.EARLY_CONFIRM_MS, d.earlyConfirmMs, 'EARLY_CONFIRM_MS')),
    instanceId: env.INSTANCE_ID || d.instanceId,
    logLevel: env.LOG_LEVEL || d.logLevel,
    maxPayloadBytes: int(env.MAX_PAYLOAD_BYTES, d.maxPayloadBytes, 'MAX_PAYLOAD_BYTES'),
    idleUnloadMs: int(env.IDLE_UNLOAD_MS, d.idleUnloadMs, 'IDLE_UNLOAD_MS'),
    maxLoadedDocs: int(env.MAX_LOADED_DOCS, d.maxLoadedDocs, 'MAX_LOADED_DOCS'),
    staticDir: path.resolve(env.STATIC_DIR || d.staticDir),
    tokenTtlMs: int(env.TOKEN_TTL_MS, d.tokenTtlMs, 'TOKEN_TTL_MS'),
    trashRetentionMs: int(env.TRASH_RETENTION_MS, d.trashRetentionMs, 'TRASH_RETENTION_MS'),
    maxRoomsPerSocket: int(env.MAX_ROOMS_PER_SOCKET, d.maxRoomsPerSocket, 'MAX_ROOMS_PER_SOCKET'),
    maxInFlightPerSocket: Math.max(2, int(env.MAX_IN_FLIGHT_PER_SOCKET, d.maxInFlightPerSocket, 'MAX_IN_FLIGHT_PER_SOCKET')),
    pingIntervalMs: Math.max(100, int(env.PING_INTERVAL_MS, d.pingIntervalMs, 'PING_INTERVAL_MS')),
    maxJsonDepth: Math.max(1, int(env.MAX_JSON_DEPTH, d.maxJsonDepth, 'MAX_JSON_DEPTH')),
    loginFreeFailuresPerAccount: int(env.LOGIN_FREE_FAILURES_PER_ACCOUNT, d.loginFreeFailuresPerAccount, 'LOGIN_FREE_FAILURES_PER_ACCOUNT'),
    loginFreeFailuresPerAddress: int(env.LOGIN_FREE_FAILURES_PER_ADDRESS, d.loginFreeFailuresPerAddress, 'LOGIN_FREE_FAILURES_PER_ADDRESS'),
    loginLockoutBaseMs: int(env.LOGIN_LOCKOUT_BASE_MS, d.loginLockoutBaseMs, 'LOGIN_LOCKOUT_BASE_MS'),
    loginLockoutMaxMs: int(env.LOGIN_LOCKOUT_MAX_MS, d.loginLockoutMaxMs, 'LOGIN_LOCKOUT_MAX_MS'),
    passwordScryptN: scryptN(env.PASSWORD_SCRYPT_N, d.passwordScryptN),
    contextualSealKey: sealKey(env.CONTEXTUAL_SEAL_KEY),
    contextualOutcomeRetentionDays: int(env.OUTCOME_RETENTION_DAYS, d.contextualOutcomeRetentionDays, 'OUTCOME_RETENTION_DAYS'),
    metricsToken: env.METRICS_TOKEN || undefined,
    grpcPort: env.GRPC_PORT === undefined || env.GRPC_PORT === '' ? undefined : int(env.GRPC_PORT, 0, 'GRPC_PORT'),
    shutdownTimeoutMs: Math.max(100, int(env.SHUTDOWN_TIMEOUT_MS, d.shutdownTimeoutMs, 'SHUTDOWN_TIMEOUT_MS')),
    stuckRunMs: int(env.STUCK_RUN_MS, d.stuckRunMs, 'STUCK_RUN_MS'),
    operatorEmails: (env.OPERATOR_EMAILS ?? '').split(',').map((e) => e.trim().toLowerCase()).filter((e) => e !== ''),
    trustedProxies: trustedProxies(env.TRUSTED_PROXIES),
  }
}

/** TRUSTED_PROXIES as a list, each entry checked now (a typo fails the start, naming the entry). */
function trustedProxies(raw: string | undefined): string[] {
  ClientAddresses.parse(raw)
  return (raw ?? '').split(',').map((s) => s.trim()).filter((s) => s !== '')
}
