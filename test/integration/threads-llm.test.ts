import * as Y from 'yjs'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createActivitiesEngine } from '../../sync-server/engines/activities/index.js'
import { subscriptionsEngine } from '../../sync-server/engines/subscriptions/index.js'
import { DEFAULT_APPROVE, createThreadsEngine } from '../../sync-server/engines/threads/index.js'
import {
  api,
  createSpace,
  errorCode,
  grantRole,
  lastOf,
  signup,
  startFakeOpenAi,
  startTestServer,
  stockProvider,
  waitFor,
  type ChatRequest,
  type FakeOpenAi,
  type Reply,
  type TestServer,
  type TestUser,
} from '../helpers/index.js'
import { createThread, node, post, settled, statusIs } from './threads-helpers.js'

/**
 * The LLM agent ([THR10]–[THR15]) against a real OpenAI-compatible HTTP server on loopback
 * (test/helpers/openai-server.ts: SSE chunks as the OpenAI API sends them, tool_calls deltas
 * included) and the script agent ([THR16]) on the real activities engine.
 */

let fake: FakeOpenAi
let ts: TestServer
let alice: TestUser
let bob: TestUser
let carol: TestUser
let viewer: TestUser
let space: string
let other: string
let n = 0

/** What the model answers: a tool result is echoed back; else the last user message says what to do. */
function reply(req: ChatRequest): Reply {
  const last = req.messages[req.messages.length - 1]!
  if (last.role === 'tool') return { text: ['done: ', typeof last.content === 'string' ? last.content : JSON.stringify(last.content)] }
  const said = lastOf(req, 'user')
  let m = /^read (\S+)$/.exec(said)
  if (m) return { text: ['Reading. '], toolCalls: [{ id: `call_read_${++n}`, name: 'read', args: { path: m[1] } }] }
  m = /^patch (\S+) (\S+)$/.exec(said)
  if (m) return { toolCalls: [{ id: `call_patch_${++n}`, name: 'patch', args: { path: m[1], patch: { Title: m[2] } } }] }
  m = /^run (\S+) (\d+)$/.exec(said)
  if (m) return { toolCalls: [{ id: `call_run_${++n}`, name: 'run', args: { codePath: m[1], inputs: { X: Number(m[2]) } } }] }
  if (said === 'hold') return { text: ['partial '], hold: true }
  return { text: ['Hel', 'lo, ', 'wor', 'ld'] }
}

beforeAll(async () => {
  fake = await startFakeOpenAi(reply)
  const llm = { baseURL: fake.url, apiKey: 'test-key', model: 'test-model', approve: DEFAULT_APPROVE, maxSteps: 8 }
  ts = await startTestServer({ config: { engines: [subscriptionsEngine, createActivitiesEngine({ seedTemplates: false }), createThreadsEngine({ llm })] } })
  alice = await signup(ts.url)
  bob = await signup(ts.url)
  carol = await signup(ts.url)
  viewer = await signup(ts.url)
  space = await createSpace(ts.url, alice.token)
  other = await createSpace(ts.url, alice.token)
  await grantRole(ts.url, alice.token, space, bob.userId, 'Editor')
  await grantRole(ts.url, alice.token, space, carol.userId, 'Editor')
  await grantRole(ts.url, alice.token, space, viewer.userId, 'Viewer')
})
afterAll(async () => {
  await ts.cleanup()
  await fake.close()
})

/** The thread once an approval is pending on it. */
const pendingOn = (th: string) =>
  waitFor(async () => {
    const x = await node(ts.url, alice.token, th)
    return x.content.PendingApproval && x.content.Round ? x : null
  }, 30_000)

/** A Document of alice's at `parent` with Title `title`. */
async function docAt(parent: string, name: string, title: string): Promise<string> {
  const doc = `${parent}/${name}-${++t}`
  await api(ts.url, alice.token).putNode(doc, 'Document', { Title: title })
  return doc
}

