import fc from 'fast-check'
import { afterEach, describe, expect, it } from 'vitest'
import { SYSTEM, isJsonObject, jsonEqual, type JsonObject, type MeshNode, type NodePath } from '../../shared/index.js'
import type { Agent } from '../../sync-server/engines/threads/index.js'
import { SimMesh, type FeedFaults } from './mesh.js'
import { forEachSeed, seeds } from './rng.js'
import { THREAD_RECONCILE_MS, alice, bob, eve, expectThreadInvariants, postAs, resting, runUntil, spaceAndThread, threads, threadsOnSim, vic } from './threads-mesh.js'

/**
 * The threads engine on the deterministic mesh (issue 18 on the kit, issue 17): virtual time
 * (`/sleep` and the reconciler on the mesh's clock), a feed that drops, delays and reorders, and
 * crashes. No sleeps, no timing asserts: every wait is for a state of the thread.
 */

let mesh: SimMesh | null = null
afterEach(async () => {
  await mesh?.close()
  mesh = null
})

describe('[THR3][THR6][THR7][KIT1] threads on a lossy feed, with cancels and crashes', () => {
  it('seeded submits, cancels, time and kill -9: each message ingested once, one response cell per round, nothing stuck', { timeout: 180_000 }, async () => {
    await forEachSeed('threads lossy feed', seeds(4, 1800), async (seed) => {
      mesh = await SimMesh.open({ seed, faults: { drop: 0.3, delay: 0.3, maxDelayMs: 200 }, engines: [threadsOnSim()] })
      const m = mesh
      const t = await spaceAndThread(m.nodes, `t${seed}`)
      // [THR7] Never the inverse write: a round's Executing is never followed by StartingExecution of it.
      const inverse: string[] = []
      let last: JsonObject | null = null
      const tap = m.committed$.subscribe((c) => {
        if (c.path !== t || !c.node) return
        const now = c.node.content
        const round = (x: JsonObject | null) => (x && isJsonObject(x.Round) ? x.Round.Response : undefined)
        if (last?.Status === 'Executing' && now.Status === 'StartingExecution' && round(last) === round(now)) inverse.push(String(round(now)))
        last = now
      })
      const posted = new Set<string>()
      let next = 0
      let steps = 0
      for (let step = 0; step < 14; step++) {
        const x = m.rng.next()
        steps++
        if (x < 0.45) {
          // A burst of concurrent posts: some slow, some a re-post of a known id, two authors.
          const burst = m.rng.int(1, 3)
          await Promise.all(Array.from({ length: burst }, () => {
            const reuse = posted.size > 0 && m.rng.next() < 0.2
            const id = reuse ? m.rng.pick([...posted]) : `m${next++}`
            const text = m.rng.next() < 0.4 ? `/sleep ${m.rng.int(1, 2_000)}` : `hello ${id}`
            posted.add(id)
            // A re-post by the other author is another message under a taken id: conflict, nothing added.
            return postAs(m, id.length % 2 ? alice : bob, t, id, text).catch((err: { code?: string }) => expect(err.code).toBe('conflict'))
          }))
        } else if (x < 0.6) {
          await m.nodes.patch(m.rng.next() < 0.5 ? alice : bob, t, { RequestedStatus: 'Cancelled' })
        } else if (x < 0.9) {
          await m.clock.advance(m.rng.int(0, 1_500))
        } else {
          await m.crash()
        }
      }
      // Whatever the feed lost, the reconciler finds; every held round ends on the clock.
      const done = await runUntil(m, t, (n) => resting(n) && ((n.content.IngestedMessageIds as string[] | undefined) ?? []).length === posted.size)
      expect([...((done.content.IngestedMessageIds as string[]) ?? [])].sort(), `seed ${seed}`).toEqual([...posted].sort())
      await expectThreadInvariants(m.nodes, done, `seed ${seed}`)
      tap.unsubscribe()
      expect(inverse, `seed ${seed}: Executing → StartingExecution`).toEqual([])
      // A crash and its boot pass find nothing left to do.
      await m.crash()
      await threads(m).engine.idle()
      expect((await m.nodes.get(SYSTEM, t))?.content).toEqual(done.content)
      const events = m.counts.events + steps
      await m.close()
      mesh = null
      return events
    })
  })
})

