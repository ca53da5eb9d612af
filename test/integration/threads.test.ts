import fc from 'fast-check'
import * as Y from 'yjs'
import Database from 'better-sqlite3'
import { join } from 'node:path'
import type { CommitInput } from '../../sync-server/storage/types.js'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { subscriptionsEngine, type SubscriptionsEngine } from '../../sync-server/engines/subscriptions/index.js'
import { MAX_MESSAGE_CHARS, createThreadsEngine, type ThreadsEngine } from '../../sync-server/engines/threads/index.js'
import { api, createSpace, errorCode, grantRole, nodeUrlPath, signup, startTestServer, stockProvider, waitFor, type TestServer, type TestUser } from '../helpers/index.js'
import { HeldClock, cells, createThread, expectInvariants, node, post, settled, statusIs } from './threads-helpers.js'

let ts: TestServer
let alice: TestUser
let bob: TestUser
let viewer: TestUser
let space: string
const clock = new HeldClock()
let n = 0
const fresh = () => createThread(ts.url, alice.token, `${space}/t${++n}`)

beforeAll(async () => {
  ts = await startTestServer({ config: { engines: [subscriptionsEngine, createThreadsEngine({ roundClock: clock, llm: null })] } })
  alice = await signup(ts.url)
  bob = await signup(ts.url)
  viewer = await signup(ts.url)
  space = await createSpace(ts.url, alice.token)
  await grantRole(ts.url, alice.token, space, bob.userId, 'Editor')
  await grantRole(ts.url, alice.token, space, viewer.userId, 'Viewer')
})
afterAll(() => ts.cleanup())

/** A fresh thread whose round delegated to a sub-thread that asks `question`; both rest on it. */
async function subAsking(question: string, id: string): Promise<{ t: string; sub: string }> {
  const t = await fresh()
  await post(ts.url, alice.token, t, `/delegate /ask ${question}`, id)
  await settled(ts.url, alice.token, t, (x) => x.content.Disposition === 'AwaitingInput')
  const sub = `${t}/_sub.${id}`
  await settled(ts.url, alice.token, sub, (x) => x.content.Disposition === 'AwaitingInput')
  return { t, sub }
}

const runner = () => (ts.server.engines.find((e) => e.name === 'subscriptions') as SubscriptionsEngine).runner
const engineOf = () => (ts.server.engines.find((e) => e.name === 'threads') as ThreadsEngine).engine

