import { afterEach, describe, expect, it } from 'vitest'
import { filter } from 'rxjs'
import { SYSTEM, subscriptionPath, type JsonObject, type MeshNode, type NodePath } from '../../shared/index.js'
import { startServer, type RunningServer } from '../../sync-server/server.js'
import type { EngineFactory } from '../../sync-server/engines/index.js'
import { createSubscriptionsEngine, type SubscriptionsEngine } from '../../sync-server/engines/subscriptions/index.js'
import { createSpace, makeTempDir, removeDir, signup, uniqueEmail, waitFor, type TestUser, TEST_SCRYPT_N } from '../helpers/index.js'

/**
 * The runner against a real server and real SQLite files: live and reconcile paths, the three
 * triggers, the continuations, unknown values, legacy migration.
 */
const servers: RunningServer[] = []
const dirs: string[] = []

async function boot(dataDir: string, engines?: EngineFactory[]): Promise<RunningServer> {
  const s = await startServer({ port: 0, host: '127.0.0.1', passwordScryptN: TEST_SCRYPT_N, dataDir, logLevel: 'silent', ...(engines ? { engines } : {}) })
  servers.push(s)
  return s
}

async function freshDir(): Promise<string> {
  const d = await makeTempDir('weft-subs-')
  dirs.push(d)
  return d
}

afterEach(async () => {
  for (const s of servers.splice(0)) await s.close()
  for (const d of dirs.splice(0)) await removeDir(d)
})

function engineOf(s: RunningServer): SubscriptionsEngine {
  return s.engines.find((e) => e.name === 'subscriptions') as SubscriptionsEngine
}

async function putSub(s: RunningServer, id: string, content: JsonObject): Promise<void> {
  await s.nodes.put(SYSTEM, subscriptionPath(id) as NodePath, {
    nodeType: 'EventSubscription',
    content: { Id: id, Status: 'Pending', CreatedAt: new Date().toISOString(), ...content },
  })
}

const get = (s: RunningServer, path: string) => s.nodes.get(SYSTEM, path as NodePath)

async function settled(s: RunningServer, id: string): Promise<MeshNode> {
  return waitFor(async () => {
    const n = await get(s, subscriptionPath(id))
    return n && n.content.Status !== 'Pending' ? n : null
  }, { timeoutMs: 60_000, description: `subscription ${id} leaves Pending` })
}

function grantSub(email: string, space: string, extra: JsonObject = {}): JsonObject {
  return {
    TriggerType: 'NodeChange', TriggerNodeType: 'User', TriggerKind: 'Created', MatchField: 'email', MatchValue: email,
    ContinuationType: 'GrantSpaceAccess', TargetPath: space, Role: 'Editor', Pin: true, ...extra,
  }
}

/**
 * A server whose runner never sees a User being created on its change feed, with an Admin's
 * pending invite (subscription `id`) of a fresh email to their space.
 */
async function inviteWithSignupsDropped(id: string): Promise<{ s: RunningServer; space: string; email: string }> {
  const dropSignups = createSubscriptionsEngine({
    changes$: (ctx) => ctx.nodes.changes$.pipe(filter((c) => !(c.nodeType === 'User' && c.kind === 'Created'))),
    reconcileIntervalMs: null,
  })
  const s = await boot(await freshDir(), [dropSignups])
  const admin = await signup(s.url)
  const space = await createSpace(s.url, admin.token)
  const email = uniqueEmail(id)
  await putSub(s, id, grantSub(email, space, { CreatedBy: admin.userId }))
  return { s, space, email }
}

