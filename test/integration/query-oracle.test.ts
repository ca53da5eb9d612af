import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import fc from 'fast-check'
import pino from 'pino'
import { SYSTEM, userPrincipal, type MeshNode, type NodePath, type NodeQuery, type Principal, type UserId } from '../../shared/index.js'
import { AccessService, assignmentLabel } from '../../sync-server/access/access-service.js'
import { NodeService } from '../../sync-server/nodes/node-service.js'
import { openSqliteStorage } from '../../sync-server/storage/sqlite-adapter.js'
import type { StorageAdapter } from '../../sync-server/storage/types.js'
import { api, createSpace, expectStatus, makeTempDir, removeDir, signup, startTestServer, type TestServer } from '../helpers/index.js'

type Page = { items: MeshNode[]; next?: string }

/** Every page of a listing, following `next`: the items and the cursors, as a client sees them. */
async function pagesOver(fetchPage: (after: string | undefined) => Promise<Page>): Promise<{ items: string[]; next: string | null }[]> {
  const pages: { items: string[]; next: string | null }[] = []
  let after: string | undefined
  for (let i = 0; i < 500; i++) {
    const page = await fetchPage(after)
    pages.push({ items: page.items.map((n) => `${n.path}=${JSON.stringify(n.content)}`), next: page.next ?? null })
    if (page.next === undefined || page.next === null) return pages
    after = page.next
  }
  throw new Error('the listing never ended')
}

/**
 * [QUERY1] Query paging sees only readable rows: over HTTP, 10,050 nodes Alice cannot read that
 * hold the filtered value answer exactly like a value nobody holds (the old scan budget of
 * 10,000 examined rows made `next` name one of them).
 */
describe('[QUERY1] the query cursor tells nothing about unreadable nodes', () => {
  let ts: TestServer
  beforeAll(async () => {
    ts = await startTestServer()
  })
  afterAll(() => ts.cleanup())

  it('[QUERY1] where.tag=secret held only by 10,050 unreadable nodes answers like where.tag=nobody: no items, no next', { timeout: 120_000 }, async () => {
    const alice = await signup(ts.url)
    const bob = await signup(ts.url)
    const mine = await createSpace(ts.url, alice.token)
    expectStatus(await api(ts.url, alice.token).putNode(`${mine}/doc`, 'Document', { tag: 'public' }), 201)
    const hidden = await createSpace(ts.url, bob.token)
    const nodes = ts.server.nodes
    for (let done = 0; done < 10_050; done += 1000) {
      await Promise.all(
        Array.from({ length: Math.min(1000, 10_050 - done) }, (_, i) =>
          nodes.update(SYSTEM, `${hidden}/n${String(done + i).padStart(5, '0')}` as NodePath, () => ({ nodeType: 'Document', content: { tag: 'secret' } }), 'system'),
        ),
      )
    }
    const http = api(ts.url, alice.token)
    const listing = (where: string, extra = '') => pagesOver(async (after) => expectStatus(await http.get<Page>(`/api/nodes?where.tag=${where}&limit=10${extra}${after ? `&after=${after}` : ''}`), 200).body)
    const secret = await listing('secret')
    expect(secret).toEqual(await listing('nobody'))
    expect(secret).toEqual([{ items: [], next: null }])
    // The home feed's shape (a node type and a field) and a bigger limit: the same.
    expect(await listing('secret', '&nodeType=Document&limit=1000')).toEqual([{ items: [], next: null }])
    // And what she may read is still listed.
    expect((await listing('public')).flatMap((p) => p.items)).toEqual([`${mine}/doc={"tag":"public"}`])
    // A forged sealed cursor opens nothing: a plain 400, never a 500.
    for (const forged of ['_q.', '_q.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA', `_q.${'x'.repeat(5000)}`]) {
      const res = await http.get(`/api/nodes?where.tag=secret&after=${forged}`)
      expect(res.status, forged.slice(0, 20)).toBe(400)
    }
  })

  it('[QUERY1] a sealed cursor opens for the user it was given to only', async () => {
    const { CursorSealer } = await import('../../sync-server/nodes/query-cursor.js')
    const sealer = new CursorSealer()
    const cursor = sealer.seal('alice', 'S/x,')
    expect(cursor.startsWith('_q.')).toBe(true)
    expect(cursor).not.toContain('S/x')
    expect(sealer.seal('alice', 'S/x,')).toBe(cursor)
    expect(sealer.unseal('alice', cursor)).toBe('S/x,')
    expect(() => sealer.unseal('bob', cursor)).toThrow(/not one this server gave you/)
    expect(() => new CursorSealer().unseal('alice', cursor)).toThrow(/not one this server gave you/)
  })
})

/**
 * [QUERY1] Seeded property: random trees of readable and unreadable nodes (assignments to the
 * user and to a group, roles, Denied), random filters and limits. The whole paged answer (items
 * and every cursor) is the same whatever values the unreadable nodes hold, and its items are
 * exactly the readable matching nodes (so readRegions agrees with the access check). A tiny
 * range-query budget makes pages stop between regions, so sealed cursors are in the answers too.
 */