/** An agent whose round asks for one approval, then (approved) patches `doc` as the round and its approver; `ran` counts the patches made. */
function approvingAgent(ran: { count: number }, doc: NodePath): Agent {
  return async (io) => {
    const args = { path: doc, patch: { Title: 'changed' } }
    const answer = await io.tools.approval({ Id: 'ap1', Tool: 'patch', Args: args, Summary: `retitle ${doc}` }, io.signal)
    if (answer.decision === 'Approved') {
      // The call checks the round's signal first: a cancel that landed after the answer stops it.
      await io.tools.call('patch', args, [answer.by], io.signal)
      ran.count++
    }
    await io.emit(answer.decision)
    return { disposition: 'Completed' }
  }
}

const APPROVAL_FIELDS = ['PendingApproval', 'ApprovalAnswer', 'ApprovalBy'] as const
const DOC = 'S/doc' as NodePath

/** A mesh whose thread S/{name} has a round waiting for approval ap1 (retitling S/doc); `ran` counts the patches made. */
async function awaitingApproval(seed: number, faults: FeedFaults, name: string): Promise<{ m: SimMesh; t: NodePath; ran: { count: number }; waiting: MeshNode }> {
  const ran = { count: 0 }
  mesh = await SimMesh.open({ seed, faults, engines: [threadsOnSim(approvingAgent(ran, DOC))] })
  const m = mesh
  const t = await spaceAndThread(m.nodes, name)
  await m.nodes.put(SYSTEM, DOC, { nodeType: 'Document', name: 'doc', content: { Title: 'before' } })
  await postAs(m, alice, t, 'u1', 'retitle the doc')
  const waiting = await runUntil(m, t, (n) => isJsonObject(n.content.PendingApproval))
  return { m, t, ran, waiting }
}

describe('[THR6][THR13][THR14] cancel while a round waits for an approval', () => {
  it('Status ends Cancelled, the approval fields are cleared with it, a late answer is refused and nothing runs (across a crash too)', { timeout: 120_000 }, async () => {
    await forEachSeed('threads cancel awaiting approval', seeds(4, 1810), async (seed) => {
      const { m, t, ran, waiting } = await awaitingApproval(seed, { drop: 0.2, delay: 0.2, maxDelayMs: 50 }, 'ask')
      expect(waiting.content).toMatchObject({ Status: 'Executing', Disposition: 'AwaitingInput', PendingApproval: { Id: 'ap1', Tool: 'patch' } })
      const crashed = m.rng.next() < 0.5
      if (crashed) {
        await m.crash()
        // The resumed round waits on the same approval.
        expect((await m.nodes.get(SYSTEM, t))?.content.PendingApproval).toEqual(waiting.content.PendingApproval)
      }
      await m.nodes.patch(bob, t, { RequestedStatus: 'Cancelled' })
      const done = await runUntil(m, t, (n) => n.content.Status === 'Cancelled' && resting(n))
      for (const f of [...APPROVAL_FIELDS, 'Disposition', 'RequestedStatus']) expect(done.content[f], `${f} (seed ${seed}, crash ${crashed})`).toBeUndefined()
      // The answer comes late: there is no approval to answer any more; nothing is written.
      await expect(m.nodes.patch(bob, t, { ApprovalAnswer: { Id: 'ap1', Decision: 'Approved' } })).rejects.toMatchObject({ code: 'conflict' })
      await m.clock.advance(THREAD_RECONCILE_MS)
      await threads(m).engine.idle()
      expect(ran.count).toBe(0)
      expect((await m.nodes.get(SYSTEM, DOC))?.content.Title).toBe('before')
      expect((await m.nodes.get(SYSTEM, `${t}/_r.u1` as NodePath))?.content.Text).toBe('')
      expect((await m.nodes.get(SYSTEM, t))?.content).toEqual(done.content)
      await expectThreadInvariants(m.nodes, done, `seed ${seed}`)
      const steps = m.counts.events
      await m.close()
      mesh = null
      return steps
    })
  })

  it('an answer and a cancel racing: the call runs at most once, and only if the answer won; the fields end cleared', { timeout: 120_000 }, async () => {
    await forEachSeed('threads answer races cancel', seeds(6, 1820), async (seed) => {
      const { m, t, ran } = await awaitingApproval(seed, { drop: 0.2, delay: 0.3, maxDelayMs: 30 }, 'race')
      const racers = m.rng.shuffle([
        () => m.nodes.patch(bob, t, { ApprovalAnswer: { Id: 'ap1', Decision: 'Approved' } }),
        () => m.nodes.patch(alice, t, { RequestedStatus: 'Cancelled' }),
      ])
      const [first, second] = racers
      const answered = await Promise.allSettled([first!(), (async () => {
        for (let k = m.rng.int(0, 6); k > 0; k--) await Promise.resolve()
        return second!()
      })()])
      const done = await runUntil(m, t, resting)
      for (const f of APPROVAL_FIELDS) expect(done.content[f], `${f} (seed ${seed})`).toBeUndefined()
      const title = (await m.nodes.get(SYSTEM, DOC))?.content.Title
      expect(ran.count).toBeLessThanOrEqual(1)
      expect(title).toBe(ran.count === 1 ? 'changed' : 'before')
      // A refused answer (the cancel came first) ran nothing.
      if (answered.some((r) => r.status === 'rejected')) expect(ran.count).toBe(0)
      await expectThreadInvariants(m.nodes, done, `seed ${seed}`)
      const steps = m.counts.events
      await m.close()
      mesh = null
      return steps
    })
  })
})

