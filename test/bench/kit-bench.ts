/**
 * The reconciler's read (issue 17, [KIT7]): finding the Running activities among logs of many
 * lines, as the activity engine's 30 s pass does. `query` parses every row's whole content;
 * `queryFields` asks storage for the paths and two fields. Run: `BENCH_ONLY=kit npm run bench`.
 */
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import pino from 'pino'
import { SYSTEM, type NodePath } from '../../shared/index.js'
import { AccessService } from '../../sync-server/access/access-service.js'
import { NodeService } from '../../sync-server/nodes/node-service.js'
import { openSqliteStorage } from '../../sync-server/storage/index.js'

const LOGS = Number(process.env.KIT_BENCH_LOGS ?? 20)
const LINES = Number(process.env.KIT_BENCH_LINES ?? 20_000)
const ROUNDS = 5

export async function benchKit(): Promise<Record<string, number>> {
  const dir = await mkdtemp(join(tmpdir(), 'weft-kit-bench-'))
  const log = pino({ level: 'silent' })
  const storage = openSqliteStorage({ file: join(dir, 'weft.db'), log })
  const nodes = new NodeService(storage, new AccessService(), { idleUnloadMs: 60_000, log })
  await nodes.boot()
  try {
    const messages = Array.from({ length: LINES }, (_, i) => ({ Level: 'Info', Text: `line ${i} of a long log`, At: '2026-01-01T00:00:00.000Z' }))
    for (let i = 0; i < LOGS; i++) {
      await nodes.put(SYSTEM, `B/_Activity/a${i}` as NodePath, { nodeType: 'ActivityLog', name: `a${i}`, content: { Status: 'Running', RequestedStatus: 'Running', Messages: messages } })
    }
    const time = async (fn: () => Promise<unknown>) => {
      let best = Infinity
      for (let r = 0; r < ROUNDS; r++) {
        const t = performance.now()
        await fn()
        best = Math.min(best, performance.now() - t)
      }
      return Math.round(best * 10) / 10
    }
    const query = { nodeType: 'ActivityLog', where: { Status: 'Running' }, limit: 500 }
    const fullMs = await time(() => nodes.query(SYSTEM, query))
    const lightMs = await time(() => nodes.queryFields(SYSTEM, query, ['Status', 'RequestedStatus']))
    return { logs: LOGS, linesPerLog: LINES, queryFullPageMs: fullMs, queryFieldsPageMs: lightMs }
  } finally {
    await nodes.close()
    await storage.close()
    await rm(dir, { recursive: true, force: true })
  }
}