describe('threads: posting', () => {
  it('[THR2] bad input is 400 with a stable code; unknown thread 404; no Thread permission 403; no token 401', async () => {
    const t = await fresh()
    const url = `/api/nodes/${nodeUrlPath(t)}/messages`
    const http = api(ts.url, alice.token)
    for (const body of [{}, { text: 5 }, { text: '' }, { text: 'x', id: '../x' }, { text: 'x', id: '_r.x' }, { text: 'x', id: 7 }, [], 'text']) {
      const res = await http.post(url, body)
      expect(res.status, JSON.stringify(body)).toBe(400)
      expect(errorCode(res)).toBe('invalid_request')
    }
    const big = await http.post(url, { text: 'x'.repeat(100_001) })
    expect(errorCode(big)).toBe('payload_too_large')
    expect(errorCode(await http.post(`/api/nodes/${nodeUrlPath(`${space}/missing`)}/messages`, { text: 'x' }))).toBe('not_found')
    const doc = `${space}/doc${n}`
    await http.putNode(doc, 'Document', {})
    expect(errorCode(await http.post(`/api/nodes/${nodeUrlPath(doc)}/messages`, { text: 'x' }))).toBe('invalid_request')
    const asViewer = await api(ts.url, viewer.token).post(url, { text: 'hi' })
    expect(asViewer.status).toBe(403)
    expect(errorCode(asViewer)).toBe('forbidden')
    const stranger = await signup(ts.url)
    expect((await api(ts.url, stranger.token).post(url, { text: 'hi' })).status).toBe(403)
    expect((await api(ts.url).post(url, { text: 'hi' })).status).toBe(401)
    // Nothing was posted by any of them.
    expect((await node(ts.url, alice.token, t)).content.UserMessageIds ?? []).toEqual([])
  })

  it('[THR1] the round state is the engine\'s: a person may request a cancel but not write Status, Messages or a cell of someone else', async () => {
    const t = await fresh()
    const http = api(ts.url, bob.token)
    for (const patch of [{ Status: 'Executing' }, { Messages: ['x'] }, { PendingUserMessages: ['x'] }, { Disposition: 'Completed' }, { RequestedStatus: 'Executing' }, { Posted: { x: 0 } }]) {
      const res = await http.patchNode(t, patch)
      expect(res.status, JSON.stringify(patch)).toBeGreaterThanOrEqual(400)
    }
    // [THR26] Posted is system's from the start; a thread never posted to is replaced as it was made.
    expect(errorCode(await http.putNode(`${space}/forged-posted`, 'Thread', { Agent: { Kind: 'builtin' }, Posted: { x: 0 } } as never))).toBe('forbidden_field')
    for (let i = 0; i < 2; i++) expect((await http.putNode(`${space}/put-twice`, 'Thread', { Agent: { Kind: 'builtin' } } as never)).status).toBe(i === 0 ? 201 : 200)
    // [THR26] Made with its (empty) Posted map, which a replace leaving it out keeps, and one naming another refuses.
    expect((await http.putNode(`${space}/put-twice`, 'Thread', { Agent: { Kind: 'script', CodePath: `${space}/code` } } as never)).status).toBe(200)
    // [THR27] The change of Agent records who made it, from posting 0 on.
    expect((await node(ts.url, bob.token, `${space}/put-twice`)).content).toEqual({ Agent: { Kind: 'script', CodePath: `${space}/code` }, Posted: {}, AgentSetBy: bob.userId, AgentSince: 0 })
    expect(errorCode(await http.putNode(`${space}/put-twice`, 'Thread', { Agent: { Kind: 'builtin' }, Posted: { x: 0 } } as never))).toBe('forbidden_field')
    const cell = await post(ts.url, alice.token, t, 'mine', 'm1')
    // [THR26] The map the post made: a person may neither change it nor remove it.
    for (const patch of [{ Posted: { m1: 0, x: 1 } }, { Posted: null }]) expect(errorCode(await http.patchNode(t, patch)), JSON.stringify(patch)).toBe('forbidden_field')
    expect(errorCode(await http.patchNode(cell, { Text: 'forged' }))).toBe('forbidden_field')
    expect(errorCode(await http.putNode(`${t}/forged`, 'ThreadMessage', { Role: 'user', Author: alice.userId, Text: 'as alice', CreatedAt: new Date().toISOString() }))).toBe('forbidden_field')
    expect(errorCode(await http.putNode(`${t}/forged2`, 'ThreadMessage', { Role: 'assistant', Author: bob.userId, Text: 'as agent', CreatedAt: new Date().toISOString() }))).toBe('forbidden_field')
    await settled(ts.url, alice.token, t)
  })

  it('[THR26] seeded property: whatever a person writes (PUT, PATCH, as Editor or Viewer), a Thread\'s Posted is what its posts made; a refused write changes nothing', async () => {
    const seed = Number(process.env.THREADS_POSTED_SEED ?? 26)
    const posted = fc.oneof(
      fc.constant(undefined),
      fc.constant({}),
      fc.constant(null),
      fc.constant([]),
      fc.constant('x'),
      fc.dictionary(fc.constantFrom('p1', 'p2', 'x'), fc.oneof(fc.integer({ min: 0, max: 3 }), fc.constant(null))),
    )
    const op = fc.record({ who: fc.constantFrom('editor', 'viewer'), kind: fc.constantFrom('put', 'patch', 'post'), posted, agent: fc.constantFrom('builtin', 'script') })
    let run = 0
    await fc.assert(
      fc.asyncProperty(fc.array(op, { minLength: 1, maxLength: 5 }), async (ops) => {
        const t = await createThread(ts.url, alice.token, `${space}/prop${++run}`)
        const model: Record<string, number> = {}
        for (const [i, o] of ops.entries()) {
          const before = (await node(ts.url, alice.token, t)).content
          if (o.kind === 'post') {
            await post(ts.url, alice.token, t, `message ${i}`, `m${i}`)
            model[`m${i}`] = Object.keys(model).length
          } else {
            const http = api(ts.url, (o.who === 'editor' ? bob : viewer).token)
            const content = { Agent: { Kind: o.agent }, ...(o.posted === undefined ? {} : { Posted: o.posted }) }
            const res = o.kind === 'put' ? await http.putNode(t, 'Thread', content as never) : await http.patchNode(t, o.posted === undefined ? { Agent: content.Agent } : { Posted: o.posted })
            if (res.status >= 400) {
              // Refused by name, never a 500, and Posted untouched (the engine may be answering a post meanwhile).
              expect([res.status, errorCode(res)], JSON.stringify(o)).toSatisfy(([status, code]) => status === 403 && (code === 'forbidden_field' || code === 'forbidden'))
              expect((await node(ts.url, alice.token, t)).content.Posted).toEqual(before.Posted)
            } else if (o.who === 'viewer') {
              // A Viewer's write is accepted only when it changes nothing (a no-op write answers 200).
              expect((await node(ts.url, alice.token, t)).content.Agent, JSON.stringify(o)).toEqual(before.Agent)
            }
          }
          // The guarantee: Posted is exactly what the posts made, on every read.
          expect((await node(ts.url, alice.token, t)).content.Posted, JSON.stringify(ops.slice(0, i + 1))).toEqual(model)
        }
      }),
      { seed, numRuns: 12 },
    )
  })

  it('[THR1][THR2] a user cell made on the device (offline composing) is ingested once by its id', async () => {
    const t = await fresh()
    const res = await api(ts.url, bob.token).putNode(`${t}/offline1`, 'ThreadMessage', { Role: 'user', Author: bob.userId, Text: 'from the train', CreatedAt: new Date().toISOString() })
    expect(res.status).toBe(201)
    const done = await settled(ts.url, alice.token, t, (x) => ((x.content.IngestedMessageIds as string[]) ?? []).includes('offline1'))
    expect(done.content.Messages).toEqual([`${t}/offline1`, `${t}/_r.offline1`])
    // Posting the same id over HTTP later adds nothing.
    expect(await post(ts.url, bob.token, t, 'from the train', 'offline1')).toBe(`${t}/offline1`)
    const again = await settled(ts.url, alice.token, t)
    expect(again.content.Messages).toHaveLength(2)
    // A cell the engine would never ingest (its id is no message id) is refused, not kept unanswered.
    for (const id of ['-dash', '.dot', 'x'.repeat(65)]) {
      const odd = await api(ts.url, bob.token).putNode(`${t}/${id}`, 'ThreadMessage', { Role: 'user', Author: bob.userId, Text: 'odd id', CreatedAt: new Date().toISOString() })
      expect(odd.status, id).toBe(400)
      expect(errorCode(odd), id).toBe('invalid_request')
      expect((await api(ts.url, bob.token).getNode(`${t}/${id}`)).status, id).toBe(404)
    }
    // [THR24] A message made on the device has a post's bound too (it went past it unchecked).
    const long = await api(ts.url, bob.token).putNode(`${t}/long1`, 'ThreadMessage', { Role: 'user', Author: bob.userId, Text: 'x'.repeat(MAX_MESSAGE_CHARS + 1), CreatedAt: new Date().toISOString() })
    expect(long.status).toBe(413)
    expect(errorCode(long)).toBe('payload_too_large')
    expect((await api(ts.url, bob.token).getNode(`${t}/long1`)).status).toBe(404)
  })
})