describe('[QUERY1] property: unreadable values never change a paged answer', () => {
  let dir: string
  let storage: StorageAdapter
  let access: AccessService
  let nodes: NodeService
  let run = 0
  const cursors = { sealed: 0, paths: 0 }
  beforeAll(async () => {
    dir = await makeTempDir('weft-query-oracle-')
    storage = openSqliteStorage({ file: join(dir, 'weft.db') })
    access = new AccessService()
    nodes = new NodeService(storage, access, { idleUnloadMs: 60_000, log: pino({ level: 'silent' }), regionQueryBudget: 2 })
    await nodes.boot()
  })
  afterAll(async () => {
    await nodes.close()
    await storage.close()
    await removeDir(dir)
  })

  const TAGS = ['a', 'b', 'c'] as const
  const mesh = fc.record({
    spaces: fc.integer({ min: 1, max: 3 }),
    // Each node: [parent index among earlier nodes or a space, tag].
    tree: fc.array(fc.tuple(fc.nat(), fc.constantFrom(...TAGS)), { minLength: 3, maxLength: 24 }),
    // Assignments: [node index (or space), subject = user | group, role, denied].
    grants: fc.array(fc.tuple(fc.nat(), fc.boolean(), fc.constantFrom('Viewer', 'Commenter', 'Editor', 'Admin'), fc.boolean()), { maxLength: 8 }),
    member: fc.boolean(),
    home: fc.array(fc.constantFrom(...TAGS), { maxLength: 3 }),
  })
  const queryArb = fc.record({
    parent: fc.oneof(fc.constant<number | null | 'top'>(null), fc.constant<'top'>('top'), fc.nat()),
    nodeType: fc.constantFrom(undefined, 'Document'),
    tag: fc.constantFrom(undefined, 'a', 'b', 'c', 'none'),
    limit: fc.integer({ min: 1, max: 4 }),
  })

  async function put(path: string, nodeType: string, content: Record<string, unknown> = {}): Promise<void> {
    await nodes.update(SYSTEM, path as NodePath, () => ({ nodeType, content: content as never }), 'system')
  }

  it('[QUERY1] the full paged answer is identical whether or not unreadable nodes hold the filtered value (seeded)', { timeout: 120_000 }, async () => {
    await fc.assert(
      fc.asyncProperty(mesh, fc.array(queryArb, { minLength: 1, maxLength: 4 }), async (m, queries) => {
        const r = run++
        const userId = `u${r}`
        const user: Principal = userPrincipal(userId as UserId)
        const spaces = Array.from({ length: m.spaces }, (_, i) => `R${r}S${i}`)
        for (const s of spaces) await put(s, 'Space')
        const paths: string[] = [...spaces]
        for (const [i, [parent, tag]] of m.tree.entries()) {
          const path = `${paths[parent % paths.length]}/n${i}`
          await put(path, 'Document', { tag, n: i })
          paths.push(path)
        }
        const group = `${spaces[0]}/G`
        await put(group, 'Group')
        if (m.member) await put(`${group}/${userId}_Membership`, 'Membership')
        const granted = new Set<string>()
        for (const [at, toGroup, role, denied] of m.grants) {
          const scope = paths[at % paths.length]!
          const subject = toGroup ? group : userId
          // One assignment per scope and subject (a second would replace the first, and a
          // space's last Admin cannot be replaced).
          if (granted.has(`${scope} ${subject}`)) continue
          granted.add(`${scope} ${subject}`)
          await put(`${scope}/_Access/${assignmentLabel(subject)}`, 'AccessAssignment', { Subject: subject, Role: role, Denied: denied })
        }
        await put(userId, 'User', { Email: `${userId}@x.example`, FullName: userId })
        for (const [i, tag] of m.home.entries()) await put(`${userId}/h${i}`, 'Document', { tag, n: i })
        const everything = [...paths, userId, ...m.home.map((_, i) => `${userId}/h${i}`)]
        const unreadable = everything.filter((p) => !access.has(user, p as NodePath, 'Read') && !spaces.includes(p) && p !== userId)

        for (const q of queries) {
          const query: NodeQuery = { limit: q.limit }
          if (q.parent === 'top') query.parent = '' as NodePath
          else if (q.parent !== null) query.parent = everything[q.parent % everything.length] as NodePath
          if (q.nodeType) query.nodeType = q.nodeType
          if (q.tag) query.where = { tag: q.tag }
          const answer = () => pagesOver(async (after) => {
            const page = await nodes.queryPage(user, { ...query, after })
            return page.next === null ? { items: page.items } : { items: page.items, next: page.next }
          })
          const first = await answer()
          for (const p of first) if (p.next !== null) cursors[p.next.startsWith('_q.') ? 'sealed' : 'paths']++
          // Exactly the readable matching nodes, in path order.
          const all = await nodes.query(SYSTEM, { ...query, limit: 100_000 })
          const expected = all.filter((n) => access.has(user, n.path, 'Read')).map((n) => `${n.path}=${JSON.stringify(n.content)}`)
          expect(first.flatMap((p) => p.items)).toEqual(expected)
          // Every unreadable node holds the filtered value, then none does: the same answer.
          for (const value of [q.tag ?? 'a', 'none-holds-this']) {
            for (const p of unreadable) await nodes.patch(SYSTEM, p as NodePath, { tag: value })
            expect(await answer()).toEqual(first)
          }
        }
      }),
      { numRuns: 30, seed: 20261203 },
    )
    // The runs paged through both kinds of cursor.
    expect(cursors.sealed).toBeGreaterThan(0)
    expect(cursors.paths).toBeGreaterThan(0)
  })
})
