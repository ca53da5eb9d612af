import { randomBytes } from 'node:crypto'
import { join } from 'node:path'
import pg from 'pg'
import pino from 'pino'
import * as Y from 'yjs'
import { afterAll, describe, expect, it } from 'vitest'
import { SYSTEM, isWeftError, jsonEqual, type JsonObject, type MeshNode, type NodePath } from '../../shared/index.js'
import { AccessService } from '../../sync-server/access/index.js'
import { MOVE_ATTEMPTS, MoveService, NodeService } from '../../sync-server/nodes/index.js'
import { openPostgresStorage, replayLog } from '../../sync-server/storage/index.js'
import { api, createDocument, createSpace, expectStatus, freshDatabase, makeTempDir, removeDir, signup, startInstances, joinAsDeafInstance, startTestServer, stockProvider, waitFor, type Instances } from '../helpers/index.js'
import { Rng } from '../sim/rng.js'
import { holdCopy, reconnect, restoreOverDeleted } from './tombstone-cases.js'

/** [TOMB1] [TOMB2] Tombstones on PostgreSQL: the restore's forward path, and several instances. */
const drops: (() => Promise<void>)[] = []
const dirs: string[] = []
afterAll(async () => {
  for (const d of drops) await d().catch(() => undefined)
  for (const d of dirs) await removeDir(d)
})

/** How many `Updated` changes of `path` the change log holds (committed, durable). */
async function committedUpdates(connectionString: string, path: string): Promise<number> {
  const c = new pg.Client({ connectionString })
  await c.connect()
  try {
    const r = await c.query<{ n: string }>(`SELECT count(*) AS n FROM changes WHERE path = $1 AND kind = 'Updated'`, [path])
    return Number(r.rows[0]?.n ?? 0)
  } finally {
    await c.end()
  }
}

