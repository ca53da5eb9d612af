/**
 * The PostgreSQL contextual cycle of this tree against another tree's, side by side in one
 * process, for a machine that others share (decision 0013, stop 45). Separate runs of
 * contextual-bench.ts differ by more than most changes do.
 *
 * The cycle is `next → react` with `ack: true`, one worker. Two servers are started, one from
 * this tree and one from BASE_TREE (the code before a change, e.g. `git archive <commit> | tar -x
 * -C /tmp/base` with a `node_modules` link). Each has its own fresh database. Rounds of EVENTS
 * cycles alternate between them, the order swapped each pair, ROUNDS pairs. A pg-boss `fetch →
 * complete` round follows each pair, on a third database. Printed as JSON:
 *  - `wallNewOverBase`: all of this tree's cycles over all of its time, divided by the base's;
 *  - `pairMedian`: the median of each pair's ratio;
 *  - `*ToPgBoss`: each tree's rate over pg-boss's;
 *  - `cpuMsPerCycle`: CPU per cycle, the server process's (`process.cpuUsage`, over each round:
 *    the idle other server is in both) and the database backends' (`utime + stime` of the
 *    backends of the tree's own database, from `/proc`; this needs the database on this
 *    machine). It holds steadier than wall time under a neighbour's load. An A/A run (BASE_TREE
 *    this same tree) shows the harness's own noise: about 2 % on this machine.
 *
 * Run: `BASE_TREE=/tmp/base npx tsx test/bench/contextual-ab.ts` (EVENTS=30, ROUNDS=30 by default).
 */
import { readFileSync } from 'node:fs'
import { resolve } from 'node:path'
import { performance } from 'node:perf_hooks'
import { pathToFileURL } from 'node:url'
import pg from 'pg'
import { PgBoss } from 'pg-boss'
import type * as SharedModule from '../../shared/index.js'
import type * as HelpersModule from '../helpers/index.js'

const EVENTS = Number(process.env.EVENTS ?? 30)
const ROUNDS = Number(process.env.ROUNDS ?? 30)

type Helpers = typeof HelpersModule
type Shared = typeof SharedModule

interface Arm {
  name: string
  round(): Promise<number>
  cpu: { server: number; db: number; cycles: number }
  close(): Promise<void>
}

/** A server of the tree at `root` (its own modules), its database, and a timed round of `next → react(ack)`. */
async function arm(name: string, root: string): Promise<Arm> {
  const h = (await import(pathToFileURL(resolve(root, 'test/helpers/index.ts')).href)) as Helpers
  const shared = (await import(pathToFileURL(resolve(root, 'shared/index.ts')).href)) as Shared
  const db = await h.freshDatabase('weft_ctxab_')
  const ts = await h.startTestServer({ config: { databaseUrl: db.url } })
  const watch = new pg.Client({ connectionString: db.url })
  await watch.connect()
  const dbName = new URL(db.url).pathname.slice(1)
  /** CPU of the database's backends (but this one), in ms. */
  const dbCpu = async () => {
    const pids = (await watch.query<{ pid: number }>('SELECT pid FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()', [dbName])).rows.map((r) => r.pid)
    let ticks = 0
    for (const pid of pids) {
      try {
        const f = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ')
        ticks += Number(f[11]) + Number(f[12])
      } catch {
        // The backend ended meanwhile.
      }
    }
    return ticks * 10
  }
  const owner = await h.signup(ts.url)
  const space = await h.createSpace(ts.url, owner.token)
  const prefix = `${space}/inbox`
  h.expectStatus(await h.api(ts.url, owner.token).putNode(prefix, 'Document', {}), 201)
  const sub = `${space}/bench`
  h.expectStatus(
    await h.api(ts.url, owner.token).putNode(sub, 'ContextualSubscription', {
      Operation: 'bench',
      Events: { NodeTypes: ['Document'], Kinds: ['Created'], PathPrefix: prefix },
      Reactions: { annotate: { Command: 'patch', Target: '{event.path}', Parameters: { Note: { Type: 'string' } } } },
      Limits: { LeaseSeconds: 60, MaxInFlight: 1, MaxAttempts: 3 },
    }),
    201,
  )
  const principal = shared.userPrincipal(owner.userId as Parameters<Shared['userPrincipal']>[0])
  const svc = ts.server.contextual
  const cpu = { server: 0, db: 0, cycles: 0 }
  let n = 0
  return {
    name,
    cpu,
    async round() {
      const consumer = `c${++n}`
      await svc.next(principal, { subscription: sub, consumer })
      for (let i = 0; i < EVENTS; i++) h.expectStatus(await h.api(ts.url, owner.token).putNode(`${prefix}/r${n}-${i}`, 'Document', { i }), 201)
      const c0 = process.cpuUsage()
      const d0 = await dbCpu()
      const t0 = performance.now()
      for (let i = 0; i < EVENTS; i++) {
        const { item } = await svc.next(principal, { subscription: sub, consumer })
        if (!item) throw new Error(`${name}: no item at ${i}`)
        const out = await svc.react(principal, { causationToken: item.reactions[0]!.causationToken, params: { Note: 'seen' }, ack: true })
        if (!out.acked) throw new Error(`${name}: not settled at ${i}`)
      }
      const rate = EVENTS / ((performance.now() - t0) / 1000)
      const c1 = process.cpuUsage(c0)
      const d1 = await dbCpu()
      // A backend that ended during the round takes its ticks with it: that round's reading is left out.
      if (d1 >= d0) {
        cpu.server += (c1.user + c1.system) / 1000
        cpu.db += d1 - d0
        cpu.cycles += EVENTS
      }
      return rate
    },
    async close() {
      await watch.end()
      await ts.cleanup()
      await db.drop()
    },
  }
}