describe('[THR14] who may answer an approval: a seeded property over crafted writes', () => {
  it('only a holder of Update answers, once, the approval pending now; nobody withdraws, re-answers or forges the engine\'s fields', { timeout: 120_000 }, async () => {
    mesh = await SimMesh.open({ seed: 1830, engines: [threadsOnSim()] })
    const m = mesh
    const pending = { Id: 'ap1', Tool: 'patch', Args: { path: 'S/doc' }, Summary: 'retitle', RequestedAt: new Date(m.clock.now()).toISOString() }
    const actors = { alice, bob, vic, eve }
    const updaters = new Set(['alice', 'bob'])
    const answer = fc.record({ Id: fc.constantFrom('ap1', 'ap2', '', '../ap1', 'ap1 ', 'x'.repeat(300)), Decision: fc.constantFrom('Approved', 'Denied', 'Maybe') })
    const patch = fc.oneof(
      answer.map((a) => ({ ApprovalAnswer: a })),
      fc.constant({ ApprovalAnswer: null }),
      fc.constantFrom('alice', 'bob', 'vic', 'eve').map((who) => ({ ApprovalBy: who })),
      answer.map((a) => ({ ApprovalAnswer: a, ApprovalBy: 'alice' })),
      fc.constant({ PendingApproval: null }),
      fc.constant({ PendingApproval: { ...pending, Id: 'forged' } }),
      fc.constant({ ApprovalAnswer: { Id: 'ap1', Decision: 'Approved', Extra: true } }),
    )
    const step = fc.record({ who: fc.constantFrom('alice', 'bob', 'vic', 'eve') as fc.Arbitrary<keyof typeof actors>, patch })
    let runs = 0
    let answeredRuns = 0
    await fc.assert(
      fc.asyncProperty(fc.array(step, { minLength: 1, maxLength: 10 }), async (drawn) => {
        const steps = drawn as Array<{ who: keyof typeof actors; patch: JsonObject }>
        runs++
        // A thread holding a pending approval and no round: the engine leaves it as it is.
        const t = await spaceAndThread(m.nodes, `p${runs}`, { Status: 'Idle', Disposition: 'AwaitingInput', PendingApproval: pending })
        for (const { who, patch: p } of steps) {
          const before = (await m.nodes.get(SYSTEM, t))!.content
          const ok = await m.nodes.patch(actors[who], t, p as JsonObject).then(() => true, () => false)
          const after = (await m.nodes.get(SYSTEM, t))!.content
          if (!ok) expect(after).toEqual(before)
          if (!updaters.has(who)) expect(after).toEqual(before)
          expect(after.PendingApproval).toEqual(pending)
          if (before.ApprovalBy !== undefined) {
            expect(after.ApprovalAnswer).toEqual(before.ApprovalAnswer)
            expect(after.ApprovalBy).toEqual(before.ApprovalBy)
          } else if (after.ApprovalBy !== undefined) {
            // This write answered: by its own author, the pending Id, a real decision.
            expect(after.ApprovalBy).toBe(who)
            expect(after.ApprovalAnswer).toEqual({ Id: 'ap1', Decision: (p as { ApprovalAnswer: { Decision: string } }).ApprovalAnswer.Decision })
            expect(['Approved', 'Denied']).toContain((after.ApprovalAnswer as JsonObject).Decision)
            answeredRuns++
          } else {
            expect(after.ApprovalAnswer).toBeUndefined()
          }
          // Liveness: the first well-formed answer of an Update holder is taken.
          const wellFormed = jsonEqual(Object.keys(p), ['ApprovalAnswer']) && isJsonObject(p.ApprovalAnswer) && Object.keys(p.ApprovalAnswer).length === 2 && p.ApprovalAnswer.Id === 'ap1' && ['Approved', 'Denied'].includes(String(p.ApprovalAnswer.Decision))
          if (wellFormed && updaters.has(who) && before.ApprovalBy === undefined) expect(ok).toBe(true)
        }
      }),
      { seed: 18, numRuns: 40 },
    )
    // The property exercised both sides.
    expect(answeredRuns).toBeGreaterThan(0)
  })
})