describe('threads: rounds', () => {
  it('[THR3][THR4] one submit → exactly one response cell, streamed "You said: …", Idle + Completed + LastActivityAt', async () => {
    const t = await fresh()
    const path = await post(ts.url, alice.token, t, 'hello there', 'u1')
    expect(path).toBe(`${t}/u1`)
    const done = await settled(ts.url, alice.token, t, (x) => x.content.Disposition === 'Completed')
    expect(done.content).toMatchObject({ Status: 'Idle', Disposition: 'Completed', Messages: [`${t}/u1`, `${t}/_r.u1`], IngestedMessageIds: ['u1'], UserMessageIds: ['u1'] })
    expect(typeof done.content.LastActivityAt).toBe('string')
    const [user, answer] = await cells(ts.url, alice.token, done)
    expect(user!.content).toMatchObject({ Role: 'user', Author: alice.userId, Text: 'hello there' })
    expect(answer!.content).toMatchObject({ Role: 'assistant', Text: 'You said: hello there' })
    expect(answer!.createdBy).toBe('system')
    // A thread at rest holds nothing of the engine's: no job, no round, no watcher (the feed is the one watcher).
    await waitFor(() => !engineOf().isBusy(t as never))
  })

  it('[THR3] three rapid submits → three ingested, each once', async () => {
    const t = await fresh()
    await Promise.all(['a', 'b', 'c'].map((id) => post(ts.url, alice.token, t, `m ${id}`, id)))
    const done = await settled(ts.url, alice.token, t, (x) => ((x.content.IngestedMessageIds as string[]) ?? []).length === 3)
    expect([...(done.content.IngestedMessageIds as string[])].sort()).toEqual(['a', 'b', 'c'])
    await expectInvariants(ts.url, alice.token, done)
  })

  it('[THR3] a submit during a slow round is queued: Messages [u1, r1, u2, u3, u4, r2]', async () => {
    const t = await fresh()
    await post(ts.url, alice.token, t, '/sleep 1000', 'u1')
    await statusIs(ts.url, alice.token, t, 'Executing')
    await waitFor(() => clock.sleeping > 0)
    for (const id of ['u2', 'u3', 'u4']) await post(ts.url, alice.token, t, id, id)
    expect((await node(ts.url, alice.token, t)).content.PendingUserMessages).toEqual([`${t}/u2`, `${t}/u3`, `${t}/u4`])
    clock.release()
    const done = await settled(ts.url, alice.token, t, (x) => ((x.content.IngestedMessageIds as string[]) ?? []).length === 4)
    expect(done.content.Messages).toEqual([`${t}/u1`, `${t}/_r.u1`, `${t}/u2`, `${t}/u3`, `${t}/u4`, `${t}/_r.u2`])
    expect((await node(ts.url, alice.token, `${t}/_r.u2`)).content.Text).toBe('You said: u2 / u3 / u4')
  })

  it('[THR2] resubmitting an ingested id adds no cell', async () => {
    const t = await fresh()
    await post(ts.url, alice.token, t, 'once', 'same')
    await settled(ts.url, alice.token, t, (x) => x.content.Disposition === 'Completed')
    expect(await post(ts.url, alice.token, t, 'once', 'same')).toBe(`${t}/same`)
    // Another author under the same id is a different message: conflict, nothing added.
    expect(errorCode(await api(ts.url, bob.token).post(`/api/nodes/${nodeUrlPath(t)}/messages`, { id: 'same', text: 'x' }))).toBe('conflict')
    const done = await settled(ts.url, alice.token, t)
    expect(done.content.Messages).toEqual([`${t}/same`, `${t}/_r.same`])
    expect(done.content.UserMessageIds).toEqual(['same'])
  })

  it('[THR4] /fail → an assistant cell with Error and Disposition Failed; /ask → AwaitingInput with the question', async () => {
    const t = await fresh()
    await post(ts.url, alice.token, t, '/fail', 'f1')
    const failed = await settled(ts.url, alice.token, t, (x) => x.content.Disposition === 'Failed')
    expect(failed.content.Status).toBe('Idle')
    const cell = await node(ts.url, alice.token, `${t}/_r.f1`)
    expect(cell.content).toMatchObject({ Role: 'assistant' })
    expect(String(cell.content.Error)).toMatch(/fail/)
    await post(ts.url, alice.token, t, '/ask which colour?', 'q1')
    const asked = await settled(ts.url, alice.token, t, (x) => x.content.Disposition === 'AwaitingInput')
    expect(asked.content.Question).toBe('which colour?')
    expect((await node(ts.url, alice.token, `${t}/_r.q1`)).content.Text).toBe('which colour?')
  })

  it('[THR17] a round of an agent kind the server has none for (no LLM configured) fails with unavailable', async () => {
    const t = await createThread(ts.url, alice.token, `${space}/nollm${++n}`, { Agent: { Kind: 'llm' } })
    await post(ts.url, alice.token, t, 'anyone there?', 'l1')
    await settled(ts.url, alice.token, t, (x) => x.content.Disposition === 'Failed')
    expect(String((await node(ts.url, alice.token, `${t}/_r.l1`)).content.Error)).toMatch(/^unavailable: .*WEFT_LLM_BASE_URL/)
  })

  it('[THR3] 50 concurrent submits from two users: each ingested once, one response cell per round', async () => {
    const t = await fresh()
    const ids = Array.from({ length: 50 }, (_, i) => `c${i}`)
    await Promise.all(ids.map((id, i) => post(ts.url, i % 2 ? bob.token : alice.token, t, `say ${id}`, id)))
    const done = await settled(ts.url, alice.token, t, (x) => ((x.content.IngestedMessageIds as string[]) ?? []).length === 50, 30_000)
    expect([...(done.content.IngestedMessageIds as string[])].sort()).toEqual([...ids].sort())
    await expectInvariants(ts.url, alice.token, done)
  })

  it('[THR8] a round acts only with the rights of every author: an author who lost Thread fails the round', async () => {
    const t = await fresh()
    const carol = await signup(ts.url)
    await grantRole(ts.url, alice.token, space, carol.userId, 'Editor')
    await post(ts.url, alice.token, t, '/sleep 1', 'h1')
    await statusIs(ts.url, alice.token, t, 'Executing')
    await waitFor(() => clock.sleeping > 0)
    await post(ts.url, carol.token, t, 'carol asks', 'k1')
    await post(ts.url, alice.token, t, 'alice too', 'k2')
    expect((await api(ts.url, alice.token).deleteNode(`${space}/_Access/${carol.userId}_Access`)).status).toBe(204)
    clock.release()
    await settled(ts.url, alice.token, t, (x) => x.content.Disposition === 'Failed')
    expect(String((await node(ts.url, alice.token, `${t}/_r.k1`)).content.Error)).toMatch(/forbidden/)
  })
})

