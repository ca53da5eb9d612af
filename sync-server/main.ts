import { configFromEnv, startServer } from './server.js'
import { createLogger } from './log.js'

// `npm start`: configuration from the environment, graceful shutdown on SIGTERM / SIGINT.
const config = configFromEnv()
const log = createLogger(config.logLevel)
// A rejection nobody handled is a bug, but one request's bug must not end everyone's sessions
// (Node ends the process on one by default): logged loudly, and the server keeps serving.
process.on('unhandledRejection', (reason) => {
  log.error({ err: reason }, 'unhandled rejection (a bug: please report it with this line); the server keeps serving')
})

try {
  const server = await startServer({ ...config, logger: log })
  let stopping = false
  const stop = (signal: string) => {
    if (stopping) return
    stopping = true
    log.info({ signal, timeoutMs: config.shutdownTimeoutMs }, 'shutting down')
    // [PROD2] Bounded: an orchestrator kills what does not stop in time; better to say why first.
    setTimeout(() => {
      log.error({ timeoutMs: config.shutdownTimeoutMs }, 'shutdown did not finish within SHUTDOWN_TIMEOUT_MS; exiting')
      process.exit(1)
    }, config.shutdownTimeoutMs).unref()
    server.close().then(
      () => process.exit(0),
      (err: unknown) => {
        log.error({ err }, 'shutdown failed')
        process.exit(1)
      },
    )
  }
  process.on('SIGTERM', () => stop('SIGTERM'))
  process.on('SIGINT', () => stop('SIGINT'))
} catch (err) {
  log.fatal({ err }, 'failed to start')
  process.exit(1)
}
