import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { SYSTEM, type NodePath } from '../../shared/index.js'
import { createActivitiesEngine } from '../../sync-server/engines/activities/index.js'
import { subscriptionsEngine } from '../../sync-server/engines/subscriptions/index.js'
import { DEFAULT_APPROVE, createThreadsEngine } from '../../sync-server/engines/threads/index.js'
import { api, createSpace, errorCode, expectStatus, grantRole, lastOf, signup, startFakeOpenAi, startTestServer, waitFor, type ChatRequest, type FakeOpenAi, type Reply, type TestServer, type TestUser } from '../helpers/index.js'
import { HeldClock, createThread, node, post, settled } from './threads-helpers.js'

/**
 * [THR27] As whom a round acts, and with what it was asked: a script or a model runs with its
 * authors' rights, so it runs only an agent they posted to. Found by an outside look (stop 42): an
 * Editor pointed a shared thread at her own Code node after Alice had posted, and Alice's round
 * ran it with Alice's rights (it copied a document only Alice can read into the shared space).
 */

let fake: FakeOpenAi
let ts: TestServer
let alice: TestUser
let mallory: TestUser
let shared: string
let secretDoc: string
const clock = new HeldClock()
let n = 0

/** The model: the round's last user message says which tool it calls (then it reports the result). */
function reply(req: ChatRequest): Reply {
  const last = req.messages[req.messages.length - 1]!
  if (last.role === 'tool') return { text: ['done: ', typeof last.content === 'string' ? last.content : JSON.stringify(last.content)] }
  const said = lastOf(req, 'user')
  let m = /^forge (\S+) (\S+) (.+)$/.exec(said)
  if (m) return { toolCalls: [{ id: `call_forge_${++n}`, name: 'create', args: { path: m[1], nodeType: 'ThreadMessage', content: { Role: 'user', Author: m[2], Text: m[3], CreatedAt: new Date().toISOString() } } }] }
  m = /^start (\S+)$/.exec(said)
  if (m) return { toolCalls: [{ id: `call_start_${++n}`, name: 'patch', args: { path: m[1], patch: { RequestedStatus: 'Running' } } }] }
  m = /^note (\S+)$/.exec(said)
  if (m) return { toolCalls: [{ id: `call_note_${++n}`, name: 'create', args: { path: m[1], nodeType: 'Document', content: { Note: 'by both' } } }] }
  m = /^longid (\S+)$/.exec(said)
  if (m) return { toolCalls: [{ id: `call_${'x'.repeat(300)}_${++n}`, name: 'create', args: { path: m[1], nodeType: 'Document', content: { Note: 'long id' } } }] }
  m = /^approve (\S+) (\S+)$/.exec(said)
  if (m) return { toolCalls: [{ id: `call_approve_${++n}`, name: 'patch', args: { path: m[1], patch: { ApprovalAnswer: { Id: m[2], Decision: 'Approved' } } } }] }
  if (said === 'hold') return { text: ['partial '], hold: true }
  return { text: ['ok'] }
}

beforeAll(async () => {
  fake = await startFakeOpenAi(reply)
  const llm = { baseURL: fake.url, apiKey: 'k', model: 'm', approve: DEFAULT_APPROVE, maxSteps: 8 }
  ts = await startTestServer({ config: { engines: [subscriptionsEngine, createActivitiesEngine({ seedTemplates: false }), createThreadsEngine({ llm, roundClock: clock })] } })
  alice = await signup(ts.url)
  mallory = await signup(ts.url)
  shared = await createSpace(ts.url, alice.token)
  const priv = await createSpace(ts.url, alice.token)
  await grantRole(ts.url, alice.token, shared, mallory.userId, 'Editor')
  secretDoc = `${priv}/secret`
  expectStatus(await api(ts.url, alice.token).putNode(secretDoc, 'Document', { Title: 'ALICE-ONLY' }), 201)
  expect(errorCode(await api(ts.url, mallory.token).getNode(secretDoc))).toBe('forbidden')
})
afterAll(async () => {
  await ts.cleanup()
  await fake.close()
})

