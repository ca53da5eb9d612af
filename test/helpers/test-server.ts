import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { startServer } from '../../sync-server/server.js'

export type ServerConfig = NonNullable<Parameters<typeof startServer>[0]>
export type WeftServer = Awaited<ReturnType<typeof startServer>>

/**
 * An in-process sync server on port 0 with its own SQLite files in a fresh temp directory.
 * `restart()` closes it and starts a new one on the same data directory (a new port), which is
 * how tests check that state survives a restart.
 */
export interface TestServer {
  /** The running server (replaced by `restart`). */
  readonly server: WeftServer
  /** `http://127.0.0.1:PORT` of the running server. */
  readonly url: string
  readonly dataDir: string
  restart(): Promise<void>
  /** Closes the server (if running) and deletes the data directory. Safe to call twice. */
  cleanup(): Promise<void>
}

/** A fresh directory under the OS temp dir; the caller removes it (`removeDir`). */
export function makeTempDir(prefix = 'weft-test-'): Promise<string> {
  return mkdtemp(join(tmpdir(), prefix))
}

export async function removeDir(dir: string): Promise<void> {
  await rm(dir, { recursive: true, force: true, maxRetries: 3 })
}

/**
 * scrypt's N for the test servers' password hashes (PASSWORD_SCRYPT_N): 2^10, not the default
 * 2^14. The suites sign up thousands of accounts (1,000 in one kill -9 test), each hash ~40 ms of
 * CPU at 2^14 on a two-core machine shared by two workers; hashing itself is tested at the default.
 */
export const TEST_SCRYPT_N = 1024

export async function startTestServer(opts: { dataDir?: string; config?: Partial<ServerConfig> } = {}): Promise<TestServer> {
  const dataDir = opts.dataDir ?? (await makeTempDir())
  const config: Partial<ServerConfig> = { port: 0, host: '127.0.0.1', logLevel: 'silent', passwordScryptN: TEST_SCRYPT_N, ...opts.config, dataDir }
  let server: WeftServer | null = await startServer(config)
  let last: WeftServer = server
  const close = async () => {
    const s = server
    server = null
    if (s) await s.close()
  }
  return {
    get server() {
      return last
    },
    get url() {
      return last.url
    },
    dataDir,
    async restart() {
      await close()
      server = await startServer(config)
      last = server
    },
    async cleanup() {
      await close()
      if (!opts.dataDir) await removeDir(dataDir)
    },
  }
}
