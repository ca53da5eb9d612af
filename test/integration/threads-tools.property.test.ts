import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { SYSTEM, userPrincipal, type NodePath, type Permission, type UserId } from '../../shared/index.js'
import { RoundTools, createThreadsEngine } from '../../sync-server/engines/threads/index.js'
import { api, createSpace, grantRole, signup, startTestServer, type TestServer, type TestUser } from '../helpers/index.js'
import { Rng } from '../sim/rng.js'

/**
 * [THR11] Seeded property: whatever the model asks (crafted paths, engine-only fields, other
 * spaces) and whoever wrote the round, a tool call succeeds only when EVERY principal of the round
 * holds the permission it needs there, a refused call changes nothing, and every row a query
 * returns is readable by every one of them.
 */

let ts: TestServer
let users: TestUser[]
let a: string
let b: string

beforeAll(async () => {
  ts = await startTestServer({ config: { engines: [createThreadsEngine({ llm: null })] } })
  users = [await signup(ts.url), await signup(ts.url), await signup(ts.url), await signup(ts.url)]
  const [alice, bob, carol] = users as [TestUser, TestUser, TestUser, TestUser]
  a = await createSpace(ts.url, alice.token)
  b = await createSpace(ts.url, alice.token)
  await grantRole(ts.url, alice.token, a, bob.userId, 'Editor')
  await grantRole(ts.url, alice.token, b, bob.userId, 'Viewer')
  await grantRole(ts.url, alice.token, a, carol.userId, 'Viewer')
  for (const p of [`${a}/doc`, `${b}/doc`]) await api(ts.url, alice.token).putNode(p, 'Document', { Title: 'x' })
  await api(ts.url, alice.token).putNode(`${a}/th`, 'Thread', { Agent: { Kind: 'builtin' } })
})
afterAll(() => ts.cleanup())

/** Query rows checked over all seeds (one seed may return none). */
let rowsSeen = 0

describe('[THR11] seeded tool calls as the round\'s authority', () => {
  for (const seed of [1, 7, 42]) {
    it(`seed ${seed}: a call succeeds only when every principal could make it; a refused call writes nothing`, { timeout: 60_000 }, async () => {
      const rand = new Rng(seed)
      const nodes = ts.server.nodes
      const paths = [`${a}/doc`, `${b}/doc`, `${a}/th`, `${a}/new`, `${b}/new`, 'Admin/Partition', `${a}/../x`, '']
      const seen = { ok: 0, refused: 0, rows: 0 }
      for (let i = 0; i < 60; i++) {
        const ids = users.map((u) => u.userId as UserId)
        const authors = ids.filter(() => rand.next() < 0.5)
        if (authors.length === 0) authors.push(rand.pick(ids))
        const also = rand.next() < 0.3 ? [rand.pick(ids)] : []
        const tool = rand.pick(['read', 'patch', 'create', 'query'] as const)
        const path = rand.pick(paths)
        const field = rand.pick(['Title', 'Status', 'Messages', 'Other'])
        const args =
          tool === 'read' ? { path } : tool === 'patch' ? { path, patch: { [field]: `v${i}` } } : tool === 'create' ? { path: `${path}-${seed}-${i}`, nodeType: rand.pick(['Document', 'Thread']), content: { [field]: `v${i}` } } : rand.next() < 0.3 ? {} : { parent: path }
        const target = (tool === 'create' ? args.path : path) as NodePath
        const before = await nodes.get(SYSTEM, target).catch(() => null)
        const tools = new RoundTools(nodes, authors, { delegate: () => Promise.reject(new Error('no')), run: () => Promise.reject(new Error('no')) })
        let ok = true
        const result = await tools.call(tool, args, also, new AbortController().signal).catch(() => {
          ok = false
          return null
        })
        if (ok && tool === 'query') {
          // Every row a query returns is readable by every principal of the call (authors and approver).
          expect(Array.isArray(result), JSON.stringify(result)?.slice(0, 200)).toBe(true)
          for (const row of result as Array<{ path: string }>) {
            for (const u of new Set([...authors, ...also])) expect(nodes.permissions(userPrincipal(u), row.path as NodePath).has('Read'), `query row ${row.path} for ${u}`).toBe(true)
          }
          seen.rows += (result as unknown[]).length
        }
        const need: Permission = tool === 'read' || tool === 'query' ? 'Read' : tool === 'patch' ? 'Update' : 'Create'
        if (ok) seen.ok++
        else seen.refused++
        // A query with no parent needs Read nowhere in particular: only its rows are checked (above).
        if (ok && !(tool === 'query' && !('parent' in args))) {
          for (const u of new Set([...authors, ...also])) {
            expect(nodes.permissions(userPrincipal(u), target).has(need), `${tool} ${target} by ${u}`).toBe(true)
          }
        } else if (tool !== 'read' && tool !== 'query') {
          expect(await nodes.get(SYSTEM, target).catch(() => null)).toEqual(before)
        }
      }
      // The seed exercised both sides of the rule.
      expect(seen.ok).toBeGreaterThan(0)
      expect(seen.refused).toBeGreaterThan(0)
      rowsSeen += seen.rows
    })
  }
  it('the seeds together checked query rows', () => {
    expect(rowsSeen).toBeGreaterThan(0)
  })
})