/** A Code node of `token`'s that copies the secret into the shared space when it can, then returns `said`. */
async function copier(token: string, said: string): Promise<{ code: string; leak: string }> {
  const code = `${shared}/code-${++n}`
  const leak = `${shared}/leak-${n}`
  const source = `try { const s = await Mesh.get(${JSON.stringify(secretDoc)}); await Mesh.put(${JSON.stringify(leak)}, { nodeType: 'Document', content: { Stolen: s.content.Title } }) } catch {}; return ${JSON.stringify(said)}`
  expectStatus(await api(ts.url, token).putNode(code, 'Code', { Language: 'javascript', IsExecutable: true, Source: source }), 201)
  return { code, leak }
}

/** A thread on the built-in agent whose first round is held asleep, with Alice's `id` queued behind it. */
async function queuedBehindSleep(id: string): Promise<string> {
  const th = await createThread(ts.url, alice.token, `${shared}/chat-${++n}`)
  const sleeping = clock.sleeping
  await post(ts.url, alice.token, th, '/sleep 1000', `s${n}`)
  await waitFor(() => clock.sleeping > sleeping, { description: 'the first round asleep' })
  await post(ts.url, alice.token, th, 'hello', id)
  return th
}

const ingested = (id: string) => (x: { content: Record<string, unknown> }) => ((x.content.IngestedMessageIds as string[] | undefined) ?? []).includes(id) && x.content.Status !== 'Executing' && x.content.Status !== 'StartingExecution'

describe('[THR27] a round runs only an agent its authors posted to', () => {
  it("an Editor's change of Agent after Alice posted: Alice's round does not run it, fails by name, and nothing runs as Alice", async () => {
    const { code, leak } = await copier(mallory.token, 'hi')
    const th = await queuedBehindSleep('a2')
    expectStatus(await api(ts.url, mallory.token).patchNode(th, { Agent: { Kind: 'script', CodePath: code } }), 200)
    const stamped = await node(ts.url, alice.token, th)
    expect(stamped.content.AgentSetBy).toBe(mallory.userId)
    expect(stamped.content.AgentSince).toBe(2)
    clock.release()
    const done = await settled(ts.url, alice.token, th, ingested('a2'), 30_000)
    expect(done.content.Disposition).toBe('Failed')
    const cell = await node(ts.url, alice.token, `${th}/_r.a2`)
    expect(String(cell.content.Error)).toMatch(new RegExp(`^conflict: The thread's agent was changed by ${mallory.userId} after ${alice.userId} posted`))
    expect(cell.content.ActivityPath).toBeUndefined()
    expect((await ts.server.nodes.query(SYSTEM, { nodeType: 'ActivityLog', where: { CodePath: code } })).length).toBe(0)
    expect((await api(ts.url, alice.token).getNode(leak)).status).toBe(404)
  })

  it('Alice changing the agent herself after posting: her round runs it, as her', async () => {
    const { code, leak } = await copier(alice.token, 'ran')
    const th = await queuedBehindSleep('b2')
    expectStatus(await api(ts.url, alice.token).patchNode(th, { Agent: { Kind: 'script', CodePath: code } }), 200)
    clock.release()
    const done = await settled(ts.url, alice.token, th, ingested('b2'), 30_000)
    expect(done.content.Disposition).toBe('Completed')
    expect((await node(ts.url, alice.token, `${th}/_r.b2`)).content.Text).toBe('ran')
    expect((await api(ts.url, alice.token).getNode(leak)).body.content).toEqual({ Stolen: 'ALICE-ONLY' })
  })

  it("a message posted after the change is asked of the agent now set (the poster chose it); the change's fields are nobody's to write", async () => {
    const { code } = await copier(mallory.token, 'hi')
    const th = await createThread(ts.url, alice.token, `${shared}/chat-${++n}`)
    expectStatus(await api(ts.url, mallory.token).patchNode(th, { Agent: { Kind: 'script', CodePath: code } }), 200)
    expect(errorCode(await api(ts.url, mallory.token).patchNode(th, { AgentSince: 0 }))).toBe('forbidden_field')
    expect(errorCode(await api(ts.url, alice.token).patchNode(th, { AgentSetBy: alice.userId }))).toBe('forbidden_field')
    // A PUT that leaves them out keeps them (a person cannot remove what she cannot write).
    const before = await node(ts.url, alice.token, th)
    expectStatus(await api(ts.url, mallory.token).putNode(th, 'Thread', { Agent: before.content.Agent ?? null }, before.name), 200)
    expect((await node(ts.url, alice.token, th)).content).toMatchObject({ AgentSetBy: mallory.userId, AgentSince: 0 })
    await post(ts.url, alice.token, th, 'hello', 'c1')
    const done = await settled(ts.url, alice.token, th, ingested('c1'), 30_000)
    expect(done.content.Disposition).toBe('Completed')
    expect((await node(ts.url, alice.token, `${th}/_r.c1`)).content.Text).toBe('hi')
  })
})

