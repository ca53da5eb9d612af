import fc from 'fast-check'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { SYSTEM, type NodePath } from '../../shared/index.js'
import { api, createDocument, createSpace, expectStatus, grantRole, signup, startTestServer, waitFor, type TestServer, type TestUser } from '../helpers/index.js'
import { createCode, run } from './activities-helpers.js'
import { ctx, definition, pull, putSubscription } from './contextual-helpers.js'

const TOKEN = 'overview-metrics-token-0123456789'

interface Overview {
  instance: string
  figures: Record<string, unknown> & { connections: number; acks: number; updates: number; refusals: Record<string, number>; engineLeaseHeld: boolean; enginePartitions: string[]; contextual: { dead: number } }
  deadLetters: { subscriptionPath: string; eventId: string; path: string; lastError: string | null }[]
  laggingConsumers: { subscriptionPath: string; lag: number; waiting: number }[]
  stuckRuns: { path: string; name: string | null; runningMs: number; startedBy: string | null; startedByName: string | null }[]
  engines: { partition: string; instance: string | null }[]
}

const overview = (url: string, token?: string) => api(url, token).get<Overview & { error?: { code: string } }>('/api/admin/overview')

/** The value of one unlabelled (or summed) sample family in Prometheus text. */
function scraped(text: string, name: string): number {
  let total = 0
  for (const line of text.split('\n')) if (line.startsWith(`${name} `) || line.startsWith(`${name}{`)) total += Number(line.slice(line.lastIndexOf(' ') + 1))
  return total
}

/**
 * [OPS10] The operator's overview (`GET /api/admin/overview`): for operators only (Admins of the
 * `Admin` partition, or OPERATOR_EMAILS), the /metrics figures from the same registry, and what a
 * person acts on: dead letters, stuck runs, lagging consumers.
 */