describe('[THR1][THR2] crafted cells: a person\'s own cell is ingested by a valid id only, never as someone else', () => {
  it('reserved ids, ids outside the message-id form, another author, OnBehalfOf and a Viewer\'s cell are refused', { timeout: 60_000 }, async () => {
    mesh = await SimMesh.open({ seed: 1840, engines: [threadsOnSim()] })
    const m = mesh
    const t = await spaceAndThread(m.nodes, 'cells')
    const cell = (author: string, extra: Record<string, unknown> = {}) => ({ nodeType: 'ThreadMessage', name: 'x', content: { Role: 'user', Author: author, Text: 'hi', CreatedAt: new Date(m.clock.now()).toISOString(), ...extra } as never })
    const refused = async (who: typeof alice, id: string, draft: ReturnType<typeof cell>, code: string) => {
      await expect(m.nodes.create(who, `${t}/${id}` as NodePath, draft), id).rejects.toMatchObject({ code })
      expect(await m.nodes.get(SYSTEM, `${t}/${id}` as NodePath)).toBeNull()
    }
    await refused(bob, '_r.u1', cell('bob'), 'invalid_path')
    await refused(bob, '_sub.u1', cell('bob'), 'invalid_path')
    await refused(bob, 'as-alice', cell('alice'), 'forbidden_field')
    await refused(bob, 'borrowed', cell('bob', { OnBehalfOf: ['alice'] }), 'forbidden_field')
    await refused(bob, 'as-agent', cell('bob', { Role: 'assistant' }), 'forbidden_field')
    await refused(vic, 'viewer', cell('vic'), 'forbidden')
    // [THR21] A segment the path allows but no message id is (too long): refused, not kept unanswered.
    await refused(bob, `a${'b'.repeat(70)}`, cell('bob'), 'invalid_request')
    await m.nodes.create(bob, `${t}/ok.1` as NodePath, cell('bob'))
    const done = await runUntil(m, t, (n) => resting(n) && ((n.content.IngestedMessageIds as string[] | undefined) ?? []).includes('ok.1'))
    await m.clock.advance(THREAD_RECONCILE_MS)
    await threads(m).engine.idle()
    const after = (await m.nodes.get(SYSTEM, t))!
    expect(after.content.UserMessageIds).toEqual(['ok.1'])
    expect(after.content.Messages).toEqual([`${t}/ok.1`, `${t}/_r.ok.1`])
    await expectThreadInvariants(m.nodes, done, 'cells')
  })
})