let t = 0
const llmThread = (extra: Record<string, unknown> = {}) => createThread(ts.url, alice.token, `${space}/llm${++t}`, { Agent: { Kind: 'llm', ...extra } })

describe('threads: the LLM agent', () => {
  it('[THR10] streams the model\'s tokens into the response cell (a stock watcher sees growing prefixes); model and key from the settings', async () => {
    const th = await llmThread({ Model: 'thread-model' })
    // The round's stream is held open so the watcher is there before the tokens.
    await post(ts.url, alice.token, th, 'hold', 'h1')
    await waitFor(() => fake.holding > 0, 30_000)
    const watcher = stockProvider(ts.url, `${th}/_r.h1`, bob.token)
    try {
      await watcher.synced()
      const text = await waitFor(() => {
        const x = watcher.content.get('Text') as Y.Text | undefined
        return x && x.toString() === 'partial ' ? x : undefined
      }, 30_000)
      expect(text).toBeInstanceOf(Y.Text)
      fake.release()
      await settled(ts.url, alice.token, th, (x) => x.content.Disposition === 'Completed')
      expect(text.toString()).toBe('partial ')
    } finally {
      watcher.destroy()
    }
    const r0 = fake.requests.length
    await post(ts.url, alice.token, th, 'say hello', 's1')
    const done = await settled(ts.url, alice.token, th, (x) => ((x.content.IngestedMessageIds as string[]) ?? []).includes('s1'))
    expect(done.content.Disposition).toBe('Completed')
    expect((await node(ts.url, alice.token, `${th}/_r.s1`)).content).toMatchObject({ Role: 'assistant', Text: 'Hello, world' })
    const req = fake.requests[r0]!
    expect(req.model).toBe('thread-model')
    expect(req.stream).toBe(true)
    // The conversation so far goes with the round: the earlier round, then this one's message.
    expect(req.messages.map((m) => m.role)).toEqual(['system', 'user', 'assistant', 'user'])
    expect(lastOf(req, 'user')).toBe('say hello')
    expect(req.tools?.map((x) => x.function.name).sort()).toEqual(['create', 'delegate', 'patch', 'query', 'read', 'run'])
    expect(fake.auth.at(-1)).toBe('Bearer test-key')
  })

  it('[THR11] a tool call runs as the round\'s author: read returns the node to the model, recorded on the cell', async () => {
    const doc = await docAt(space, 'notes', 'the plan')
    const th = await llmThread()
    await post(ts.url, alice.token, th, `read ${doc}`, 'r1')
    await settled(ts.url, alice.token, th, (x) => x.content.Disposition === 'Completed')
    const cell = await node(ts.url, alice.token, `${th}/_r.r1`)
    expect(cell.content.Text).toMatch(/^Reading\. done: .*the plan/)
    expect(cell.content.ToolCalls).toEqual([expect.objectContaining({ Tool: 'read', Args: { path: doc }, Status: 'Done', Step: 0 })])
    // The model was given the tool result for its call id.
    const toolMsg = fake.requests.at(-1)!.messages.at(-1)!
    expect(toolMsg.role).toBe('tool')
    expect(String(toolMsg.content)).toContain('the plan')
  })

  it('[THR11] a tool call is refused when ONE author of the round lacks the right: a tool error to the model, nothing read', async () => {
    const secret = await docAt(other, 'secret', 'only alice')
    const th = await llmThread()
    // One round carrying carol's and alice's messages: both are queued behind a held round.
    await post(ts.url, alice.token, th, 'hold', 'x0')
    await waitFor(() => fake.holding > 0, 30_000)
    await post(ts.url, carol.token, th, 'me too', 'x1')
    await post(ts.url, alice.token, th, `read ${secret}`, 'x2')
    fake.release()
    await settled(ts.url, alice.token, th, (x) => ((x.content.IngestedMessageIds as string[]) ?? []).includes('x2') && x.content.Disposition === 'Completed')
    const cell = await node(ts.url, alice.token, `${th}/_r.x1`)
    const [call] = cell.content.ToolCalls as Array<Record<string, unknown>>
    expect(call).toMatchObject({ Tool: 'read', Status: 'Error' })
    expect(String(call!.Error)).toMatch(/^forbidden: /)
    expect(String(call!.Error)).toContain(carol.userId)
    expect(call!.Result).toBeUndefined()
    const last = fake.requests.at(-1)!
    expect(String(last.messages.at(-1)!.content)).toMatch(/forbidden/)
    expect(JSON.stringify(last)).not.toContain('only alice')
  })

  it('[THR13][THR14] an approval round-trip: the round waits, a person with Update approves (the patch runs) or denies (a tool error "denied by …")', async () => {
    const doc = await docAt(space, 'target', 'before')
    const th = await llmThread()
    await post(ts.url, alice.token, th, `patch ${doc} approved`, 'p1')
    const waiting = await pendingOn(th)
    expect(waiting.content).toMatchObject({ Status: 'Executing', Disposition: 'AwaitingInput' })
    const pending = waiting.content.PendingApproval as Record<string, unknown>
    expect(pending).toMatchObject({ Tool: 'patch', Args: { path: doc, patch: { Title: 'approved' } } })
    expect(typeof pending.Summary).toBe('string')
    expect(typeof pending.RequestedAt).toBe('string')
    expect((await node(ts.url, alice.token, doc)).content.Title).toBe('before')
    // A Viewer may not answer; an answer to another approval is a conflict; the engine's fields are its own.
    expect((await api(ts.url, viewer.token).patchNode(th, { ApprovalAnswer: { Id: pending.Id, Decision: 'Approved' } })).status).toBe(403)
    expect(errorCode(await api(ts.url, bob.token).patchNode(th, { ApprovalAnswer: { Id: 'nope', Decision: 'Approved' } }))).toBe('conflict')
    expect(errorCode(await api(ts.url, bob.token).patchNode(th, { ApprovalBy: bob.userId }))).toBe('forbidden_field')
    expect(errorCode(await api(ts.url, bob.token).patchNode(th, { PendingApproval: null }))).toBe('forbidden_field')
    expect((await api(ts.url, bob.token).patchNode(th, { ApprovalAnswer: { Id: pending.Id, Decision: 'Approved' } })).status).toBe(200)
    const done = await settled(ts.url, alice.token, th, (x) => x.content.Disposition === 'Completed')
    for (const f of ['PendingApproval', 'ApprovalAnswer', 'ApprovalBy']) expect(done.content[f]).toBeUndefined()
    expect((await node(ts.url, alice.token, doc)).content.Title).toBe('approved')
    const [call] = (await node(ts.url, alice.token, `${th}/_r.p1`)).content.ToolCalls as Array<Record<string, unknown>>
    expect(call).toMatchObject({ Tool: 'patch', Status: 'Done', ApprovedBy: bob.userId })

    // Denied: the tool never runs; the model is told who denied it.
    await post(ts.url, alice.token, th, `patch ${doc} denied`, 'p2')
    const again = await pendingOn(th)
    const id = (again.content.PendingApproval as Record<string, unknown>).Id
    expect((await api(ts.url, carol.token).patchNode(th, { ApprovalAnswer: { Id: id, Decision: 'Denied' } })).status).toBe(200)
    await settled(ts.url, alice.token, th, (x) => ((x.content.IngestedMessageIds as string[]) ?? []).includes('p2') && x.content.Disposition === 'Completed')
    expect((await node(ts.url, alice.token, doc)).content.Title).toBe('approved')
    const [denied] = (await node(ts.url, alice.token, `${th}/_r.p2`)).content.ToolCalls as Array<Record<string, unknown>>
    expect(denied).toMatchObject({ Status: 'Denied', Error: `denied by ${carol.userId}` })
    expect(String(fake.requests.at(-1)!.messages.at(-1)!.content)).toContain(`denied by ${carol.userId}`)
  })

  it('[THR11][THR13] the run tool through a round: it waits for approval, runs the Code node as the round\'s author, and its return value goes to the model', async () => {
    const secret = await docAt(other, 'secret', 'alice only')
    const code = `${space}/times21-${++t}`
    await api(ts.url, alice.token).putNode(code, 'Code', { Language: 'javascript', IsExecutable: true, Source: `const s = await Mesh.get(${JSON.stringify(secret)}); return { n: Inputs.X * 21, title: s.content.Title }` })
    const th = await llmThread()
    await post(ts.url, alice.token, th, `run ${code} 2`, 'run1')
    const waiting = await pendingOn(th)
    const pending = waiting.content.PendingApproval as Record<string, unknown>
    expect(pending).toMatchObject({ Tool: 'run', Args: { codePath: code, inputs: { X: 2 } } })
    expect((await api(ts.url, alice.token).patchNode(th, { ApprovalAnswer: { Id: pending.Id, Decision: 'Approved' } })).status).toBe(200)
    await settled(ts.url, alice.token, th, (x) => x.content.Disposition === 'Completed')
    const [call] = (await node(ts.url, alice.token, `${th}/_r.run1`)).content.ToolCalls as Array<Record<string, unknown>>
    expect(call).toMatchObject({ Tool: 'run', Status: 'Done', ApprovedBy: alice.userId })
    // The script read alice's private node: it ran as alice, the round's author.
    expect(JSON.stringify(call!.Result)).toContain('42')
    expect(JSON.stringify(call!.Result)).toContain('alice only')
    expect(String(fake.requests.at(-1)!.messages.at(-1)!.content)).toContain('42')
  })

  it('[THR11] the run tool as someone who may not run the Code node: a tool error, no approval asked, nothing runs', async () => {
    const code = `${other}/private-code-${++t}`
    await api(ts.url, alice.token).putNode(code, 'Code', { Language: 'javascript', IsExecutable: true, Source: 'return 1' })
    const th = await llmThread()
    await post(ts.url, carol.token, th, `run ${code} 3`, 'run2')
    const done = await settled(ts.url, alice.token, th, (x) => ((x.content.IngestedMessageIds as string[]) ?? []).includes('run2') && x.content.Disposition === 'Completed')
    expect(done.content.PendingApproval).toBeUndefined()
    const [call] = (await node(ts.url, alice.token, `${th}/_r.run2`)).content.ToolCalls as Array<Record<string, unknown>>
    expect(call).toMatchObject({ Tool: 'run', Status: 'Error' })
    expect(String(call!.Error)).toMatch(/^forbidden: /)
    expect(call!.Result).toBeUndefined()
    expect((await node(ts.url, alice.token, code)).content.LastActivityPath).toBeUndefined()
  })

  it('[THR14] an approved call runs only if the approver could make it too', async () => {
    // Bob (Editor of the thread's space) approves a patch of alice's other space, where he has no right.
    const doc = await docAt(other, 'private', 'before')
    const th = await llmThread()
    await post(ts.url, alice.token, th, `patch ${doc} changed`, 'a1')
    const waiting = await pendingOn(th)
    const id = (waiting.content.PendingApproval as Record<string, unknown>).Id
    expect((await api(ts.url, bob.token).patchNode(th, { ApprovalAnswer: { Id: id, Decision: 'Approved' } })).status).toBe(200)
    await settled(ts.url, alice.token, th, (x) => x.content.Disposition === 'Completed')
    expect((await node(ts.url, alice.token, doc)).content.Title).toBe('before')
    const [call] = (await node(ts.url, alice.token, `${th}/_r.a1`)).content.ToolCalls as Array<Record<string, unknown>>
    expect(call).toMatchObject({ Status: 'Error', ApprovedBy: bob.userId })
    expect(String(call!.Error)).toContain(bob.userId)
  })

  it('[THR19][THR14] cancel while a round waits for an approval: Cancelled with the fields cleared, the call marked, a late answer refused, nothing runs', async () => {
    const doc = await docAt(space, 'stopped', 'before')
    const th = await llmThread()
    await post(ts.url, alice.token, th, `patch ${doc} never`, 'q1')
    const waiting = await pendingOn(th)
    const id = (waiting.content.PendingApproval as Record<string, unknown>).Id
    // Crafted answers change nothing: a forged author, an answer to another id, a Viewer's answer.
    expect(errorCode(await api(ts.url, bob.token).patchNode(th, { ApprovalAnswer: { Id: id, Decision: 'Approved', By: alice.userId } }))).toBe('invalid_content')
    expect(errorCode(await api(ts.url, bob.token).patchNode(th, { ApprovalAnswer: { Id: `${String(id)}x`, Decision: 'Approved' } }))).toBe('conflict')
    expect(errorCode(await api(ts.url, viewer.token).patchNode(th, { ApprovalAnswer: { Id: id, Decision: 'Approved' } }))).toBe('forbidden')
    const asked = fake.requests.length
    expect((await api(ts.url, bob.token).patchNode(th, { RequestedStatus: 'Cancelled' })).status).toBe(200)
    const done = await settled(ts.url, alice.token, th, (x) => x.content.Status === 'Cancelled')
    for (const f of ['PendingApproval', 'ApprovalAnswer', 'ApprovalBy', 'Disposition', 'RequestedStatus']) expect(done.content[f], f).toBeUndefined()
    const late = await api(ts.url, bob.token).patchNode(th, { ApprovalAnswer: { Id: id, Decision: 'Approved' } })
    expect(errorCode(late)).toBe('conflict')
    expect((await node(ts.url, alice.token, th)).content.ApprovalAnswer).toBeUndefined()
    expect((await node(ts.url, alice.token, doc)).content.Title).toBe('before')
    const [call] = (await node(ts.url, alice.token, `${th}/_r.q1`)).content.ToolCalls as Array<Record<string, unknown>>
    expect(call).toMatchObject({ Tool: 'patch', Status: 'Error', Error: 'cancelled while waiting for approval' })
    expect(call!.ApprovedBy).toBeUndefined()
    // The model was not asked again.
    expect(fake.requests.length).toBe(asked)
  })

  it('[THR12] cancel mid-stream aborts the HTTP request to the model; Status Cancelled, the partial text kept', async () => {
    const th = await llmThread()
    const before = fake.aborted
    await post(ts.url, alice.token, th, 'hold', 'c1')
    await waitFor(() => fake.holding > 0, 30_000)
    await waitFor(async () => (await node(ts.url, alice.token, `${th}/_r.c1`)).content.Text === 'partial ', 30_000)
    expect((await api(ts.url, bob.token).patchNode(th, { RequestedStatus: 'Cancelled' })).status).toBe(200)
    const done = await settled(ts.url, alice.token, th, (x) => x.content.Status === 'Cancelled')
    expect(done.content.RequestedStatus).toBeUndefined()
    await waitFor(() => fake.aborted === before + 1, 30_000)
    expect(fake.holding).toBe(0)
    expect((await node(ts.url, alice.token, `${th}/_r.c1`)).content.Text).toBe('partial ')
  })

  it('[THR15] a pending approval survives a restart: the resumed round waits on it, and the answer continues it once', async () => {
    const doc = await docAt(space, 'restart', 'before')
    const th = await llmThread()
    await post(ts.url, alice.token, th, `patch ${doc} after-restart`, 'k1')
    const waiting = await pendingOn(th)
    const pending = waiting.content.PendingApproval as Record<string, unknown>
    const calls = fake.requests.length
    await ts.restart()
    const after = await statusIs(ts.url, alice.token, th, 'Executing')
    expect(after.content.PendingApproval).toEqual(pending)
    expect((await api(ts.url, bob.token).patchNode(th, { ApprovalAnswer: { Id: pending.Id, Decision: 'Approved' } })).status).toBe(200)
    await settled(ts.url, alice.token, th, (x) => x.content.Disposition === 'Completed')
    expect((await node(ts.url, alice.token, doc)).content.Title).toBe('after-restart')
    // The model was not asked again for the step it had answered: one more request, the tool result's.
    expect(fake.requests.length).toBe(calls + 1)
    const [call] = (await node(ts.url, alice.token, `${th}/_r.k1`)).content.ToolCalls as Array<Record<string, unknown>>
    expect(call).toMatchObject({ Status: 'Done', ApprovedBy: bob.userId })
  })
})