async function main(): Promise<void> {
  const baseTree = process.env.BASE_TREE
  if (!baseTree) throw new Error('Set BASE_TREE to the directory of the tree to compare against.')
  const here = resolve(import.meta.dirname, '../..')
  const base = await arm('base', resolve(baseTree))
  const mine = await arm('new', here)
  const h = (await import('../helpers/index.js')) as Helpers
  const bossDb = await h.freshDatabase('weft_ctxab_boss_')
  const boss = new PgBoss({ connectionString: bossDb.url, schema: 'pgboss' })
  boss.on('error', (err) => console.error('pg-boss', err))
  try {
    await boss.start()
    await boss.createQueue('bench')
    const bossRound = async () => {
      await boss.insert('bench', Array.from({ length: EVENTS }, (_, i) => ({ data: { i } })))
      const t0 = performance.now()
      for (let i = 0; i < EVENTS; i++) {
        const [job] = await boss.fetch('bench')
        if (!job) throw new Error(`pg-boss: no job at ${i}`)
        await boss.complete('bench', job.id)
      }
      return EVENTS / ((performance.now() - t0) / 1000)
    }
    // Warm both (and pg-boss) before anything counts.
    await base.round()
    await mine.round()
    await bossRound()
    base.cpu.server = base.cpu.db = base.cpu.cycles = 0
    mine.cpu.server = mine.cpu.db = mine.cpu.cycles = 0
    const b: number[] = []
    const m: number[] = []
    const q: number[] = []
    for (let i = 0; i < ROUNDS; i++) {
      if (i % 2 === 0) {
        b.push(await base.round())
        m.push(await mine.round())
      } else {
        m.push(await mine.round())
        b.push(await base.round())
      }
      q.push(await bossRound())
    }
    /** Cycles over time, all rounds of equal size: the harmonic mean of the rates. */
    const overall = (xs: number[]) => xs.length / xs.reduce((a, x) => a + 1 / x, 0)
    const pairs = m.map((x, i) => x / b[i]!).sort((x, y) => x - y)
    const r3 = (x: number) => Math.round(x * 1000) / 1000
    const perCycle = (a: Arm) => ({ server: r3(a.cpu.server / a.cpu.cycles), db: r3(a.cpu.db / a.cpu.cycles) })
    console.log(
      JSON.stringify(
        {
          events: EVENTS,
          rounds: ROUNDS,
          wallNewOverBase: r3(overall(m) / overall(b)),
          pairMedian: r3(pairs[Math.floor(pairs.length / 2)]!),
          baseToPgBoss: r3(overall(b) / overall(q)),
          newToPgBoss: r3(overall(m) / overall(q)),
          cpuMsPerCycle: { base: perCycle(base), new: perCycle(mine) },
        },
        null,
        2,
      ),
    )
  } finally {
    await boss.stop({ graceful: false }).catch(() => undefined)
    await base.close()
    await mine.close()
    await bossDb.drop()
  }
}

main().then(
  () => process.exit(0),
  (e: unknown) => {
    console.error(e)
    process.exit(1)
  },
)