describe('[OPS10] the admin overview', () => {
  let ts: TestServer
  let listed: TestUser
  let granted: TestUser
  let other: TestUser
  let space = ''

  beforeAll(async () => {
    ts = await startTestServer({ config: { metricsToken: TOKEN, stuckRunMs: 0, operatorEmails: ['Ops.Person@Example.com'] } })
    listed = await signup(ts.url, 'ops.person@example.com')
    granted = await signup(ts.url)
    other = await signup(ts.url)
    await ts.server.nodes.put(SYSTEM, `Admin/_Access/${granted.userId}_Access` as NodePath, { nodeType: 'AccessAssignment', content: { Subject: granted.userId, Role: 'Admin' } }, 'system')
    space = await createSpace(ts.url, other.token)
  })
  afterAll(async () => {
    await ts?.cleanup()
  })

  it('[OPS10] no session is 401; a user who is no operator (an Admin of their own space) is 403 forbidden; both kinds of operator get 200', async () => {
    expect((await overview(ts.url)).status).toBe(401)
    const refused = await overview(ts.url, other.token)
    expect(refused.status).toBe(403)
    expect(refused.body.error?.code).toBe('forbidden')
    expect((await overview(ts.url, 'not-a-token')).status).toBe(401)
    expect((await overview(ts.url, TOKEN)).status).toBe(401)
    for (const who of [listed, granted]) expect((await overview(ts.url, who.token)).status).toBe(200)
    // GET /api/me says so, for the app's navigation.
    for (const [who, operator] of [[listed, true], [granted, true], [other, false]] as const) expect((await api(ts.url, who.token).get<{ operator: boolean }>('/api/me')).body.operator).toBe(operator)
  })

  it('[OPS13] nobody deletes the Admin area (an operator\'s one click took the page from every operator): 403 forbidden with words, over HTTP and for the system; it stays, and so does the page', async () => {
    const refused = await api(ts.url, granted.token).deleteNode('Admin')
    expect(refused.status).toBe(403)
    expect((refused.body as { error: { code: string; message: string } }).error.message).toMatch(/Admin is the server’s own area/)
    await expect(ts.server.nodes.delete(SYSTEM, 'Admin' as NodePath)).rejects.toMatchObject({ code: 'forbidden' })
    expect((await ts.server.nodes.get(SYSTEM, 'Admin' as NodePath))?.nodeType).toBe('Space')
    for (const who of [listed, granted]) expect((await overview(ts.url, who.token)).status).toBe(200)
    // Its own nodes are still theirs to remove (an Admin grant of someone else, say).
    expectStatus(await api(ts.url, granted.token).putNode(`Admin/_Access/${other.userId}_Access`, 'AccessAssignment', { Subject: other.userId, Role: 'Viewer' }), 201)
    expectStatus(await api(ts.url, granted.token).deleteNode(`Admin/_Access/${other.userId}_Access`), 204)
  })

  it('[OPS10] the figures are the /metrics figures (one registry)', async () => {
    const doc = await createDocument(ts.url, other.token, `${space}/counted`, {})
    expectStatus(await api(ts.url, other.token).patchNode(doc, { A: 1 }), 200)
    expect((await api(ts.url, other.token).patchNode(doc, '[]')).status).toBe(400)
    const o = expectStatus(await overview(ts.url, granted.token), 200).body
    const text = await (await fetch(`${ts.url}/metrics`, { headers: { authorization: `Bearer ${TOKEN}` } })).text()
    expect(o.figures.acks).toBe(scraped(text, 'weft_acks_total'))
    expect(o.figures.updates).toBe(scraped(text, 'weft_updates_total'))
    expect(o.figures.refusals.invalid_patch).toBeGreaterThanOrEqual(1)
    expect(o.figures.refusals.invalid_patch).toBe(scraped(text.split('\n').filter((l) => l.includes('code="invalid_patch"')).join('\n'), 'weft_refusals_total'))
    expect(o.figures.engineLeaseHeld).toBe(true)
    // [SCALE17] A lone instance runs every engine partition.
    expect(o.figures.enginePartitions).toEqual(['activities', 'subscriptions', 'threads'])
    expect(o.engines).toEqual(['subscriptions', 'activities', 'threads'].map((partition) => ({ partition, instance: o.instance })))
    for (const k of ['connections', 'rooms', 'loadedDocs', 'engineLagVersions', 'commits', 'eventLoopDelaySeconds', 'contextual']) expect(o.figures).toHaveProperty(k)
  })

  it('[OPS10] [OPS12] a dead letter and a lagging consumer are listed with their subscription (an idle one is not); a stuck run with its path and its starter\'s name', async () => {
    const sub = `${space}/sub`
    const prefix = `${space}/inbox`
    expectStatus(await putSubscription(ts.url, other.token, sub, definition(prefix, { Limits: { LeaseSeconds: 30, MaxInFlight: 2, MaxAttempts: 1 } })), 201)
    await createDocument(ts.url, other.token, prefix, {})
    const c = ctx(ts.url, other.token)
    expectStatus(await c.next(sub), 200)
    await createDocument(ts.url, other.token, `${prefix}/d`, {})
    const got = await pull(ts.url, other.token, sub)
    expect(expectStatus(await c.nack(got.consumerId, got.item, 0, 'gave up'), 200).body.state).toBe('dead')
    // [OPS12] A change after the consumer's last pull that is not its event: it is behind the
    // head, with nothing waiting: idle, not lagging.
    await createDocument(ts.url, other.token, `${space}/later`, {})
    const idle = expectStatus(await overview(ts.url, listed.token), 200).body
    expect(idle.laggingConsumers.find((l) => l.subscriptionPath === sub)).toBeUndefined()
    // Two of its events; one pull leases the first and leaves the second waiting: lagging.
    await createDocument(ts.url, other.token, `${prefix}/e1`, {})
    await createDocument(ts.url, other.token, `${prefix}/e2`, {})
    await pull(ts.url, other.token, sub)

    const code = await createCode(ts.url, other.token, `${space}/forever`, 'Log.info("started"); for (;;) await sleep(50)')
    const runPath = await run(ts.url, other.token, code)
    const o = await waitFor(async () => {
      const body = expectStatus(await overview(ts.url, listed.token), 200).body
      return body.stuckRuns.some((r) => r.path === runPath) ? body : null
    }, { description: 'the run is listed as stuck' })
    // [WEB74] With its own name, as the run's page says it.
    expect(o.stuckRuns.find((r) => r.path === runPath)).toMatchObject({ name: 'forever run', startedBy: other.userId, startedByName: 'Test User' })
    expect(o.deadLetters).toContainEqual(expect.objectContaining({ subscriptionPath: sub, path: `${prefix}/d`, lastError: 'gave up' }))
    expect(o.figures.contextual.dead).toBeGreaterThanOrEqual(1)
    expect(o.laggingConsumers.find((l) => l.subscriptionPath === sub)?.waiting).toBe(1)

    expectStatus(await api(ts.url, other.token).patchNode(runPath, { RequestedStatus: 'Cancelled' }), 200)
    await waitFor(async () => !expectStatus(await overview(ts.url, listed.token), 200).body.stuckRuns.some((r) => r.path === runPath), { description: 'a cancelled run leaves the list' })
  })

  it('[OPS14] a consumer whose worker stopped pulling, with changes of its events it never read, is lagging with how many wait (one whose unread changes are none of its events is not)', async () => {
    const sub = `${space}/stopped-sub`
    const prefix = `${space}/stopped-inbox`
    expectStatus(await putSubscription(ts.url, other.token, sub, definition(prefix)), 201)
    await createDocument(ts.url, other.token, prefix, {})
    // The worker pulls once (its consumer starts at the head, nothing to hand out), then stops.
    const first = expectStatus(await ctx(ts.url, other.token).next(sub, 'stopped-worker'), 200).body
    expect(first.item).toBeNull()
    const consumerId = first.consumerId
    // Changes after its last pull that are none of its events: idle, not listed.
    await createDocument(ts.url, other.token, `${space}/stopped-elsewhere`, {})
    expect(expectStatus(await overview(ts.url, listed.token), 200).body.laggingConsumers.find((l) => l.subscriptionPath === sub)).toBeUndefined()
    // Two of its events land while nobody pulls: it lags, two waiting, though nothing was ingested.
    await createDocument(ts.url, other.token, `${prefix}/s1`, {})
    await createDocument(ts.url, other.token, `${prefix}/s2`, {})
    const o = expectStatus(await overview(ts.url, listed.token), 200).body
    expect(o.laggingConsumers.find((l) => l.subscriptionPath === sub)).toMatchObject({ waiting: 2 })
    expect(o.laggingConsumers.find((l) => l.subscriptionPath === sub)?.lag).toBeGreaterThanOrEqual(2)
    // The list says no more than its own consumer's status: still nothing pending in storage.
    expect(expectStatus(await ctx(ts.url, other.token).status(consumerId), 200).body.pending).toBe(0)
    // Its worker comes back and takes both: it leaves the list.
    for (let i = 0; i < 2; i++) {
      const got = await pull(ts.url, other.token, sub, 'stopped-worker')
      expectStatus(await ctx(ts.url, other.token).ack(got.consumerId, got.item), 200)
    }
    expect(expectStatus(await overview(ts.url, listed.token), 200).body.laggingConsumers.find((l) => l.subscriptionPath === sub)).toBeUndefined()
  })

  it('[OPS10] property: whatever roles a user holds, on the Admin partition and elsewhere, the overview answers 200 exactly to an undenied Admin of Admin', async () => {
    const role = fc.constantFrom('Viewer', 'Commenter', 'Editor', 'Admin', null)
    const seed = Number(process.env.WEFT_FC_SEED ?? 20_10)
    await fc.assert(
      fc.asyncProperty(role, fc.boolean(), role, async (onAdmin, denied, elsewhere) => {
        const user = await signup(ts.url)
        if (onAdmin) await ts.server.nodes.put(SYSTEM, `Admin/_Access/${user.userId}_Access` as NodePath, { nodeType: 'AccessAssignment', content: { Subject: user.userId, Role: onAdmin, Denied: denied } }, 'system')
        if (elsewhere) await grantRole(ts.url, other.token, space, user.userId, elsewhere)
        const status = (await overview(ts.url, user.token)).status
        expect(status).toBe(onAdmin === 'Admin' && !denied ? 200 : 403)
      }),
      { seed, numRuns: 12 },
    )
  })
})
