import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import { SYSTEM, WeftError, type JsonObject, type NodePath } from '../../shared/index.js'
import { api, createSpace, errorCode, expectStatus, freshDatabase, grantRole, signup, startTestServer, type TestServer, type TestUser } from '../helpers/index.js'
import { ctx, definition, putSubscription, answeredThread, subscriptionWithConsumer } from './contextual-helpers.js'
import { Rng, forEachSeed, seeds } from '../sim/rng.js'

/**
 * [CTX50] A reaction whose command commits more than once (a thread post: the message, then its
 * enqueue; a delete of a subtree: the children, then the node): authorized with its first write,
 * every commit fenced by the lease and the source row, the outcome on the last. On each storage.
 */
describe.each([['SQLite'], ['PostgreSQL']])('[CTX50] a reaction\'s command in steps (%s)', (storage) => {
  let ts: TestServer
  let db: Awaited<ReturnType<typeof freshDatabase>> | null = null
  let owner: TestUser
  let space = ''
  beforeAll(async () => {
    db = storage === 'PostgreSQL' ? await freshDatabase('weft_ctxsteps_') : null
    ts = await startTestServer(db ? { config: { databaseUrl: db.url } } : {})
    owner = await signup(ts.url)
    space = await createSpace(ts.url, owner.token)
  })
  afterAll(async () => {
    await ts.cleanup()
    await db?.drop()
  })

  /** A subscription `s{n}` over `in{n}` (made), its consumer made by a first pull of `token`'s caller. */
  const setup = (n: string, token = owner.token, overrides: JsonObject = {}) => subscriptionWithConsumer(ts.url, owner.token, space, n, token, overrides)

  it('[CTX50] a thread post that fails half-way (its enqueue) records nothing; its retry completes it, one message, answered once', async () => {
    const thread = `${space}/thread50`
    expectStatus(await api(ts.url, owner.token).putNode(thread, 'Thread', { Agent: { Kind: 'builtin' } }), 201)
    const sub = `${space}/s50`
    const def = definition(`${space}/in50`, {
      Parameters: { Thread: { Type: 'string', Required: true } },
      Reactions: { tell: { Command: 'post_thread_message', Target: '{param.Thread}', Parameters: { Text: { Type: 'string', Required: true } } } },
    })
    expectStatus(await putSubscription(ts.url, owner.token, sub, def), 201)
    expectStatus(await api(ts.url, owner.token).putNode(`${space}/in50`, 'Document', {}), 201)
    const c = ctx(ts.url, owner.token)
    const params = { params: { Thread: thread } }
    expectStatus(await c.next(sub, 'w1', params), 200)
    await api(ts.url, owner.token).putNode(`${space}/in50/d`, 'Document', {})
    const got = expectStatus(await c.next(sub, 'w1', { ...params, waitSeconds: 10 }), 200).body
    const { consumerId, item } = got as { consumerId: string; item: NonNullable<typeof got.item> }
    // The post's second commit (the enqueue on the thread, by system) fails once, as a storage
    // failure would, after the message cell committed.
    const storage = ts.server.storage
    const commit = storage.commit.bind(storage)
    let failed = 0
    const spy = vi.spyOn(storage, 'commit').mockImplementation(async (c) => {
      if (c.path === thread && failed === 0) {
        failed++
        throw new WeftError('unavailable', 'storage unavailable (injected)')
      }
      return commit(c)
    })
    try {
      const first = await c.react(item, 'tell', { Text: 'despite the failure' }, { ack: true })
      expect(failed).toBe(1)
      expect([first.status, errorCode(first)]).toEqual([503, 'unavailable'])
    } finally {
      spy.mockRestore()
    }
    // Nothing recorded, nothing settled: the lease still holds the item.
    expect(expectStatus(await c.status(consumerId), 200).body).toMatchObject({ leased: 1, acked: 0 })
    // The retry (the same token) finds the message there and enqueues it, carrying the outcome.
    const told = expectStatus(await c.react(item, 'tell', { Text: 'despite the failure' }, { ack: true }), 200).body
    expect(told).toMatchObject({ repeated: false, acked: true, outcome: { status: 'committed', path: thread, reaction: 'tell' } })
    expect(told.outcome.version).toEqual(expect.any(Number))
    expect(expectStatus(await c.react(item, 'tell', { Text: 'again' }), 200).body).toEqual({ outcome: told.outcome, repeated: true, paramsDiffer: true, message: expect.stringContaining('yours were not applied') })
    const messages = await answeredThread(ts.url, owner.token, thread)
    expect(messages).toHaveLength(2)
    expect((await api(ts.url, owner.token).getNode(messages[0]!)).body.content).toMatchObject({ Role: 'user', Author: owner.userId, Text: 'despite the failure' })
    expect(expectStatus(await c.status(consumerId), 200).body).toMatchObject({ leased: 0, acked: 1 })
  })

  /** [CTX50] A thread, a subscription posting to it (as `user`), and `user`'s leased item. */
  async function postSetup(n: string, user: TestUser, rejections?: string[]) {
    const thread = `${space}/thread${n}`
    expectStatus(await api(ts.url, owner.token).putNode(thread, 'Thread', { Agent: { Kind: 'builtin' } }), 201)
    const sub = `${space}/s${n}`
    const tell = { Command: 'post_thread_message', Target: '{param.Thread}', Parameters: { Text: { Type: 'string', Required: true } }, ...(rejections ? { Rejections: rejections } : {}) }
    expectStatus(await putSubscription(ts.url, owner.token, sub, definition(`${space}/in${n}`, { Parameters: { Thread: { Type: 'string', Required: true } }, Reactions: { tell } })), 201)
    expectStatus(await api(ts.url, owner.token).putNode(`${space}/in${n}`, 'Document', {}), 201)
    const c = ctx(ts.url, user.token)
    const params = { params: { Thread: thread } }
    expectStatus(await c.next(sub, 'w1', params), 200)
    expectStatus(await api(ts.url, owner.token).putNode(`${space}/in${n}/d`, 'Document', {}), 201)
    const got = expectStatus(await c.next(sub, 'w1', { ...params, waitSeconds: 10 }), 200).body
    return { thread, c, consumerId: got.consumerId, item: got.item! }
  }

  /** Runs `fn` with storage commits of `when` replaced by `how` (once). */
  async function withCommit<T>(when: (x: { path: string; kind: string }) => boolean, how: (commit: () => Promise<unknown>) => Promise<unknown>, fn: () => Promise<T>): Promise<T> {
    const storage = ts.server.storage
    const commit = storage.commit.bind(storage)
    let done = false
    const spy = vi.spyOn(storage, 'commit').mockImplementation(async (x) => {
      if (!done && when(x)) {
        done = true
        return how(() => commit(x)) as never
      }
      return commit(x)
    })
    try {
      return await fn()
    } finally {
      spy.mockRestore()
    }
  }

  it('[CTX50] a post is authorized with its first write: a revocation after the message committed does not stop its enqueue, which carries the outcome', async () => {
    const bob = await signup(ts.url)
    const grant = await grantRole(ts.url, owner.token, space, bob.userId, 'Editor')
    const { thread, c, item } = await postSetup('52', bob)
    const r = await withCommit(
      (x) => x.path.startsWith(`${thread}/ctx-`) && x.kind === 'Created',
      async (commit) => {
        const out = await commit()
        expectStatus(await api(ts.url, owner.token).deleteNode(grant), 200, 204)
        return out
      },
      () => c.react(item, 'tell', { Text: 'before the revocation' }),
    )
    expect(expectStatus(r, 200).body.outcome).toMatchObject({ status: 'committed', path: thread })
    const t = (await api(ts.url, owner.token).getNode(thread)).body
    expect(t.content.UserMessageIds).toHaveLength(1)
  })

  it('[CTX50] a post whose source row went before the message\'s commit commits nothing: the message\'s write is fenced too', async () => {
    const { thread, c, item } = await postSetup('53', owner)
    let cell = ''
    const r = await withCommit(
      (x) => x.path.startsWith(`${thread}/ctx-`) && x.kind === 'Created',
      async (commit) => {
        await ts.server.nodes.delete(SYSTEM, item.event.path as NodePath, 'http')
        return commit()
      },
      async () => {
        const out = await c.react(item, 'tell', { Text: 'after the source went' })
        cell = (await api(ts.url, owner.token).getNode(thread)).body.content.UserMessageIds as never
        return out
      },
    )
    expect([r.status, errorCode(r)]).toEqual([403, 'reaction_denied'])
    expect(cell).toBeUndefined()
    const children = await ts.server.nodes.query(SYSTEM, { parent: thread } as never)
    expect(children.map((n) => n.path)).toEqual([])
  })

  it('[CTX50] a delete is authorized with its first write: a revocation after the first child went does not leave it half-done', async () => {
    const bob = await signup(ts.url)
    const grant = await grantRole(ts.url, owner.token, space, bob.userId, 'Admin')
    const { sub, prefix, c } = await setup('54', bob.token, { Reactions: { remove: { Command: 'delete', Target: '{event.path}' } } })
    expectStatus(await api(ts.url, owner.token).putNode(`${prefix}/d`, 'Document', {}), 201)
    const item = expectStatus(await c.next(sub, 'w1', { waitSeconds: 10 }), 200).body.item!
    for (const k of ['k1', 'k2', 'k3']) expectStatus(await api(ts.url, owner.token).putNode(`${prefix}/d/${k}`, 'Document', {}), 201)
    const r = await withCommit(
      (x) => x.path.startsWith(`${prefix}/d/`) && x.kind === 'Deleted',
      async (commit) => {
        const out = await commit()
        expectStatus(await api(ts.url, owner.token).deleteNode(grant), 200, 204)
        return out
      },
      () => c.react(item, 'remove'),
    )
    expect(expectStatus(r, 200).body.outcome).toMatchObject({ status: 'committed', path: `${prefix}/d` })
    for (const p of [`${prefix}/d`, `${prefix}/d/k1`, `${prefix}/d/k3`]) expect((await api(ts.url, owner.token).getNode(p)).status).toBe(404)
  })

  it('[CTX50] a declared rejection after a step of the command landed is the caller\'s error, not an outcome: the retry completes the command', async () => {
    // A post whose enqueue is refused with `conflict` (declared) after its message committed.
    const { thread, c, consumerId, item } = await postSetup('55', owner, ['conflict'])
    const r = await withCommit(
      (x) => x.path === thread,
      async () => {
        throw new WeftError('conflict', `${thread} was changed on another server a moment ago.`)
      },
      () => c.react(item, 'tell', { Text: 'x' }, { ack: true }),
    )
    expect([r.status, errorCode(r)]).toEqual([409, 'conflict'])
    expect(expectStatus(await c.status(consumerId), 200).body).toMatchObject({ leased: 1, acked: 0 })
    const again = expectStatus(await c.react(item, 'tell', { Text: 'x' }, { ack: true }), 200).body
    expect(again).toMatchObject({ repeated: false, acked: true, outcome: { status: 'committed' } })
    expect((await api(ts.url, owner.token).getNode(thread)).body.content.UserMessageIds).toHaveLength(1)
    // Declared and before any write (no thread there): a rejection, as ever.
    const other = await postSetup('56', owner, ['not_found'])
    expectStatus(await api(ts.url, owner.token).deleteNode(other.thread), 200, 204)
    expect(expectStatus(await other.c.react(other.item, 'tell', { Text: 'x' }), 200).body.outcome).toMatchObject({ status: 'rejected', code: 'not_found' })
  })

  it('[CTX50] a delete whose node\'s own commit fails after its children went records nothing; its retry deletes the node and answers', async () => {
    const { sub, prefix, c, consumerId } = await setup('51', owner.token, { Reactions: { remove: { Command: 'delete', Target: '{event.path}' } } })
    expectStatus(await api(ts.url, owner.token).putNode(`${prefix}/d`, 'Document', {}), 201)
    const item = expectStatus(await c.next(sub, 'w1', { waitSeconds: 10 }), 200).body.item!
    expect(item.event.path).toBe(`${prefix}/d`)
    // Made after the event was pulled: the delete cascades to them.
    for (const k of ['k1', 'k2']) expectStatus(await api(ts.url, owner.token).putNode(`${prefix}/d/${k}`, 'Document', {}), 201)
    const storage = ts.server.storage
    const commit = storage.commit.bind(storage)
    let failed = 0
    const spy = vi.spyOn(storage, 'commit').mockImplementation(async (x) => {
      if (x.path === `${prefix}/d` && x.kind === 'Deleted' && failed === 0) {
        failed++
        throw new WeftError('unavailable', 'storage unavailable (injected)')
      }
      return commit(x)
    })
    try {
      const first = await c.react(item, 'remove')
      expect(failed).toBe(1)
      expect(first.status).toBeGreaterThanOrEqual(500)
    } finally {
      spy.mockRestore()
    }
    // The children went, the node stands, no outcome: a retry is not a repeat.
    expect((await api(ts.url, owner.token).getNode(`${prefix}/d/k1`)).status).toBe(404)
    expect((await api(ts.url, owner.token).getNode(`${prefix}/d`)).status).toBe(200)
    const removed = expectStatus(await c.react(item, 'remove'), 200).body
    expect(removed).toMatchObject({ repeated: false, outcome: { status: 'committed', path: `${prefix}/d`, reaction: 'remove' } })
    expect((await api(ts.url, owner.token).getNode(`${prefix}/d`)).status).toBe(404)
    expect(expectStatus(await c.react(item, 'remove'), 200).body).toEqual({ outcome: removed.outcome, repeated: true })
    expectStatus(await c.ack(consumerId, item), 200)
  })

  it('[CTX50] a delete of a subtree holding the event\'s source: the source\'s own delete does not refuse the rest; committed, all gone', async () => {
    const { sub, prefix, c } = await setup('61', owner.token, { Reactions: { dropParent: { Command: 'delete', Target: '{event.parent}' } } })
    expectStatus(await api(ts.url, owner.token).putNode(`${prefix}/p`, 'Document', {}), 201)
    const first = expectStatus(await c.next(sub, 'w1', { waitSeconds: 10 }), 200).body
    expect(first.item!.event.path).toBe(`${prefix}/p`)
    expectStatus(await c.ack(first.consumerId, first.item!), 200)
    expectStatus(await api(ts.url, owner.token).putNode(`${prefix}/p/c`, 'Document', {}), 201)
    const got = expectStatus(await c.next(sub, 'w1', { waitSeconds: 10 }), 200).body
    const item = got.item!
    expect(item.event.path).toBe(`${prefix}/p/c`)
    const r = expectStatus(await c.react(item, 'dropParent', {}, { ack: true }), 200).body
    expect(r).toMatchObject({ repeated: false, acked: true, outcome: { status: 'committed', path: `${prefix}/p` } })
    expect((await api(ts.url, owner.token).getNode(`${prefix}/p`)).status).toBe(404)
    expect((await api(ts.url, owner.token).getNode(`${prefix}/p/c`)).status).toBe(404)
    expect(expectStatus(await c.react(item, 'dropParent'), 200).body).toEqual({ outcome: r.outcome, repeated: true })
  })

  it('[CTX50] a source delete applied here and durable in the same batch as the post\'s enqueue: denied, as every commit of the command is fenced', async () => {
    const { thread, c, item } = await postSetup('62', owner)
    const source = item.event.path
    const st = ts.server.storage
    const commit = st.commit.bind(st)
    let release: (() => void) | null = null
    let held!: () => void
    const sourceHeld = new Promise<void>((r) => (held = r))
    const order: string[] = []
    let deleting: Promise<unknown> | null = null
    const spy = vi.spyOn(st, 'commit').mockImplementation(async (x) => {
      if (x.path.startsWith(`${thread}/ctx-`) && x.kind === 'Created') {
        order.push('cell')
        const out = commit(x)
        deleting = ts.server.nodes.delete(SYSTEM, source as NodePath, 'http').then(() => order.push('source deleted durable'), (e) => order.push(`source delete failed ${e}`))
        await sourceHeld
        return out
      }
      if (x.path === source && x.kind === 'Deleted') {
        order.push('source delete submitted (held)')
        const go = new Promise<void>((r) => (release = r))
        held()
        await go
        return commit(x)
      }
      if (x.path === thread && release) {
        order.push('enqueue submitted; releasing source delete into the same batch')
        const r = release as () => void
        release = null
        r()
        await Promise.resolve()
        const out = commit(x)
        out.then((rec) => order.push(`enqueue durable v${rec.version}`), () => order.push('enqueue refused'))
        return out
      }
      return commit(x)
    })
    let r
    try {
      r = await c.react(item, 'tell', { Text: 'x' })
      if (release) { order.push('enqueue never submitted'); (release as () => void)() }
      await deleting
    } finally {
      spy.mockRestore()
    }
    expect(order).toContain('source delete submitted (held)')
    expect([r.status, errorCode(r)]).toEqual([403, 'reaction_denied'])
    // Nothing enqueued: the message cell (an earlier step) stays, not in the thread.
    expect((await api(ts.url, owner.token).getNode(thread)).body.content.UserMessageIds).toBeUndefined()
  })

  it('[CTX50] the source deleted and made again, both durable in the same batch as the post\'s enqueue: denied', async () => {
    const { thread, c, item } = await postSetup('63', owner)
    const source = item.event.path
    const st = ts.server.storage
    const commit = st.commit.bind(st)
    const order: string[] = []
    // Each held commit: told when it arrives, let go on another's signal, tells when it is sent.
    const gate = () => {
      let open!: () => void
      const opened = new Promise<void>((r) => (open = r))
      return { open, opened }
    }
    const [goDel, delHeld, delIn, crHeld, createdIn] = [gate(), gate(), gate(), gate(), gate()]
    const hold = async (x: Parameters<typeof commit>[0], name: string, arrived: ReturnType<typeof gate>, until: ReturnType<typeof gate>, sent: ReturnType<typeof gate>) => {
      order.push(name)
      arrived.open()
      await until.opened
      const o = commit(x)
      sent.open()
      return o
    }
    const bg: Promise<unknown>[] = []
    let armed = true
    const spy = vi.spyOn(st, 'commit').mockImplementation(async (x) => {
      if (x.path.startsWith(`${thread}/ctx-`) && x.kind === 'Created') {
        order.push('cell')
        const out = commit(x)
        bg.push(ts.server.nodes.delete(SYSTEM, source as NodePath, 'http').then(() => order.push('del durable'), (e) => order.push(`del failed ${e}`)))
        await delHeld.opened
        bg.push(ts.server.nodes.put(SYSTEM, source as NodePath, { nodeType: 'Document', content: { again: true } }, 'http').then(() => order.push('recreate durable'), (e) => order.push(`recreate failed ${e}`)))
        await crHeld.opened
        order.push(`applied(source)=${ts.server.nodes.applied(source as NodePath)}`)
        return out
      }
      if (armed && x.path === source && x.kind === 'Deleted') return hold(x, 'del held', delHeld, goDel, delIn)
      if (armed && x.path === source && x.kind === 'Created') return hold(x, 'create held', crHeld, delIn, createdIn)
      if (x.path === thread && armed) {
        armed = false
        order.push('enqueue submitted')
        goDel.open()
        await createdIn.opened
        const out = commit(x)
        out.then((rec) => order.push(`enqueue durable v${rec.version}`), (e) => order.push(`enqueue refused ${e}`))
        return out
      }
      return commit(x)
    })
    let r
    try {
      r = await c.react(item, 'tell', { Text: 'x' })
      if (armed) {
        order.push('enqueue never submitted')
        goDel.open()
      }
      await Promise.all(bg)
    } finally {
      spy.mockRestore()
    }
    expect(order).toContain('create held')
    expect([r.status, errorCode(r)], JSON.stringify(order)).toEqual([403, 'reaction_denied'])
    expect((await api(ts.url, owner.token).getNode(thread)).body.content.UserMessageIds).toBeUndefined()
  })
  it('[CTX50] seeded: a delete of a random subtree with one of its commits failing once records its outcome only with the whole subtree gone, and its retry completes it', { timeout: 120_000 }, async () => {
    await forEachSeed(`contextual steps (${storage})`, seeds(6, 5000), async (seed) => {
      const rng = new Rng(seed)
      const { sub, prefix, c, consumerId } = await setup(`sd${seed}`, owner.token, { Reactions: { remove: { Command: 'delete', Target: '{event.path}' } } })
      const root = `${prefix}/d`
      expectStatus(await api(ts.url, owner.token).putNode(root, 'Document', {}), 201)
      const item = expectStatus(await c.next(sub, 'w1', { waitSeconds: 10 }), 200).body.item!
      expect(item.event.path).toBe(root)
      // A random tree under the event's node, made after the pull (only the root is an event leased).
      const tree = [root]
      for (let i = rng.int(0, 6); i > 0; i--) {
        const path = `${rng.pick(tree)}/n${tree.length}`
        expectStatus(await api(ts.url, owner.token).putNode(path, 'Document', {}), 201)
        tree.push(path)
      }
      // The k-th commit of the command (each node's delete, deepest first, the root last) fails once.
      const k = rng.int(0, tree.length - 1)
      let seen = 0
      const settle = rng.next() < 0.5
      const first = await withCommit(
        (x) => x.kind === 'Deleted' && (x.path === root || x.path.startsWith(`${root}/`)) && seen++ === k,
        async () => {
          throw new WeftError('unavailable', 'storage unavailable (injected)')
        },
        () => c.react(item, 'remove', {}, settle ? { ack: true } : {}),
      )
      expect(first.status, `seed ${seed}`).toBe(503)
      // Nothing recorded, nothing settled; what went is a part of the tree, the root last of all.
      expect(expectStatus(await c.status(consumerId), 200).body).toMatchObject({ leased: 1 })
      const left = await Promise.all(tree.map(async (p) => (await api(ts.url, owner.token).getNode(p)).status))
      expect(left[0], `seed ${seed}: the root goes last`).toBe(200)
      const again = expectStatus(await c.react(item, 'remove', {}, settle ? { ack: true } : {}), 200).body
      expect(again).toMatchObject({ repeated: false, outcome: { status: 'committed', path: root } })
      for (const p of tree) expect((await api(ts.url, owner.token).getNode(p)).status, `seed ${seed}: ${p}`).toBe(404)
      expect(expectStatus(await c.react(item, 'remove'), 200).body).toEqual({ outcome: again.outcome, repeated: true })
      return tree.length
    })
  })
})
