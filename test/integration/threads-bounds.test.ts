import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { SYSTEM, type NodePath } from '../../shared/index.js'
import { createActivitiesEngine } from '../../sync-server/engines/activities/index.js'
import { subscriptionsEngine } from '../../sync-server/engines/subscriptions/index.js'
import { DEFAULT_APPROVE, createThreadsEngine } from '../../sync-server/engines/threads/index.js'
import { api, createSpace, expectStatus, lastOf, signup, startFakeOpenAi, startTestServer, waitFor, type ChatRequest, type FakeOpenAi, type Reply, type TestServer, type TestUser } from '../helpers/index.js'
import { createThread, node, post, settled } from './threads-helpers.js'

/**
 * [THR24] Every round is bounded: delegation depth, tool calls a step and a round, model steps,
 * tokens a step (sent to the model), characters a response cell holds. Against a real server and
 * the OpenAI-compatible loopback server (test/helpers/openai-server.ts).
 */

let fake: FakeOpenAi
let ts: TestServer
let alice: TestUser
let space: string
let n = 0
const MAX_CHARS = 1_000
/** Rejections nobody handled while this file ran: in production each one ends the process. */
const unhandled: unknown[] = []
const onUnhandled = (err: unknown) => unhandled.push(err)

/** The first user message of the request says how the model behaves for the whole round. */
function reply(req: ChatRequest): Reply {
  const said = lastOf(req, 'user')
  if (said === 'many') return { toolCalls: Array.from({ length: 50 }, (_, i) => ({ id: `call_many_${++n}_${i}`, name: 'read', args: { path: space } })) }
  if (said === 'loop') return { text: ['again '], toolCalls: [{ id: `call_loop_${++n}`, name: 'read', args: { path: space } }] }
  if (said === 'long') return { text: Array.from({ length: 30 }, () => 'x'.repeat(99) + ' ') }
  const last = req.messages[req.messages.length - 1]!
  if (last.role === 'tool') return { text: ['done: ', typeof last.content === 'string' ? last.content : JSON.stringify(last.content)] }
  if (said === 'hand off') return { toolCalls: [{ id: `call_dg_${++n}`, name: 'delegate', args: { task: 'sub task' } }] }
  return { text: ['ok'] }
}

beforeAll(async () => {
  process.on('unhandledRejection', onUnhandled)
  fake = await startFakeOpenAi(reply)
  const llm = { baseURL: fake.url, apiKey: 'k', model: 'test-model', approve: DEFAULT_APPROVE, maxSteps: 8, maxOutputTokens: 123 }
  ts = await startTestServer({ config: { engines: [subscriptionsEngine, createActivitiesEngine({ seedTemplates: false }), createThreadsEngine({ llm, maxDelegationDepth: 2, maxResponseChars: MAX_CHARS })] } })
  alice = await signup(ts.url)
  space = await createSpace(ts.url, alice.token)
})
afterAll(async () => {
  process.off('unhandledRejection', onUnhandled)
  await ts.cleanup()
  await fake.close()
})

/** An LLM round of `said` on a new thread, run to its end: the thread's Disposition and the response cell. */
async function llmRound(said: string, id: string) {
  const t = await createThread(ts.url, alice.token, `${space}/llm${++n}`, { Agent: { Kind: 'llm' } })
  await post(ts.url, alice.token, t, said, id)
  const done = await settled(ts.url, alice.token, t, (x) => x.content.Disposition !== undefined, 60_000)
  return { disposition: done.content.Disposition, cell: (await node(ts.url, alice.token, `${t}/_r.${id}`)).content }
}

/** Requests made for the round whose first message was `said`. */
const requestsFor = (said: string) => fake.requests.filter((r) => lastOf(r, 'user') === said)

