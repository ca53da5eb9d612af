import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createActivitiesEngine } from '../../sync-server/engines/activities/index.js'
import { api, createSpace, grantRole, signup, startTestServer, waitFor, type TestServer, type TestUser } from '../helpers/index.js'
import { createCode, lines, run, terminal, texts, waitForStatus } from './activities-helpers.js'

/**
 * [ACT5] [ACT7] [ACT18] Runs as an outside look found them (stop 42): a thrown message stored
 * whole, a return value the node cannot hold leaving the run Running, a deleted activity's script
 * running on as its starter.
 */
let ts: TestServer
let alice: TestUser
let viewer: TestUser
let space: string
let n = 0

beforeAll(async () => {
  ts = await startTestServer({ config: { engines: [createActivitiesEngine({ timeoutMs: 120_000, watchdogMs: 20_000, spares: 1, workerNice: 0, seedTemplates: false })] } })
  alice = await signup(ts.url)
  viewer = await signup(ts.url)
  space = await createSpace(ts.url, alice.token)
  await grantRole(ts.url, alice.token, space, viewer.userId, 'Viewer')
})
afterAll(() => ts.cleanup())

const code = (src: string) => createCode(ts.url, alice.token, `${space}/c${n++}`, src)
const runAs = async (who: TestUser, src: string) => waitForStatus(ts.url, who.token, await run(ts.url, who.token, await code(src)), terminal)
const said = (who: TestUser, p: string, pred: (t: string) => boolean) => waitFor(async () => texts((await api(ts.url, who.token).getNode(p)).body as never).some(pred) || null, { description: `${p} logs it` })

describe('runs and what bounds them', () => {
  it("a Viewer's thrown 20 MB message is cut as any log line is, in the run's Error and its last line", async () => {
    const done = await runAs(viewer, "throw 'x'.repeat(20 * 1024 * 1024)")
    expect(done.content.Status).toBe('Failed')
    expect(lines(done).at(-1)!.Text.length).toBeLessThanOrEqual(10_000)
    expect(String(done.content.Error).length).toBeLessThanOrEqual(10_000)
  })

  it('[ACT20] a return value keeps its null members, at every depth (a merge patch dropped them)', async () => {
    const value = { found: null, list: [null, 1], nested: { gone: null, kept: 'x', deeper: { z: null } } }
    const done = await runAs(alice, `return ${JSON.stringify(value)}`)
    expect(done.content.Status).toBe('Succeeded')
    expect(done.content.ReturnValue).toEqual(value)
    expect(Object.keys(done.content.ReturnValue as object)).toEqual(['found', 'list', 'nested'])
    // A bare null is no return value, as before.
    expect((await runAs(alice, 'return null')).content.ReturnValue).toBeUndefined()
  })

  it('a return value nested past MAX_JSON_DEPTH ends the run Failed, saying why (it stayed Running until the sweep called its worker lost)', async () => {
    const done = await runAs(alice, "let v = 'leaf'; for (let i = 0; i < 80; i++) v = { In: v }; return v")
    expect(done.content.Status).toBe('Failed')
    expect(String(done.content.Error)).toMatch(/^The script's return value could not be stored/)
    expect(done.content.ReturnValue).toBeUndefined()
  })

  it("deleting running activities stops their scripts: the starter's run slots are free again; a queued one deleted never starts", async () => {
    const loop = await code(`Log.info('up'); for (let i = 0; !Ct.aborted; i++) { await Mesh.put('${space}/tick', { nodeType: 'Document', content: { I: i } }); await sleep(100) }`)
    // SCRIPT_MAX_RUNS_PER_USER (4) runs, each writing as Alice until stopped.
    const runs = await Promise.all([1, 2, 3, 4].map(() => run(ts.url, alice.token, loop)))
    for (const r of runs) await said(alice, r, (t) => t === 'up')
    const late = await run(ts.url, alice.token, await code(`await Mesh.put('${space}/late', { nodeType: 'Document', content: {} })`))
    await said(alice, late, (t) => t.startsWith('Waiting'))
    for (const r of [late, ...runs]) expect((await api(ts.url, alice.token).deleteNode(r)).status).toBe(204)
    // Her next run gets a slot (the deleted ones no longer hold theirs) and ends; the deleted queued run did not run before it.
    const next = await runAs(alice, 'return 1')
    expect(next.content.Status).toBe('Succeeded')
    expect((await api(ts.url, alice.token).getNode(`${space}/late`)).status).toBe(404)
  })
  it("[ACT17] a Viewer's run waiting for her slot does not start once the Code node is made not executable, and says why", async () => {
    const loop = await code(`Log.info('up'); while (!Ct.aborted) await sleep(50)`)
    const runs = await Promise.all([1, 2, 3, 4].map(() => run(ts.url, viewer.token, loop)))
    for (const r of runs) await said(viewer, r, (t) => t === 'up')
    const c = await code(`await Mesh.get('${space}'); Log.info('ran')`)
    const q = await run(ts.url, viewer.token, c)
    await said(viewer, q, (t) => t.startsWith('Waiting'))
    expect((await api(ts.url, alice.token).patchNode(c, { IsExecutable: false })).status).toBe(200)
    for (const r of runs) await api(ts.url, viewer.token).patchNode(r, { RequestedStatus: 'Cancelled' })
    const done = await waitForStatus(ts.url, viewer.token, q, terminal)
    expect(done.content.Status).toBe('Failed')
    expect(texts(done)).not.toContain('ran')
    expect(String(done.content.Error)).toMatch(/is not executable/)
  })
  it('[ACT1] a draft started by a patch of RequestedStatus is held to its required inputs: it ends Failed naming them, and nothing runs', async () => {
    const c = await createCode(ts.url, alice.token, `${space}/c${n++}`, `await Mesh.put('${space}/ran-without', { nodeType: 'Document', content: {} }); return 1`, { Inputs: { Target: { Type: 'node', Required: true } } })
    const draft = await run(ts.url, viewer.token, c, { start: false })
    expect((await api(ts.url, viewer.token).patchNode(draft, { RequestedStatus: 'Running' })).status).toBe(200)
    const done = await waitForStatus(ts.url, viewer.token, draft, terminal)
    expect(done.content.Status).toBe('Failed')
    expect(String(done.content.Error)).toMatch(/Required inputs are missing: Target/)
    expect((await api(ts.url, alice.token).getNode(`${space}/ran-without`)).status).toBe(404)
  })
  it('a value the server thread cannot read (nested deeper than its stack) ends the run Failed saying so, not at the watchdog', async () => {
    const done = await runAs(alice, "JSON.stringify = () => '['.repeat(5000) + ']'.repeat(5000); return 1")
    expect(done.content.Status).toBe('Failed')
    expect(String(done.content.Error)).toMatch(/sent a value this server cannot read/)
  })
})