describe('tombstones on PostgreSQL', () => {
  it('[TOMB2] a node deleted after the backup comes back as the backup has it: a stale copy newer than the backup does not revert the restore; a node the restore deletes leaves a tombstone', { timeout: 300_000 }, async () => {
    const db = await freshDatabase('weft_tomb_')
    drops.push(db.drop)
    const dir = await makeTempDir('weft-tomb-pg-')
    dirs.push(dir)
    await restoreOverDeleted({ start: () => startTestServer({ config: { databaseUrl: db.url } }), env: { DATABASE_URL: db.url }, file: join(dir, 'tomb.weftbak') })
  })

  it('[TOMB1] [SCALE2] deleted on one instance while a copy was loaded on another (its row write still due), created again on a third: the copy reconnecting there at once brings nothing back, and that instance serves the new node', { timeout: 120_000 }, async () => {
    let set: Instances | undefined
    try {
      set = await startInstances(3)
      const url = (i: number) => set!.servers[i]!.url
      const alice = await signup(url(0))
      const space = await createSpace(url(0), alice.token)
      const path = `${space}/again`
      await createDocument(url(0), alice.token, path, { Old: 'secret' })
      // The copy is made on instance 2, which keeps the node loaded.
      const stale = await holdCopy(url(1), path, alice.token, { Later: 1 })
      expectStatus(await api(url(0), alice.token).deleteNode(path), 204)
      await createDocument(url(2), alice.token, path, { Fresh: true })
      const s = await reconnect(url(1), path, alice.token, stale, 'stale')
      // Every instance converges on the same content (the others hear of the probe through Redis).
      for (let i = 0; i < 3; i++) {
        await waitFor(async () => jsonEqual((await api(url(i), alice.token).getNode(path)).body.content, { Fresh: true, Probe: 'stale' }), {
          timeoutMs: 20_000,
          description: `instance ${i + 1} has the new node and the probe`,
        })
      }
      expect(s.json()).toEqual({ Fresh: true, Probe: 'stale' })
      s.destroy()
    } finally {
      await set?.cleanup()
    }
  })

  it('[SCALE19] deleted through an instance that has not yet heard of an edit made through another: the tombstone holds the edit, and a copy holding it brings nothing back', { timeout: 120_000 }, async () => {
    let set: Instances | undefined
    try {
      set = await startInstances(2)
      const url = (i: number) => set!.servers[i]!.url
      const alice = await signup(url(0))
      const space = await createSpace(url(0), alice.token)
      const path = `${space}/late`
      await createDocument(url(0), alice.token, path, { Title: 't' })
      // Instance 2 keeps the node loaded, doc and all (a client stays on it there).
      const watcher = stockProvider(url(1), path, alice.token)
      await watcher.synced()
      // Redis frozen: instance 2 hears of nothing (until its poll of the database, a second later).
      set.redis.pause()
      let stale: Y.Doc
      try {
        // Through instance 1: an edit by a client that keeps its copy; at once, deleted through instance 2.
        stale = await holdCopy(url(0), path, alice.token, { Secret: 'made on one' })
        // Committed, not only applied: instance 1 shows an edit from its copy before the commit
        // is durable, and a delete committed first refuses that commit instead (the edit never
        // stored, its client's copy still holds it: not the case this test is about; under load
        // the full suite met it once).
        await waitFor(() => committedUpdates(set!.databaseUrl, path).then((n) => n >= 1), { description: 'the edit committed' })
        expectStatus(await api(url(1), alice.token).deleteNode(path), 204)
      } finally {
        set.redis.resume()
        watcher.destroy()
      }
      await waitFor(async () => (await api(url(0), alice.token).getNode(path)).status === 404, { timeoutMs: 20_000, description: 'instance 1 has heard of the delete' })
      await createDocument(url(0), alice.token, path, { Fresh: true })
      const s = await reconnect(url(0), path, alice.token, stale, 'stale')
      expect((await api(url(0), alice.token).getNode(path)).body.content).toEqual({ Fresh: true, Probe: 'stale' })
      expect(s.json()).toEqual({ Fresh: true, Probe: 'stale' })
      s.destroy()
    } finally {
      await set?.cleanup()
    }
  })

  it('[SCALE16] an instance that has not heard of a delete and a create elsewhere cannot write its copy of the old node onto the new one, nor delete the new one', { timeout: 60_000 }, async () => {
    const { a, b, close } = await deafPair()
    try {
      const code = (e: unknown) => (isWeftError(e) ? e.code : String(e))
      /** B holds a copy of the node at `path` (a write loads it, doc and all); A deletes it and makes another there. */
      const replacedBehindB = async (path: NodePath) => {
        await a.nodes.update(SYSTEM, path, () => ({ nodeType: 'Space', content: { Gen: 1 } }), 'engine')
        await b.nodes.patch(SYSTEM, path, { FromB: 1 })
        await a.nodes.delete(SYSTEM, path, 'engine')
        // Created again a moment later (a new creation time).
        await new Promise((r) => setTimeout(r, 5))
        await a.nodes.update(SYSTEM, path, () => ({ nodeType: 'Space', content: { Gen: 2 } }), 'engine')
      }
      const patched = 'Patched' as NodePath
      await replacedBehindB(patched)
      expect(code(await b.nodes.patch(SYSTEM, patched, { Stale: true }).catch((e: unknown) => e))).toBe('conflict')
      expect((await a.storage.getNode(patched))?.content).toEqual({ Gen: 2 })
      // B's copy is dropped: its next read is the new node, and a write to it lands.
      expect((await b.nodes.get(SYSTEM, patched))?.content).toEqual({ Gen: 2 })
      await b.nodes.patch(SYSTEM, patched, { Fresh: true })
      expect((await a.storage.getNode(patched))?.content).toEqual({ Gen: 2, Fresh: true })
      // A delete from the old copy does not delete the new node.
      const deleted = 'Deleted' as NodePath
      await replacedBehindB(deleted)
      expect(code(await b.nodes.delete(SYSTEM, deleted, 'http').catch((e: unknown) => e))).toBe('conflict')
      expect((await a.storage.getNode(deleted))?.content).toEqual({ Gen: 2 })
    } finally {
      await close()
    }
  })

  it('[SCALE19] an instance that has not heard of an edit made elsewhere deletes the node: its first commit is refused, it catches up, and the tombstone holds the edit', { timeout: 60_000 }, async () => {
    const { a, b, close } = await deafPair()
    try {
      const spot = 'Edited' as NodePath
      // A holds the node, doc and all (a write loads it so); B edits it, and A is never told.
      await a.nodes.create(SYSTEM, spot, { nodeType: 'Space', content: { Title: 't' } })
      await a.nodes.patch(SYSTEM, spot, { ByA: 1 })
      await b.nodes.patch(SYSTEM, spot, { Secret: 'made on b' })
      const log = (await a.storage.loadDoc(spot))!
      const before = new Y.Doc()
      replayLog(before, log.snapshot, log.updates)
      await a.nodes.delete(SYSTEM, spot, 'engine')
      expect(await a.storage.getNode(spot)).toBeNull()
      // Every struct of the node, B's edit among them, is in what it left.
      const tomb = (await a.storage.loadTombstone(spot))!
      const covered = Y.decodeStateVector(Y.encodeStateVectorFromUpdate(tomb))
      for (const [client, clock] of Y.decodeStateVector(Y.encodeStateVector(before))) expect(covered.get(client) ?? 0, `client ${client}`).toBe(clock)
    } finally {
      await close()
    }
  })

  it('[SCALE20] a put on an instance that has not heard of a delete elsewhere creates the node there (from the tombstone), not a 404; a patch or an engine update there is refused not_found, its function run once', { timeout: 60_000 }, async () => {
    const { a, b, close } = await deafPair()
    try {
      const code = (e: unknown) => (isWeftError(e) ? e.code : String(e))
      const put = 'PutAgain' as NodePath
      await a.nodes.create(SYSTEM, put, { nodeType: 'Space', content: { Old: 'secret' } })
      await b.nodes.patch(SYSTEM, put, { ByB: 1 })
      await a.nodes.delete(SYSTEM, put, 'engine')
      // B's copy still has the node: its put commits an Updated, which storage refuses; made again, it creates.
      const made = await b.nodes.put(SYSTEM, put, { nodeType: 'Space', content: { New: 1 } })
      expect(made.created).toBe(true)
      expect((await a.storage.getNode(put))?.content).toEqual({ New: 1 })
      expect(await a.storage.loadTombstone(put)).toBeNull()
      // A patch meant for the deleted node is not turned into anything else.
      const patched = 'PatchGone' as NodePath
      await a.nodes.create(SYSTEM, patched, { nodeType: 'Space', content: { Old: 1 } })
      await b.nodes.patch(SYSTEM, patched, { ByB: 1 })
      await a.nodes.delete(SYSTEM, patched, 'engine')
      expect(code(await b.nodes.patch(SYSTEM, patched, { Late: 1 }).catch((e: unknown) => e))).toBe('not_found')
      expect(await a.storage.getNode(patched)).toBeNull()
      // Nor an engine's update: its function ran once, on what it saw (it may have acted on it).
      const updated = 'UpdateGone' as NodePath
      await a.nodes.create(SYSTEM, updated, { nodeType: 'Space', content: { Old: 1 } })
      await b.nodes.patch(SYSTEM, updated, { ByB: 1 })
      await a.nodes.delete(SYSTEM, updated, 'engine')
      const seen: string[] = []
      const refused = await b.nodes
        .update(SYSTEM, updated, (current) => {
          seen.push(current ? 'node' : 'none')
          return current ? { ...current, content: { ...current.content, Late: 1 } } : undefined
        })
        .catch((e: unknown) => e)
      expect(code(refused)).toBe('not_found')
      expect(seen).toEqual(['node'])
      expect(await a.storage.getNode(updated)).toBeNull()
    } finally {
      await close()
    }
  })

  it('[SCALE16]-[SCALE21] seeded: two instances that hear of each other only when they catch up create, edit, put, delete, move away and back, and take stale copies back at a node and its child; neither ever holds a field written to an earlier node there', { timeout: 120_000 }, async () => {
    // A quarter of the steps run on both instances at once: a seed fixes the operations, not their
    // interleaving, so several seeds run (one with CLUSTER_TOMB_SEED).
    const seeds = process.env.CLUSTER_TOMB_SEED ? [Number(process.env.CLUSTER_TOMB_SEED)] : [1, 2, 20261205]
    for (const seed of seeds) await clusterTombstoneProperty(seed)
  })

  it('[SCALE21] a child edited and deleted through another instance while a move was being worked out: the move is refused, made again, and the child keeps the tombstone that holds the edit', { timeout: 60_000 }, async () => {
    const { a, b, close } = await deafPair()
    try {
      await topAndKid(a, b, { K: 1 })
      // Between A reading the logs for the move's tombstones and its transaction, B edits the
      // child and deletes it (once: the move made again meets nothing).
      const realMove = a.storage.moveSubtree.bind(a.storage)
      let between = true
      let bLeft: Uint8Array | null = null
      a.storage.moveSubtree = async (input) => {
        if (between) {
          between = false
          await b.nodes.patch(SYSTEM, 'S/top/kid' as NodePath, { Secret: 'made on b' })
          await b.nodes.delete(SYSTEM, 'S/top/kid' as NodePath, 'engine')
          bLeft = await b.storage.loadTombstone('S/top/kid' as NodePath)
        }
        return realMove(input)
      }
      await new MoveService(a.nodes).move(SYSTEM, 'S/top' as NodePath, 'S/moved' as NodePath)
      expect(between).toBe(false)
      expect(await a.storage.getNode('S/moved' as NodePath)).toMatchObject({ content: { T: 1 } })
      expect(await a.storage.getNode('S/moved/kid' as NodePath)).toBeNull()
      // The tombstone at the child's path is B's (it holds the edit), not one the move made before it.
      const tomb = (await a.storage.loadTombstone('S/top/kid' as NodePath))!
      expect(bLeft).not.toBeNull()
      const clocks = (t: Uint8Array) => [...Y.decodeStateVector(Y.encodeStateVectorFromUpdate(t))].sort()
      expect(clocks(tomb)).toEqual(clocks(bLeft!))
    } finally {
      await close()
    }
  })

  it('[SCALE21] a subtree edited through another instance before each try: the move is made again up to MOVE_ATTEMPTS times, then refused with a conflict a person can act on, nothing moved', { timeout: 60_000 }, async () => {
    const { a, b, close } = await deafPair()
    try {
      await topAndKid(a, b, { K: 0 })
      const realMove = a.storage.moveSubtree.bind(a.storage)
      // B edits the child between A's reads and each of A's first `edits` transactions.
      let edits = MOVE_ATTEMPTS - 1
      let tries = 0
      let kid = 'S/top/kid' as NodePath
      a.storage.moveSubtree = async (input) => {
        tries++
        if (edits > 0) {
          edits--
          await b.nodes.patch(SYSTEM, kid, { K: tries })
        }
        return realMove(input)
      }
      await new MoveService(a.nodes).move(SYSTEM, 'S/top' as NodePath, 'S/moved' as NodePath)
      expect(tries).toBe(MOVE_ATTEMPTS)
      expect(await a.storage.getNode('S/moved/kid' as NodePath)).toMatchObject({ content: { K: MOVE_ATTEMPTS - 1 } })

      // Edited before every try: refused after the last, with the storage's conflict; nothing moved.
      await b.freshen()
      tries = 0
      edits = Infinity
      kid = 'S/moved/kid' as NodePath
      const error = await new MoveService(a.nodes).move(SYSTEM, 'S/moved' as NodePath, 'S/again' as NodePath).catch((e: unknown) => e)
      expect(tries).toBe(MOVE_ATTEMPTS)
      expect(error).toMatchObject({ code: 'conflict', message: expect.stringMatching(/another server a moment ago; move it again/) })
      expect(await a.storage.getNode('S/again' as NodePath)).toBeNull()
      expect(await a.storage.getNode('S/moved/kid' as NodePath)).toMatchObject({ content: { K: MOVE_ATTEMPTS } })
    } finally {
      await close()
    }
  })

  it('[SCALE18] an instance that has not heard of a delete elsewhere creates its node from the tombstone that delete left, not from none', { timeout: 60_000 }, async () => {
    const { a, b, close } = await deafPair()
    try {
      const spot = 'Spot' as NodePath
      // B made a node there and deleted it: its copy knows the tombstone that delete left.
      await b.nodes.create(SYSTEM, spot, { nodeType: 'Space', content: { First: 'b' } })
      await b.nodes.delete(SYSTEM, spot, 'engine')
      // A makes a node there (from B's tombstone) and deletes it; B is never told.
      await a.nodes.create(SYSTEM, spot, { nodeType: 'Space', content: { Old: 'secret' } })
      await a.nodes.patch(SYSTEM, spot, { More: 'secret too' })
      await a.nodes.delete(SYSTEM, spot, 'engine')
      const tomb = await a.storage.loadTombstone(spot)
      expect(tomb).not.toBeNull()
      // B creates there: its first commit is refused (the path has a tombstone it did not start
      // from: A's, not its own), and it is made again from storage, taking A's.
      const made = await b.nodes.create(SYSTEM, spot, { nodeType: 'Space', content: { New: 1 } })
      expect(made.content).toEqual({ New: 1 })
      expect(await a.storage.loadTombstone(spot)).toBeNull()
      const stored = (await a.storage.loadDoc(spot))!
      const doc = new Y.Doc()
      replayLog(doc, stored.snapshot, stored.updates)
      const covered = Y.decodeStateVector(Y.encodeStateVector(doc))
      for (const [client, clock] of Y.decodeStateVector(Y.encodeStateVectorFromUpdate(tomb!))) expect(covered.get(client) ?? 0).toBeGreaterThanOrEqual(clock)
      expect((await a.storage.getNode(spot))?.content).toEqual({ New: 1 })
    } finally {
      await close()
    }
  })
})

