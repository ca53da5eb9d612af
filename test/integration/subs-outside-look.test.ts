import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { randomUUID } from 'node:crypto'
import { SYSTEM, legacyInviteSubscriptionIds, spaceInviteSubscriptionId, subscriptionPath, type NodePath } from '../../shared/index.js'
import {
  api,
  createSpace,
  signup,
  startTestServer,
  uniqueEmail,
  waitFor,
  type TestServer,
  type TestUser,
} from '../helpers/index.js'

/**
 * Outside look at the event-subscriptions engine: trust boundaries and crafted input.
 * Each test here failed on the code it was written against; it passes once the defect is fixed.
 */
describe('subscriptions: outside look', () => {
  let ts: TestServer
  let victim: TestUser
  let attacker: TestUser

  const node = (path: string) => ts.server.nodes.get(SYSTEM, path as NodePath)
  const invite = (token: string, s: string, body: unknown) => api(ts.url, token).post<Record<string, unknown>>(`/api/spaces/${s}/invites`, body)
  const members = (token: string, s: string) => api(ts.url, token).get<{ invites: { email: string | null; subscriptionId: string; status: string }[] }>(`/api/spaces/${s}/members`)

  beforeAll(async () => {
    ts = await startTestServer()
    victim = await signup(ts.url)
    attacker = await signup(ts.url)
  })
  afterAll(async () => {
    await ts?.cleanup()
  })

  it('[SUB15] an invite to one space is not taken over by an invite to another space whose name slugs the same (case)', async () => {
    const n = randomUUID().slice(0, 8)
    const victimSpace = await createSpace(ts.url, victim.token, `Team${n}`)
    // Any signed-in user may create a space at a free top-level path.
    const attackerSpace = await createSpace(ts.url, attacker.token, `team${n}`)
    const email = uniqueEmail('invitee')
    expect((await invite(victim.token, victimSpace, { email, role: 'Editor' })).status).toBe(201)
    expect((await invite(attacker.token, attackerSpace, { email, role: 'Viewer' })).status).toBe(201)
    // The victim's pending invite is still listed on the victim's space...
    const listed = await members(victim.token, victimSpace)
    expect(listed.body.invites.map((i) => i.email)).toContain(email)
    // ...and the invitee, on sign-up, gets the role the victim's Admin gave.
    const user = await signup(ts.url, email)
    // (The other space's Admin invited them too: that grant, on that space, is theirs to give.)
    const grant = await waitFor(async () => node(`${victimSpace}/_Access/${user.userId}_Access`), { description: 'the grant on the first space' })
    expect(grant.content.Role).toBe('Editor')
  })

  it('[SUB15] two invitees whose addresses differ only in punctuation each keep their own invite', async () => {
    const space = await createSpace(ts.url, victim.token)
    const n = randomUUID().slice(0, 8)
    const first = `ann.lee-${n}@test.weft.example`
    const second = `ann_lee-${n}@test.weft.example`
    expect((await invite(victim.token, space, { email: first, role: 'Editor' })).status).toBe(201)
    expect((await invite(victim.token, space, { email: second, role: 'Viewer' })).status).toBe(201)
    const listed = await members(victim.token, space)
    expect(listed.body.invites.map((i) => i.email).sort()).toEqual([first, second].sort())
  })

  it('[SUB15] an Admin of a space with a long (valid) name can invite by email (the subscription id is not refused as too long a name)', async () => {
    // A valid top-level path of 480 characters (paths take 1,024); the subscription id is longer still.
    const name = `s${randomUUID().replace(/-/g, '')}`.padEnd(480, 'x')
    const space = await createSpace(ts.url, victim.token, name)
    const res = await invite(victim.token, space, { email: uniqueEmail('long'), role: 'Viewer' })
    expect(res.status, JSON.stringify(res.body)).toBe(201)
  })

  it('[SUB15] an invite made before the hashed ids is still listed, upserted by a re-invite and revoked by its id', async () => {
    const space = await createSpace(ts.url, victim.token)
    const email = uniqueEmail('before')
    const old = legacyInviteSubscriptionIds(email, space).space
    // As the invite code wrote it then.
    if (!(await node('Admin/EventSubscription'))) await ts.server.nodes.put(SYSTEM, 'Admin/EventSubscription' as NodePath, { nodeType: 'Document', content: {} })
    await ts.server.nodes.put(SYSTEM, subscriptionPath(old) as NodePath, { nodeType: 'EventSubscription', content: {
      Id: old, TriggerType: 'NodeChange', TriggerNodeType: 'User', TriggerKind: 'Created', MatchField: 'Email', MatchValue: email,
      ContinuationType: 'GrantSpaceAccess', TargetPath: space, Role: 'Viewer', Pin: true, Status: 'Pending', CreatedBy: victim.userId, CreatedAt: new Date().toISOString(),
    } })
    expect((await members(victim.token, space)).body.invites.map((i) => i.subscriptionId)).toEqual([old])
    const again = await invite(victim.token, space, { email, role: 'Editor' })
    expect(again.body).toMatchObject({ status: 'Invited', subscriptionId: old })
    expect((await node(subscriptionPath(old)))?.content.Role).toBe('Editor')
    expect(await node(subscriptionPath(spaceInviteSubscriptionId(email, space)))).toBeNull()
    expect((await api(ts.url, victim.token).request('DELETE', `/api/spaces/${space}/invites/${old}`)).status).toBe(200)
    expect((await node(subscriptionPath(old)))?.content.Status).toBe('Cancelled')
  })

  it('[SUB15] an invite never merges into a subscription at its id that is another invite', async () => {
    const space = await createSpace(ts.url, victim.token)
    const email = uniqueEmail('taken')
    const id = spaceInviteSubscriptionId(email, space)
    const other = { Id: id, TriggerType: 'Timer', FireAt: new Date(Date.now() + 3_600_000).toISOString(), ContinuationType: 'PostThreadMessage', TargetPath: 'elsewhere', Status: 'Pending' }
    if (!(await node('Admin/EventSubscription'))) await ts.server.nodes.put(SYSTEM, 'Admin/EventSubscription' as NodePath, { nodeType: 'Document', content: {} })
    await ts.server.nodes.put(SYSTEM, subscriptionPath(id) as NodePath, { nodeType: 'EventSubscription', content: other })
    const res = await invite(victim.token, space, { email, role: 'Editor' })
    expect(res.status).toBe(409)
    expect((await node(subscriptionPath(id)))?.content).toEqual(other)
  })

  // ------------------------------------------------------------------------------------------
  // An Admin of the Admin partition (an operator) may write EventSubscription nodes. That is all
  // they are Admin of: the engine must not act beyond what the writer may do elsewhere.

  async function operator(): Promise<TestUser> {
    const op = await signup(ts.url)
    await ts.server.nodes.put(SYSTEM, `Admin/_Access/${op.userId}_Access` as NodePath, { nodeType: 'AccessAssignment', content: { Subject: op.userId, Role: 'Admin' } }, 'system')
    // The parent is a plain node the operator may create (Create on Admin) when no invite made it yet.
    const parent = await api(ts.url, op.token).getNode('Admin/EventSubscription')
    if (parent.status === 404) expect((await api(ts.url, op.token).putNode('Admin/EventSubscription', 'Document', {})).status).toBe(201)
    return op
  }
  /** Writes a Timer subscription due now over HTTP as `who`; answers the HTTP status. */
  async function putTimerSub(who: TestUser, id: string, content: Record<string, unknown>): Promise<number> {
    const res = await api(ts.url, who.token).putNode(subscriptionPath(id), 'EventSubscription', {
      Id: id, Status: 'Pending', TriggerType: 'Timer', FireAt: new Date(Date.now() - 1000).toISOString(), CreatedAt: new Date().toISOString(), ...content,
    } as never)
    return res.status
  }
  /** The subscription's end, or null when the write was refused (nothing to settle). */
  async function settledOrRefused(status: number, id: string): Promise<string | null> {
    if (status >= 400) return null
    const n = await waitFor(async () => {
      const cur = await node(subscriptionPath(id))
      return cur && cur.content.Status !== 'Pending' ? cur : null
    }, { description: `${id} settles` })
    return String(n.content.Status)
  }

  it('[SUB13] an operator cannot make the engine grant them Admin on someone else\'s space by leaving CreatedBy out', async () => {
    const op = await operator()
    const space = await createSpace(ts.url, victim.token)
    expect((await api(ts.url, op.token).getNode(space)).status).toBe(403)
    const id = `outside_nocreator_${randomUUID().slice(0, 8)}`
    const status = await putTimerSub(op, id, { ContinuationType: 'GrantSpaceAccess', TargetPath: space, Role: 'Admin', SubjectId: op.userId, Pin: false })
    await settledOrRefused(status, id)
    expect(await node(`${space}/_Access/${op.userId}_Access`)).toBeNull()
    expect((await api(ts.url, op.token).getNode(space)).status).not.toBe(200)
  })

  it('[SUB13] a grant or a group add refused for want of the right says the same whether its target exists or not (the right is checked first)', async () => {
    const op = await operator()
    const space = await createSpace(ts.url, victim.token)
    const group = `${space}/crew`
    expect((await api(ts.url, victim.token).putNode(group, 'Group', {})).status).toBe(201)
    const errorOf = async (continuation: string, target: string): Promise<string> => {
      const id = `outside_exists_${randomUUID().slice(0, 8)}`
      const status = await putTimerSub(op, id, { ContinuationType: continuation, TargetPath: target, Role: 'Viewer', SubjectId: op.userId, Pin: false })
      expect(await settledOrRefused(status, id)).toBe('Failed')
      return String((await node(subscriptionPath(id)))!.content.LastError).replaceAll(target, '{target}')
    }
    for (const [continuation, there] of [['GrantSpaceAccess', space], ['AddToGroup', group]] as const) {
      const missing = `${there}-missing-${randomUUID().slice(0, 8)}`
      const [a, b] = [await errorOf(continuation, there), await errorOf(continuation, missing)]
      expect(a, continuation).toMatch(/no longer Admin of \{target\}/)
      expect(b, continuation).toBe(a)
    }
  })

  it('[SUB13] an operator cannot make the engine grant them Admin on someone else\'s space by naming its Admin as CreatedBy', async () => {
    const op = await operator()
    const space = await createSpace(ts.url, victim.token)
    const id = `outside_forged_${randomUUID().slice(0, 8)}`
    const status = await putTimerSub(op, id, { ContinuationType: 'GrantSpaceAccess', TargetPath: space, Role: 'Admin', SubjectId: op.userId, Pin: false, CreatedBy: victim.userId })
    await settledOrRefused(status, id)
    expect(await node(`${space}/_Access/${op.userId}_Access`)).toBeNull()
  })

  it('[SUB13] PostThreadMessage does not write into a thread its creator may not even read', async () => {
    const op = await operator()
    const space = await createSpace(ts.url, victim.token)
    const thread = `${space}/private`
    const tr = await api(ts.url, victim.token).putNode(thread, 'Thread', {}); expect(tr.status, JSON.stringify(tr.body)).toBe(201)
    expect((await api(ts.url, op.token).getNode(thread)).status).not.toBe(200)
    const id = `outside_post_${randomUUID().slice(0, 8)}`
    const status = await putTimerSub(op, id, { ContinuationType: 'PostThreadMessage', TargetPath: thread, Text: 'Ignore previous instructions.', CreatedBy: op.userId })
    await settledOrRefused(status, id)
    expect(await node(`${thread}/_t.${id}`)).toBeNull()
    expect((await node(thread))?.content.Messages ?? []).toEqual([])
  })

  it('[SUB13] DeliverToNode does not write a delivery onto a node its creator may not write', async () => {
    const op = await operator()
    const space = await createSpace(ts.url, victim.token)
    const doc = `${space}/doc`
    expect((await api(ts.url, victim.token).putNode(doc, 'Document', { Title: 'mine' })).status).toBe(201)
    const id = `outside_deliver_${randomUUID().slice(0, 8)}`
    const status = await putTimerSub(op, id, { ContinuationType: 'DeliverToNode', DeliverTo: doc, CreatedBy: op.userId })
    await settledOrRefused(status, id)
    expect((await node(doc))?.content).toEqual({ Title: 'mine' })
  })

  it('[SUB13] PublishSocialPost without CreatedBy does not publish as system into someone else\'s space', async () => {
    const op = await operator()
    const space = await createSpace(ts.url, victim.token)
    const id = `outside_social_${randomUUID().slice(0, 8)}`
    const status = await putTimerSub(op, id, { ContinuationType: 'PublishSocialPost', TargetPath: space, Text: 'spam' })
    await settledOrRefused(status, id)
    expect(await node(`${space}/post_${id}`)).toBeNull()
  })

  it('[SUB13] a person\'s write of a subscription records them as its CreatedBy: create, replace and patch', async () => {
    const op = await operator()
    const id = `outside_stamp_${randomUUID().slice(0, 8)}`
    const path = subscriptionPath(id)
    const later = new Date(Date.now() + 3_600_000).toISOString()
    const fields = { Id: id, Status: 'Pending', TriggerType: 'Timer', FireAt: later, ContinuationType: 'PostThreadMessage', TargetPath: 'nowhere' }
    const http = api(ts.url, op.token)
    expect((await http.putNode(path, 'EventSubscription', { ...fields, CreatedBy: victim.userId })).status).toBe(201)
    expect((await node(path))?.content.CreatedBy).toBe(op.userId)
    // The system's own write names the user it acts for; a person's next write names that person again.
    await ts.server.nodes.patch(SYSTEM, path as NodePath, { CreatedBy: victim.userId })
    expect((await http.putNode(path, 'EventSubscription', { ...fields, Text: 'replaced' })).status).toBe(200)
    expect((await node(path))?.content).toMatchObject({ CreatedBy: op.userId, Text: 'replaced' })
    await ts.server.nodes.patch(SYSTEM, path as NodePath, { CreatedBy: null })
    expect((await http.patchNode(path, { Text: 'patched' })).status).toBe(200)
    expect((await node(path))?.content).toMatchObject({ CreatedBy: op.userId, Text: 'patched' })
    expect((await http.patchNode(path, { CreatedBy: victim.userId })).status).toBe(200)
    expect((await node(path))?.content.CreatedBy).toBe(op.userId)
  })

  it('[SUB14] an Editor of the Admin partition cannot launder a subscription through a legacy Admin/ScheduledAction node', async () => {
    const editor = await signup(ts.url)
    await ts.server.nodes.put(SYSTEM, `Admin/_Access/${editor.userId}_Access` as NodePath, { nodeType: 'AccessAssignment', content: { Subject: editor.userId, Role: 'Editor' } }, 'system')
    const http = api(ts.url, editor.token)
    const space = await createSpace(ts.url, victim.token)
    const fields = {
      TriggerType: 'Timer', FireAt: new Date(Date.now() - 1000).toISOString(), ContinuationType: 'GrantSpaceAccess',
      TargetPath: space, Role: 'Admin', SubjectId: editor.userId, Pin: false, CreatedBy: victim.userId,
    }
    // An Editor may not write an EventSubscription (system and Admins only)...
    if (!(await node('Admin/EventSubscription'))) await ts.server.nodes.put(SYSTEM, 'Admin/EventSubscription' as NodePath, { nodeType: 'Document', content: {} })
    const id = `outside_legacy_${randomUUID().slice(0, 8)}`
    expect((await http.putNode(subscriptionPath(id), 'EventSubscription', { Id: id, ...fields })).status).toBe(403)
    // ...nor get one written for them by the legacy migration.
    if ((await http.getNode('Admin/ScheduledAction')).status === 404) expect((await http.putNode('Admin/ScheduledAction', 'Document', {})).status).toBe(201)
    const put = await http.putNode(`Admin/ScheduledAction/${id}`, 'Document', fields)
    if (put.status < 300) {
      await waitFor(async () => (await node(`Admin/ScheduledAction/${id}`)) === null, { description: 'legacy node handled' })
      const sub = await node(subscriptionPath(id))
      if (sub) await waitFor(async () => (await node(subscriptionPath(id)))?.content.Status !== 'Pending', { description: 'settled' })
    }
    expect(await node(`${space}/_Access/${editor.userId}_Access`)).toBeNull()
  })

  it('[SUB13] an invite made by a system@… account is re-checked like any other: their lost Admin stops it', async () => {
    // Fresh server: user ids come from the email's local part, so the first system@… account was
    // "system" and passed for the server; [AUTH6] reserves that id, and [SUB13] never reads it so.
    const fresh = await startTestServer()
    try {
      const owner = await signup(fresh.url)
      const sys = await signup(fresh.url, `system@${randomUUID().slice(0, 8)}.weft.example`)
      const space = await createSpace(fresh.url, owner.token)
      const assignment = `${space}/_Access/${sys.userId}_Access`
      expect((await api(fresh.url, owner.token).putNode(assignment, 'AccessAssignment', { Subject: sys.userId, Role: 'Admin' })).status).toBe(201)
      const email = uniqueEmail('via-system')
      const invited = await api(fresh.url, sys.token).post<{ subscriptionId: string }>(`/api/spaces/${space}/invites`, { email, role: 'Admin' })
      expect(invited.status).toBe(201)
      // The owner takes Admin away from the inviter before the invitee signs up.
      expect((await api(fresh.url, owner.token).deleteNode(assignment)).status).toBe(204)
      expect((await api(fresh.url, sys.token).getNode(space)).status).toBe(403)
      const invitee = await signup(fresh.url, email)
      const sub = await waitFor(async () => {
        const cur = await fresh.server.nodes.get(SYSTEM, subscriptionPath(invited.body.subscriptionId) as NodePath)
        return cur && cur.content.Status !== 'Pending' ? cur : null
      }, { description: 'invite settles' })
      expect(sys.userId).not.toBe('system')
      expect(sub.content.Status).toBe('Failed')
      expect(await fresh.server.nodes.get(SYSTEM, `${space}/_Access/${invitee.userId}_Access` as NodePath)).toBeNull()
    } finally {
      await fresh.cleanup()
    }
  })

  it('[SUB9] a group invite refused by an explicit Denied adds no membership either (as the direct invite does)', async () => {
    const space = await createSpace(ts.url, victim.token)
    const group = `${space}/crew`
    expect((await api(ts.url, victim.token).putNode(group, 'Group', {})).status).toBe(201)
    // User ids come from the email's local part: the Admin can say no to this person ahead of time.
    const local = `denied${randomUUID().slice(0, 8)}`
    const email = `${local}@test.weft.example`
    expect((await api(ts.url, victim.token).putNode(`${group}/_Access/${local}_Access`, 'AccessAssignment', { Subject: local, Role: 'Viewer', Denied: true })).status).toBe(201)
    const res = await api(ts.url, victim.token).post<{ results: { subscriptionId: string }[] }>(`/api/groups/${group}/invites`, { email, role: 'Viewer' })
    expect(res.status).toBe(200)
    const id = res.body.results[0]!.subscriptionId
    const user = await signup(ts.url, email)
    expect(user.userId).toBe(local)
    const sub = await waitFor(async () => {
      const cur = await node(subscriptionPath(id))
      return cur && cur.content.Status !== 'Pending' ? cur : null
    }, { description: 'invite settles' })
    expect(sub.content.Status).toBe('Failed')
    expect(await node(`${group}/${user.userId}_Membership`)).toBeNull()
  })
})
