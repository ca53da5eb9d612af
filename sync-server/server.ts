import { createServer as createHttpServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import type { Logger } from 'pino'
import { WeftError } from '../shared/index.js'
import { AccessService } from './access/index.js'
import { AuthService, LoginThrottle, SessionEnds } from './auth/index.js'
import { configFromEnv, defaultConfig, type ServerConfig } from './config.js'
import { defaultEngines, type Engine, type EngineFactory } from './engines/index.js'
import { apiRoutes, createHttpHandler, moveRoutes, type Route } from './http/index.js'
import { createLogger } from './log.js'
import { MoveService, NodeService } from './nodes/index.js'
import { openStorage, type StorageAdapter } from './storage/index.js'
import { SocketServer } from './sync/index.js'
import { SearchService, searchRoutes } from './search/index.js'
import { startCluster, type Cluster } from './cluster/index.js'
import { ContextualService, contextualRoutes, contextualWriteRule, startContextualGrpc, type ContextualGrpcServer } from './contextual/index.js'
import { ServerMetrics, adminOverviewRoute, isOperator, metricsRoute } from './metrics/index.js'
import { mcpRoutes } from './mcp/index.js'
import type { ContextualTotals } from './storage/index.js'

/** Versions of full change history kept; older records survive only as the latest per path. */
const CHANGE_HISTORY = 100_000

export interface StartOptions extends Partial<ServerConfig> {
  engines?: EngineFactory[]
  logger?: Logger
  /** The time the login throttle reads ([AUTH3]); tests move it instead of waiting. */
  now?: () => number
}

export interface RunningServer {
  /** http://HOST:PORT (127.0.0.1 when bound to every interface). */
  url: string
  port: number
  config: ServerConfig
  nodes: NodeService
  users: AuthService
  access: AccessService
  storage: StorageAdapter
  engines: Engine[]
  /** [SCALE1] Set when REDIS_URL is: the fan-out and the engines' lease. */
  cluster: Cluster | null
  /** [CTX30] The contextual subscriptions service (every surface calls it). */
  contextual: ContextualService
  /** [CTX35] The contextual gRPC port; null when GRPC_PORT is unset. */
  grpcPort: number | null
  stats(): { loadedDocs: number; rooms: number }
  /**
   * [PROD2] Graceful: stop accepting (and answer /healthz 503), close every socket with 1001
   * (clients reconnect, to another instance behind a load balancer), let HTTP requests under way
   * finish (at most half of `shutdownTimeoutMs`), stop the engines and give their lease up, then
   * finish the pending commits and close storage.
   */
  close(): Promise<void>
}

/**
 * Opens storage, rebuilds indexes, starts the engines (each reconciles before /healthz is ok),
 * then serves HTTP, /sync and /mux on one port.
 */
export async function startServer(options: StartOptions = {}): Promise<RunningServer> {
  const { engines: factories = defaultEngines, logger, now, ...overrides } = options
  const config: ServerConfig = { ...defaultConfig(), host: '127.0.0.1', ...overrides }
  const log = logger ?? createLogger(config.logLevel)
  if (config.redisUrl && !config.databaseUrl) throw new WeftError('invalid_request', 'REDIS_URL needs DATABASE_URL: several instances share one PostgreSQL database.')
  const storage = await openStorage({ dataDir: config.dataDir, databaseUrl: config.databaseUrl, log })
  const access = new AccessService()
  const nodes = new NodeService(storage, access, { idleUnloadMs: config.idleUnloadMs, maxLoadedDocs: config.maxLoadedDocs, maxJsonDepth: config.maxJsonDepth, log })
  await nodes.boot()
  const throttle = new LoginThrottle(
    {
      freePerAccount: config.loginFreeFailuresPerAccount,
      freePerAddress: config.loginFreeFailuresPerAddress,
      lockoutBaseMs: config.loginLockoutBaseMs,
      lockoutMaxMs: config.loginLockoutMaxMs,
    },
    now,
  )
  const auth = new AuthService(storage, nodes, { tokenTtlMs: config.tokenTtlMs, throttle, scryptN: config.passwordScryptN })
  auth.startPurging()
  // [STO7] The change table keeps the last CHANGE_HISTORY versions whole, then the latest change per path.
  const purgeChanges = () =>
    void storage.lastVersion().then((v) => (v > CHANGE_HISTORY ? storage.purgeSupersededChanges(v - CHANGE_HISTORY) : undefined)).catch((err: unknown) => log.warn({ err }, 'change purge failed'))
  purgeChanges()
  const purgeTimer = setInterval(purgeChanges, 3_600_000)
  purgeTimer.unref()
  // [MOVE6] A trashed subtree can be restored for TRASH_RETENTION_MS; then it is purged.
  const moves = new MoveService(nodes)
  const purgeTrash = () =>
    void moves
      .purgeExpiredTrash(new Date(Date.now() - config.trashRetentionMs).toISOString())
      .catch((err: unknown) => log.warn({ err }, 'trash purge failed'))
  purgeTrash()
  const trashTimer = setInterval(purgeTrash, 3_600_000)
  trashTimer.unref()
  const abort = new AbortController()
  let healthy = false
  // [CTX1] Contextual subscriptions: definitions compiled on write; one service for every surface.
  nodes.registerWriteRule('ContextualSubscription', contextualWriteRule())
  const sealKey = config.contextualSealKey ? Buffer.from(config.contextualSealKey, 'base64') : undefined
  const outcomeRetentionMs = config.contextualOutcomeRetentionDays > 0 ? config.contextualOutcomeRetentionDays * 24 * 3600_000 : null
  const contextual = new ContextualService({ nodes, access, storage, log, outcomeRetentionMs, ...(sealKey ? { sealKey } : {}) })
  contextual.start()

  const engines = factories.map((f) => f({ nodes, users: auth, log, signal: abort.signal, maxPayloadBytes: config.maxPayloadBytes }))
  // [SCALE17] One partition per engine, named by it (a name given twice gets its place appended).
  const partitions = engines.map((e, i) => ({ name: engines.findIndex((x) => x.name === e.name) === i ? e.name : `${e.name}.${i}`, factory: factories[i]! }))
  // [SCALE6] With several instances these serve the engines' routes only; the engines that work
  // run on the one instance holding the lease (cluster/engine-owner.ts).
  const cluster = config.redisUrl
    ? await startCluster({
        instanceId: config.instanceId,
        redisUrl: config.redisUrl,
        databaseUrl: config.databaseUrl!,
        engineLeaseMs: config.engineLeaseMs,
        earlyConfirmMs: config.earlyConfirmMs,
        nodes,
        storage,
        partitions,
        context: { users: auth, log, maxPayloadBytes: config.maxPayloadBytes },
        log,
      })
    : null
  if (cluster) for (const engine of engines) await engine.stop()
  if (cluster) contextual.connect(cluster.contextualPeers)
  if (cluster) auth.connectPeers(cluster.tokenPeers)
  const engineLimits = () => Object.assign({}, ...engines.map((e) => e.limits?.() ?? {})) as Record<string, number>
  // [OPS10] Always kept (counters and scrape-time gauges): the operator's page reads it; /metrics serves it only with METRICS_TOKEN.
  const metrics = await startMetrics()
  const operators = { nodes, access, operatorEmails: new Set(config.operatorEmails.map((e) => e.toLowerCase())) }
  const overview = adminOverviewRoute({
    ...operators,
    metrics,
    attention: (limit, now) => contextual.attention(limit, now),
    instanceId: config.instanceId,
    stuckRunMs: config.stuckRunMs,
    engines: async () => (cluster ? cluster.owner.holders() : partitions.map((p) => ({ partition: p.name, instance: config.instanceId }))),
  })
  const routes: Route[] = [metricsRoute(metrics, config.metricsToken), overview, ...engines.flatMap((e) => e.routes ?? []), ...moveRoutes(nodes, moves), ...apiRoutes({ nodes, auth, isHealthy: () => healthy, config, engineLimits, isOperator: (p) => isOperator(operators, p) }), ...searchRoutes(new SearchService(nodes, storage)), ...contextualRoutes(contextual)]
  // [MCP5] The MCP tools at /mcp: the same services as the routes above, as the caller.
  routes.push(...mcpRoutes({ contextual, nodes, maxJsonDepth: config.maxJsonDepth, log, ...(cluster ? { peers: cluster.mcpPeers } : {}) }))
  // [PROD3] The first signed-in request or socket (any transport) tells the engines someone uses
  // this server: what a first use needs is warmed then, not held from boot by a server nobody uses.
  let used = false
  const noteUse = <T>(who: T): T => {
    if (who && !used) {
      used = true
      for (const engine of engines) engine.inUse?.()
    }
    return who
  }
  const authenticate = (token: string | null) => auth.session(token).then(noteUse)
  // [AUTH8] Long polls and wake-up streams (HTTP, MCP, gRPC) end with their session, as sockets do.
  const sessionEnds = new SessionEnds(auth)
  const watchSession = sessionEnds.watch.bind(sessionEnds)
  const sockets = new SocketServer({
    nodes,
    access,
    authenticate,
    onRevoked: (listener) => auth.onRevoked(listener),
    maxPayloadBytes: config.maxPayloadBytes,
    maxRoomsPerSocket: config.maxRoomsPerSocket,
    maxUpdatesInFlight: config.maxInFlightPerSocket,
    pingIntervalMs: config.pingIntervalMs,
    log,
    onRefused: (code, transport) => metrics.refused(code, transport),
  })
  const http: Server = createHttpServer(createHttpHandler({ routes: () => routes, authenticate, watchSession, maxPayloadBytes: config.maxPayloadBytes, staticDir: config.staticDir, log, onRefused: (code) => metrics.refused(code, 'http') }))
  http.on('upgrade', (req, socket, head) => {
    try {
      if (!sockets.handleUpgrade(req, socket, head)) socket.destroy()
    } catch (err) {
      // Whatever one upgrade throws, it costs that socket only.
      log.warn({ err }, 'upgrade failed')
      socket.destroy()
    }
  })
  // An idle keep-alive socket stays open past the usual 60 s of a proxy or load balancer in front,
  // and past a long poll (`next` waits up to 60 s): otherwise the server closes a socket just as
  // a client (or nginx) sends the next request on it, and that request fails with a reset. Node
  // counts an idle socket's wait for the next request against headersTimeout: it stays above.
  http.keepAliveTimeout = 65_000
  http.headersTimeout = 66_000

  /**
   * [OPS3]–[OPS8] Counters on the write path, gauges read on scrape.
   * Engine lag: the change log's head minus the newest version this instance's feed delivered.
   */
  async function startMetrics(): Promise<ServerMetrics> {
    let fed = await storage.lastVersion()
    nodes.changes$.subscribe((c) => {
      if (c.version > fed) fed = c.version
    })
    const m = new ServerMetrics(
      {
        connections: () => sockets.connectionCount,
        loadedDocs: () => nodes.loadedDocCount(),
        rooms: () => nodes.roomCount(),
        engineLag: async () => Math.max(0, (await storage.lastVersion()) - fed),
        engineLeaseHeld: () => (cluster ? cluster.owner.owns : true),
        enginePartitions: () => {
          const held = new Set(cluster ? cluster.owner.held() : partitions.map((p) => p.name))
          return Object.fromEntries(partitions.map((p) => [p.name, held.has(p.name)]))
        },
        contextual: async () => (await storage.contextual({ op: 'totals', now: Date.now() })) as ContextualTotals,
        contextualWaiting: () => contextual.waiting,
      },
      log,
    )
    nodes.instrument({
      update: (origin) => m.update(origin),
      durable: (origin) => m.acked(origin),
      refused: (code, origin) => m.refused(code, origin),
      committed: (seconds) => m.committed(seconds),
    })
    return m
  }

  await new Promise<void>((resolve, reject) => {
    http.once('error', reject)
    http.listen(config.port, config.host, () => resolve())
  })
  const port = (http.address() as AddressInfo).port
  const grpc: ContextualGrpcServer | null =
    config.grpcPort === undefined
      ? null
      : await startContextualGrpc({
          service: contextual,
          authenticate,
          watchSession,
          host: config.host,
          port: config.grpcPort,
          maxReceiveBytes: config.maxPayloadBytes,
          log,
          onRefused: (code) => metrics.refused(code, 'grpc'),
        })
  const host = config.host === '0.0.0.0' || config.host === '::' ? '127.0.0.1' : config.host
  const url = `http://${host}:${port}`

  if (cluster) cluster.startEngines()
  else for (const engine of engines) await engine.start()
  healthy = true
  log.info({ port, url, storage: storage.kind, dataDir: config.dataDir }, 'listening')

  let closing: Promise<void> | null = null
  return {
    url,
    port,
    config,
    nodes,
    users: auth,
    access,
    storage,
    engines,
    cluster,
    contextual,
    grpcPort: grpc?.port ?? null,
    stats: () => nodes.stats(),
    close() {
      closing ??= (async () => {
        healthy = false
        // No new connection from here; idle keep-alive connections go now, busy ones when their request ends.
        const drained = new Promise<void>((resolve) => http.close(() => resolve()))
        http.closeIdleConnections()
        abort.abort()
        auth.stop()
        sessionEnds.stop()
        contextual.stop()
        clearInterval(purgeTimer)
        clearInterval(trashTimer)
        // 1001 going away: outside 4400–4499, so stock y-websocket clients reconnect.
        await sockets.close()
        await grpc?.close()
        let cut: ReturnType<typeof setTimeout> | undefined
        await Promise.race([drained, new Promise<void>((resolve) => (cut = setTimeout(resolve, config.shutdownTimeoutMs / 2)))])
        clearTimeout(cut)
        http.closeAllConnections()
        await drained
        if (cluster) await cluster.close().catch((err: unknown) => log.error({ err }, 'cluster close failed'))
        else for (const engine of [...engines].reverse()) await engine.stop().catch((err: unknown) => log.error({ err }, 'engine stop failed'))
        await nodes.close()
        await storage.close()
        log.info('closed')
      })()
      return closing
    },
  }
}

export { configFromEnv }