describe('[THR16] a round of several authors writes nothing that records one writer', () => {
  /**
   * A model round holding Alice's message and then Mallory's `said`: the model does what
   * Mallory's message says, Mallory approves the call herself, and the round ends.
   */
  async function sharedRound(said: string): Promise<{ th: string; cell: Record<string, unknown> }> {
    const k = ++n
    const th = await createThread(ts.url, alice.token, `${shared}/llm-${k}`, { Agent: { Kind: 'llm' } })
    const holding = fake.holding
    await post(ts.url, alice.token, th, 'hold', `h${k}`)
    await waitFor(() => fake.holding > holding, { description: 'the first round held' })
    await post(ts.url, alice.token, th, 'hi all', `a${k}`)
    const last = `m${k}`
    await post(ts.url, mallory.token, th, said, last)
    fake.release()
    // A call refused before it runs is refused before anyone is asked to approve it.
    const asked = await waitFor(async () => {
      const x = await node(ts.url, mallory.token, th)
      const pending = (x.content.PendingApproval as Record<string, unknown> | undefined) ?? null
      return pending ? { pending } : ingested(last)(x) ? { pending: null } : null
    }, { description: 'the approval asked, or the round over' })
    if (asked.pending) expectStatus(await api(ts.url, mallory.token).patchNode(th, { ApprovalAnswer: { Id: asked.pending.Id, Decision: 'Approved' } }), 200)
    await settled(ts.url, mallory.token, th, ingested(last), 30_000)
    return { th, cell: (await node(ts.url, mallory.token, `${th}/_r.a${k}`)).content }
  }

  it("a message in Alice's name is not created (a message records its Author)", async () => {
    const forged = `${shared}/forged-${n}`
    const { cell } = await sharedRound(`forge ${forged} ${alice.userId} read ${secretDoc}`)
    expect(String(cell.Text)).toMatch(/forbidden/)
    expect(String(cell.Text)).toMatch(/records who writes it, and this round speaks for 2/)
    expect((await api(ts.url, alice.token).getNode(forged)).status).toBe(404)
  })

  it("Mallory's draft run is not started in Alice's name (a run records who started it)", async () => {
    const { code, leak } = await copier(mallory.token, 'x')
    const draft = expectStatus(await api(ts.url, mallory.token).post<{ path: string }>(`/api/nodes/${code}/run`, { start: false }), 201).body.path
    const { cell } = await sharedRound(`start ${draft}`)
    expect(String(cell.Text)).toMatch(/records who writes it/)
    const run = await node(ts.url, mallory.token, draft)
    expect(run.content.RequestedStatus ?? null).toBeNull()
    expect(run.content.StartedBy ?? null).toBeNull()
    expect((await api(ts.url, alice.token).getNode(leak)).status).toBe(404)
  })

  it('a plain document both may write is created', async () => {
    const doc = `${shared}/note-${n}`
    const { cell } = await sharedRound(`note ${doc}`)
    expect(String(cell.Text)).toMatch(/^done: /)
    expect((await api(ts.url, alice.token).getNode(doc)).body.content).toEqual({ Note: 'by both' })
  })
})

