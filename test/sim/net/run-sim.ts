import * as Y from 'yjs'
import { SYSTEM, docToJson, jsonEqual, type JsonObject } from '../../../shared/index.js'
import { Rng, SIM_CLOSE, SimClient, SimServer, quiesce, tick, type TransportKind } from './sim-network.js'

export interface SimRunOptions {
  kind: TransportKind
  seed: number
  steps: number
  clients?: number
  /**
   * Viewers beside the editors: they edit too, over the same seeded network, and every one of
   * their edits must be refused ([SIM4]): the server's doc never holds a Viewer's clock.
   */
  viewers?: number
}

export interface SimRunResult {
  steps: number
  /** Messages delivered, both directions. */
  delivered: number
  edits: number
  reconnects: number
  /** Updates refused for a gap (sent before the reconnect's sync step 2), healed by it. */
  gapRefusals: number
  /** Viewer edits refused as forbidden ([SIM4]). */
  forbidden: number
  ms: number
}

/** A failure names its seed and step, so it replays: `SIM_SEED=<seed> SIM_KIND=<kind>`. */
export class SimFailure extends Error {
  constructor(
    readonly kind: TransportKind,
    readonly seed: number,
    readonly step: number,
    what: string,
    /** Env that sets the run's cast when it is not the default (SIM_CLIENTS, SIM_VIEWERS). */
    cast = '',
  ) {
    super(
      `sim ${kind} seed=${seed} step=${step}: ${what} (replay: SIM_KIND=${kind} SIM_SEED=${seed} ${cast}npx vitest run test/sim/net/sync-sim.test.ts -t replay; ` +
        `keep it: add { "seed": ${seed}, "why": "<what it caught>" } under "sim net ${kind}" in test/sim/seeds.json)`,
    )
  }
}

/**
 * One seeded run: clients edit, the network delivers one message at a time in a seeded order,
 * storage lands its commits on `tick` steps, connections drop and come back. Invariants hold
 * after every step; at the end the network heals and every doc converges to the server's, with
 * every edit in it, and a restarted server (same file) holds it too.
 */
export async function runSim(opts: SimRunOptions): Promise<SimRunResult> {
  const { kind, seed } = opts
  const rng = new Rng(seed)
  const editorCount = opts.clients ?? 3
  const server = await SimServer.start({ kind, clients: editorCount, viewers: opts.viewers ?? 0 })
  const clients = server.principals.map((_, i) => new SimClient(i < editorCount ? `c${i}` : `v${i - editorCount}`, kind, server.path))
  const isViewer = (c: SimClient) => clients.indexOf(c) >= editorCount
  const started = performance.now()
  let delivered = 0
  let reconnects = 0
  let gapRefusals = 0
  let forbidden = 0
  let step = 0
  const fail = (what: string): never => {
    throw new SimFailure(kind, seed, step, what, opts.viewers ? `SIM_CLIENTS=${editorCount} SIM_VIEWERS=${opts.viewers} ` : '')
  }
  try {
    clients.forEach((c, i) => c.connect(server.connect(server.principals[i]!)))
    await tick()
    const room = await server.room()
    /** The server's clock per client id, never going back: what it integrated stays. */
    const seen = new Map<number, number>()

    const check = () => {
      for (const c of clients) {
        if (c.link?.serverClose) fail(`the server closed ${c.name}'s connection: ${c.link.serverClose.code} ${c.link.serverClose.reason}`)
        // A stock client that reconnects sends its new edits before its sync step 2: the server
        // refuses those with a gap (it lacks their predecessors), and the step 2 that follows
        // carries them. Any other refusal is a failure.
        for (const r of c.refusals.splice(0)) {
          if (isViewer(c) && /forbidden/.test(r)) forbidden++
          else if (/invalid_update: .*a gap in a client's clocks/.test(r)) gapRefusals++
          else fail(`${c.name} was refused: ${r}`)
        }
        const id = c.doc.clientID
        const now = Y.getState(room.doc.store, id)
        // [SIM4] Nothing a Viewer wrote reaches the server's doc.
        if (isViewer(c) && now > 0) fail(`${c.name} (a Viewer) has ${now} structs in the server's doc`)
        if (now < (seen.get(id) ?? 0)) fail(`the server's doc lost ${c.name}'s edits (${now} < ${seen.get(id)})`)
        seen.set(id, now)
        // [SIM1] Acknowledged (mux Ack: durable) is in the server's doc.
        if (c.ackedClock > now) fail(`${c.name}'s acknowledged clock ${c.ackedClock} is not in the server doc (${now})`)
      }
    }

    for (; step < opts.steps; step++) {
      const r = rng.next()
      const c = rng.pick(clients)
      if (r < 0.25) c.edit(rng)
      else if (r < 0.5) {
        if (c.link?.deliverToServer()) delivered++
      } else if (r < 0.75) {
        if (c.receiveNext()) delivered++
      } else if (r < 0.93) await tick()
      else if (r < 0.96) {
        if (c.link?.open) c.link.close(SIM_CLOSE)
      } else if (!c.link?.open) {
        reconnects++
        c.connect(server.connect(server.principals[clients.indexOf(c)]!))
      }
      check()
    }

    // Heal: everyone connected, every queue drained, every commit landed.
    for (const [i, c] of clients.entries()) {
      if (!c.link?.open) {
        reconnects++
        c.connect(server.connect(server.principals[i]!))
      }
    }
    try {
      delivered += await quiesce(clients)
    } catch (e) {
      fail((e as Error).message)
    }
    check()
    // [SIM1] Convergence: every client holds exactly the server's doc, with every edit of its own.
    const serverJson = docToJson(room.doc)
    for (const c of clients) {
      if (isViewer(c)) {
        // A Viewer holds everything the server has, plus its own refused edits and nothing else
        // (a raw Yjs client keeps its refused writes: on a shared key its own value may win locally).
        const own = c.json()
        for (const [key, value] of Object.entries(serverJson)) if (!c.wroteShared.has(key) && !jsonEqual(own[key] ?? null, value)) fail(`${c.name} (a Viewer) did not converge on ${key}`)
        for (const key of Object.keys(own)) if (!(key in serverJson) && !key.startsWith(`${c.name}_`) && !c.wroteShared.has(key)) fail(`${c.name} (a Viewer) holds ${key}, which the server does not`)
        continue
      }
      if (!jsonEqual(c.json(), serverJson)) fail(`${c.name} did not converge:\n${JSON.stringify(c.json())}\nserver:\n${JSON.stringify(serverJson)}`)
      for (const [key, value] of c.wrote) if (serverJson[key] !== value) fail(`${c.name}'s edit ${key}=${value} is lost (server has ${JSON.stringify(serverJson[key])})`)
    }
    // [SIM1] Nothing acknowledged is lost: a server on the same file holds all of it.
    await new Promise((resolve) => setTimeout(resolve, 0))
    await server.restart()
    const stored = (await server.nodes.get(SYSTEM, server.path))?.content as JsonObject | undefined
    if (!stored || !jsonEqual(stored, serverJson)) fail(`the restarted server holds ${JSON.stringify(stored)}, not ${JSON.stringify(serverJson)}`)
    const reopened = await server.room()
    for (const c of clients) {
      if (Y.getState(reopened.doc.store, c.doc.clientID) < c.ackedClock) fail(`${c.name}'s acknowledged edits are not durable`)
    }
    return { steps: opts.steps, delivered, edits: clients.reduce((n, c) => n + c.edits, 0), reconnects, gapRefusals, forbidden, ms: performance.now() - started }
  } finally {
    await server.stop()
  }
}
