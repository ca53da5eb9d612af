import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { ChangeRecord, NodePath } from '../../shared/index.js'
import type { StorageAdapter } from '../../sync-server/storage/index.js'
import { addMember, api, createDocument, createGroup, createSpace, expectStatus, grantRole, signup, type TestServer, type TestUser } from '../helpers/index.js'

/**
 * [FEED5] The feed shows a record only to a reader who could read its path when it was written and
 * can read it now. Before, it checked today's access only: a subtree holding a `Denied`
 * assignment that was moved, trashed or deleted took the Denied with it, and the history of its
 * old paths (paths, node types, kinds) became readable to the very people it excluded.
 * Shared by `feed-history.test.ts` (SQLite) and `feed-history.pg.test.ts` (PostgreSQL).
 */
interface Page {
  items: ChangeRecord[]
  next: number
}

const departures = ['move', 'trash', 'delete'] as const
type Departure = (typeof departures)[number]

export function describeFeedHistory(storageName: string, start: () => Promise<{ ts: TestServer; drop?: () => Promise<void> }>): void {
  describe(`feed history under a Denied (${storageName})`, () => {
    let ts: TestServer
    let drop: (() => Promise<void>) | undefined
    let alice: TestUser
    let bob: TestUser
    let carol: TestUser
    let space: string
    let other: string

    beforeAll(async () => {
      ;({ ts, drop } = await start())
      ;[alice, bob, carol] = await Promise.all([signup(ts.url), signup(ts.url), signup(ts.url)])
      space = await createSpace(ts.url, alice.token)
      other = await createSpace(ts.url, alice.token)
      // Bob and Carol read both spaces; a Denied below keeps Bob out of one subtree.
      for (const s of [space, other]) {
        await grantRole(ts.url, alice.token, s, bob.userId, 'Viewer')
        await grantRole(ts.url, alice.token, s, carol.userId, 'Viewer')
      }
    }, 60_000)
    afterAll(async () => {
      await ts.cleanup()
      await drop?.()
    })

    const lastVersion = () => ts.server.storage.lastVersion()

    /** The whole feed after `since` as `user` sees it, following `next` until caught up ([FEED1]). */
    async function feed(user: TestUser, since: number): Promise<ChangeRecord[]> {
      const http = api(ts.url, user.token)
      const seen: ChangeRecord[] = []
      // The head as the call starts: on PostgreSQL a version is taken before its commit is visible,
      // so "caught up" is reaching it, following `next` until then (not the head read afterwards,
      // which an engine's write in flight may have moved: the CI rehearsal's one failure).
      const head = await lastVersion()
      let cursor = since
      for (let i = 0; i < 1000; i++) {
        const page = expectStatus(await http.get<Page>(`/api/changes?since=${cursor}&limit=50`), 200).body
        expect(page.next).toBeGreaterThanOrEqual(cursor)
        seen.push(...page.items)
        if (page.next === cursor && cursor >= head) break
        cursor = page.next
      }
      // Caught up: the cursor reached the head, past every record withheld from this reader too.
      expect(cursor).toBeGreaterThanOrEqual(head)
      // A record says what changed, never whom it is withheld from.
      for (const item of seen) expect(Object.keys(item).sort()).toEqual(['kind', 'nodeType', 'path', 'version'])
      return seen
    }

    const under = (records: ChangeRecord[], prefix: string) => records.filter((r) => r.path === prefix || r.path.startsWith(`${prefix}/`))

    /** A subtree Bob may not read: a Denied for him at its root, children with a history (one already deleted). */
    async function secretSubtree(name: string, denied: string = bob.userId): Promise<string> {
      const root = await createDocument(ts.url, alice.token, `${space}/${name}`, { Title: 'Secret' })
      await grantRole(ts.url, alice.token, root, denied, 'Viewer', true)
      await createDocument(ts.url, alice.token, `${root}/plan`, { Step: 1 })
      expectStatus(await api(ts.url, alice.token).patchNode(`${root}/plan`, { Step: 2 }), 200)
      await createDocument(ts.url, alice.token, `${root}/gone`, { Old: true })
      expectStatus(await api(ts.url, alice.token).deleteNode(`${root}/gone`), 204)
      return root
    }

    async function depart(how: Departure, root: string, to: string): Promise<void> {
      const http = api(ts.url, alice.token)
      if (how === 'move') expectStatus(await http.post(`/api/nodes/${root}/move`, { to }), 200)
      else if (how === 'trash') expectStatus(await http.post(`/api/nodes/${root}/trash`), 200)
      else expectStatus(await http.deleteNode(root), 204)
    }

    for (const how of departures) {
      it(`[FEED5] ${how}: the old records of a subtree Bob was Denied stay withheld from him; Carol, who could read it, still gets its Deleted records; a new node at the reused path is shown`, async () => {
        const since = await lastVersion()
        const root = await secretSubtree(`secret-${how}`)
        expect(under(await feed(bob, since), root)).toEqual([])
        const carolBefore = under(await feed(carol, since), root)
        expect(carolBefore.map((r) => r.path)).toContain(`${root}/gone`)

        const departed = await lastVersion()
        await depart(how, root, `${other}/moved-${how}`)
        // Gone from where it was: today's access there is Bob's Viewer on the space.
        expectStatus(await api(ts.url, bob.token).getNode(space), 200)

        // [FEED8] Only the root's creation is his: it was made before the Denied, when he read it.
        expect(under(await feed(bob, since), root).map((r) => [r.path, r.kind])).toEqual([[root, 'Created']])
        // The Denied went with the subtree: Bob reads nothing of it where it went either.
        if (how === 'move') expect(under(await feed(bob, since), `${other}/moved-${how}`)).toEqual([])

        // Carol could read it all along: every record is hers, the departure's Deleted ones included
        // (her client drops its copies on them).
        const carolAfter = under(await feed(carol, since), root)
        const deletedAtDeparture = carolAfter.filter((r) => r.version > departed && r.kind === 'Deleted').map((r) => r.path)
        expect(deletedAtDeparture.sort()).toEqual([root, `${root}/_Access/${bob.userId}_Access`, `${root}/plan`].sort())
        expect(carolAfter.filter((r) => r.version <= departed)).toEqual(carolBefore)

        // The path is reused by a node Bob may read: its records are his, the old ones still are not.
        const reused = await lastVersion()
        await createDocument(ts.url, alice.token, root, { Title: 'Public now' })
        await createDocument(ts.url, alice.token, `${root}/plan`, { Step: 'new' })
        const bobNow = under(await feed(bob, since), root)
        expect(bobNow.map((r) => [r.path, r.kind, r.version > reused])).toEqual([
          [root, 'Created', false],
          [root, 'Created', true],
          [`${root}/plan`, 'Created', true],
        ])
      })
    }

    it('[FEED5] a Denied naming a group Bob is in: moved away with its subtree, its old records stay withheld from him', async () => {
      const groupSpace = await createSpace(ts.url, alice.token)
      const group = await createGroup(ts.url, alice.token, `${groupSpace}/Team`)
      await addMember(ts.url, alice.token, group, bob.userId)
      const since = await lastVersion()
      const root = await secretSubtree('secret-group', group)
      // Bob's own Denied is the barrier of the other cases; here only the group is Denied, so the
      // group must be what gives him the space: his own Viewer there goes for this case.
      await grantRole(ts.url, alice.token, space, group, 'Viewer')
      expectStatus(await api(ts.url, alice.token).deleteNode(`${space}/_Access/${bob.userId}_Access`), 204)
      try {
        expect((await api(ts.url, bob.token).getNode(root)).status).toBe(403)
        expect(under(await feed(bob, since), root)).toEqual([])
        await depart('move', root, `${other}/moved-group`)
        expectStatus(await api(ts.url, bob.token).getNode(space), 200)
        // [FEED8] The root's creation came before the group's Denied: his own Viewer read it then.
        expect(under(await feed(bob, since), root).map((r) => [r.path, r.kind])).toEqual([[root, 'Created']])
      } finally {
        await grantRole(ts.url, alice.token, space, bob.userId, 'Viewer')
      }
    })

    it('[FEED5] a Denied lifted in place (patched to not Denied, or deleted): Bob reads the subtree now, and its records from before stay withheld', async () => {
      for (const lift of ['patch', 'delete'] as const) {
        const since = await lastVersion()
        const root = await secretSubtree(`lifted-${lift}`)
        const assignment = `${root}/_Access/${bob.userId}_Access`
        if (lift === 'patch') expectStatus(await api(ts.url, alice.token).patchNode(assignment, { Denied: false }), 200)
        else expectStatus(await api(ts.url, alice.token).deleteNode(assignment), 204)
        const lifted = await lastVersion()
        expectStatus(await api(ts.url, bob.token).getNode(`${root}/plan`), 200)
        // [FEED8] What was made while it stood stays withheld; the root's creation, before it, is his.
        expect(under(await feed(bob, since), root).map((r) => [r.path, r.kind])).toEqual([[root, 'Created']])
        expectStatus(await api(ts.url, alice.token).patchNode(`${root}/plan`, { Step: 3 }), 200)
        expect(under(await feed(bob, since), root).map((r) => [r.path, r.kind, r.version > lifted])).toEqual([
          [root, 'Created', false],
          [`${root}/plan`, 'Updated', true],
        ])
      }
    })

    it('[FEED5] the mirror case: records Bob could read, then a Denied for him: withheld while it stands (he cannot read there now)', async () => {
      const since = await lastVersion()
      const root = await createDocument(ts.url, alice.token, `${space}/open`, { Title: 'Open' })
      await createDocument(ts.url, alice.token, `${root}/note`, {})
      expect(under(await feed(bob, since), root).map((r) => r.path)).toEqual([root, `${root}/note`])
      await grantRole(ts.url, alice.token, root, bob.userId, 'Viewer', true)
      expect(under(await feed(bob, since), root)).toEqual([])
      expect(under(await feed(carol, since), root).map((r) => r.path)).toEqual([root, `${root}/note`, `${root}/_Access/${bob.userId}_Access`])
      // [FEED8] Lifted: what he could read before it is his again; what was made while it stood is not.
      const assignment = `${root}/_Access/${bob.userId}_Access`
      await createDocument(ts.url, alice.token, `${root}/hidden`, {})
      expectStatus(await api(ts.url, alice.token).patchNode(assignment, { Denied: false }), 200)
      expect(under(await feed(bob, since), root).map((r) => r.path)).toEqual([root, `${root}/note`])
      // Denied again, something made, lifted again: each span it stood is withheld, the gap between is his.
      await createDocument(ts.url, alice.token, `${root}/between`, {})
      expectStatus(await api(ts.url, alice.token).patchNode(assignment, { Denied: true }), 200)
      await createDocument(ts.url, alice.token, `${root}/hidden-2`, {})
      expectStatus(await api(ts.url, alice.token).deleteNode(assignment), 204)
      await createDocument(ts.url, alice.token, `${root}/after`, {})
      expect(under(await feed(bob, since), root).map((r) => r.path)).toEqual([root, `${root}/note`, `${root}/between`, `${root}/after`])
      expect(under(await feed(carol, since), root).map((r) => r.path)).toContain(`${root}/hidden-2`)
    })
    it('[FEED7] an Admin who makes and ends Denied assignments for ever new subjects cannot grow the records without bound: past its bound a list means everyone', async () => {
      const since = await lastVersion()
      const root = await createDocument(ts.url, alice.token, `${space}/churn`, { Title: 'Churn' })
      const a = api(ts.url, alice.token)
      // [FEED8] A Denied withholds only what was made while it stood: the documents come while all stand.
      const ghosts = Array.from({ length: 30 }, (_, i) => `ghost-${i}-${'x'.repeat(120)}`)
      for (const ghost of ghosts) await grantRole(ts.url, alice.token, root, ghost, 'Viewer', true)
      for (let i = 0; i < 3; i++) await createDocument(ts.url, alice.token, `${root}/d${i}`, { I: i })
      for (const ghost of ghosts) expectStatus(await a.deleteNode(`${root}/_Access/${ghost}_Access`), 204)
      const stored = (await ts.server.storage.changesSince(since, 10_000)).filter((r) => r.path === root || r.path.startsWith(`${root}/`))
      expect(stored.length).toBeGreaterThan(4)
      for (const r of stored) expect((r.withheld ?? []).join('\n').length, r.path).toBeLessThan(2048)
      // The documents' own records ended withheld from everyone (more withheld is the safe side).
      expect(stored.find((r) => r.path === `${root}/d0`)?.withheld).toEqual(['*'])
      expect(under(await feed(carol, since), `${root}/d0`)).toEqual([])
      // A later change is everyone's again.
      expectStatus(await a.patchNode(`${root}/d0`, { I: 10 }), 200)
      expect(under(await feed(carol, since), `${root}/d0`).map((r) => r.kind)).toEqual(['Updated'])
    })
  })
}

/**
 * [FEED5] A database from before the column, opened by this release: its old record is withheld
 * from nobody until a commit's withholding marks it with the later ones.
 */
export async function expectOlderDatabaseGainsColumn(s: StorageAdapter): Promise<void> {
  try {
    await s.commit({ path: 'Sp/a/b' as NodePath, kind: 'Created', nodeType: 'Document', name: 'b', content: {}, createdBy: 'u1', at: new Date(0).toISOString(), update: null, withhold: [{ scope: 'Sp/a' as NodePath, subject: 'bob' }] })
    expect((await s.changesSince(0, 10)).map((r) => [r.path, r.withheld ?? null])).toEqual([
      ['Sp/a', ['bob']],
      ['Sp/a/b', ['bob']],
    ])
  } finally {
    await s.close()
  }
}