describe('[THR29] a run or an agent writes no message into a thread (it would be asked again, without end)', () => {
  it('a script agent writing a message into its own thread: refused by name, its round answers, no second round', async () => {
    const k = ++n
    const th = `${shared}/self-${k}`
    const again = `${th}/again-${k}`
    const code = `${shared}/poster-${k}`
    const cell = JSON.stringify({ Role: 'user', Author: alice.userId, Text: 'again', CreatedAt: '2026-01-01T00:00:00.000Z' })
    const source = `try { await Mesh.put(${JSON.stringify(again)}, { nodeType: 'ThreadMessage', content: ${cell} }); return 'wrote' } catch (e) { return 'refused: ' + e.code + ': ' + e.message }`
    expectStatus(await api(ts.url, alice.token).putNode(code, 'Code', { Language: 'javascript', IsExecutable: true, Source: source }), 201)
    await createThread(ts.url, alice.token, th, { Agent: { Kind: 'script', CodePath: code } })
    await post(ts.url, alice.token, th, 'go', `g${k}`)
    const done = await settled(ts.url, alice.token, th, ingested(`g${k}`), 30_000)
    expect(done.content.Disposition).toBe('Completed')
    expect(String((await node(ts.url, alice.token, `${th}/_r.g${k}`)).content.Text)).toMatch(/^refused: forbidden: A run or an agent cannot write a message into a thread/)
    expect((await api(ts.url, alice.token).getNode(again)).status).toBe(404)
    expect(done.content.Messages).toEqual([`${th}/g${k}`, `${th}/_r.g${k}`])
    // Alice herself still writes her own message cell directly (as on an offline device): it is asked.
    expectStatus(await api(ts.url, alice.token).putNode(`${th}/own-${k}`, 'ThreadMessage', { Role: 'user', Author: alice.userId, Text: 'me', CreatedAt: new Date().toISOString() }), 201)
    expect((await settled(ts.url, alice.token, th, ingested(`own-${k}`), 30_000)).content.Messages).toHaveLength(4)
  })

  it('[THR31] a reminder into its own thread: a script agent cannot arrange one (only system and Admins write live subscriptions), and one arranged for Alice posts once as a tool cell that asks no round', async () => {
    const k = ++n
    const th = `${shared}/remind-${k}`
    const code = `${shared}/reminder-${k}`
    const sub = `Admin/EventSubscription/remind-${k}`
    const fields = { Id: `remind-${k}`, TriggerType: 'Timer', FireAt: '2020-01-01T00:00:00.000Z', ContinuationType: 'PostThreadMessage', TargetPath: th, Text: 'reminder', Status: 'Pending' }
    const source = `try { await Mesh.put(${JSON.stringify(sub)}, { nodeType: 'EventSubscription', content: ${JSON.stringify(fields)} }); return 'arranged' } catch (e) { return 'refused: ' + e.code }`
    expectStatus(await api(ts.url, alice.token).putNode(code, 'Code', { Language: 'javascript', IsExecutable: true, Source: source }), 201)
    await createThread(ts.url, alice.token, th, { Agent: { Kind: 'script', CodePath: code } })
    await post(ts.url, alice.token, th, 'remind me', `r${k}`)
    await settled(ts.url, alice.token, th, ingested(`r${k}`), 30_000)
    expect((await node(ts.url, alice.token, `${th}/_r.r${k}`)).content.Text).toBe('refused: forbidden')
    expect(await ts.server.nodes.get(SYSTEM, sub as NodePath)).toBeNull()
    // One arranged for Alice (by the system, as an invite or a delegation is): due already, it fires.
    await ts.server.nodes.create(SYSTEM, sub as NodePath, { nodeType: 'EventSubscription', name: `remind-${k}`, content: { ...fields, CreatedBy: alice.userId } })
    const posted = await waitFor(async () => {
      const x = await node(ts.url, alice.token, th)
      return ((x.content.Messages ?? []) as string[]).includes(`${th}/_t.remind-${k}`) ? x : null
    }, { description: 'the reminder posted' })
    expect((await node(ts.url, alice.token, `${th}/_t.remind-${k}`)).content).toMatchObject({ Role: 'tool', Text: 'reminder' })
    // Alice's next message is the second round: the reminder asked none of its own.
    await post(ts.url, alice.token, th, 'thanks', `t${k}`)
    const done = await settled(ts.url, alice.token, th, ingested(`t${k}`), 30_000)
    expect(((done.content.Messages ?? []) as string[]).filter((m) => m.includes('/_r.'))).toEqual([`${th}/_r.r${k}`, `${th}/_r.t${k}`])
    expect(posted.content.Messages).toContain(`${th}/_t.remind-${k}`)
  })

  it("a model's create tool in Alice's own round: a message in her name is refused (a tool error the model sees)", async () => {
    const k = ++n
    const th = await createThread(ts.url, alice.token, `${shared}/llm-self-${k}`, { Agent: { Kind: 'llm', Approve: [] } })
    const forged = `${th}/again-${k}`
    await post(ts.url, alice.token, th, `forge ${forged} ${alice.userId} say it again`, `f${k}`)
    const done = await settled(ts.url, alice.token, th, ingested(`f${k}`), 30_000)
    expect(String((await node(ts.url, alice.token, `${th}/_r.f${k}`)).content.Text)).toMatch(/forbidden: A run or an agent cannot write a message into a thread/)
    expect((await api(ts.url, alice.token).getNode(forged)).status).toBe(404)
    expect(done.content.Messages).toHaveLength(2)
  })
})