describe('[THR3] a thread state merged from two instances\' copies (an enqueue on a copy that had not seen the claim)', () => {
  /**
   * Round state is rewritten whole per field (a JSON value in the doc): a post's enqueue on one
   * instance and the owner's claim on another, each on a copy without the other's write, merge to
   * one of them per field. The next round's input is therefore the posted ids not yet ingested
   * (`UserMessageIds` minus `IngestedMessageIds`), never `PendingUserMessages` alone.
   */
  async function answered(m: SimMesh, name: string, ids: string[]): Promise<NodePath> {
    const t = await spaceAndThread(m.nodes, name)
    for (const id of ids) await postAs(m, alice, t, id, `hello ${id}`)
    await runUntil(m, t, (n) => resting(n) && (n.content.IngestedMessageIds as string[] | undefined)?.length === ids.length && n.content.Disposition === 'Completed')
    return t
  }

  it('the enqueue\'s stale list won: an ingested message pending again is cleared, not answered twice', { timeout: 60_000 }, async () => {
    mesh = await SimMesh.open({ seed: 3, engines: [threadsOnSim()] })
    const m = mesh
    const t = await answered(m, 'merged-pending', ['x1'])
    let claims = 0
    const tap = m.committed$.subscribe((c) => {
      if (c.path === t && c.node?.content.Status === 'StartingExecution') claims++
    })
    // What the merge leaves: x1 ingested and answered, and pending again (the enqueue's array won).
    await m.nodes.patch(SYSTEM, t, { PendingUserMessages: [`${t}/x1`], HasPending: true })
    const done = await runUntil(m, t, (n) => resting(n) && n.content.HasPending === false)
    tap.unsubscribe()
    expect(claims).toBe(0)
    expect(done.content.Messages).toEqual([`${t}/x1`, `${t}/_r.x1`])
    await expectThreadInvariants(m.nodes, done, 'merged pending')
  })

  it('the claim\'s list won: a posted message missing from the pending list is still answered, once', { timeout: 60_000 }, async () => {
    mesh = await SimMesh.open({ seed: 4, engines: [threadsOnSim()] })
    const m = mesh
    const t = await answered(m, 'merged-lost', ['x1'])
    // x2 was posted (its cell and its id are there) but the claim's empty pending list won.
    await m.nodes.put(SYSTEM, `${t}/x2` as NodePath, { nodeType: 'ThreadMessage', name: 'x2', content: { Role: 'user', Author: 'alice', Text: 'hello x2', CreatedAt: new Date(0).toISOString() } })
    await m.nodes.patch(SYSTEM, t, { UserMessageIds: ['x1', 'x2'], PendingUserMessages: [], HasPending: false })
    const done = await runUntil(m, t, (n) => resting(n) && (n.content.IngestedMessageIds as string[]).includes('x2') && n.content.Disposition === 'Completed')
    expect(done.content.Messages).toEqual([`${t}/x1`, `${t}/_r.x1`, `${t}/x2`, `${t}/_r.x2`])
    expect((await m.nodes.get(SYSTEM, `${t}/_r.x2` as NodePath))?.content.Text).toBe('You said: hello x2')
    await expectThreadInvariants(m.nodes, done, 'merged lost')
  })

  it('[THR28] a post the stopped owner heard but had not acted on: its HasPending lost the merge (no scan finds it), and no event of it reached the engine: the next engine finds it at boot and answers it once', { timeout: 60_000 }, async () => {
    const faults = { drop: 0, delay: 0, maxDelayMs: 1 }
    mesh = await SimMesh.open({ seed: 5, faults, engines: [threadsOnSim()] })
    const m = mesh
    const t = await answered(m, 'lost-at-handover', ['x1'])
    // From now on the engine hears nothing: what the old owner saw last before it stopped.
    faults.drop = 1
    await m.nodes.put(SYSTEM, `${t}/x2` as NodePath, { nodeType: 'ThreadMessage', name: 'x2', content: { Role: 'user', Author: 'alice', Text: 'hello x2', CreatedAt: new Date(0).toISOString() } })
    // What the merge of the post and a concurrent claim leaves: x2 posted, the claim's lists and HasPending won.
    await m.nodes.patch(SYSTEM, t, { Posted: { x2: 1 }, UserMessageIds: ['x1'], PendingUserMessages: [], HasPending: false })
    await threads(m).engine.idle()
    await m.clock.advance(60_000)
    await threads(m).engine.idle()
    expect((await m.nodes.get(SYSTEM, t))?.content.IngestedMessageIds).toEqual(['x1'])
    // The owner stops; the next one boots (its feed works).
    faults.drop = 0
    await m.crash()
    const done = await runUntil(m, t, (n) => resting(n) && (n.content.IngestedMessageIds as string[]).includes('x2') && n.content.Disposition === 'Completed')
    expect(done.content.Messages).toEqual([`${t}/x1`, `${t}/_r.x1`, `${t}/x2`, `${t}/_r.x2`])
    expect((await m.nodes.get(SYSTEM, `${t}/_r.x2` as NodePath))?.content.Text).toBe('You said: hello x2')
    await expectThreadInvariants(m.nodes, done, 'lost at handover')
  })
})

