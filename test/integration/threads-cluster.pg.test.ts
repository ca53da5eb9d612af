import { afterAll, describe, expect, it } from 'vitest'
import { api, createSpace, expectStatus, signup, startInstances, waitFor, type Instances } from '../helpers/index.js'
import { createThread, expectInvariants, node, post } from './threads-helpers.js'

/**
 * [THR26] Threads on two instances (child processes on one PostgreSQL, a private Redis): two
 * people post to one thread at the same moment, one through each instance, while the instances
 * cannot see each other's writes (Redis frozen). Each enqueue rewrites the thread's round state
 * on its own instance's copy; the copies merge once Redis goes on (or the change log's catch-up).
 */
describe('Threads posted to through two instances at once', () => {
  let set: Instances | undefined
  afterAll(async () => {
    await set?.cleanup()
  })

  it('[THR26] every message posted at the same moment on two instances is answered, once', { timeout: 180_000 }, async () => {
    set = await startInstances(2)
    const [one, two] = set.servers.map((s) => s.url) as [string, string]
    const alice = await signup(one)
    const space = await createSpace(one, alice.token)
    const threads: string[] = []
    for (let i = 0; i < 4; i++) threads.push(await createThread(one, alice.token, `${space}/t${i}`))
    // A first message through each instance: both build and keep the thread's doc ([SCALE9]).
    for (const t of threads) {
      await post(one, alice.token, t, 'first', 'w1')
      await post(two, alice.token, t, 'second', 'w2')
    }
    // Both instances' copies converge (Redis, or the change log's catch-up) on every id answered.
    const answered = (ids: string[]) => async (t: string) => {
      let last = await node(one, alice.token, t)
      for (const url of [one, two]) {
        last = await waitFor(async () => {
          const n = await node(url, alice.token, t)
          const has = (field: string) => ids.every((id) => ((n.content[field] as string[] | undefined) ?? []).includes(id))
          return n.content.Status === 'Idle' && n.content.Round === undefined && has('IngestedMessageIds') && has('UserMessageIds') ? n : null
        }, { timeoutMs: 60_000, description: `${t} answers ${ids.join(', ')} on ${url}` }).catch(async (e: Error) => {
          // What each copy holds, to tell a lost id from a slow one.
          throw new Error(`${e.message}; ${JSON.stringify((await node(one, alice.token, t)).content)} / ${JSON.stringify((await node(two, alice.token, t)).content)}`)
        })
      }
      return last
    }
    for (const t of threads) await answered(['w1', 'w2'])(t)
    set.redis.pause()
    try {
      await Promise.all(threads.flatMap((t) => [post(one, alice.token, t, 'from one', 'a'), post(two, alice.token, t, 'from two', 'b')]))
    } finally {
      set.redis.resume()
    }
    // [THR26] Brand-new threads whose FIRST two posts go through the two instances at once, while
    // neither sees the other's write: the thread was created with its `Posted` map, so both
    // enqueues add their key to the same map (two maps made at once: the merge kept one).
    const fresh: string[] = []
    for (let i = 0; i < 4; i++) fresh.push(await createThread(one, alice.token, `${space}/f${i}`))
    // Each instance holds the new thread's doc (a person's write through each), as it is before a post.
    for (const t of fresh) {
      for (const [url, approve] of [[two, ['patch']], [one, ['patch', 'run']]] as const) {
        expectStatus(await api(url, alice.token).patchNode(t, { Agent: { Kind: 'builtin', Approve: approve } }), 200)
      }
      for (const url of [one, two]) {
        await waitFor(async () => ((await node(url, alice.token, t)).content.Agent as { Approve?: string[] }).Approve?.length === 2, { timeoutMs: 30_000, description: `${t} patched on ${url}` })
      }
    }
    set.redis.pause()
    try {
      await Promise.all(fresh.flatMap((t) => [post(one, alice.token, t, 'from one', 'x'), post(two, alice.token, t, 'from two', 'y')]))
    } finally {
      set.redis.resume()
    }
    for (const t of fresh) {
      const n = await answered(['x', 'y'])(t)
      expect(Object.keys(n.content.Posted as object).sort()).toEqual(['x', 'y'])
      await expectInvariants(two, alice.token, n)
    }
    for (const t of threads) {
      const n = await answered(['w1', 'w2', 'a', 'b'])(t)
      expect([...((n.content.IngestedMessageIds as string[]) ?? [])].sort()).toEqual(['a', 'b', 'w1', 'w2'])
      expect((n.content.UserMessageIds as string[]).slice().sort()).toEqual(['a', 'b', 'w1', 'w2'])
      await expectInvariants(two, alice.token, n)
      // Each posted cell once in Messages, each answered by the round that took it.
      const messages = (n.content.Messages as string[]) ?? []
      for (const id of ['w1', 'w2', 'a', 'b']) expect(messages.filter((m) => m === `${t}/${id}`)).toHaveLength(1)
    }
  })
})