describe('[THR30] an approval is answered by a person, never by a run or an agent acting for one', () => {
  it("a model in Alice's other thread cannot approve the call her first thread awaits; Alice's own answer still counts", async () => {
    const k = ++n
    const waiting = await createThread(ts.url, alice.token, `${shared}/asks-${k}`, { Agent: { Kind: 'llm' } })
    const doc = `${shared}/approved-${k}`
    await post(ts.url, alice.token, waiting, `note ${doc}`, `w${k}`)
    const asked = await waitFor(async () => {
      const x = await node(ts.url, alice.token, waiting)
      return (x.content.PendingApproval as Record<string, unknown> | undefined) ?? null
    }, { description: 'the approval asked' })
    const other = await createThread(ts.url, alice.token, `${shared}/approver-${k}`, { Agent: { Kind: 'llm', Approve: [] } })
    await post(ts.url, alice.token, other, `approve ${waiting} ${String(asked.Id)}`, `o${k}`)
    await settled(ts.url, alice.token, other, ingested(`o${k}`), 30_000)
    expect(String((await node(ts.url, alice.token, `${other}/_r.o${k}`)).content.Text)).toMatch(/forbidden: An approval is answered by a person/)
    const still = await node(ts.url, alice.token, waiting)
    expect(still.content.PendingApproval).toEqual(asked)
    expect(still.content.ApprovalBy ?? null).toBeNull()
    expect((await api(ts.url, alice.token).getNode(doc)).status).toBe(404)
    expectStatus(await api(ts.url, alice.token).patchNode(waiting, { ApprovalAnswer: { Id: asked.Id, Decision: 'Approved' } }), 200)
    await settled(ts.url, alice.token, waiting, ingested(`w${k}`), 30_000)
    expect((await api(ts.url, alice.token).getNode(doc)).body.content).toEqual({ Note: 'by both' })
  })
})

