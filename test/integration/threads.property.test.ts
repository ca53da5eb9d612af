import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { subscriptionsEngine } from '../../sync-server/engines/subscriptions/index.js'
import { createThreadsEngine } from '../../sync-server/engines/threads/index.js'
import { api, createSpace, grantRole, signup, startTestServer, waitFor, type TestServer, type TestUser } from '../helpers/index.js'
import { HeldClock, createThread, expectInvariants, node, post } from './threads-helpers.js'
import { Rng } from '../sim/rng.js'

let ts: TestServer
let alice: TestUser
let bob: TestUser
let space: string
const clock = new HeldClock()

beforeAll(async () => {
  ts = await startTestServer({ config: { engines: [subscriptionsEngine, createThreadsEngine({ roundClock: clock })] } })
  alice = await signup(ts.url)
  bob = await signup(ts.url)
  space = await createSpace(ts.url, alice.token)
  await grantRole(ts.url, alice.token, space, bob.userId, 'Editor')
})
afterAll(() => ts.cleanup())

describe('[THR3][THR6][THR7] seeded interleavings of submit, cancel, release and restart', () => {
  for (const seed of [1, 7, 42]) {
    it(`seed ${seed}: each message ingested once, one response cell per round, nothing stuck in StartingExecution`, { timeout: 120_000 }, async () => {
      const rand = new Rng(seed)
      const t = await createThread(ts.url, alice.token, `${space}/p${seed}`)
      const posted = new Set<string>()
      let next = 0
      for (let step = 0; step < 14; step++) {
        const x = rand.next()
        if (x < 0.45) {
          // A burst of submits (sometimes a slow one, sometimes a re-post of a known id), concurrently.
          const burst = 1 + Math.floor(rand.next() * 3)
          await Promise.all(Array.from({ length: burst }, () => {
            const reuse = posted.size > 0 && rand.next() < 0.2
            const id = reuse ? [...posted][Math.floor(rand.next() * posted.size)]! : `m${next++}`
            const author = id.length % 2 ? alice : bob
            const text = rand.next() < 0.4 ? '/sleep 1' : `hello ${id}`
            posted.add(id)
            return api(ts.url, author.token).post(`/api/nodes/${t.split('/').map(encodeURIComponent).join('/')}/messages`, { id, text })
          }))
        } else if (x < 0.65) {
          await api(ts.url, rand.next() < 0.5 ? alice.token : bob.token).patchNode(t, { RequestedStatus: 'Cancelled' })
        } else if (x < 0.85) {
          clock.release()
        } else {
          await ts.restart()
        }
      }
      // Drain: keep releasing held rounds until the thread rests with everything ingested.
      const done = await waitFor(async () => {
        clock.release()
        const n = await node(ts.url, alice.token, t)
        const c = n.content
        const ingested = (c.IngestedMessageIds as string[] | undefined) ?? []
        const resting = c.Status === 'Idle' || c.Status === 'Cancelled'
        return resting && c.Round === undefined && ingested.length === posted.size ? n : null
      }, { timeoutMs: 60_000, intervalMs: 20, description: `seed ${seed} settles` })
      expect([...((done.content.IngestedMessageIds as string[]) ?? [])].sort()).toEqual([...posted].sort())
      expect(done.content.PendingUserMessages).toEqual([])
      await expectInvariants(ts.url, alice.token, done)
    })
  }
})

describe('[THR7] a post after a restart still dispatches', () => {
  it('the engine reconciles and the next submit is answered', async () => {
    const t = await createThread(ts.url, alice.token, `${space}/after-restart`)
    await ts.restart()
    await post(ts.url, alice.token, t, 'still here', 'a1')
    const done = await waitFor(async () => {
      const n = await node(ts.url, alice.token, t)
      return n.content.Disposition === 'Completed' ? n : null
    }, 15_000)
    expect(done.content.Messages).toEqual([`${t}/a1`, `${t}/_r.a1`])
  })
})
