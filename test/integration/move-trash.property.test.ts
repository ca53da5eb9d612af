import fc from 'fast-check'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { api, createDocument, createSpace, grantRole, signup, startTestServer, type TestServer, type TestUser } from '../helpers/index.js'

/** A seeded stream of numbers in [0, 1) from fast-check: the same seed replays the same sequence. */
function rng(seed: number): () => number {
  const [draws] = fc.sample(fc.array(fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true }), { minLength: 2000, maxLength: 2000 }), { seed, numRuns: 1 })
  let i = 0
  return () => draws![i++ % draws!.length]!
}

interface ModelNode {
  id: string
  parent: string | null
  space: string
  /** A Viewer grant this node carries for `carrier` (moves with it). */
  carries: boolean
  trashed: string | null
}

let ts: TestServer
beforeAll(async () => {
  ts = await startTestServer()
})
afterAll(() => ts.cleanup())

it('[MOVE7] after any seeded sequence of moves, trashes and restores, readers follow the destination and carried grants, and nothing is lost', async () => {
  const seed = Number(process.env.MOVE_SEED ?? 20261203)
  const random = rng(seed)
  const pick = <T>(xs: T[]): T => xs[Math.floor(random() * xs.length)]!
  const admin: TestUser = await signup(ts.url)
  const viewers: Record<string, TestUser> = {}
  const carrier = await signup(ts.url)
  const spaces = [await createSpace(ts.url, admin.token), await createSpace(ts.url, admin.token)]
  for (const s of spaces) {
    viewers[s] = await signup(ts.url)
    await grantRole(ts.url, admin.token, s, viewers[s]!.userId, 'Viewer')
  }
  const a = api(ts.url, admin.token)
  const model = new Map<string, ModelNode>()
  const pathOf = (id: string): string => {
    const n = model.get(id)!
    return n.parent === null ? `${n.space}/${id}` : `${pathOf(n.parent)}/${id}`
  }
  const ancestors = (id: string): string[] => {
    const out: string[] = []
    for (let p: string | null = id; p; p = model.get(p)!.parent) out.push(p)
    return out
  }
  for (let i = 0; i < 8; i++) {
    const id = `n${i}`
    const parents = [...model.values()].filter((n) => !n.trashed)
    const parent = i > 0 && random() < 0.6 ? pick(parents) : null
    model.set(id, { id, parent: parent?.id ?? null, space: parent?.space ?? pick(spaces), carries: random() < 0.3, trashed: null })
    await createDocument(ts.url, admin.token, pathOf(id), { Id: id })
    if (model.get(id)!.carries) await grantRole(ts.url, admin.token, pathOf(id), carrier.userId, 'Viewer')
  }
  const setSpace = (id: string, space: string) => {
    for (const n of model.values()) if (ancestors(n.id).includes(id)) n.space = space
  }
  const originals = new Map<string, string>()

  for (let step = 0; step < 30; step++) {
    const live = [...model.values()].filter((n) => !n.trashed && !ancestors(n.id).some((x) => model.get(x)!.trashed))
    const roll = random()
    if (roll < 0.55 && live.length > 0) {
      const n = pick(live)
      const targets = live.filter((t) => !ancestors(t.id).includes(n.id))
      const target = random() < 0.3 || targets.length === 0 ? null : pick(targets)
      const space = target ? target.space : pick(spaces)
      const to = target ? `${pathOf(target.id)}/${n.id}` : `${space}/${n.id}`
      const res = await a.post(`/api/nodes/${pathOf(n.id)}/move`, { to })
      if (to === pathOf(n.id)) expect(res.status).toBe(409)
      else {
        expect([step, res.status, res.body]).toEqual([step, 200, expect.anything()])
        n.parent = target?.id ?? null
        setSpace(n.id, space)
      }
    } else if (roll < 0.8 && live.length > 0) {
      const n = pick(live)
      const res = await a.post<{ trashPath: string }>(`/api/nodes/${pathOf(n.id)}/trash`)
      expect(res.status).toBe(200)
      originals.set(n.id, pathOf(n.id))
      n.trashed = res.body.trashPath
    } else {
      const trashed = [...model.values()].filter((n) => n.trashed)
      if (trashed.length === 0) continue
      const n = pick(trashed)
      // It goes back to the path it had when trashed, if its parent is still there (and visible).
      const original = originals.get(n.id)!
      const parentPath = original.slice(0, original.lastIndexOf('/'))
      const liveNow = [...model.values()].filter((x) => x !== n && !ancestors(x.id).some((y) => model.get(y)!.trashed))
      const parent = liveNow.find((x) => pathOf(x.id) === parentPath)
      const ok = (spaces.includes(parentPath) || parent !== undefined) && !liveNow.some((x) => pathOf(x.id) === original)
      const res = await a.post(`/api/nodes/${n.trashed}/restore`)
      expect([step, res.status]).toEqual([step, ok ? 200 : 409])
      if (ok) {
        n.trashed = null
        n.parent = parent?.id ?? null
        setSpace(n.id, parent?.space ?? parentPath)
      }
    }
    // The invariant, for every node: where it is, and exactly who reads it there.
    for (const n of model.values()) {
      const hidden = ancestors(n.id).find((x) => model.get(x)!.trashed)
      const path = hidden ? `${model.get(hidden)!.trashed}${pathOf(n.id).slice(pathOf(hidden).length)}` : pathOf(n.id)
      const got = await a.getNode(path)
      expect([step, path, got.status, got.body.content]).toEqual([step, path, 200, { Id: n.id }])
      const expectReaders = {
        viewerA: !hidden && n.space === spaces[0],
        viewerB: !hidden && n.space === spaces[1],
        carrier: !hidden && ancestors(n.id).some((x) => model.get(x)!.carries),
      }
      const reads = async (u: TestUser) => (await api(ts.url, u.token).getNode(path)).status === 200
      expect([step, path, { viewerA: await reads(viewers[spaces[0]!]!), viewerB: await reads(viewers[spaces[1]!]!), carrier: await reads(carrier) }]).toEqual([step, path, expectReaders])
    }
  }
}, 120_000)