describe('[THR24] round bounds', () => {
  it('a delegation past the depth limit is refused with the reason in the thread, not a crash', async () => {
    const t = await createThread(ts.url, alice.token, `${space}/deep${++n}`)
    await post(ts.url, alice.token, t, '/delegate /delegate /delegate hi', 'd1')
    const done = await settled(ts.url, alice.token, t, (x) => x.content.Disposition !== undefined)
    expect(done.content.Disposition).toBe('Completed')
    const second = `${t}/_sub.d1/_sub.task`
    const refused = await node(ts.url, alice.token, second)
    expect(refused.content).toMatchObject({ Status: 'Idle', Disposition: 'Failed' })
    expect(String((await node(ts.url, alice.token, `${second}/_r.task`)).content.Error)).toMatch(/^invalid_request: Delegation refused: .* 3 sub-threads deep; at most 2\./)
    expect(await ts.server.nodes.get(SYSTEM, `${second}/_sub.task` as NodePath)).toBeNull()
    expect(String((await node(ts.url, alice.token, `${t}/_r.d1`)).content.Text)).toMatch(/^Delegated: Delegated: invalid_request: Delegation refused/)
  })

  it('a step asking for 50 tool calls fails the round before any runs; the model is asked once', async () => {
    const { disposition, cell } = await llmRound('many', 'm1')
    expect(disposition).toBe('Failed')
    expect(String(cell.Error)).toMatch(/50 tool calls in one step; at most 16/)
    expect(cell.ToolCalls ?? []).toEqual([])
    expect(requestsFor('many')).toHaveLength(1)
  })

  it('a model that always calls a tool fails after exactly 8 requests (WEFT_LLM_MAX_STEPS); maxOutputTokens is sent', async () => {
    const { disposition, cell } = await llmRound('loop', 'l1')
    expect(disposition).toBe('Failed')
    expect(String(cell.Error)).toMatch(/used its 8 steps/)
    expect(cell.ToolCalls).toHaveLength(8)
    const reqs = requestsFor('loop')
    expect(reqs).toHaveLength(8)
    expect(reqs[0]!.max_tokens).toBe(123)
  })

  it('a model streaming past the response cell\'s cap fails the round; the cell keeps exactly the cap', async () => {
    const { disposition, cell } = await llmRound('long', 'g1')
    expect(disposition).toBe('Failed')
    expect(String(cell.Error)).toMatch(/^payload_too_large: The answer passed 1000 characters/)
    expect(String(cell.Text)).toHaveLength(MAX_CHARS)
  })

  it('a script agent logging past the response cell\'s cap while it still runs: the run is cancelled, the round fails by name, no rejection is left unhandled (it ended the process)', async () => {
    const code = `${space}/chatty${++n}`
    const source = "Log.info('x'.repeat(600)); Log.info('y'.repeat(600)); Log.info('z'); await sleep(120000); return 'done'"
    expectStatus(await api(ts.url, alice.token).putNode(code, 'Code', { Language: 'javascript', IsExecutable: true, Source: source }), 201)
    const t = await createThread(ts.url, alice.token, `${space}/script${n}`, { Agent: { Kind: 'script', CodePath: code } })
    await post(ts.url, alice.token, t, 'go', 'sc1')
    const done = await settled(ts.url, alice.token, t, (x) => x.content.Disposition !== undefined, 60_000)
    expect(done.content.Disposition).toBe('Failed')
    const cell = (await node(ts.url, alice.token, `${t}/_r.sc1`)).content
    expect(String(cell.Error)).toMatch(/^payload_too_large: The answer passed 1000 characters/)
    expect(String(cell.Text)).toHaveLength(MAX_CHARS)
    const run = await waitFor(async () => {
      const [r] = await ts.server.nodes.query(SYSTEM, { nodeType: 'ActivityLog', where: { CodePath: code } })
      return r && r.content.Status === 'Cancelled' ? r : null
    }, { description: 'the run cancelled' })
    expect(run.content.Status).toBe('Cancelled')
    expect(unhandled.map(String)).toEqual([])
  })

  it('[THR11][THR9] the LLM `delegate` tool through a round: a sub-thread answers, the model gets its answer, the hand-back is recorded once', async () => {
    const t = await createThread(ts.url, alice.token, `${space}/llm${++n}`, { Agent: { Kind: 'llm' } })
    await post(ts.url, alice.token, t, 'hand off', 'h1')
    const done = await settled(ts.url, alice.token, t, (x) => x.content.Disposition !== undefined, 60_000)
    expect(done.content.Disposition).toBe('Completed')
    const cell = (await node(ts.url, alice.token, `${t}/_r.h1`)).content
    const [call] = cell.ToolCalls as Array<{ Id: string; Tool: string; Status: string }>
    expect(call).toMatchObject({ Tool: 'delegate', Status: 'Done' })
    expect(String(cell.Text)).toBe('done: {"answer":"ok"}')
    const sub = `${t}/_sub.h1.${call!.Id}`
    expect((await node(ts.url, alice.token, sub)).content).toMatchObject({ ParentPath: t, Status: 'Idle', Disposition: 'Completed', Agent: { Kind: 'llm' } })
    expect((await node(ts.url, alice.token, `${sub}/_r.task`)).content.Text).toBe('ok')
    const tool = await waitFor(async () => ((await node(ts.url, alice.token, t)).content.Messages as string[]).find((m) => m.includes('/_t.')), 30_000)
    expect((await node(ts.url, alice.token, t)).content.Messages).toEqual([`${t}/h1`, `${t}/_r.h1`, tool])
  })
})