/** A Code node of alice's with `source`, and a thread whose script agent runs it. */
async function scriptThread(name: string, source: string): Promise<{ code: string; th: string }> {
  const code = `${space}/${name}-${++t}`
  await api(ts.url, alice.token).putNode(code, 'Code', { Language: 'javascript', IsExecutable: true, Source: source })
  return { code, th: await createThread(ts.url, alice.token, `${space}/script${t}`, { Agent: { Kind: 'script', CodePath: code } }) }
}

describe('threads: the script agent', () => {
  it('[THR16] the round runs the Code node as an activity as its author: log lines and the return value stream into the cell', async () => {
    const { code, th } = await scriptThread('echo', "Log.info('thinking'); const me = await Mesh.get(Inputs.Thread); return 'Echo: ' + Inputs.Messages.join(' | ') + ' in ' + me.nodeType")
    await post(ts.url, alice.token, th, 'hi there', 's1')
    await settled(ts.url, alice.token, th, (x) => x.content.Disposition === 'Completed')
    const cell = await node(ts.url, alice.token, `${th}/_r.s1`)
    expect(cell.content.Text).toBe('thinking\nEcho: hi there in Thread')
    const run = await node(ts.url, alice.token, String(cell.content.ActivityPath))
    expect(run.content).toMatchObject({ Status: 'Succeeded', StartedBy: alice.userId, CodePath: code })
  })

  it('[THR16] a failing script fails the round with its error', async () => {
    const { th } = await scriptThread('boom', "throw new Error('boom')")
    await post(ts.url, alice.token, th, 'go', 'f1')
    await settled(ts.url, alice.token, th, (x) => x.content.Disposition === 'Failed')
    expect(String((await node(ts.url, alice.token, `${th}/_r.f1`)).content.Error)).toMatch(/boom/)
  })

  it('[THR16] cancelling the round cancels its activity; a round of two authors runs no code', async () => {
    const { th } = await scriptThread('slow', "Log.info('started'); await sleep(600000); return 'never'")
    await post(ts.url, alice.token, th, 'go', 'c1')
    const cell = await waitFor(async () => {
      const c = await node(ts.url, alice.token, `${th}/_r.c1`)
      return c.content.Text === 'started\n' && typeof c.content.ActivityPath === 'string' ? c : null
    }, 30_000)
    // Two authors wait for the next round: it may not lend their rights to one run.
    await post(ts.url, carol.token, th, 'carol too', 'c2')
    await post(ts.url, alice.token, th, 'and alice', 'c3')
    expect((await api(ts.url, alice.token).patchNode(th, { RequestedStatus: 'Cancelled' })).status).toBe(200)
    await waitFor(async () => (await node(ts.url, alice.token, String(cell.content.ActivityPath))).content.Status === 'Cancelled', 30_000)
    const next = await settled(ts.url, alice.token, th, (x) => ((x.content.IngestedMessageIds as string[]) ?? []).includes('c3') && x.content.Disposition === 'Failed')
    expect(next.content.Messages).toEqual([`${th}/c1`, `${th}/_r.c1`, `${th}/c2`, `${th}/c3`, `${th}/_r.c2`])
    const refused = await node(ts.url, alice.token, `${th}/_r.c2`)
    expect(String(refused.content.Error)).toMatch(/^forbidden: .*acts as one person/)
    expect(refused.content.ActivityPath).toBeUndefined()
  })
})
