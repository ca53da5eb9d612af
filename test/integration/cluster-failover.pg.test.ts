import { afterAll, describe, expect, it } from 'vitest'
import { spaceInviteSubscriptionId } from '../../shared/index.js'
import { api, createSpace, signup, uniqueEmail, waitFor } from '../helpers/index.js'
import { createCode, run, texts } from './activities-helpers.js'
import { createThread, node, post, settled, statusIs } from './threads-helpers.js'
import { ENGINE_PARTITIONS, partitionOf, partitionOwners, partitionsStarted, startInstances, type Instances } from '../helpers/index.js'

/**
 * [SCALE6] [SCALE7] [SCALE8] [SCALE17] One owner of each engine partition at a time, through a
 * PostgreSQL lease per partition, spread over the instances; kill -9 of the owners: the survivor
 * takes their partitions when the leases run out, and nothing the dead owners did is done again
 * (their claims are in the database).
 */
describe('[SCALE6] engine failover between instances', () => {
  let set: Instances | undefined
  afterAll(async () => {
    await set?.cleanup()
  })

  it('[SCALE6][SCALE7][SCALE8][SCALE17] the partitions spread, one owner each; kill -9 of their owners: the survivor takes them; the invite fires once, the run is not executed again, the thread round is not dispatched twice', { timeout: 240_000 }, async () => {
    set = await startInstances(4, { ENGINE_LEASE_MS: '2000', OPERATOR_EMAILS: 'ops@failover.test' })
    // [SCALE17] Three partitions over four instances: one each on three of them, the fourth runs none.
    const owners = await partitionOwners(set.servers, set.databaseUrl, { spread: true, timeoutMs: 60_000 })
    const survivor = set.servers.find((s) => ![...owners.values()].includes(s))!
    const doomed = [...new Set(owners.values())]
    expect(doomed).toHaveLength(3)
    // [SCALE6] Never two owners of a partition at once: across every instance's log, each partition's
    // engine starting (before it is built) and stopped (after it stopped) alternate, in time, and
    // the last one is a start.
    for (const partition of ENGINE_PARTITIONS) {
      const events = set.servers.flatMap((s) => s.logs().filter((l) => partitionOf(l) === partition && (l.msg === 'engine starting under the lease' || l.msg === 'engine stopped: lease gone')).map((l) => ({ up: l.msg === 'engine starting under the lease', time: Number(new Date(l.time as string)) })))
      events.sort((a, b) => a.time - b.time || Number(a.up) - Number(b.up))
      expect(events.map((e) => e.up).filter((up, i) => up !== (i % 2 === 0)), `${partition}: ${JSON.stringify(events)}`).toEqual([])
      expect(events.at(-1)?.up).toBe(true)
    }
    const startedBefore = partitionsStarted(survivor).length
    const url = survivor.url
    // [SCALE17] An operator sees where each engine runs, alike through every instance.
    const ops = await signup(url, 'ops@failover.test')
    type Engines = { instance: string; engines: { partition: string; instance: string | null }[] }
    const where = async (through: string) => (await api(through, ops.token).get<Engines>('/api/admin/overview')).body
    const holderOf = (p: string) => `i${set!.servers.indexOf(owners.get(p)!) + 1}`
    for (const s of set.servers) {
      const o = await where(s.url)
      expect(o.engines.map((e) => [e.partition, e.instance]).sort()).toEqual(ENGINE_PARTITIONS.map((p) => [p, holderOf(p)]))
    }
    const admin = await signup(url)
    const space = await createSpace(url, admin.token)

    // Work in flight on the owners: a run that never ends, a thread round that sleeps, an invite.
    const code = await createCode(url, admin.token, `${space}/forever`, 'Log.info("started"); for (;;) await sleep(50)')
    const runPath = await run(url, admin.token, code)
    await waitFor(async () => texts((await api(url, admin.token).getNode(runPath)).body as never).includes('started'), { timeoutMs: 30_000, description: 'the run started on its owner' })
    const thread = await createThread(url, admin.token, `${space}/talk`)
    await post(url, admin.token, thread, '/sleep 1500', 'q1')
    await statusIs(url, admin.token, thread, 'Executing', 30_000)
    const email = uniqueEmail('failover')
    expect((await api(url, admin.token).post(`/api/spaces/${space}/invites`, { email, role: 'Editor' })).status).toBe(201)

    await Promise.all(doomed.map((s) => s.kill('SIGKILL')))
    const next = await partitionOwners(set.servers, set.databaseUrl, { timeoutMs: 30_000 })
    expect(new Set(next.values())).toEqual(new Set([survivor]))

    // [SCALE8] The invite fires once: one assignment, the subscription Fired by one terminal write.
    const invitee = await signup(url, email)
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

    const after = await where(url)
    expect(after.engines.map((e) => e.instance)).toEqual(ENGINE_PARTITIONS.map(() => after.instance))
    // [SCALE6] Still one owner: the survivor started each partition's engine once after the kill.
    expect(partitionsStarted(survivor).slice(startedBefore).sort()).toEqual([...ENGINE_PARTITIONS])
  })
})