describe('[THR11] a delegation cannot be blocked by a message planted where its sub-thread will be', () => {
  it("an Editor's message under a sub-thread not made yet is refused (its parent does not exist); the delegation then answers", async () => {
    const th = await createThread(ts.url, alice.token, `${shared}/deleg-${++n}`)
    const sleeping = clock.sleeping
    await post(ts.url, alice.token, th, '/sleep 1000', `d${n}`)
    await waitFor(() => clock.sleeping > sleeping, { description: 'the first round asleep' })
    const id = `dg${n}`
    await post(ts.url, alice.token, th, '/delegate summarise', id)
    const plant = await api(ts.url, mallory.token).putNode(`${th}/_sub.${id}/task`, 'ThreadMessage', { Role: 'user', Author: mallory.userId, Text: 'x', CreatedAt: new Date().toISOString() })
    expect(plant.status).toBe(404)
    expect(errorCode(plant)).toBe('not_found')
    clock.release()
    const done = await settled(ts.url, alice.token, th, ingested(id), 30_000)
    expect(done.content.Disposition).not.toBe('Failed')
    expect((await api(ts.url, alice.token).getNode(`${th}/_sub.${id}`)).status).toBe(200)
  })
})

describe('[THR8] the history a round hands its agent', () => {
  it('leaves out a message one of its authors is denied (the model would repeat it to them)', async () => {
    const th = await createThread(ts.url, alice.token, `${shared}/hist-${++n}`, { Agent: { Kind: 'llm' } })
    await post(ts.url, alice.token, th, 'ALICE-PRIVATE-NOTE', `p${n}`)
    await settled(ts.url, alice.token, th, ingested(`p${n}`), 30_000)
    await grantRole(ts.url, alice.token, `${th}/p${n}`, mallory.userId, 'Viewer', true)
    expect(errorCode(await api(ts.url, mallory.token).getNode(`${th}/p${n}`))).toBe('forbidden')
    const asked = fake.requests.length
    await post(ts.url, mallory.token, th, 'what did she say?', `q${n}`)
    await settled(ts.url, mallory.token, th, ingested(`q${n}`), 30_000)
    const mine = fake.requests.slice(asked)
    expect(mine.length).toBeGreaterThan(0)
    expect(JSON.stringify(mine)).toContain('what did she say?')
    expect(JSON.stringify(mine)).not.toContain('ALICE-PRIVATE-NOTE')
    // Alice's own next round still has it.
    const before = fake.requests.length
    await post(ts.url, alice.token, th, 'and again', `r${n}`)
    await settled(ts.url, alice.token, th, ingested(`r${n}`), 30_000)
    expect(JSON.stringify(fake.requests.slice(before))).toContain('ALICE-PRIVATE-NOTE')
  })
})

describe('[THR13] an approval a person can answer', () => {
  it("a model's tool call id past 200 characters is answered by a short id, and the call runs", async () => {
    const k = ++n
    const th = await createThread(ts.url, alice.token, `${shared}/long-${k}`, { Agent: { Kind: 'llm' } })
    const doc = `${shared}/long-doc-${k}`
    await post(ts.url, alice.token, th, `longid ${doc}`, `l${k}`)
    const pending = await waitFor(async () => ((await node(ts.url, alice.token, th)).content.PendingApproval as { Id: string } | undefined) ?? null, { description: 'the approval asked' })
    expect(pending.Id.length).toBeLessThanOrEqual(200)
    expectStatus(await api(ts.url, alice.token).patchNode(th, { ApprovalAnswer: { Id: pending.Id, Decision: 'Approved' } }), 200)
    const done = await settled(ts.url, alice.token, th, ingested(`l${k}`), 30_000)
    expect(done.content.Disposition).toBe('Completed')
    expect((await api(ts.url, alice.token).getNode(doc)).body.content).toEqual({ Note: 'long id' })
  })
})