describe('threads: cancel and streaming', () => {
  it('[THR6][WEB71] cancel mid-round: Status Cancelled and RequestedStatus cleared in one write; the stopped cell says so; pending input re-dispatches', async () => {
    const t = await fresh()
    await post(ts.url, alice.token, t, '/sleep 1000', 's1')
    await statusIs(ts.url, alice.token, t, 'Executing')
    await waitFor(() => clock.sleeping > 0)
    await post(ts.url, alice.token, t, 'after stop', 's2')
    // A stock watcher records every state of the thread it is sent.
    const watcher = stockProvider(ts.url, t, bob.token)
    await watcher.synced()
    const states: Record<string, unknown>[] = []
    watcher.doc.on('afterTransaction', () => states.push(watcher.json()))
    // Everyone sees the request at once (a person's write), then the engine settles it.
    expect((await api(ts.url, bob.token).patchNode(t, { RequestedStatus: 'Cancelled' })).status).toBe(200)
    const done = await settled(ts.url, alice.token, t, (x) => ((x.content.IngestedMessageIds as string[]) ?? []).length === 2 && x.content.Status === 'Idle')
    expect(done.content.RequestedStatus).toBeUndefined()
    expect(done.content.Messages).toEqual([`${t}/s1`, `${t}/_r.s1`, `${t}/s2`, `${t}/_r.s2`])
    expect((await node(ts.url, alice.token, `${t}/_r.s2`)).content.Text).toBe('You said: after stop')
    // [WEB71] The stopped round's cell says it was stopped (it holds no text); the next one does not.
    expect((await node(ts.url, alice.token, `${t}/_r.s1`)).content).toMatchObject({ Text: '', Stopped: true })
    expect((await node(ts.url, alice.token, `${t}/_r.s2`)).content.Stopped).toBeUndefined()
    // Executing → Cancelled with the request cleared in the same write: no state in between.
    await waitFor(() => states.some((x) => x.Status === 'Idle' && (x.IngestedMessageIds as string[]).length === 2))
    watcher.destroy()
    expect(states.some((x) => x.Status === 'Cancelled')).toBe(true)
    expect(states.filter((x) => x.Status === 'Cancelled' && x.RequestedStatus !== undefined)).toEqual([])
    expect(states.filter((x) => x.Status === 'Executing' && x.RequestedStatus === undefined && (x.IngestedMessageIds as string[]).length === 1)).toEqual([])
  })

  it('[THR6] cancelling a parent cancels its running sub-thread', async () => {
    const t = await fresh()
    await post(ts.url, alice.token, t, '/delegate /sleep 1000', 'd1')
    const sub = `${t}/_sub.d1`
    await statusIs(ts.url, alice.token, sub, 'Executing')
    await waitFor(() => clock.sleeping > 0)
    await api(ts.url, alice.token).patchNode(t, { RequestedStatus: 'Cancelled' })
    const subDone = await settled(ts.url, alice.token, sub, (x) => x.content.Status === 'Cancelled')
    expect(subDone.content.RequestedStatus).toBeUndefined()
    const parent = await settled(ts.url, alice.token, t, (x) => x.content.Status === 'Cancelled')
    expect(parent.content.RequestedStatus).toBeUndefined()
  })

  it('[THR4] a stock y-websocket watcher sees the answer streamed into the response cell as text deltas', async () => {
    const t = await fresh()
    await post(ts.url, alice.token, t, '/sleep 5', 'w1')
    await statusIs(ts.url, alice.token, t, 'Executing')
    await waitFor(() => clock.sleeping > 0)
    const watcher = stockProvider(ts.url, `${t}/_r.w1`, bob.token)
    try {
      await watcher.synced()
      const seen: string[] = []
      const text = await waitFor(() => watcher.content.get('Text') as Y.Text | undefined)
      expect(text).toBeInstanceOf(Y.Text)
      text.observe(() => seen.push(text.toString()))
      clock.release()
      await waitFor(() => text.toString() === 'You said: /sleep 5')
      // A word at a time: the watcher saw growing prefixes, not one write.
      expect(seen.length).toBeGreaterThan(1)
      expect(seen.every((s) => 'You said: /sleep 5'.startsWith(s))).toBe(true)
    } finally {
      watcher.destroy()
    }
    await settled(ts.url, alice.token, t)
  })

  it('[STO5] an answer streamed into its cell while someone watches leaves the row\'s JSON to one coalesced write: no write of the text rewrites the row', async () => {
    const t = await fresh()
    const cell = `${t}/_r.s1`
    const seen: CommitInput[] = []
    const storage = ts.server.storage
    const commit = storage.commit.bind(storage)
    storage.commit = (input) => {
      if (input.path === cell) seen.push(input)
      return commit(input)
    }
    const words = '/sleep 5'
    await post(ts.url, alice.token, t, words, 's1')
    await statusIs(ts.url, alice.token, t, 'Executing')
    await waitFor(() => clock.sleeping > 0)
    const watcher = stockProvider(ts.url, cell, bob.token)
    try {
      await watcher.synced()
      clock.release()
      await settled(ts.url, alice.token, t, (x) => x.content.Disposition === 'Completed')
    } finally {
      storage.commit = commit
      watcher.destroy()
    }
    const texts = seen.filter((c) => c.kind === 'Updated' && c.update !== null)
    expect(texts.length).toBeGreaterThan(1)
    // Every write of the growing text is a Yjs delta only; the row follows, coalesced.
    expect(texts.filter((c) => c.deferContent !== true)).toEqual([])
    const answer = (await api(ts.url, alice.token).getNode(cell)).body
    expect(answer.content.Text).toBe(`You said: ${words}`)
    const db = new Database(join(ts.dataDir, 'weft.db'), { readonly: true })
    try {
      const raw = () => db.prepare('SELECT content, content_stale AS stale FROM nodes WHERE path = ?').get(cell) as { content: string; stale: number }
      await waitFor(() => raw().stale === 0, { timeoutMs: 30_000, description: 'the row written' })
      expect(JSON.parse(raw().content)).toEqual(answer.content)
    } finally {
      db.close()
    }
  })

  it('[THR9] /delegate: a sub-thread (same agent, ParentPath) runs the task; the parent answers "Delegated: " + its answer', async () => {
    const t = await fresh()
    await post(ts.url, alice.token, t, '/delegate write a haiku', 'g1')
    const done = await settled(ts.url, alice.token, t, (x) => x.content.Disposition === 'Completed')
    expect((await node(ts.url, alice.token, `${t}/_r.g1`)).content.Text).toBe('Delegated: You said: write a haiku')
    const sub = await node(ts.url, alice.token, `${t}/_sub.g1`)
    expect(sub.content).toMatchObject({ ParentPath: t, Agent: { Kind: 'builtin' }, Status: 'Idle', Disposition: 'Completed' })
    expect((await node(ts.url, alice.token, `${t}/_sub.g1/task`)).content).toMatchObject({ Role: 'user', Author: alice.userId, Text: 'write a haiku' })
    await expectInvariants(ts.url, alice.token, done)
    expect(engineOf().liveRounds()).not.toContain(t)
  })

  it('[THR23][THR32] a sub-thread asking a question surfaces it in the parent without firing the hand-back; its real completion fires it once, said by the sub-thread\'s name', async () => {
    const t = await fresh()
    await post(ts.url, alice.token, t, '/delegate /ask which colour?', 'k1')
    const asked = await settled(ts.url, alice.token, t, (x) => x.content.Disposition === 'AwaitingInput')
    expect(asked.content.Question).toBe('which colour?')
    expect((await node(ts.url, alice.token, `${t}/_r.k1`)).content.Text).toBe('Delegated: which colour?')
    const sub = `${t}/_sub.k1`
    expect((await node(ts.url, alice.token, sub)).content).toMatchObject({ Status: 'Idle', Disposition: 'AwaitingInput' })
    // The runner saw the sub-thread run and rest on its question, and has done all it will do.
    await runner().idle()
    const toolCells = async () => ((await node(ts.url, alice.token, t)).content.Messages as string[]).filter((m) => m.includes('/_t.'))
    expect(await toolCells()).toEqual([])
    // The question is answered in the sub-thread; its round completes: the hand-back fires, once.
    await post(ts.url, alice.token, sub, 'blue', 'a1')
    await settled(ts.url, alice.token, sub, (x) => x.content.Disposition === 'Completed')
    const tool = await waitFor(async () => (await toolCells())[0])
    await runner().idle()
    await settled(ts.url, alice.token, t)
    expect(await toolCells()).toEqual([tool])
    // [THR32] The sub-thread's name as the Sub-threads list shows it, never its `_sub.` path; About links it.
    const handBack = (await node(ts.url, alice.token, tool)).content
    expect(handBack).toMatchObject({ Role: 'tool', Text: '“Delegated: /ask which colour?” has finished.', About: sub })
    expect(handBack.Text).not.toContain('_sub.')
    expect((await node(ts.url, alice.token, t)).content.Messages).toEqual([`${t}/k1`, `${t}/_r.k1`, tool])
  })

  it('[THR23][THR32] cancelling a sub-thread that waits on its question withdraws it: Cancelled, and the parent is told so (by its name), once', async () => {
    const { t, sub } = await subAsking('which size?', 'c1')
    expect((await api(ts.url, bob.token).patchNode(sub, { RequestedStatus: 'Cancelled' })).status).toBe(200)
    const cancelled = await settled(ts.url, alice.token, sub, (x) => x.content.Status === 'Cancelled')
    expect(cancelled.content.Disposition).toBeUndefined()
    expect(cancelled.content.Question).toBeUndefined()
    expect(cancelled.content.RequestedStatus).toBeUndefined()
    const toolCells = async () => ((await node(ts.url, alice.token, t)).content.Messages as string[]).filter((m) => m.includes('/_t.'))
    const tool = await waitFor(async () => (await toolCells())[0])
    expect((await node(ts.url, alice.token, tool)).content).toMatchObject({ Role: 'tool', Author: 'system', Text: '“Delegated: /ask which size?” was cancelled.', About: sub })
    await runner().idle()
    expect(await toolCells()).toEqual([tool])
    // A cancelled sub-thread answers its next message as any thread does.
    await post(ts.url, alice.token, sub, 'again', 'c2')
    expect((await settled(ts.url, alice.token, sub, (x) => (x.content.IngestedMessageIds as string[]).includes('c2'))).content.Status).toBe('Idle')
    await runner().idle()
    expect(await toolCells()).toEqual([tool])
  })

  it('[THR23] cancelling the parent that surfaced a sub-thread\'s question cancels the sub-thread too', async () => {
    const { t, sub } = await subAsking('which day?', 'p1')
    expect((await api(ts.url, alice.token).patchNode(t, { RequestedStatus: 'Cancelled' })).status).toBe(200)
    const parent = await settled(ts.url, alice.token, t, (x) => x.content.Status === 'Cancelled')
    expect(parent.content.Question).toBeUndefined()
    const child = await settled(ts.url, alice.token, sub, (x) => x.content.Status === 'Cancelled')
    expect(child.content.Disposition).toBeUndefined()
    const tool = await waitFor(async () => ((await node(ts.url, alice.token, t)).content.Messages as string[]).find((m) => m.includes('/_t.')))
    expect((await node(ts.url, alice.token, tool)).content.Text).toBe('“Delegated: /ask which day?” was cancelled.')
  })

  it('[THR6] a cancel on a thread at rest with no question changes nothing but the request', async () => {
    const t = await fresh()
    await post(ts.url, alice.token, t, 'hello', 'r1')
    const done = await settled(ts.url, alice.token, t, (x) => x.content.Disposition === 'Completed')
    expect((await api(ts.url, alice.token).patchNode(t, { RequestedStatus: 'Cancelled' })).status).toBe(200)
    const after = await settled(ts.url, alice.token, t, (x) => x.content.RequestedStatus === undefined)
    expect(after.content).toMatchObject({ Status: 'Idle', Disposition: 'Completed' })
    expect(after.content.Messages).toEqual(done.content.Messages)
  })
})
