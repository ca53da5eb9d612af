import { afterAll, describe, expect, it } from 'vitest'
import { spaceInviteSubscriptionId } from '../../shared/index.js'
import { api, createSpace, signup, uniqueEmail, waitFor, type SpawnedServer } from '../helpers/index.js'
import { createCode, run, texts } from './activities-helpers.js'
import { createThread, node, post, settled, statusIs } from './threads-helpers.js'
import { engineOwner, startInstances, type Instances } from '../helpers/index.js'

/**
 * [SCALE6] [SCALE7] [SCALE8] One owner of the engines at a time, through a PostgreSQL lease; kill -9
 * of the owner: another instance takes over when the lease runs out, and nothing the dead owner
 * did is done again (its claims are in the database).
 */
describe('[SCALE6] engine failover between instances', () => {
  let set: Instances | undefined
  afterAll(async () => {
    await set?.cleanup()
  })

  it('[SCALE6][SCALE7][SCALE8] kill -9 of the owner: another takes over; the invite fires once, the run is not executed again, the thread round is not dispatched twice', { timeout: 240_000 }, async () => {
    set = await startInstances(3, { ENGINE_LEASE_MS: '2000' })
    const owner = await engineOwner(set.servers)
    const others = set.servers.filter((s) => s !== owner)
    const started = (s: SpawnedServer) => s.logs().filter((l) => l.msg === 'engines started under the lease').length
    // [SCALE6] Exactly one instance runs the engines.
    expect(others.map(started)).toEqual([0, 0])
    const url = others[0]!.url
    const admin = await signup(url)
    const space = await createSpace(url, admin.token)

    // Work in flight on the owner: a run that never ends, a thread round that sleeps, an invite.
    const code = await createCode(url, admin.token, `${space}/forever`, 'Log.info("started"); for (;;) await sleep(50)')
    const runPath = await run(url, admin.token, code)
    await waitFor(async () => texts((await api(url, admin.token).getNode(runPath)).body as never).includes('started'), { timeoutMs: 30_000, description: 'the run started on the owner' })
    const thread = await createThread(url, admin.token, `${space}/talk`)
    await post(url, admin.token, thread, '/sleep 1500', 'q1')
    await statusIs(url, admin.token, thread, 'Executing', 30_000)
    const email = uniqueEmail('failover')
    expect((await api(url, admin.token).post(`/api/spaces/${space}/invites`, { email, role: 'Editor' })).status).toBe(201)

    await owner.kill('SIGKILL')
    const next = await engineOwner(others, 30_000)
    expect(others).toContain(next)

    // [SCALE8] The invite fires once: one assignment, the subscription Fired by one terminal write.
    const invitee = await signup(others[1]!.url, email)
    const grant = `${space}/_Access/${invitee.userId}_Access`
    await waitFor(async () => (await api(url, admin.token).getNode(grant)).status === 200, { timeoutMs: 30_000, description: 'the invite fired' })
    const invites = await waitFor(async () => {
      const res = await api(url, admin.token).get<{ invites: { subscriptionId: string; status: string }[] }>(`/api/spaces/${space}/members`)
      const mine = res.body.invites.filter((i) => i.subscriptionId === spaceInviteSubscriptionId(email, space))
      return mine.length > 0 && mine.every((i) => i.status !== 'Pending') ? mine : null
    }, { timeoutMs: 30_000, description: 'the invite leaves Pending' })
    expect(invites.map((i) => i.status)).toEqual(['Fired'])
    const grants = (await api(url, admin.token).queryNodes({ parent: `${space}/_Access`, nodeType: 'AccessAssignment' })).body.items.filter((n) => n.content.Subject === invitee.userId)
    expect(grants).toHaveLength(1)

    // [SCALE7] The run the dead owner was executing is not executed again: it ends Failed, naming the restart.
    const failed = await waitFor(async () => {
      const n = (await api(url, admin.token).getNode(runPath)).body
      return n.content?.Status === 'Failed' ? n : null
    }, { timeoutMs: 30_000, description: 'the lost run ends Failed' })
    expect(texts(failed as never).filter((t) => t === 'started')).toHaveLength(1)
    expect(String(failed.content.Error)).toMatch(/restarted/)

    // The thread's round resumes into its one response cell: one reply, not two.
    const done = await settled(url, admin.token, thread, (x) => x.content.Disposition === 'Completed', 60_000)
    expect(done.content.Messages).toEqual([`${thread}/q1`, `${thread}/_r.q1`])
    expect((await node(url, admin.token, `${thread}/_r.q1`)).content.Text).toBe('You said: /sleep 1500')

    // [SCALE6] Still one owner: only the instance that took over started engines after the kill.
    expect(others.map(started).sort()).toEqual([0, 1])
  })
})
