import { afterEach, describe, expect, it } from 'vitest'
import { SYSTEM, spaceInviteSubscriptionId, subscriptionPath, type JsonObject, type MeshNode, type NodePath, type Principal } from '../../shared/index.js'
import { startServer, type RunningServer } from '../../sync-server/server.js'
import type { UpdateFn } from '../../sync-server/nodes/types.js'
import { api, createSpace, errorCode, grantRole, makeTempDir, removeDir, signup, uniqueEmail, waitFor, type TestUser, TEST_SCRYPT_N } from '../helpers/index.js'

/**
 * [SUB8]-[SUB12] Engines never drop a delivery, and a revoke never loses to a grant in flight.
 * Real server, real SQLite; the interleavings are made for real by holding one write of the
 * engine (a deferred promise) while the other party acts, not by hoping for a timing.
 */
const servers: RunningServer[] = []
const dirs: string[] = []

async function boot(dir?: string): Promise<RunningServer> {
  const dataDir = dir ?? (await makeTempDir('weft-delivery-'))
  if (!dir) dirs.push(dataDir)
  const s = await startServer({ port: 0, host: '127.0.0.1', passwordScryptN: TEST_SCRYPT_N, dataDir, logLevel: 'silent' })
  servers.push(s)
  return s
}

afterEach(async () => {
  for (const s of servers.splice(0)) await s.close()
  for (const d of dirs.splice(0)) await removeDir(d)
})

const get = (s: RunningServer, path: string) => s.nodes.get(SYSTEM, path as NodePath)

function deferred(): { promise: Promise<void>; resolve: () => void } {
  let resolve!: () => void
  const promise = new Promise<void>((r) => (resolve = r))
  return { promise, resolve }
}

/**
 * Runs `before` (once, awaited) ahead of the first engine write to a path `match` accepts, then
 * lets that write go on: the other party's action lands between the engine's checks and its write.
 */
function interceptUpdate(s: RunningServer, match: (path: string) => boolean, before: () => Promise<void>): { entered: Promise<void> } {
  const original = s.nodes.update.bind(s.nodes)
  const entered = deferred()
  let done = false
  s.nodes.update = async (principal: Principal, path: NodePath, fn: UpdateFn, origin?: Parameters<typeof original>[3]) => {
    if (!done && match(path)) {
      done = true
      entered.resolve()
      await before()
    }
    return original(principal, path, fn, origin)
  }
  return { entered: entered.promise }
}

async function subscription(s: RunningServer, id: string): Promise<MeshNode | null> {
  return get(s, subscriptionPath(id))
}

async function putSub(s: RunningServer, id: string, content: JsonObject): Promise<void> {
  await s.nodes.put(SYSTEM, subscriptionPath(id) as NodePath, {
    nodeType: 'EventSubscription',
    content: { Id: id, Status: 'Pending', CreatedAt: new Date().toISOString(), ...content },
  })
}

const assignment = (space: string, userId: string) => `${space}/_Access/${userId}_Access`
const pinsOf = async (s: RunningServer, userId: string) => ((await get(s, userId))?.content.PinnedPaths ?? []) as string[]