/**
 * Two instances on one database, in this process; their change messages never arrive (a delay as
 * long as the test), which is the window a fan-out has.
 */
async function deafPair() {
  const connectionString = process.env.WEFT_TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test'
  const schema = `weft_test_${randomBytes(6).toString('hex')}`
  const instance = async () => {
    const storage = await openPostgresStorage({ connectionString, schema })
    const nodes = new NodeService(storage, new AccessService(), { idleUnloadMs: 60_000, log: pino({ level: 'silent' }) })
    await nodes.boot()
    const { freshen } = await joinAsDeafInstance(nodes, storage)
    return { storage, nodes, freshen }
  }
  const a = await instance()
  const b = await instance()
  return {
    a,
    b,
    async close() {
      for (const x of [a, b]) {
        await x.nodes.close()
        await x.storage.close()
      }
      const c = new pg.Client({ connectionString })
      await c.connect()
      await c.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`)
      await c.end()
    },
  }
}

type Instance = Awaited<ReturnType<typeof deafPair>>['a']

/** `S/top` and its child `S/top/kid` (holding `kid`), made through A; B has caught up on them. */
async function topAndKid(a: Instance, b: Instance, kid: JsonObject): Promise<void> {
  await a.nodes.create(SYSTEM, 'S' as NodePath, { nodeType: 'Space', content: {} })
  await a.nodes.create(SYSTEM, 'S/top' as NodePath, { nodeType: 'Document', content: { T: 1 } })
  await a.nodes.create(SYSTEM, 'S/top/kid' as NodePath, { nodeType: 'Document', content: kid })
  await b.freshen()
}

/**
 * [SCALE16]-[SCALE21] One seed of the cluster property: two instances that hear of each other only
 * when they catch up act on a node and its child; after each step each holds only fields written
 * to it.
 */
async function clusterTombstoneProperty(seed: number): Promise<void> {
  const rng = new Rng(seed)
  const { a, b, close } = await deafPair()
  try {
    const moves = new Map([a, b].map((x) => [x, new MoveService(x.nodes)]))
    await a.nodes.create(SYSTEM, 'S' as NodePath, { nodeType: 'Space', content: {} })
    await b.freshen()
    const prop = 'S/prop' as NodePath
    const kid = 'S/prop/kid' as NodePath
    const code = (e: unknown) => (isWeftError(e) ? e.code : String(e))
    // Every node made gets a generation; every field written names the generation of the node its
    // writer believed it was writing to: `G<n>_…`.
    const generations = new Map<string, number>()
    let made = 0
    const key = (node: MeshNode) => `${node.path}@${node.createdAt}`
    const generationOf = (node: MeshNode | null) => (node ? generations.get(key(node)) : undefined)
    /** Synced copies (a client's Yjs state as the server had it), each with its node's generation. */
    const copies: { path: NodePath; doc: Y.Doc; generation: number }[] = []
    const counts = { created: 0, deleted: 0, movedAway: 0, movedBack: 0, refused: 0, reconnectedOlder: 0, caughtUp: 0 }
    const aways: NodePath[] = []
    /** A write refused with one of `codes` (what it may meet here) counts as refused; anything else fails the test. */
    const attempt = async <T>(codes: readonly string[], write: () => Promise<T>): Promise<T | null> => {
      try {
        return await write()
      } catch (e) {
        if (!codes.includes(code(e))) throw e
        counts.refused++
        return null
      }
    }
    const check = async (where: string) => {
      for (const path of [prop, kid]) {
        const node = await a.storage.getNode(path)
        if (!node) continue
        const g = generationOf(node)
        expect(g, `${where}: ${path} is a node nobody made there (seed ${seed})`).toBeDefined()
        const stray = Object.keys(node.content).filter((f) => !f.startsWith(`G${g}_`))
        expect(stray, `${where}: ${path} ${JSON.stringify(node.content)} is generation ${g} (seed ${seed})`).toEqual([])
      }
    }
    /** One step's operation `op` on instance `x` (the seed picks both). */
    const act = async (x: typeof a, op: number, step: number) => {
      const path = rng.next() < 0.65 ? prop : kid
      if (op < 20) {
        // Create (or put, which creates when the path is free here).
        const gen = ++made
        const content = { [`G${gen}_made${step}`]: step }
        const node = await attempt(['already_exists', 'not_found', 'conflict'], async () => (op < 10 ? await x.nodes.create(SYSTEM, path, { nodeType: 'Document', content }) : (await x.nodes.put(SYSTEM, path, { nodeType: 'Document', content })).node))
        if (node && !generations.has(key(node))) {
          generations.set(key(node), gen)
          counts.created++
        } else if (node) {
          // A put that replaced a node keeps that node's generation: written again under it.
          await attempt(['not_found', 'conflict'], () => x.nodes.put(SYSTEM, path, { nodeType: 'Document', content: { [`G${generationOf(node)}_put${step}`]: step } }))
        }
      } else if (op < 42) {
        const g = generationOf(await x.nodes.get(SYSTEM, path).catch(() => null))
        if (g !== undefined) await attempt(['not_found', 'conflict'], () => x.nodes.patch(SYSTEM, path, { [`G${g}_edit${step}`]: step }))
      } else if (op < 52) {
        if (await attempt(['not_found', 'conflict'], async () => (await x.nodes.delete(SYSTEM, path, 'engine'), true))) counts.deleted++
      } else if (op < 60 && (aways.length === 0 || (await x.nodes.get(SYSTEM, prop).catch(() => null)))) {
        // [SCALE21] The node (and its child) moved away: each leaves a tombstone ...
        const away = `S/away${step}` as NodePath
        if (await attempt(['not_found', 'conflict'], () => moves.get(x)!.move(SYSTEM, prop, away))) {
          counts.movedAway++
          aways.push(away)
        }
      } else if (op < 60) {
        // ... and back (when the path looks free here), over whatever tombstones are there by then.
        const away = rng.pick(aways)
        if (await attempt(['not_found', 'conflict'], () => moves.get(x)!.move(SYSTEM, away, prop))) {
          counts.movedBack++
          aways.splice(aways.indexOf(away), 1)
        }
      } else if (op < 75) {
        // A client syncs the node as the database has it, and keeps its copy.
        const stored = await a.storage.loadDoc(path)
        const g = generationOf(await a.storage.getNode(path))
        if (stored && g !== undefined) {
          const doc = new Y.Doc()
          replayLog(doc, stored.snapshot, stored.updates)
          copies.push({ path, doc, generation: g })
        }
      } else if (op < 90 && copies.length > 0) {
        // A held copy reconnects to this instance: its sync sends everything it has. A copy holding
        // structs another instance wrote that this one has not applied yet is refused
        // client_id_conflict (the client reloads).
        const copy = rng.pick(copies)
        const node = await x.nodes.get(SYSTEM, copy.path).catch(() => null)
        if (node) {
          if (copy.generation !== generationOf(node)) counts.reconnectedOlder++
          await attempt(['not_found', 'conflict', 'client_id_conflict'], () => x.nodes.applyClientUpdate(SYSTEM, copy.path, Y.encodeStateAsUpdate(copy.doc), null, 'sync'))
        }
      } else {
        await x.freshen()
        counts.caughtUp++
      }
    }
    for (let step = 0; step < 400; step++) {
      // Mostly one operation on one instance; a quarter of the steps run one on each at once
      // (a move or a delete there meets the other's edit in flight).
      const together = rng.next() < 0.25
      const ops = together ? [{ x: a, op: rng.int(0, 99) }, { x: b, op: rng.int(0, 99) }] : [{ x: rng.pick([a, b]), op: rng.int(0, 99) }]
      await Promise.all(ops.map((o) => act(o.x, o.op, step)))
      await check(`after step ${step} (${ops.map((o) => `op ${o.op} on ${o.x === a ? 'A' : 'B'}`).join(' with ')})`)
    }
    // The seed exercises the cases: several nodes at each path, moves both ways, older copies taken back, refusals.
    expect(counts.created, JSON.stringify(counts)).toBeGreaterThan(5)
    expect(counts.deleted, JSON.stringify(counts)).toBeGreaterThan(2)
    expect(counts.movedAway, JSON.stringify(counts)).toBeGreaterThan(1)
    expect(counts.movedBack, JSON.stringify(counts)).toBeGreaterThan(0)
    expect(counts.reconnectedOlder, JSON.stringify(counts)).toBeGreaterThan(2)
    expect(counts.refused, JSON.stringify(counts)).toBeGreaterThan(2)
  } finally {
    await close()
  }
}