describe('[THR7] recovery of a round a dead process left behind', () => {
  /** A thread at S/{name}, resting, with a user cell `id` (made by system: no kick) saying `text`. */
  async function threadWithCell(m: SimMesh, name: string, id: string, text: string): Promise<NodePath> {
    const t = await spaceAndThread(m.nodes, name, { Status: 'Idle', Messages: [], UserMessageIds: [], IngestedMessageIds: [], PendingUserMessages: [] })
    await m.nodes.put(SYSTEM, `${t}/${id}` as NodePath, { nodeType: 'ThreadMessage', name: id, content: { Role: 'user', Author: 'alice', Text: text, CreatedAt: new Date(0).toISOString() } })
    return t
  }
  const states = (m: SimMesh, path: string): JsonObject[] => {
    const seen: JsonObject[] = []
    m.committed$.subscribe((c) => {
      if (c.path === path && c.node) seen.push(c.node.content)
    })
    return seen
  }

  it('an orphaned StartingExecution claim is rolled back by compare-and-set (inputs pending again, cells out of Messages), then answered once', { timeout: 60_000 }, async () => {
    mesh = await SimMesh.open({ seed: 1, engines: [threadsOnSim()] })
    const m = mesh
    const t = await threadWithCell(m, 'orphan', 'x1', 'hello x1')
    const seen = states(m, t)
    const input = `${t}/x1`
    const response = `${t}/_r.x1`
    // What a process that died right after its claim leaves: StartingExecution with its Round, no response cell.
    await m.nodes.patch(SYSTEM, t, { Status: 'StartingExecution', Round: { Response: response, Inputs: [input] }, Messages: [input, response], IngestedMessageIds: ['x1'] })
    const done = await runUntil(m, t, (n) => resting(n) && n.content.Disposition === 'Completed')
    const rolled = seen.find((c) => c.Status === 'Idle' && Array.isArray(c.PendingUserMessages) && c.PendingUserMessages.includes(input))
    expect(rolled, JSON.stringify(seen.map((c) => c.Status))).toBeDefined()
    expect(rolled!.Messages).toEqual([])
    expect(rolled!.IngestedMessageIds).toEqual([])
    expect(rolled!.Round).toBeUndefined()
    expect(done.content.Messages).toEqual([input, response])
    expect(done.content.IngestedMessageIds).toEqual(['x1'])
    expect((await m.nodes.get(SYSTEM, response as NodePath))?.content.Text).toBe('You said: hello x1')
    // seen[0] is the dead process's claim (set up above); after the roll-back the engine claims once.
    expect(seen[0]!.Status).toBe('StartingExecution')
    expect(seen.slice(1).filter((c) => c.Status === 'StartingExecution')).toHaveLength(1)
    await expectThreadInvariants(m.nodes, done, 'orphaned claim')
  })

  it('a round left Executing with partial text resumes into its cell without writing that text again', { timeout: 60_000 }, async () => {
    mesh = await SimMesh.open({ seed: 2, engines: [threadsOnSim()] })
    const m = mesh
    const t = await threadWithCell(m, 'resumed', 'y1', 'hello there y1')
    const input = `${t}/y1`
    const response = `${t}/_r.y1`
    const partial = 'You said: hello '
    await m.nodes.put(SYSTEM, response as NodePath, { nodeType: 'ThreadMessage', name: '_r.y1', content: { Role: 'assistant', Author: 'agent', Text: partial, CreatedAt: new Date(0).toISOString() } })
    const cellTexts: string[] = []
    m.committed$.subscribe((c) => {
      if (c.path === response && c.node) cellTexts.push(String(c.node.content.Text))
    })
    const seen = states(m, t)
    await m.nodes.patch(SYSTEM, t, { Status: 'Executing', Round: { Response: response, Inputs: [input] }, Messages: [input, response], IngestedMessageIds: ['y1'] })
    const done = await runUntil(m, t, (n) => resting(n) && n.content.Disposition === 'Completed')
    expect((await m.nodes.get(SYSTEM, response as NodePath))?.content.Text).toBe('You said: hello there y1')
    // Every write of the cell extends what was there; none writes the partial text (or less) again.
    expect(cellTexts.length).toBeGreaterThan(0)
    for (const x of cellTexts) expect(x.startsWith(partial) && x.length > partial.length, x).toBe(true)
    expect(seen.some((c) => c.Status === 'StartingExecution')).toBe(false)
    expect(done.content.Messages).toEqual([input, response])
    await expectThreadInvariants(m.nodes, done, 'resumed round')
  })
})