describe('[SUB8] the TierInvite receiver never drops a delivery', () => {
  it('[SUB8] a second delivery that arrives while the first is being granted is handled too, with no restart', async () => {
    const s = await boot()
    const admin = await signup(s.url)
    const space = await createSpace(s.url, admin.token)
    // [SUB13] In the space: a delivery is a write made for the inviter, who may update it there.
    const target = `${space}/team`
    await s.nodes.put(SYSTEM, target as NodePath, { nodeType: 'TierInvite', content: { Space: space, Tier: 'Editor' } })
    const emails = [uniqueEmail('tier-a'), uniqueEmail('tier-b')]
    for (const [i, email] of emails.entries()) {
      await putSub(s, `tier_${i}`, {
        TriggerType: 'NodeChange', TriggerNodeType: 'User', MatchField: 'Email', MatchValue: email,
        ContinuationType: 'DeliverToNode', DeliverTo: target, CreatedBy: admin.userId,
      })
    }
    // Hold the first grant until the second delivery is on the node.
    const release = deferred()
    const held = interceptUpdate(s, (p) => p.startsWith(`${space}/_Access/`), () => release.promise)
    const first = await signup(s.url, emails[0])
    await held.entered
    expect(((await get(s, target))?.content.EventDeliveries as unknown[]).length).toBe(1)
    const second = await signup(s.url, emails[1])
    await waitFor(async () => (((await get(s, target))?.content.EventDeliveries ?? []) as unknown[]).length === 2, { description: 'second delivery written while the first is held' })
    release.resolve()

    const done = await waitFor(async () => {
      const n = await get(s, target)
      return ((n?.content.HandledDeliveries ?? []) as string[]).length === 2 ? n : null
    }, { description: 'both deliveries handled' })
    expect([...(done.content.HandledDeliveries as string[])].sort()).toEqual(['tier_0', 'tier_1'])
    expect((await get(s, assignment(space, first.userId)))?.content).toMatchObject({ Role: 'Editor' })
    expect((await get(s, assignment(space, second.userId)))?.content).toMatchObject({ Role: 'Editor' })
  })

  it('[SUB9] a delivery for someone explicitly Denied on the space is Refused, and the Denied stays', async () => {
    const s = await boot()
    const admin = await signup(s.url)
    const space = await createSpace(s.url, admin.token)
    const blocked = await signup(s.url)
    const denied = await grantRole(s.url, admin.token, space, blocked.userId, 'Viewer', true)
    const target = `${space}/d`
    await s.nodes.put(SYSTEM, target as NodePath, { nodeType: 'TierInvite', content: { Space: space, Tier: 'Admin' } })
    await putSub(s, 'tier_denied', { TriggerType: 'Timer', FireAt: new Date(0).toISOString(), SubjectId: blocked.userId, ContinuationType: 'DeliverToNode', DeliverTo: target, CreatedBy: admin.userId })
    const refused = await waitFor(async () => {
      const n = await get(s, target)
      return n?.content.Status ? n : null
    })
    expect(refused.content).toMatchObject({ Status: 'Refused', Reason: expect.stringContaining('explicitly Denied') })
    expect((await get(s, denied))?.content).toMatchObject({ Role: 'Viewer', Denied: true })
  })
})

