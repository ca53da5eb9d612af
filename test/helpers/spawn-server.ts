import { spawn, type ChildProcess } from 'node:child_process'
import { existsSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { dirname, join, resolve } from 'node:path'
import { TEST_SCRYPT_N } from './test-server.js'

/** The repository root (this file is test/helpers/spawn-server.ts). */
export const REPO_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..')

/**
 * [PROD1] `WEFT_TEST_COMPILED=1` (`npm run test:compiled`): every server and `weft` command a test
 * runs as a child process is the production build (`dist-server/`, from `npm run build`), run
 * with plain `node`, instead of the sources through tsx. Answers the entry file, or null.
 */
export function compiledEntryFor(name: 'main' | 'weft'): string | null {
  if (process.env.WEFT_TEST_COMPILED !== '1') return null
  const entry = join(REPO_ROOT, 'dist-server', `${name}.mjs`)
  if (!existsSync(entry)) throw new Error(`WEFT_TEST_COMPILED=1 runs ${entry}, which is missing: run \`npm run build\` first.`)
  return entry
}

export interface SpawnedServer {
  readonly url: string
  readonly port: number
  readonly pid: number
  readonly child: ChildProcess
  /** Resolves when the process exits, with its exit code (null when killed by a signal). */
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>
  /** Sends `signal` (default SIGTERM) and returns `exited`. */
  kill(signal?: NodeJS.Signals): Promise<{ code: number | null; signal: NodeJS.Signals | null }>
  /** Everything the process wrote to stdout and stderr so far (for failure messages). */
  output(): string
  /** Parsed JSON log lines (pino) written to stdout so far. */
  logs(): Record<string, unknown>[]
}

export interface SpawnOptions {
  dataDir: string
  /** Default 0 (a random free port, read back from the `listening` log line). */
  port?: number
  env?: Record<string, string>
  /** Extra node flags, e.g. `--expose-gc`. */
  nodeArgs?: string[]
  /**
   * A compiled server to run with plain `node` (e.g. `dist-server/main.mjs` from
   * `node sync-server/build.mjs`) instead of the sources through tsx.
   */
  compiledEntry?: string
  /** How long to wait for the `listening` line (default 20 s: tsx compiles on first start). */
  startTimeoutMs?: number
}

/**
 * Runs `node --import tsx sync-server/main.ts` (or `node <compiledEntry>`) as a child process
 * (its own RSS, killable with SIGKILL) and resolves once it logs `"msg":"listening"` with its port.
 */
export function spawnServer(opts: SpawnOptions): Promise<SpawnedServer> {
  const compiled = opts.compiledEntry ?? compiledEntryFor('main')
  const entry = compiled ? [compiled] : ['--import', 'tsx', 'sync-server/main.ts']
  const child = spawn(process.execPath, [...(opts.nodeArgs ?? []), ...entry], {
    cwd: REPO_ROOT,
    env: {
      ...process.env,
      PORT: String(opts.port ?? 0),
      HOST: '127.0.0.1',
      DATA_DIR: opts.dataDir,
      LOG_LEVEL: 'info',
      PASSWORD_SCRYPT_N: String(TEST_SCRYPT_N),
      ...opts.env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let out = ''
  const logs: Record<string, unknown>[] = []
  let lineBuffer = ''
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolveExit) => {
    child.once('exit', (code, signal) => resolveExit({ code, signal }))
  })
  return new Promise<SpawnedServer>((resolveStart, rejectStart) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL')
      rejectStart(new Error(`server did not log "listening" within ${opts.startTimeoutMs ?? 90_000} ms. Output:\n${out}`))
    }, opts.startTimeoutMs ?? 90_000)
    let started = false
    child.stderr?.on('data', (chunk: Buffer) => {
      out += chunk.toString()
    })
    child.stdout?.on('data', (chunk: Buffer) => {
      const text = chunk.toString()
      out += text
      lineBuffer += text
      const lines = lineBuffer.split('\n')
      lineBuffer = lines.pop() ?? ''
      for (const line of lines) {
        let entry: Record<string, unknown>
        try {
          entry = JSON.parse(line) as Record<string, unknown>
        } catch {
          continue
        }
        logs.push(entry)
        if (!started && entry.msg === 'listening' && typeof entry.port === 'number') {
          started = true
          clearTimeout(timer)
          const port = entry.port
          resolveStart({
            url: `http://127.0.0.1:${port}`,
            port,
            pid: child.pid ?? -1,
            child,
            exited,
            kill: (signal = 'SIGTERM') => {
              if (child.exitCode === null && child.signalCode === null) child.kill(signal)
              return exited
            },
            output: () => out,
            logs: () => logs,
          })
        }
      }
    })
    void exited.then(({ code, signal }) => {
      if (started) return
      clearTimeout(timer)
      rejectStart(new Error(`server exited (code ${code}, signal ${signal}) before listening. Output:\n${out}`))
    })
  })
}
