import { afterAll, describe, expect, it } from 'vitest'
import { SYSTEM, spaceInviteSubscriptionId, subscriptionPath, type ChangeRecord, type NodePath } from '../../shared/index.js'
import { startServer, type RunningServer } from '../../sync-server/server.js'
import { api, createSpace, makeTempDir, removeDir, signup, spawnServer, waitFor, type SpawnedServer, TEST_PASSWORD, TEST_SCRYPT_N } from '../helpers/index.js'

/**
 * [SUB3] at most once, under the worst timing: the server process is killed with SIGKILL while
 * 1,000 invitees are signing up, then restarted on the same data directory. Every subscription
 * must end Fired exactly once (one terminal write) and every invitee must hold exactly one
 * assignment, whatever was in flight at the kill.
 */
const INVITEES = 1000
const CONCURRENCY = 24

async function allChanges(s: RunningServer): Promise<ChangeRecord[]> {
  const out: ChangeRecord[] = []
  let since = 0
  for (;;) {
    const page = await s.nodes.changesSince(SYSTEM, since, 10_000)
    out.push(...page)
    if (page.length < 10_000) return out
    since = page[page.length - 1]!.version
  }
}

describe('[SUB3] kill -9 during 1,000 sign-ups', () => {
  let dir = ''
  const children: SpawnedServer[] = []
  afterAll(async () => {
    for (const c of children) await c.kill('SIGKILL')
    if (dir) await removeDir(dir)
  })

  it('every subscription fires exactly once and no assignment is duplicated', { timeout: 240_000 }, async () => {
    dir = await makeTempDir('weft-kill9-')
    const emails = Array.from({ length: INVITEES }, (_, i) => `k9-${i}@kill.weft.example`)

    // Seed: an admin, a space and 1,000 pending invites, written with the engine off.
    const seed = await startServer({ port: 0, host: '127.0.0.1', passwordScryptN: TEST_SCRYPT_N, dataDir: dir, logLevel: 'silent', engines: [] })
    const admin = await signup(seed.url)
    const space = await createSpace(seed.url, admin.token)
    const at = new Date().toISOString()
    await Promise.all(emails.map((email) => seed.nodes.put(SYSTEM, subscriptionPath(spaceInviteSubscriptionId(email, space)) as NodePath, {
      nodeType: 'EventSubscription',
      content: {
        Id: spaceInviteSubscriptionId(email, space), TriggerType: 'NodeChange', TriggerNodeType: 'User', TriggerKind: 'Created',
        MatchField: 'Email', MatchValue: email, ContinuationType: 'GrantSpaceAccess', TargetPath: space, Role: 'Editor', Pin: true,
        Status: 'Pending', CreatedBy: admin.userId, CreatedAt: at,
      },
    })))
    await seed.close()

    // Sign up with the runner live, and kill the process part-way.
    const first = await spawnServer({ dataDir: dir })
    children.push(first)
    const done = new Set<string>()
    let next = 0
    const killAfter = Math.floor(INVITEES * 0.4)
    let killed = false
    const worker = async (url: string, stopOnKill: boolean) => {
      while (next < emails.length) {
        if (stopOnKill && killed) return
        const email = emails[next++] as string
        const res = await api(url).post('/api/auth/signup', { email, password: TEST_PASSWORD, name: email }).catch(() => null)
        if (res && (res.status === 201 || res.status === 409)) done.add(email)
        if (!killed && done.size >= killAfter) {
          killed = true
          await first.kill('SIGKILL')
        }
      }
    }
    await Promise.all(Array.from({ length: CONCURRENCY }, () => worker(first.url, true)))
    expect(killed).toBe(true)

    // Restart on the same data: boot reconcile catches up; the rest sign up with the feed live.
    const second = await spawnServer({ dataDir: dir })
    children.push(second)
    next = 0
    const remaining = emails.filter((e) => !done.has(e))
    const retry = async () => {
      while (remaining.length > 0) {
        const email = remaining.pop() as string
        const res = await api(second.url).post('/api/auth/signup', { email, password: TEST_PASSWORD, name: email })
        expect([201, 409]).toContain(res.status)
      }
    }
    await Promise.all(Array.from({ length: CONCURRENCY }, retry))
    const adminApi = api(second.url, (await api(second.url).post<{ token: string }>('/api/auth/login', { email: admin.email, password: TEST_PASSWORD })).body.token)
    await waitFor(async () => {
      const res = await adminApi.get<{ invites: { status: string }[] }>(`/api/spaces/${space}/members`)
      return res.body.invites.length === INVITEES && res.body.invites.every((i) => i.status !== 'Pending')
    }, { timeoutMs: 60_000, intervalMs: 200, description: 'every invite leaves Pending' })
    await second.kill('SIGTERM')

    // Inspect the durable state.
    const s = await startServer({ port: 0, host: '127.0.0.1', passwordScryptN: TEST_SCRYPT_N, dataDir: dir, logLevel: 'silent', engines: [] })
    try {
      const changes = await allChanges(s)
      const writesByPath = new Map<string, string[]>()
      for (const c of changes) {
        const list = writesByPath.get(c.path) ?? []
        list.push(c.kind)
        writesByPath.set(c.path, list)
      }
      const assignments = await s.nodes.query(SYSTEM, { parent: `${space}/_Access` as NodePath, nodeType: 'AccessAssignment', limit: Number.MAX_SAFE_INTEGER })
      const bySubject = new Map<string, number>()
      for (const a of assignments) bySubject.set(String(a.content.Subject), (bySubject.get(String(a.content.Subject)) ?? 0) + 1)
      const missingUserNodes: string[] = []
      for (const email of emails) {
        const id = spaceInviteSubscriptionId(email, space)
        const sub = await s.nodes.get(SYSTEM, subscriptionPath(id) as NodePath)
        const userId = await s.users.findUserIdByEmail(email)
        expect(userId, email).not.toBeNull()
        if (!(await s.nodes.get(SYSTEM, userId as string as NodePath))) {
          missingUserNodes.push(email)
          continue
        }
        expect(sub?.content.Status, id).toBe('Fired')
        expect(sub?.content.SubjectId, id).toBe(userId)
        // Created by the seed, then exactly one terminal write.
        expect(writesByPath.get(subscriptionPath(id)), id).toEqual(['Created', 'Updated'])
        expect(bySubject.get(userId as string), email).toBe(1)
        expect(writesByPath.get(`${space}/_Access/${userId}_Access`), email).toEqual(['Created'])
        const user = await s.nodes.get(SYSTEM, userId as string as NodePath)
        expect(user?.content.PinnedPaths, email).toEqual([space])
      }
      // An account whose User node was never written (killed between the two) can never fire an
      // invite: that is the sign-up's atomicity, reported here by name rather than hidden.
      expect(missingUserNodes, 'accounts without a User node after kill -9').toEqual([])
    } finally {
      await s.close()
    }
  })
})