describe('[SUB10] a revoke during a grant: the revoke wins, or the grant is taken back', () => {
  /** An Admin's space and a pending email invite (Editor, pinned) of a fresh address. */
  async function pendingInvite(s: RunningServer): Promise<{ admin: TestUser; space: string; email: string; id: string }> {
    const admin = await signup(s.url)
    const space = await createSpace(s.url, admin.token)
    const email = uniqueEmail('revoke')
    const res = await api(s.url, admin.token).post(`/api/spaces/${space}/invites`, { email, role: 'Editor', pin: true })
    expect(res.status).toBe(201)
    return { admin, space, email, id: spaceInviteSubscriptionId(email, space) }
  }
  const revoke = async (s: RunningServer, admin: TestUser, space: string, id: string) => {
    const res = await api(s.url, admin.token).request('DELETE', `/api/spaces/${space}/invites/${id}`)
    expect(res.status, JSON.stringify(res.body)).toBe(200)
  }

  it('[SUB10] revoked after the firing started but before the grant is written: nothing is ever granted', async () => {
    const s = await boot()
    const { admin, space, email, id } = await pendingInvite(s)
    // The firing's last look at the subscription before it grants: the revoke lands just ahead of it.
    const original = s.nodes.get.bind(s.nodes)
    let revoked = false
    s.nodes.get = async (principal, path) => {
      if (!revoked && path === subscriptionPath(id)) {
        revoked = true
        await revoke(s, admin, space, id)
      }
      return original(principal, path)
    }
    const since = await s.storage.lastVersion()
    const invitee = await signup(s.url, email)
    await waitFor(() => revoked, { description: 'the revoke ran inside the firing' })
    await waitFor(async () => (await subscription(s, id))?.content.TakenBackAt, { description: 'take-back check done' })
    const sub = (await subscription(s, id))!
    expect(sub.content.Status).toBe('Cancelled')
    // Not granted and removed: never granted at all.
    const changes = await s.storage.changesSince(since, 10_000)
    expect(changes.filter((c) => c.path === assignment(space, invitee.userId))).toEqual([])
    expect(await pinsOf(s, invitee.userId)).toEqual([])
    expect((await api(s.url, invitee.token).getNode(space)).status).toBe(403)
  })

  it('[SUB10] revoked between the checks and the grant write: the grant is taken back (assignment and pin), never "Cancelled and granted"', async () => {
    const s = await boot()
    const { admin, space, email, id } = await pendingInvite(s)
    interceptUpdate(s, (p) => p.startsWith(`${space}/_Access/`) && !p.endsWith(`${admin.userId}_Access`), () => revoke(s, admin, space, id))
    const invitee = await signup(s.url, email)
    const sub = await waitFor(async () => {
      const n = await subscription(s, id)
      return n?.content.TakenBackAt ? n : null
    }, { description: 'taken back' })
    expect(sub.content.Status).toBe('Cancelled')
    expect(sub.content.FiredAt).toBeUndefined()
    await waitFor(async () => (await get(s, assignment(space, invitee.userId))) === null, { description: 'assignment removed' })
    expect(await pinsOf(s, invitee.userId)).toEqual([])
    expect((await api(s.url, invitee.token).getNode(space)).status).toBe(403)
  })

  it('[SUB10] revoked while the pin is written: the role goes back to the one held before, and the pin goes', async () => {
    const s = await boot()
    const admin = await signup(s.url)
    const space = await createSpace(s.url, admin.token)
    const member = await signup(s.url)
    await grantRole(s.url, admin.token, space, member.userId, 'Viewer')
    const id = 'grant_while_pinning'
    interceptUpdate(s, (p) => p === member.userId, () => revoke(s, admin, space, id))
    await putSub(s, id, { TriggerType: 'Timer', FireAt: new Date(0).toISOString(), SubjectId: member.userId, ContinuationType: 'GrantSpaceAccess', TargetPath: space, Role: 'Editor', Pin: true, CreatedBy: admin.userId })
    const sub = await waitFor(async () => {
      const n = await subscription(s, id)
      return n?.content.TakenBackAt ? n : null
    }, { description: 'taken back' })
    expect(sub.content.Status).toBe('Cancelled')
    const a = (await get(s, assignment(space, member.userId)))!
    expect(a.content).toMatchObject({ Subject: member.userId, Role: 'Viewer' })
    expect(a.content.GrantedBy).toBeUndefined()
    expect(await pinsOf(s, member.userId)).toEqual([])
  })

  it('[SUB10] a grant cut short by a crash after the revoke is taken back at the next boot', async () => {
    const dir = await makeTempDir('weft-delivery-')
    dirs.push(dir)
    const s1 = await boot(dir)
    const admin = await signup(s1.url)
    const space = await createSpace(s1.url, admin.token)
    const member = await signup(s1.url)
    const id = 'crashed_grant'
    const createdAt = new Date().toISOString()
    // The state a crash leaves: the grant written (with its record), the revoke landed, no take-back yet.
    await s1.nodes.put(SYSTEM, assignment(space, member.userId) as NodePath, {
      nodeType: 'AccessAssignment',
      content: { Subject: member.userId, Role: 'Editor', Denied: false, GrantedBy: id, Grant: { Invited: createdAt, Role: 'Editor', PriorRole: null, PriorPinned: false, Pin: false } },
    })
    await servers.splice(servers.indexOf(s1), 1)[0]!.close()
    // Written with the engines down (another process): the next boot finds it.
    const raw = await startServer({ port: 0, host: '127.0.0.1', passwordScryptN: TEST_SCRYPT_N, dataDir: dir, logLevel: 'silent', engines: [] })
    await putSub(raw, id, { Status: 'Cancelled', CreatedAt: createdAt, TriggerType: 'Timer', FireAt: new Date(0).toISOString(), SubjectId: member.userId, ContinuationType: 'GrantSpaceAccess', TargetPath: space, Role: 'Editor', CreatedBy: admin.userId })
    await raw.close()
    const s2 = await boot(dir)
    await waitFor(async () => (await subscription(s2, id))?.content.TakenBackAt, { description: 'taken back at boot' })
    expect(await get(s2, assignment(space, member.userId))).toBeNull()
  })
})

