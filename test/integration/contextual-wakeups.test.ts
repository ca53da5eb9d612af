import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { userPrincipal, type UserId } from '../../shared/index.js'
import { WAKEUP_BOUNDS } from '../../sync-server/contextual/routes.js'
import { api, expectStatus, grantRole, signup, waitFor } from '../helpers/index.js'
import { ctx, definition, ownedServer, putSubscription } from './contextual-helpers.js'

/** An open wake-up stream: its raw text so far, and how to end it. */
async function wakeups(url: string, token: string | null, consumerId: string): Promise<{ status: number; text: () => string; frames: () => string[]; close(): void; body: string }> {
  const ctl = new AbortController()
  const res = await fetch(`${url}/api/contextual/wakeups?consumerId=${encodeURIComponent(consumerId)}`, {
    headers: token ? { authorization: `Bearer ${token}` } : {},
    signal: ctl.signal,
  })
  let text = ''
  if (res.headers.get('content-type')?.startsWith('text/event-stream')) {
    void (async () => {
      const reader = res.body!.getReader()
      const dec = new TextDecoder()
      for (;;) {
        const { done, value } = await reader.read().catch(() => ({ done: true, value: undefined }))
        if (done) return
        text += dec.decode(value, { stream: true })
      }
    })()
    return { status: res.status, text: () => text, frames: () => text.split('\n\n').filter((f) => f.startsWith('event:')), close: () => ctl.abort(), body: '' }
  }
  return { status: res.status, text: () => '', frames: () => [], close: () => ctl.abort(), body: await res.text() }
}

