/**
 * Child-process host for the benchmarks, so a server's RSS and CPU are its own and the bench
 * clients run on the other core. Started by sync-bench.ts as
 *   node --expose-gc --import tsx test/bench/server-host.ts
 * with BENCH_SERVER=weft|relay, DATA_DIR, IDLE_UNLOAD_MS. Talks over IPC:
 *   child → parent  { type: 'ready', url }
 *   parent → child  { type: 'stats' }  → { type: 'stats', rss, heapUsed, loadedDocs, cpuMicros }
 *   parent → child  { type: 'gc' }     → { type: 'gc' }   (after a full collection)
 *   parent → child  { type: 'seed', prefix, count, createdBy } → { type: 'seeded', ms }
 * Seeding writes Document nodes as `system` in-process: it prepares the RSS scenario quickly
 * and is not measured.
 */
import { startServer } from '../../sync-server/server.js'
import { SYSTEM, parseNodePath } from '../../shared/index.js'
import { startRelay } from './server-relay.js'

type Request = { type: 'stats' } | { type: 'gc' } | { type: 'seed'; prefix: string; count: number }

function reply(message: unknown): void {
  process.send?.(message)
}

const kind = process.env.BENCH_SERVER ?? 'weft'
if (kind === 'relay') {
  const relay = await startRelay()
  process.on('message', (m: Request) => {
    if (m.type === 'stats') reply({ type: 'stats', rss: process.memoryUsage().rss, heapUsed: process.memoryUsage().heapUsed, loadedDocs: -1 })
    if (m.type === 'gc') {
      globalThis.gc?.()
      reply({ type: 'gc' })
    }
  })
  process.on('SIGTERM', () => void relay.close().then(() => process.exit(0)))
  reply({ type: 'ready', url: relay.url })
} else {
  const server = await startServer({
    port: 0,
    host: '127.0.0.1',
    dataDir: process.env.DATA_DIR,
    logLevel: 'warn',
    idleUnloadMs: Number(process.env.IDLE_UNLOAD_MS ?? 30_000),
  })
  process.on('message', (m: Request) => {
    void (async () => {
      switch (m.type) {
        case 'stats': {
          const mem = process.memoryUsage()
          const cpu = process.cpuUsage()
          reply({ type: 'stats', rss: mem.rss, heapUsed: mem.heapUsed, loadedDocs: server.stats().loadedDocs, cpuMicros: cpu.user + cpu.system })
          break
        }
        case 'gc':
          globalThis.gc?.()
          reply({ type: 'gc' })
          break
        case 'seed': {
          const start = performance.now()
          let next = 0
          await Promise.all(
            Array.from({ length: 64 }, async () => {
              while (next < m.count) {
                const i = next++
                await server.nodes.put(SYSTEM, parseNodePath(`${m.prefix}/n${i}`), { nodeType: 'Document', content: { Index: i, Title: `Node ${i}` } }, 'system')
              }
            }),
          )
          reply({ type: 'seeded', ms: performance.now() - start })
          break
        }
        default:
          m satisfies never
      }
    })()
  })
  process.on('SIGTERM', () => void server.close().then(() => process.exit(0)))
  reply({ type: 'ready', url: server.url })
}
