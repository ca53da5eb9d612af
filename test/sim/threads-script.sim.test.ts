import { afterEach, describe, expect, it } from 'vitest'
import { SYSTEM, type NodePath } from '../../shared/index.js'
import { assignmentLabel } from '../../sync-server/access/access-service.js'
import { SimMesh } from './mesh.js'
import { activitiesOnSim, codeNode, until } from './activities-mesh.js'
import { THREAD_RECONCILE_MS, alice, bob, expectThreadInvariants, postAs, resting, runUntil, spaceAndThread, threadsOnSim } from './threads-mesh.js'

/**
 * [THR8][THR16] The script agent on the mesh, with the real activities engine: as whom a round's
 * run acts, and what it may never borrow. For the round of two authors the feed drops everything,
 * so both posts are in before the reconciler (on the virtual clock) claims them, every time. Runs
 * go on real script threads: those tests wait for the thread's state (no clock moves meanwhile).
 */

let mesh: SimMesh | null = null
afterEach(async () => {
  await mesh?.close()
  mesh = null
})

const ALL_DROPPED = { drop: 1, delay: 0, maxDelayMs: 0 }

/** Space P, where only bob is an Editor, and its Document P/doc. */
async function bobsSpace(m: SimMesh): Promise<NodePath> {
  await m.nodes.put(SYSTEM, 'P' as NodePath, { nodeType: 'Space', name: 'P', content: {} })
  await m.nodes.put(SYSTEM, `P/_Access/${assignmentLabel('bob')}` as NodePath, { nodeType: 'AccessAssignment', name: 'bob', content: { Subject: 'bob', Role: 'Editor' } })
  await m.nodes.put(SYSTEM, 'P/doc' as NodePath, { nodeType: 'Document', name: 'doc', content: { Title: 'before' } })
  return 'P/doc' as NodePath
}

const activityLogs = async (m: SimMesh, code: NodePath) => (await m.nodes.query(SYSTEM, { nodeType: 'ActivityLog', limit: 100 })).filter((n) => n.content.CodePath === code)

describe('[THR8][THR16] the script agent acts only with rights every author of the round holds', () => {
  it('a round whose messages come from two people runs no code: forbidden in the cell, no activity made', { timeout: 120_000 }, async () => {
    mesh = await SimMesh.open({ seed: 1850, faults: ALL_DROPPED, engines: [activitiesOnSim, threadsOnSim()] })
    const m = mesh
    const t = await spaceAndThread(m.nodes, 'two', { Agent: { Kind: 'script', CodePath: 'S/echo' } })
    const code = await codeNode(m.nodes, 'echo', "return 'Echo: ' + Inputs.Messages.join(' | ')")
    await postAs(m, alice, t, 'a1', 'from alice')
    await postAs(m, bob, t, 'b1', 'from bob')
    const done = await runUntil(m, t, (n) => resting(n) && n.content.Disposition !== undefined, THREAD_RECONCILE_MS / 10)
    expect(done.content.Messages).toEqual([`${t}/a1`, `${t}/b1`, `${t}/_r.a1`])
    expect(done.content.Disposition).toBe('Failed')
    const cell = await m.nodes.get(SYSTEM, `${t}/_r.a1` as NodePath)
    expect(String(cell?.content.Error)).toMatch(/^forbidden: .*acts as one person/)
    expect(cell?.content.ActivityPath).toBeUndefined()
    expect(await activityLogs(m, code)).toEqual([])
    await expectThreadInvariants(m.nodes, done, 'two authors')
  })

  it('a run acts as the round\'s author, never with the rights of the thread\'s maker: alice\'s round may not write where only bob may', { timeout: 120_000 }, async () => {
    mesh = await SimMesh.open({ seed: 1851, engines: [activitiesOnSim, threadsOnSim()] })
    const m = mesh
    const t = await spaceAndThread(m.nodes, 'borrow', { Agent: { Kind: 'script', CodePath: 'S/retitle' } })
    const doc = await bobsSpace(m)
    const code = await codeNode(m.nodes, 'retitle', `await Mesh.patch('${doc}', { Title: Inputs.Messages[0] }); return 'done'`)
    // Alice's round: the script's write is refused as hers, the round fails, the doc is untouched.
    await postAs(m, alice, t, 'a1', 'by alice')
    const failed = await until(m.nodes, t, (n) => resting(n) && n.content.Disposition !== undefined)
    expect(failed.content.Disposition).toBe('Failed')
    const refused = await m.nodes.get(SYSTEM, `${t}/_r.a1` as NodePath)
    const run = await m.nodes.get(SYSTEM, refused?.content.ActivityPath as NodePath)
    expect(run?.content).toMatchObject({ StartedBy: 'alice', CodePath: code, Status: 'Failed' })
    expect((await m.nodes.get(SYSTEM, doc))?.content.Title).toBe('before')
    // Bob's round, same thread, same code: his right, his write.
    await postAs(m, bob, t, 'b1', 'by bob')
    const done = await until(m.nodes, t, (n) => resting(n) && ((n.content.IngestedMessageIds as string[]) ?? []).includes('b1') && n.content.Disposition !== undefined)
    expect(done.content.Disposition).toBe('Completed')
    expect((await m.nodes.get(SYSTEM, doc))?.content.Title).toBe('by bob')
    const ran = await m.nodes.get(SYSTEM, (await m.nodes.get(SYSTEM, `${t}/_r.b1` as NodePath))?.content.ActivityPath as NodePath)
    expect(ran?.content).toMatchObject({ StartedBy: 'bob', Status: 'Succeeded' })
    await expectThreadInvariants(m.nodes, done, 'borrow')
  })

  it('an author without Execute on the Code node: forbidden, nothing runs', { timeout: 120_000 }, async () => {
    mesh = await SimMesh.open({ seed: 1852, faults: ALL_DROPPED, engines: [activitiesOnSim, threadsOnSim()] })
    const m = mesh
    await bobsSpace(m)
    await m.nodes.put(SYSTEM, 'P/tool' as NodePath, { nodeType: 'Code', name: 'tool', content: { Language: 'javascript', Source: 'return 1', IsExecutable: true } })
    const t = await spaceAndThread(m.nodes, 'noexec', { Agent: { Kind: 'script', CodePath: 'P/tool' } })
    await postAs(m, alice, t, 'a1', 'run it')
    const done = await runUntil(m, t, (n) => resting(n) && n.content.Disposition !== undefined, THREAD_RECONCILE_MS / 10)
    expect(done.content.Disposition).toBe('Failed')
    expect(String((await m.nodes.get(SYSTEM, `${t}/_r.a1` as NodePath))?.content.Error)).toMatch(/^forbidden: alice lacks Execute on P\/tool/)
    expect(await activityLogs(m, 'P/tool' as NodePath)).toEqual([])
  })
})
