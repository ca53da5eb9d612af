import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import fc from 'fast-check'
import * as Y from 'yjs'
import { SYSTEM, userPrincipal, type JsonValue, type NodePath, type UserId } from '../../shared/index.js'
import type { CommitInput } from '../../sync-server/storage/types.js'
import { api, createDocument, createSpace, grantRole, signup, startTestServer, stockProvider, type TestServer } from '../helpers/index.js'

/**
 * [ACT12] `NodeService.append` is one Yjs array insert, logged as such: no append rewrites the
 * node's row (its whole JSON), whether or not anyone watches the node, and the appended items are
 * there after a restart, in the order the appends were called. Real server, real SQLite.
 */
let ts: TestServer
beforeAll(async () => {
  ts = await startTestServer()
})
afterAll(() => ts.cleanup())

const json = (v: unknown) => (v instanceof Y.AbstractType ? v.toJSON() : v)

/** Records what the node service hands the real storage for one path. */
function recordCommits(path: string): CommitInput[] {
  const storage = ts.server.storage
  const seen: CommitInput[] = []
  const commit = storage.commit.bind(storage)
  storage.commit = (input) => {
    if (input.path === path) seen.push(input)
    return commit(input)
  }
  return seen
}

describe('[ACT12] append', () => {
  it('with nobody watching: every append logs a Yjs insert of constant size and defers the row; all lines survive a restart', async () => {
    const owner = await signup(ts.url)
    const space = await createSpace(ts.url, owner.token)
    const path = `${space}/log` as NodePath
    // Created by an engine (as activities are): no doc is built until something needs one.
    await ts.server.nodes.create(SYSTEM, path, { nodeType: 'Document', content: { Items: [] } }, 'engine')
    expect(ts.server.nodes.hasDoc(path)).toBe(false)
    const commits = recordCommits(path)
    for (let i = 0; i < 300; i++) await ts.server.nodes.append(SYSTEM, path, 'Items', [{ N: i, Text: `line ${i}` }])
    expect(commits).toHaveLength(300)
    expect(commits.every((c) => c.kind === 'Updated' && c.update !== null && c.deferContent === true)).toBe(true)
    // O(1): the 300th line's update is no bigger than the 101st's (same-width numbers and text;
    // a few bytes of Yjs clock aside).
    const size = (i: number) => commits[i]!.update!.length
    expect(size(299)).toBeLessThanOrEqual(size(100) + 4)
    const expected = Array.from({ length: 300 }, (_, i) => ({ N: i, Text: `line ${i}` }))
    expect((await ts.server.nodes.get(SYSTEM, path))?.content.Items).toEqual(expected)

    // A stock provider joining later sees them all, as one array.
    const watcher = stockProvider(ts.url, path, owner.token)
    await watcher.synced()
    expect(json(watcher.content.get('Items'))).toEqual(expected)
    watcher.destroy()

    await ts.restart()
    expect((await api(ts.url, owner.token).getNode(path)).body.content.Items).toEqual(expected)
  })

  it('is refused like a patch of the field: a Viewer, a non-array field, a missing node; nothing is written', async () => {
    const owner = await signup(ts.url)
    const viewer = await signup(ts.url)
    const space = await createSpace(ts.url, owner.token)
    await grantRole(ts.url, owner.token, space, viewer.userId, 'Viewer')
    const path = (await createDocument(ts.url, owner.token, `${space}/doc`, { Items: ['a'], Title: 'x' })) as NodePath
    const commits = recordCommits(path)
    const nodes = ts.server.nodes
    await expect(nodes.append(userPrincipal(viewer.userId as UserId), path, 'Items', ['b'])).rejects.toMatchObject({ code: 'forbidden' })
    await expect(nodes.append(SYSTEM, path, 'Title', ['b'])).rejects.toMatchObject({ code: 'invalid_patch' })
    await expect(nodes.append(SYSTEM, `${space}/missing` as NodePath, 'Items', ['b'])).rejects.toMatchObject({ code: 'not_found' })
    expect(nodes.hasDoc(`${space}/missing` as NodePath)).toBe(false)
    expect(commits).toHaveLength(0)
    expect((await nodes.get(SYSTEM, path))?.content).toMatchObject({ Items: ['a'], Title: 'x' })
  })

  it('appends called without waiting for each other land in call order, interleaved with patches of other fields (seeded property)', async () => {
    const owner = await signup(ts.url)
    const space = await createSpace(ts.url, owner.token)
    let round = 0
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.oneof(fc.record({ append: fc.array(fc.integer(), { minLength: 1, maxLength: 5 }) }), fc.record({ patch: fc.integer() })), { minLength: 1, maxLength: 25 }),
        fc.boolean(),
        async (ops, watched) => {
          const path = `${space}/p${round++}` as NodePath
          // Created by an engine, so no doc is built: unwatched, the first appends race its build.
          await ts.server.nodes.create(SYSTEM, path, { nodeType: 'Document', content: { Items: [] } }, 'engine')
          expect(ts.server.nodes.hasDoc(path)).toBe(false)
          const watcher = watched ? stockProvider(ts.url, path, owner.token) : null
          await watcher?.synced()
          const writes = ops.map((op) =>
            'append' in op ? ts.server.nodes.append(SYSTEM, path, 'Items', op.append as JsonValue[]) : ts.server.nodes.patch(SYSTEM, path, { Other: op.patch }, 'engine'),
          )
          await Promise.all(writes)
          const items = ops.flatMap((op) => ('append' in op ? op.append : []))
          const node = await ts.server.nodes.get(SYSTEM, path)
          expect(node?.content.Items).toEqual(items)
          if (watcher) {
            await expect.poll(() => json(watcher.content.get('Items'))).toEqual(items)
            watcher.destroy()
          }
        },
      ),
      { numRuns: 40, seed: Number(process.env.WEFT_FC_SEED ?? 20261203) },
    )
  })
})