describe('[CTX39] payload-free wake-ups per consumer', () => {
  const env = ownedServer()

  async function setup(n: string, token = env.owner.token) {
    const sub = `${env.space}/s${n}`
    const prefix = `${env.space}/in${n}`
    expectStatus(await putSubscription(env.ts.url, env.owner.token, sub, definition(prefix)), 201)
    expectStatus(await api(env.ts.url, env.owner.token).putNode(prefix, 'Document', {}), 201)
    const consumerId = expectStatus(await ctx(env.ts.url, token).next(sub, 'w1'), 200).body.consumerId
    return { sub, prefix, consumerId }
  }

  it('[CTX39] a stream wakes at once and on a matching commit, carrying nothing but "wake"; next then finds the work', async () => {
    const { sub, prefix, consumerId } = await setup('1')
    const s = await wakeups(env.ts.url, env.owner.token, consumerId)
    try {
      expect(s.status).toBe(200)
      await waitFor(() => s.frames().length === 1, { description: 'the first wake-up' })
      expectStatus(await api(env.ts.url, env.owner.token).putNode(`${prefix}/d`, 'Document', { Secret: 'in the content' }), 201)
      await waitFor(() => s.frames().length === 2, { description: 'a wake-up for the commit' })
      // Nothing of the commit travels: no path, no version, no content.
      expect(s.frames()).toEqual(['event: wake\ndata: ', 'event: wake\ndata: '])
      expect(s.text()).not.toContain(prefix)
      const item = expectStatus(await ctx(env.ts.url, env.owner.token).next(sub, 'w1'), 200).body.item
      expect(item?.event.path).toBe(`${prefix}/d`)
    } finally {
      s.close()
    }
  })

  it('[CTX39] a commit the listener cannot read (or that is not its events) wakes nothing; a nack back to pending does', async () => {
    const worker = await signup(env.ts.url)
    await grantRole(env.ts.url, env.owner.token, env.space, worker.userId, 'Editor')
    const { sub, prefix, consumerId } = await setup('2', worker.token)
    expectStatus(await api(env.ts.url, env.owner.token).putNode(`${prefix}/secret`, 'Document', {}), 201)
    await grantRole(env.ts.url, env.owner.token, `${prefix}/secret`, worker.userId, 'Viewer', true)
    const causes: Array<string | null> = []
    const unlisten = await env.ts.server.contextual.listen(userPrincipal(worker.userId as UserId), { consumerId }, (p) => causes.push(p))
    try {
      expectStatus(await api(env.ts.url, env.owner.token).putNode(`${prefix}/secret/h`, 'Document', {}), 201)
      expectStatus(await api(env.ts.url, env.owner.token).putNode(`${prefix}/note`, 'Post', {}), 201)
      expectStatus(await api(env.ts.url, env.owner.token).putNode(`${prefix}/v1`, 'Document', {}), 201)
      // The feed is ordered: when v1's wake-up has come, the hidden one and the Post would have come first.
      await waitFor(() => causes.includes(`${prefix}/v1`))
      expect(causes).toEqual([`${prefix}/v1`])
      const w = ctx(env.ts.url, worker.token)
      const item = expectStatus(await w.next(sub, 'w1'), 200).body.item!
      expect(item.event.path).toBe(`${prefix}/v1`)
      expectStatus(await w.nack(consumerId, item, 0), 200)
      expect(causes).toEqual([`${prefix}/v1`, null])
    } finally {
      unlisten()
    }
  })

  it('[CTX39] no database-wide stream: a consumer id is required, it must be the caller\'s, a token is needed, and streams are bounded', async () => {
    const { consumerId } = await setup('3')
    const none = await wakeups(env.ts.url, env.owner.token, '')
    expect([none.status, JSON.parse(none.body).error.code]).toEqual([400, 'invalid_request'])
    const other = await signup(env.ts.url)
    const theirs = await wakeups(env.ts.url, other.token, consumerId)
    expect([theirs.status, JSON.parse(theirs.body).error.code]).toEqual([404, 'not_found'])
    const anon = await wakeups(env.ts.url, null, consumerId)
    expect(anon.status).toBe(401)
    const open = []
    try {
      for (let i = 0; i < WAKEUP_BOUNDS.streamsPerUser; i++) open.push(await wakeups(env.ts.url, env.owner.token, consumerId))
      expect(open.every((s) => s.status === 200)).toBe(true)
      const over = await wakeups(env.ts.url, env.owner.token, consumerId)
      expect([over.status, JSON.parse(over.body).error.code]).toEqual([429, 'rate_limited'])
    } finally {
      for (const s of open) s.close()
    }
    // Closed streams free their places.
    await waitFor(async () => {
      const s = await wakeups(env.ts.url, env.owner.token, consumerId)
      s.close()
      return s.status === 200
    })
  })

  it('[CTX39] seeded property: a listener is woken by exactly the commits of its events that its owner may read', async () => {
    const viewer = await signup(env.ts.url)
    await grantRole(env.ts.url, env.owner.token, env.space, viewer.userId, 'Viewer')
    const { sub, prefix } = await setup('5')
    const owner = api(env.ts.url, env.owner.token)
    expectStatus(await owner.putNode(`${prefix}/hidden`, 'Document', {}), 201)
    await grantRole(env.ts.url, env.owner.token, `${prefix}/hidden`, viewer.userId, 'Viewer', true)
    expectStatus(await owner.putNode(`${env.space}/elsewhere`, 'Document', {}), 201)
    const consumerId = expectStatus(await ctx(env.ts.url, viewer.token).next(sub, 'prop'), 200).body.consumerId
    const woken: string[] = []
    const unlisten = await env.ts.server.contextual.listen(userPrincipal(viewer.userId as UserId), { consumerId }, (path) => {
      if (path) woken.push(path)
    })
    let n = 0
    try {
      await fc.assert(
        fc.asyncProperty(fc.array(fc.constantFrom('readable', 'update', 'hidden', 'elsewhere', 'otherType'), { minLength: 1, maxLength: 8 }), async (ops) => {
          woken.length = 0
          const expected: string[] = []
          let last: string | null = null
          for (const op of ops) {
            const id = `p${++n}`
            if (op === 'readable' || (op === 'update' && !last)) {
              expectStatus(await owner.putNode(`${prefix}/${id}`, 'Document', { n }), 201)
              expected.push((last = `${prefix}/${id}`))
            } else if (op === 'update') {
              expectStatus(await owner.patchNode(last!, { n }), 200)
              expected.push(last!)
            } else if (op === 'hidden') {
              expectStatus(await owner.putNode(`${prefix}/hidden/${id}`, 'Document', { n }), 201)
            } else if (op === 'elsewhere') {
              expectStatus(await owner.putNode(`${env.space}/elsewhere/${id}`, 'Document', { n }), 201)
            } else {
              expectStatus(await owner.putNode(`${prefix}/${id}`, 'Code', { Source: 'return 1', Language: 'javascript' }), 201)
            }
          }
          // A last readable commit: once it woke the listener, every commit before it was seen.
          const sentinel = `${prefix}/s${++n}`
          expectStatus(await owner.putNode(sentinel, 'Document', {}), 201)
          await waitFor(() => woken.includes(sentinel))
          expect(woken.filter((p) => p !== sentinel)).toEqual(expected)
        }),
        { seed: 20261204, numRuns: 12 },
      )
    } finally {
      unlisten()
    }
  })

  it('[CTX39] streams opened all at once are bounded too, and a refused open takes no place', async () => {
    const { consumerId } = await setup('4')
    // Refusals first: none of them may keep a place.
    for (let i = 0; i < 20; i++) expect((await wakeups(env.ts.url, env.owner.token, 'no-such-consumer')).status).toBe(404)
    const burst = await Promise.all(Array.from({ length: 3 * WAKEUP_BOUNDS.streamsPerUser }, () => wakeups(env.ts.url, env.owner.token, consumerId)))
    try {
      const statuses = burst.map((s) => s.status)
      expect(statuses.filter((x) => x === 200)).toHaveLength(WAKEUP_BOUNDS.streamsPerUser)
      expect(statuses.filter((x) => x !== 200).every((x) => x === 429)).toBe(true)
    } finally {
      for (const s of burst) s.close()
    }
    await waitFor(async () => {
      const s = await wakeups(env.ts.url, env.owner.token, consumerId)
      s.close()
      return s.status === 200
    })
  })
})