describe('[SUB-R] event subscription runner', () => {
  it('[SUB-R1] the change feed drops the sign-up → the reconcile path still fires it', async () => {
    const { s, space, email } = await inviteWithSignupsDropped('dropped')
    await engineOf(s).runner.idle()
    const user = await signup(s.url, email)
    await engineOf(s).runner.idle()
    expect((await get(s, subscriptionPath('dropped')))?.content.Status).toBe('Pending')
    // The safety net (periodic in production) re-evaluates against current state.
    await engineOf(s).runner.reconcile()
    expect((await settled(s, 'dropped')).content.Status).toBe('Fired')
    expect((await get(s, `${space}/_Access/${user.userId}_Access`))?.content.Role).toBe('Editor')
  })

  it('[SUB-R1b] a dropped event is replayed from the change log as soon as the feed shows the gap', async () => {
    const { s, space, email } = await inviteWithSignupsDropped('gap')
    const user = await signup(s.url, email)
    // Any later change reveals the gap in versions; no reconcile is asked for.
    await s.nodes.put(SYSTEM, `${space}/after` as NodePath, { nodeType: 'Document', content: {} })
    expect((await settled(s, 'gap')).content.Status).toBe('Fired')
    expect((await get(s, `${space}/_Access/${user.userId}_Access`))?.content.Role).toBe('Editor')
  })

  it('[SUB-R2] the sign-up happened while the runner was down → fires at boot', async () => {
    const dir = await freshDir()
    const dropAll = createSubscriptionsEngine({ changes$: (ctx) => ctx.nodes.changes$.pipe(filter(() => false)), reconcileIntervalMs: null })
    const s1 = await boot(dir, [dropAll])
    const admin = await signup(s1.url)
    const space = await createSpace(s1.url, admin.token)
    const email = uniqueEmail('down')
    await putSub(s1, 'down', grantSub(email, space))
    const user = await signup(s1.url, email)
    await s1.close()
    const s2 = await boot(dir)
    // Engine.start() resolved (so /healthz is ok) only after the boot reconcile fired it.
    expect((await get(s2, subscriptionPath('down')))?.content.Status).toBe('Fired')
    expect((await get(s2, user.userId))?.content.PinnedPaths).toEqual([space])
  })

  it('[SUB-R3] user and subscription both exist before boot → fires exactly once with the feed live', async () => {
    const dir = await freshDir()
    const s1 = await boot(dir, [])
    const admin = await signup(s1.url)
    const space = await createSpace(s1.url, admin.token)
    const email = uniqueEmail('both')
    const user = await signup(s1.url, email)
    await putSub(s1, 'both', grantSub(email, space, { CreatedBy: admin.userId }))
    const before = await s1.nodes.changesSince(SYSTEM, 0, 10_000)
    const since = before[before.length - 1]?.version ?? 0
    await s1.close()

    const s2 = await boot(dir)
    // Live events after boot must not fire it again: touch the user and re-save the subscription.
    await s2.nodes.patch(SYSTEM, user.userId as NodePath, { FullName: 'Renamed' })
    await signup(s2.url, uniqueEmail('other'))
    await engineOf(s2).runner.reconcile()
    await engineOf(s2).runner.idle()
    const changes = (await s2.nodes.changesSince(SYSTEM, since, 10_000)).filter((c) => c.version > since)
    const subWrites = changes.filter((c) => c.path === subscriptionPath('both'))
    const grantWrites = changes.filter((c) => c.path === `${space}/_Access/${user.userId}_Access`)
    const pinWrites = changes.filter((c) => c.path === user.userId)
    expect(subWrites.map((c) => c.kind)).toEqual(['Updated'])
    expect(grantWrites.map((c) => c.kind)).toEqual(['Created'])
    expect(pinWrites.length).toBe(2) // the pin, then the rename
    expect((await get(s2, subscriptionPath('both')))?.content.Status).toBe('Fired')
  })

  it('[SUB-R4] a Timer 1 s in the past at boot fires; a near one fires live', async () => {
    const dir = await freshDir()
    const s1 = await boot(dir, [])
    const admin = await signup(s1.url)
    const space = await createSpace(s1.url, admin.token)
    const trial: TestUser = await signup(s1.url)
    await putSub(s1, 'past', { TriggerType: 'Timer', FireAt: new Date(Date.now() - 1000).toISOString(), SubjectId: trial.userId, ContinuationType: 'GrantSpaceAccess', TargetPath: space, Role: 'Viewer' })
    await s1.close()
    const s2 = await boot(dir)
    expect((await get(s2, subscriptionPath('past')))?.content.Status).toBe('Fired')
    expect((await get(s2, `${space}/_Access/${trial.userId}_Access`))?.content.Role).toBe('Viewer')

    const other = await signup(s2.url)
    await putSub(s2, 'soon', { TriggerType: 'Timer', FireAt: new Date(Date.now() + 300).toISOString(), SubjectId: other.userId, ContinuationType: 'GrantSpaceAccess', TargetPath: space, Role: 'Commenter' })
    await engineOf(s2).runner.idle()
    expect((await get(s2, subscriptionPath('soon')))?.content.Status).toBe('Pending')
    const fired = await settled(s2, 'soon')
    expect(fired.content.Status).toBe('Fired')
    expect(Date.parse(fired.content.FiredAt as string)).toBeGreaterThanOrEqual(Date.parse(fired.content.FireAt as string))
  })

  // [SUB-R4b] (warm-up warmAheadMs before FireAt, firing at FireAt) is on virtual time: test/sim/subscriptions.sim.test.ts.

  it('[SUB-R5] NodeStatus: Running → Idle fires PostThreadMessage once; deleting the watched node ends Failed', async () => {
    const dir = await freshDir()
    const s = await boot(dir)
    const admin = await signup(s.url)
    const space = await createSpace(s.url, admin.token)
    await s.nodes.put(SYSTEM, `${space}/parent` as NodePath, { nodeType: 'Thread', content: { Messages: [] } })
    await s.nodes.put(SYSTEM, `${space}/child` as NodePath, { nodeType: 'Document', content: { Status: 'Idle' } })
    await s.nodes.put(SYSTEM, `${space}/doomed` as NodePath, { nodeType: 'Document', content: { Status: 'Running' } })
    const watch = (watched: string): JsonObject => ({
      TriggerType: 'NodeStatus', WatchPath: watched, StatusField: 'status', RestingValues: ['Idle', 'Cancelled', 'Done'], RequireActiveFirst: true,
      ContinuationType: 'PostThreadMessage', TargetPath: `${space}/parent`,
    })
    await putSub(s, 'delegate', watch(`${space}/child`))
    await putSub(s, 'doomed', watch(`${space}/doomed`))
    // An initial, replayed resting value of a node that never ran does not fire.
    await engineOf(s).runner.idle()
    expect((await get(s, subscriptionPath('delegate')))?.content.Status).toBe('Pending')
    await s.nodes.patch(SYSTEM, `${space}/child` as NodePath, { Status: 'Executing' })
    await waitFor(async () => (await get(s, subscriptionPath('delegate')))?.content.ObservedActiveAt)
    await s.nodes.patch(SYSTEM, `${space}/child` as NodePath, { Status: 'Idle' })
    expect((await settled(s, 'delegate')).content.Status).toBe('Fired')
    const thread = await get(s, `${space}/parent`)
    expect(thread?.content.Messages).toEqual([`${space}/parent/_t.delegate`])
    expect((await get(s, `${space}/parent/_t.delegate`))?.content).toEqual(expect.objectContaining({ Role: 'tool', SubscriptionId: 'delegate', Text: expect.stringContaining(`${space}/child`) }))

    await s.nodes.delete(SYSTEM, `${space}/doomed` as NodePath)
    const failed = await settled(s, 'doomed')
    expect(failed.content.Status).toBe('Failed')
    expect(failed.content.LastError).toContain(`${space}/doomed was deleted`)
  })

  it('[SUB-R6] a watched node that came to rest during downtime fires at boot', async () => {
    const dir = await freshDir()
    const s1 = await boot(dir)
    const admin = await signup(s1.url)
    const space = await createSpace(s1.url, admin.token)
    await s1.nodes.put(SYSTEM, `${space}/t` as NodePath, { nodeType: 'Thread', content: { Messages: [] } })
    await s1.nodes.put(SYSTEM, `${space}/w` as NodePath, { nodeType: 'Document', content: { Status: 'Executing' } })
    await putSub(s1, 'downtime', { TriggerType: 'NodeStatus', WatchPath: `${space}/w`, RestingValues: ['Idle'], RequireActiveFirst: true, ContinuationType: 'PostThreadMessage', TargetPath: `${space}/t` })
    await waitFor(async () => (await get(s1, subscriptionPath('downtime')))?.content.ObservedActiveAt)
    await s1.close()
    const s0 = await boot(dir, [])
    await s0.nodes.patch(SYSTEM, `${space}/w` as NodePath, { Status: 'Idle' })
    await s0.close()
    const s2 = await boot(dir)
    expect((await settled(s2, 'downtime')).content.Status).toBe('Fired')
    expect((await get(s2, `${space}/t`))?.content.Messages).toHaveLength(1)
  })

  it('[SUB-R7] unknown continuation or trigger values end Failed by name and survive the round trip', async () => {
    const dir = await freshDir()
    const s = await boot(dir)
    const past = new Date(Date.now() - 1000).toISOString()
    await putSub(s, 'teleport', { TriggerType: 'Timer', FireAt: past, ContinuationType: 'Teleport', Extra: { Kept: true } })
    await putSub(s, 'lunar', { TriggerType: 'Lunar', ContinuationType: 'GrantSpaceAccess' })
    const t = await settled(s, 'teleport')
    expect(t.content).toMatchObject({ Status: 'Failed', ContinuationType: 'Teleport', Extra: { Kept: true } })
    expect(t.content.LastError).toContain('EventContinuationType "Teleport"')
    const l = await settled(s, 'lunar')
    expect(l.content).toMatchObject({ Status: 'Failed', TriggerType: 'Lunar' })
    expect(l.content.LastError).toContain('EventTriggerType "Lunar"')
  })

  it('[SUB-R8] DeliverToNode: the TierInvite receiver re-checks the inviter; failures are named', async () => {
    const dir = await freshDir()
    const s = await boot(dir)
    const admin = await signup(s.url)
    const space = await createSpace(s.url, admin.token)
    const notAdmin = await signup(s.url)
    const good = uniqueEmail('tier')
    const bad = uniqueEmail('tier-bad')
    // [SUB13] A delivery is a write made for the inviter: the TierInvites are in the space, where
    // both may update them; only the Admin may grant.
    const tiers = `${space}/tiers`
    await s.nodes.put(SYSTEM, tiers as NodePath, { nodeType: 'Document', content: {} })
    await s.nodes.put(SYSTEM, `${space}/_Access/${notAdmin.userId}_Access` as NodePath, { nodeType: 'AccessAssignment', content: { Subject: notAdmin.userId, Role: 'Editor' } })
    await s.nodes.put(SYSTEM, 'Admin/TierInvites' as NodePath, { nodeType: 'Document', content: {} })
    for (const [slugged, email, by] of [['good', good, admin.userId], ['bad', bad, notAdmin.userId]] as const) {
      await s.nodes.put(SYSTEM, `${tiers}/${slugged}` as NodePath, { nodeType: 'TierInvite', content: { Space: space, Tier: 'Commenter', Email: email } })
      await putSub(s, `tier_${slugged}`, {
        TriggerType: 'NodeChange', TriggerNodeType: 'User', MatchField: 'Email', MatchValue: email,
        ContinuationType: 'DeliverToNode', DeliverTo: `${tiers}/${slugged}`, CreatedBy: by,
      })
    }
    await putSub(s, 'nowhere', { TriggerType: 'Timer', FireAt: new Date(0).toISOString(), ContinuationType: 'DeliverToNode' })
    await putSub(s, 'missing', { TriggerType: 'Timer', FireAt: new Date(0).toISOString(), ContinuationType: 'DeliverToNode', DeliverTo: 'Admin/TierInvites/none' })

    const u1 = await signup(s.url, good)
    const u2 = await signup(s.url, bad)
    expect((await settled(s, 'tier_good')).content.Status).toBe('Fired')
    const granted = await waitFor(async () => {
      const n = await get(s, `${tiers}/good`)
      return n?.content.Status ? n : null
    })
    expect(granted.content).toMatchObject({ Status: 'Granted', GrantedTo: u1.userId, EventDelivery: { SubscriptionId: 'tier_good', SubjectId: u1.userId, CreatedBy: admin.userId } })
    expect((await get(s, `${space}/_Access/${u1.userId}_Access`))?.content.Role).toBe('Commenter')
    const refused = await waitFor(async () => {
      const n = await get(s, `${tiers}/bad`)
      return n?.content.Status ? n : null
    })
    expect(refused.content).toMatchObject({ Status: 'Refused', Reason: expect.stringContaining(`${notAdmin.userId} is no longer Admin of ${space}`) })
    expect(await get(s, `${space}/_Access/${u2.userId}_Access`)).toBeNull()

    expect((await settled(s, 'nowhere')).content.LastError).toContain('DeliverToNode needs DeliverTo')
    expect((await settled(s, 'missing')).content.LastError).toContain('DeliverTo node Admin/TierInvites/none does not exist')
  })

  it('[SUB-R9] PublishSocialPost is run by its module handler, idempotently', async () => {
    const dir = await freshDir()
    const s = await boot(dir)
    const admin = await signup(s.url)
    const space = await createSpace(s.url, admin.token)
    await putSub(s, 'post1', { TriggerType: 'Timer', FireAt: new Date(Date.now() - 10).toISOString(), ContinuationType: 'PublishSocialPost', TargetPath: space, Text: 'Hello', CreatedBy: admin.userId })
    expect((await settled(s, 'post1')).content.Status).toBe('Fired')
    expect((await get(s, `${space}/post_post1`))?.content).toMatchObject({ Text: 'Hello', Author: admin.userId, SubscriptionId: 'post1' })
  })

  it('[SUB-R10] legacy Admin/ScheduledAction nodes migrate at boot and still grant', async () => {
    const dir = await freshDir()
    const s1 = await boot(dir, [])
    const admin = await signup(s1.url)
    const space = await createSpace(s1.url, admin.token)
    const email = uniqueEmail('legacy')
    await s1.nodes.put(SYSTEM, 'Admin/ScheduledAction' as NodePath, { nodeType: 'Document', content: {} })
    await s1.nodes.put(SYSTEM, 'Admin/ScheduledAction/old1' as NodePath, {
      nodeType: 'ScheduledAction',
      content: { TriggerNodeType: 'User', MatchField: 'email', MatchValue: email, ContinuationType: 'GrantSpaceAccess', TargetPath: space, Role: 'Editor', Pin: true },
    })
    await s1.close()
    const s2 = await boot(dir)
    expect(await get(s2, 'Admin/ScheduledAction/old1')).toBeNull()
    expect((await get(s2, subscriptionPath('old1')))?.content).toMatchObject({ Id: 'old1', TriggerType: 'NodeChange', Status: 'Pending', MatchValue: email })
    const user = await signup(s2.url, email)
    expect((await settled(s2, 'old1')).content.Status).toBe('Fired')
    expect((await get(s2, `${space}/_Access/${user.userId}_Access`))?.content.Role).toBe('Editor')
    // A legacy node written while running is migrated live too.
    await s2.nodes.put(SYSTEM, 'Admin/ScheduledAction/old2' as NodePath, { nodeType: 'ScheduledAction', content: { TriggerNodeType: 'User', MatchField: 'email', MatchValue: uniqueEmail(), TargetPath: space } })
    await waitFor(async () => (await get(s2, subscriptionPath('old2'))) && !(await get(s2, 'Admin/ScheduledAction/old2')))
  })

  it('[SUB-R11] a continuation type claimed twice is a start-up error naming both', async () => {
    const factory = createSubscriptionsEngine({
      modules: [
        { name: 'social', continuations: { PublishSocialPost: async () => {} } },
        { name: 'copycat', continuations: { PublishSocialPost: async () => {} } },
      ],
    })
    const dir = await freshDir()
    await expect(startServer({ port: 0, host: '127.0.0.1', passwordScryptN: TEST_SCRYPT_N, dataDir: dir, logLevel: 'silent', engines: [factory] })).rejects.toThrow(/PublishSocialPost.*social.*copycat/)
  })
})