describe('[SUB9] [SUB12] grants and pins', () => {
  it('[SUB9] inviting someone explicitly Denied is a conflict and the Denied assignment is unchanged', async () => {
    const s = await boot()
    const admin = await signup(s.url)
    const space = await createSpace(s.url, admin.token)
    const blocked = await signup(s.url)
    const path = await grantRole(s.url, admin.token, space, blocked.userId, 'Editor', true)
    const before = (await get(s, path))!
    const res = await api(s.url, admin.token).post(`/api/spaces/${space}/invites`, { email: blocked.email, role: 'Admin', pin: true })
    expect(res.status).toBe(409)
    expect(errorCode(res)).toBe('conflict')
    expect((await get(s, path))!).toEqual(before)
    expect(await pinsOf(s, blocked.userId)).toEqual([])
  })

  it('[SUB9] a subscription grant to someone Denied ends Failed, naming the Denied, and grants nothing', async () => {
    const s = await boot()
    const admin = await signup(s.url)
    const space = await createSpace(s.url, admin.token)
    const blocked = await signup(s.url)
    const path = await grantRole(s.url, admin.token, space, blocked.userId, 'Viewer', true)
    await putSub(s, 'grant_denied', { TriggerType: 'Timer', FireAt: new Date(0).toISOString(), SubjectId: blocked.userId, ContinuationType: 'GrantSpaceAccess', TargetPath: space, Role: 'Admin', Pin: true, CreatedBy: admin.userId })
    const sub = await waitFor(async () => {
      const n = await subscription(s, 'grant_denied')
      return n && n.content.Status !== 'Pending' ? n : null
    })
    expect(sub.content).toMatchObject({ Status: 'Failed', LastError: expect.stringContaining('explicitly Denied') })
    expect((await get(s, path))?.content).toMatchObject({ Role: 'Viewer', Denied: true })
    expect(await pinsOf(s, blocked.userId)).toEqual([])
  })

  it('[SUB12] inviting yourself (twice) adds no pin, and a pin is never listed twice', async () => {
    const s = await boot()
    const admin = await signup(s.url)
    const space = await createSpace(s.url, admin.token)
    for (let i = 0; i < 2; i++) {
      const res = await api(s.url, admin.token).post(`/api/spaces/${space}/invites`, { email: admin.email, role: 'Viewer', pin: true })
      expect(res.status).toBe(200)
      expect(res.body).toMatchObject({ status: 'Granted', userId: admin.userId })
    }
    expect(await pinsOf(s, admin.userId)).toEqual([])
    // Still Admin: inviting yourself as Viewer lowers nothing.
    expect((await get(s, assignment(space, admin.userId)))?.content.Role).toBe('Admin')
    // Someone else invited twice with a pin has it once.
    const other = await signup(s.url)
    for (let i = 0; i < 2; i++) await api(s.url, admin.token).post(`/api/spaces/${space}/invites`, { email: other.email, role: 'Viewer', pin: true })
    expect(await pinsOf(s, other.userId)).toEqual([space])
  })
})