describe('[CTX31] a long poll is woken only by what can give its own consumer work', () => {
  const env = ownedServer()

  /** Counts the lease statements run for each consumer (the real storage, wrapped), until `stop`. */
  function countLeases() {
    const storage = env.ts.server.storage
    const original = storage.contextual.bind(storage)
    const leases = new Map<string, number>()
    storage.contextual = (call) => {
      if (call.op === 'lease') leases.set(call.consumerId, (leases.get(call.consumerId) ?? 0) + 1)
      return original(call)
    }
    return { of: (consumerId: string) => leases.get(consumerId) ?? 0, stop: () => (storage.contextual = original) }
  }

  async function setup(n: string, maxInFlight: number) {
    const sub = `${env.space}/w${n}`
    const prefix = `${env.space}/wq${n}`
    expectStatus(await putSubscription(env.ts.url, env.owner.token, sub, definition(prefix, { Limits: { LeaseSeconds: 60, MaxInFlight: maxInFlight, MaxAttempts: 3 } })), 201)
    expectStatus(await api(env.ts.url, env.owner.token).putNode(prefix, 'Document', {}), 201)
    const c = ctx(env.ts.url, env.owner.token)
    const consumerId = expectStatus(await c.next(sub, 'w1'), 200).body.consumerId
    return { sub, prefix, c, consumerId }
  }

  it('[CTX31] a consumer at its in-flight limit sleeps through commits, even of its own events; its ack wakes it with the next one', async () => {
    const { sub, prefix, c, consumerId } = await setup('1', 1)
    expectStatus(await api(env.ts.url, env.owner.token).putNode(`${prefix}/first`, 'Document', {}), 201)
    const held = expectStatus(await c.next(sub, 'w1'), 200).body.item!
    expect(held.event.path).toBe(`${prefix}/first`)
    const svc = env.ts.server.contextual
    const counter = countLeases()
    try {
      const waiting = c.next(sub, 'w1', { waitSeconds: 60 })
      await waitFor(() => svc.waiting === 1, { description: 'the long poll waits' })
      const COMMITS = 40
      for (let i = 0; i < COMMITS; i++) expectStatus(await api(env.ts.url, env.owner.token).putNode(`${prefix}/n${i}`, 'Document', { i }), 201)
      // Each commit woke the poll, which leased again and found the consumer full: one lease per
      // commit. Now it waits for its lease (60 s) to end: the one lease that found it full.
      expect(counter.of(consumerId)).toBe(1)
      expectStatus(await c.ack(consumerId, held), 200)
      const got = expectStatus(await waiting, 200).body
      expect(got.item?.event.path).toBe(`${prefix}/n0`)
    } finally {
      counter.stop()
    }
  })

  it("[CTX31] a nack or a re-drive of one consumer wakes that consumer's long poll, not another's", async () => {
    const a = await setup('2', 2)
    const b = await setup('3', 2)
    const svc = env.ts.server.contextual
    expectStatus(await api(env.ts.url, env.owner.token).putNode(`${a.prefix}/x`, 'Document', {}), 201)
    const item = expectStatus(await a.c.next(a.sub, 'w1'), 200).body.item!
    const counter = countLeases()
    try {
      const waitingB = b.c.next(b.sub, 'w1', { waitSeconds: 60 })
      await waitFor(() => svc.waiting === 1, { description: "B's long poll waits" })
      const before = counter.of(b.consumerId)
      // A's nack (to pending, due now) and A's re-drive (nothing dead: a no-op) wake nobody of B.
      expectStatus(await a.c.nack(a.consumerId, item, 0), 200)
      expectStatus(await a.c.redrive(a.consumerId), 200)
      expect(expectStatus(await a.c.next(a.sub, 'w1'), 200).body.item?.event.path).toBe(`${a.prefix}/x`)
      expect(counter.of(b.consumerId)).toBe(before)
      expect(svc.waiting).toBe(1)
      // B's own event wakes it.
      expectStatus(await api(env.ts.url, env.owner.token).putNode(`${b.prefix}/y`, 'Document', {}), 201)
      expect(expectStatus(await waitingB, 200).body.item?.event.path).toBe(`${b.prefix}/y`)
    } finally {
      counter.stop()
    }
  })

  it('[CTX31] a full consumer\'s long poll waits until its lease ends, then gets the event again, without looking in between (SQLite)', async () => {
    const sub = `${env.space}/w5`
    const prefix = `${env.space}/wq5`
    expectStatus(await putSubscription(env.ts.url, env.owner.token, sub, definition(prefix, { Limits: { LeaseSeconds: 5, MaxInFlight: 1, MaxAttempts: 3 } })), 201)
    expectStatus(await api(env.ts.url, env.owner.token).putNode(prefix, 'Document', {}), 201)
    const c = ctx(env.ts.url, env.owner.token)
    const consumerId = expectStatus(await c.next(sub, 'w1'), 200).body.consumerId
    expectStatus(await api(env.ts.url, env.owner.token).putNode(`${prefix}/slow`, 'Document', {}), 201)
    const held = expectStatus(await c.next(sub, 'w1'), 200).body.item!
    const counter = countLeases()
    try {
      const again = expectStatus(await c.next(sub, 'w1', { waitSeconds: 30 }), 200).body.item
      expect(again).toMatchObject({ event: { path: `${prefix}/slow` }, attempt: held.attempt + 1 })
      // One lease finding it full, one when the lease ended: none in between.
      expect(counter.of(consumerId)).toBe(2)
    } finally {
      counter.stop()
    }
  })

  it('[CTX31] a nack or a commit landing while the poll\'s lease statement runs (before it waits) is not slept through', async () => {
    const { sub, prefix, c, consumerId } = await setup('6', 2)
    expectStatus(await api(env.ts.url, env.owner.token).putNode(`${prefix}/e`, 'Document', {}), 201)
    const item = expectStatus(await c.next(sub, 'w1'), 200).body.item!
    const storage = env.ts.server.storage
    const original = storage.contextual.bind(storage)
    const during = async (act: () => Promise<unknown>) => {
      let once = true
      storage.contextual = async (call) => {
        const answer = await original(call)
        // The lease has read the state (nothing due); what happens now comes before the poll waits.
        if (once && call.op === 'lease' && call.consumerId === consumerId) {
          once = false
          await act()
        }
        return answer
      }
    }
    // The service's waits counted: the poll must lease again at once, never wait (else it waits its 60 s).
    const svc = env.ts.server.contextual as unknown as { wait: (...args: unknown[]) => Promise<void> }
    const realWait = svc.wait.bind(svc)
    let waits = 0
    svc.wait = (...args) => {
      waits++
      return realWait(...args)
    }
    try {
      await during(() => c.nack(consumerId, item, 0))
      const again = expectStatus(await c.next(sub, 'w1', { waitSeconds: 60 }), 200).body.item
      expect(again).toMatchObject({ event: { path: `${prefix}/e` }, attempt: 2 })
      await during(() => api(env.ts.url, env.owner.token).putNode(`${prefix}/f`, 'Document', {}))
      const fresh = expectStatus(await c.next(sub, 'w1', { waitSeconds: 60 }), 200).body.item
      expect(fresh).toMatchObject({ event: { path: `${prefix}/f` }, attempt: 1 })
      // Full now; its nack's record pushed out of the service's bounded memory by 10,001 other
      // consumers' wake-ups before the poll looks: still not slept through.
      const flood = svc as unknown as { wakeHere: (id: string, due: boolean) => void }
      await during(async () => {
        await c.nack(consumerId, fresh!, 0)
        for (let i = 0; i <= 10_000; i++) flood.wakeHere(`other-${i}`, false)
      })
      const redone = expectStatus(await c.next(sub, 'w1', { waitSeconds: 60 }), 200).body.item
      expect(redone).toMatchObject({ event: { path: `${prefix}/f` }, attempt: 2 })
      expect(waits).toBe(0)
    } finally {
      storage.contextual = original
      svc.wait = realWait
    }
  })

  it("[CTX31] a nack of the consumer's own lease wakes its waiting long poll with the item again", async () => {
    const { sub, prefix, c, consumerId } = await setup('4', 2)
    expectStatus(await api(env.ts.url, env.owner.token).putNode(`${prefix}/z`, 'Document', {}), 201)
    const item = expectStatus(await c.next(sub, 'w1'), 200).body.item!
    const svc = env.ts.server.contextual
    const before = svc.waiting
    const waiting = c.next(sub, 'w1', { waitSeconds: 60 })
    await waitFor(() => svc.waiting === before + 1, { description: 'the long poll waits' })
    expectStatus(await c.nack(consumerId, item, 0), 200)
    expect(expectStatus(await waiting, 200).body.item).toMatchObject({ event: { path: `${prefix}/z` }, attempt: 2 })
  })
})
