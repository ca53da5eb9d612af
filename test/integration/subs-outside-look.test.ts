import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { randomUUID } from 'node:crypto'
import { SYSTEM, subscriptionPath, type NodePath } from '../../shared/index.js'
import {
  api,
  createSpace,
  signup,
  startTestServer,
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

  const node = (path: string) => ts.server.nodes.get(SYSTEM, path as NodePath)

  beforeAll(async () => {
    ts = await startTestServer()
    victim = await signup(ts.url)
  })
  afterAll(async () => {
    await ts?.cleanup()
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
