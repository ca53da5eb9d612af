import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import {
  SYSTEM,
  groupInviteSubscriptionId,
  invitationPath,
  spaceInviteSubscriptionId,
  subscriptionPath,
  type NodePath,
} from '../../shared/index.js'
import {
  api,
  createGroup,
  createSpace,
  errorCode,
  grantRole,
  signup,
  startTestServer,
  uniqueEmail,
  waitFor,
  type TestServer,
  type TestUser,
} from '../helpers/index.js'

/**
 * Invites by email through the HTTP API (event-subscriptions seed, "Trigger 1"), against a real
 * server with the subscriptions engine.
 */
describe('[SUB-INV] space and group invites', () => {
  let ts: TestServer
  let admin: TestUser
  let space: string

  const sub = (id: string) => ts.server.nodes.get(SYSTEM, subscriptionPath(id) as NodePath)
  const node = (path: string) => ts.server.nodes.get(SYSTEM, path as NodePath)
  const invite = (token: string, s: string, body: unknown) => api(ts.url, token).post<Record<string, unknown>>(`/api/spaces/${s}/invites`, body)

  beforeAll(async () => {
    ts = await startTestServer()
    admin = await signup(ts.url)
    space = await createSpace(ts.url, admin.token)
  })
  afterAll(async () => {
    await ts?.cleanup()
  })

  it('[SUB-INV1] invite an unknown email → Invited; on sign-up the grant and the pin land at once', async () => {
    const email = uniqueEmail('invitee')
    const res = await invite(admin.token, space, { email, role: 'Editor', pin: true })
    expect(res.status).toBe(201)
    const id = spaceInviteSubscriptionId(email, space)
    expect(res.body).toEqual({ email, status: 'Invited', subscriptionId: id })
    const s = await sub(id)
    expect(s?.content).toMatchObject({ Id: id, TriggerType: 'NodeChange', TriggerNodeType: 'User', TriggerKind: 'Created', MatchValue: email, ContinuationType: 'GrantSpaceAccess', TargetPath: space, Role: 'Editor', Pin: true, Status: 'Pending', CreatedBy: admin.userId })
    expect((await node(invitationPath(email)))?.content).toMatchObject({ Email: email, SubscriptionIds: [id] })
    // [SUB16] An address whose slug is the same (`.` for `_`) has a record of its own.
    const twin = email.replace(/^([^@]*?)-/, '$1.').replace('@', '.x@')
    const twin2 = twin.replace('.x@', '_x@')
    for (const e of [twin, twin2]) expect((await invite(admin.token, space, { email: e, role: 'Viewer' })).status).toBe(201)
    expect(invitationPath(twin)).not.toBe(invitationPath(twin2))
    expect((await node(invitationPath(twin)))?.content).toMatchObject({ Email: twin, SubscriptionIds: [spaceInviteSubscriptionId(twin, space)] })
    expect((await node(invitationPath(twin2)))?.content).toMatchObject({ Email: twin2, SubscriptionIds: [spaceInviteSubscriptionId(twin2, space)] })

    // "At once": on the sign-up's change, not a reconcile (minutes away); how fast is a bench figure.
    const user = await signup(ts.url, email)
    const assignment = await waitFor(() => node(`${space}/_Access/${user.userId}_Access`), { description: 'grant' })
    expect(assignment.content).toMatchObject({ Subject: user.userId, Role: 'Editor', Denied: false })
    // The grant lands first (so a pinned path is always readable), then the pin.
    const pinned = await waitFor(async () => {
      const me = await api(ts.url, user.token).getNode(user.userId)
      return (me.body.content.PinnedPaths as string[]).length > 0 ? me.body.content.PinnedPaths : null
    }, { description: 'pin' })
    expect(pinned).toEqual([space])
    // The invitee can now read the space with their own token.
    expect((await api(ts.url, user.token).getNode(space)).status).toBe(200)
    const fired = await waitFor(async () => ((await sub(id))?.content.Status === 'Fired' ? await sub(id) : null))
    expect(fired.content.FiredAt).toEqual(expect.any(String))
    expect(fired.content.SubjectId).toBe(user.userId)
  })

  it('[SUB-INV2] invite an existing user → Granted now, no subscription', async () => {
    const existing = await signup(ts.url)
    const res = await invite(admin.token, space, { email: existing.email.toUpperCase(), role: 'Viewer', pin: false })
    expect(res.status).toBe(200)
    expect(res.body).toMatchObject({ status: 'Granted', userId: existing.userId })
    expect((await node(`${space}/_Access/${existing.userId}_Access`))?.content).toMatchObject({ Role: 'Viewer' })
    expect(await sub(spaceInviteSubscriptionId(existing.email, space))).toBeNull()
  })

  it('[ACC40] an invite of someone with an account says what it did to their role: granted, already held, a higher role kept, or the caller', async () => {
    const bob = await signup(ts.url)
    const first = await invite(admin.token, space, { email: bob.email, role: 'Editor', pin: false })
    expect(first.body).toMatchObject({ status: 'Granted', userId: bob.userId, change: 'granted', role: 'Editor' })
    const again = await invite(admin.token, space, { email: bob.email, role: 'Editor', pin: false })
    expect(again.body).toMatchObject({ change: 'same_role', role: 'Editor' })
    // An invite never lowers a role: Bob stays Editor, and the answer says so.
    const lower = await invite(admin.token, space, { email: bob.email, role: 'Viewer', pin: false })
    expect(lower.body).toMatchObject({ status: 'Granted', change: 'higher_role', role: 'Editor' })
    expect((await node(`${space}/_Access/${bob.userId}_Access`))?.content).toMatchObject({ Role: 'Editor' })
    const higher = await invite(admin.token, space, { email: bob.email, role: 'Admin', pin: false })
    expect(higher.body).toMatchObject({ change: 'granted', role: 'Admin' })
    const self = await invite(admin.token, space, { email: admin.email, role: 'Viewer', pin: false })
    expect(self.body).toMatchObject({ status: 'Granted', userId: admin.userId, change: 'self' })
    expect((await node(`${space}/_Access/${admin.userId}_Access`))?.content).toMatchObject({ Role: 'Admin' })
  })

  it('[SUB-INV3] a re-invite upserts the same subscription (and revives a cancelled one)', async () => {
    const email = uniqueEmail('again')
    const a = await invite(admin.token, space, { email, role: 'Viewer' })
    const b = await invite(admin.token, space, { email: email.toUpperCase(), role: 'Editor' })
    expect(b.body.subscriptionId).toBe(a.body.subscriptionId)
    const all = await ts.server.nodes.query(SYSTEM, { parent: 'Admin/EventSubscription' as NodePath, where: { MatchValue: email }, limit: 100 })
    expect(all.map((n) => n.path)).toEqual([subscriptionPath(a.body.subscriptionId as string)])
    expect(all[0]?.content.Role).toBe('Editor')

    const revoke = await api(ts.url, admin.token).request('DELETE', `/api/spaces/${space}/invites/${a.body.subscriptionId}`)
    expect(revoke.status).toBe(200)
    expect((await sub(a.body.subscriptionId as string))?.content.Status).toBe('Cancelled')
    await invite(admin.token, space, { email })
    expect((await sub(a.body.subscriptionId as string))?.content.Status).toBe('Pending')
  })

  it('[SUB-INV4] revoke = Cancelled: the invitee signs up and gets nothing', async () => {
    const email = uniqueEmail('revoked')
    const { body } = await invite(admin.token, space, { email, role: 'Editor' })
    const del = await api(ts.url, admin.token).request('DELETE', `/api/spaces/${space}/invites/${body.subscriptionId}`)
    expect(del.body).toEqual({ status: 'Cancelled' })
    const again = await api(ts.url, admin.token).request('DELETE', `/api/spaces/${space}/invites/${body.subscriptionId}`)
    expect(again.status).toBe(409)
    const user = await signup(ts.url, email)
    // The engine sees the sign-up on the feed; give it the same chance it had in SUB-INV1, then check.
    await ts.server.nodes.update(SYSTEM, user.userId as NodePath, () => undefined)
    const status = (await sub(body.subscriptionId as string))?.content.Status
    expect(status).toBe('Cancelled')
    expect(await node(`${space}/_Access/${user.userId}_Access`)).toBeNull()
  })

  it('[SUB-INV5] only Admins invite or revoke; readers list members and invites', async () => {
    const editor = await signup(ts.url)
    await grantRole(ts.url, admin.token, space, editor.userId, 'Editor')
    const stranger = await signup(ts.url)
    const refused = await invite(editor.token, space, { email: uniqueEmail(), role: 'Viewer' })
    expect(refused.status).toBe(403)
    expect(errorCode(refused)).toBe('forbidden')
    expect((await invite(stranger.token, space, { email: uniqueEmail() })).status).toBe(403)
    const pending = await invite(admin.token, space, { email: uniqueEmail('listed'), role: 'Viewer' })
    expect((await api(ts.url, editor.token).request('DELETE', `/api/spaces/${space}/invites/${pending.body.subscriptionId}`)).status).toBe(403)

    const list = await api(ts.url, editor.token).get<{ members: { subject: string; role: string; email: string | null }[]; invites: { subscriptionId: string; status: string; lastError: string | null }[] }>(`/api/spaces/${space}/members`)
    expect(list.status).toBe(200)
    expect(list.body.members).toEqual(expect.arrayContaining([
      expect.objectContaining({ subject: admin.userId, role: 'Admin', email: admin.email }),
      expect.objectContaining({ subject: editor.userId, role: 'Editor' }),
    ]))
    expect(list.body.invites).toEqual(expect.arrayContaining([expect.objectContaining({ subscriptionId: pending.body.subscriptionId, status: 'Pending', lastError: null })]))
    expect((await api(ts.url, stranger.token).get(`/api/spaces/${space}/members`)).status).toBe(403)
    expect((await invite(admin.token, space, { email: 'not an email' })).status).toBe(400)
  })

  it('[SUB-INV6] the inviter lost Admin before the sign-up → Failed, named, and nothing granted', async () => {
    const s2 = await createSpace(ts.url, admin.token)
    const inviter = await signup(ts.url)
    await grantRole(ts.url, admin.token, s2, inviter.userId, 'Admin')
    const email = uniqueEmail('late')
    const { body } = await invite(inviter.token, s2, { email, role: 'Editor' })
    await grantRole(ts.url, admin.token, s2, inviter.userId, 'Viewer')
    const user = await signup(ts.url, email)
    const failed = await waitFor(async () => {
      const n = await sub(body.subscriptionId as string)
      return n?.content.Status === 'Failed' ? n : null
    })
    expect(failed.content.LastError).toContain(`${inviter.userId} is no longer Admin of ${s2}`)
    expect(await node(`${s2}/_Access/${user.userId}_Access`)).toBeNull()
  })

  it('[SUB-INV7] group invites, single and bulk, with a group path containing "/"', async () => {
    const group = await createGroup(ts.url, admin.token, `${space}/Team`)
    const existing = await signup(ts.url)
    const a = uniqueEmail('ga')
    const b = uniqueEmail('gb')
    const res = await api(ts.url, admin.token).post<{ results: Record<string, unknown>[] }>(`/api/groups/${group}/invites`, { emails: `${a}, ${b}\n${existing.email}; ${a}`, role: 'Viewer' })
    expect(res.status).toBe(200)
    expect(res.body.results).toEqual([
      { email: a, status: 'Invited', subscriptionId: groupInviteSubscriptionId(a, group) },
      { email: b, status: 'Invited', subscriptionId: groupInviteSubscriptionId(b, group) },
      { email: existing.email, status: 'Granted', userId: existing.userId, change: 'added' },
    ])
    expect(await node(`${group}/${existing.userId}_Membership`)).not.toBeNull()
    // A single address; no role → membership only.
    const c = uniqueEmail('gc')
    const single = await api(ts.url, admin.token).post<{ results: Record<string, unknown>[] }>(`/api/groups/${group}/invites`, { email: c })
    expect(single.body.results).toEqual([{ email: c, status: 'Invited', subscriptionId: groupInviteSubscriptionId(c, group) }])

    const ua = await signup(ts.url, a)
    const uc = await signup(ts.url, c)
    const membership = await waitFor(() => node(`${group}/${ua.userId}_Membership`))
    expect(membership.nodeType).toBe('Membership')
    expect((await waitFor(() => node(`${group}/_Access/${ua.userId}_Access`))).content).toMatchObject({ Role: 'Viewer' })
    await waitFor(() => node(`${group}/${uc.userId}_Membership`))
    await waitFor(async () => (await sub(groupInviteSubscriptionId(c, group)))?.content.Status === 'Fired')
    expect(await node(`${group}/_Access/${uc.userId}_Access`)).toBeNull()
    // The new member reads the group through the grant.
    expect((await api(ts.url, ua.token).getNode(group)).status).toBe(200)

    const outsider = await signup(ts.url)
    expect((await api(ts.url, outsider.token).post(`/api/groups/${group}/invites`, { emails: [uniqueEmail()] })).status).toBe(403)
  })

  it('[ACC41] a group invite of someone with an account says what it did: added, already a member (nothing changed), or the caller', async () => {
    const group = await createGroup(ts.url, admin.token, `${space}/Crew41`)
    const bob = await signup(ts.url)
    const post = (body: unknown) => api(ts.url, admin.token).post<{ results: Record<string, unknown>[] }>(`/api/groups/${group}/invites`, body)
    expect((await post({ email: bob.email })).body.results).toEqual([{ email: bob.email, status: 'Granted', userId: bob.userId, change: 'added' }])
    const membership = await node(`${group}/${bob.userId}_Membership`)
    expect(membership).not.toBeNull()
    // Again: nothing changes, and the answer says so (it said the same as the first time).
    expect((await post({ email: bob.email })).body.results).toEqual([{ email: bob.email, status: 'Granted', userId: bob.userId, change: 'already_member' }])
    expect((await node(`${group}/${bob.userId}_Membership`))?.version).toBe(membership?.version)
    // A member given a role they do not hold yet: that is a change.
    expect((await post({ email: bob.email, role: 'Viewer' })).body.results).toMatchObject([{ change: 'added' }])
    expect((await node(`${group}/_Access/${bob.userId}_Access`))?.content).toMatchObject({ Role: 'Viewer' })
    expect((await post({ email: bob.email, role: 'Viewer' })).body.results).toMatchObject([{ change: 'already_member' }])
    // The caller's own address: an Admin may join the group they run; once a member, it is said as them.
    expect((await post({ email: admin.email })).body.results).toMatchObject([{ userId: admin.userId, change: 'added' }])
    expect((await post({ emails: [admin.email, bob.email] })).body.results).toMatchObject([{ change: 'self' }, { change: 'already_member' }])
  })
})
