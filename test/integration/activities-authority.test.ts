import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { SYSTEM, type JsonObject, type MeshNode, type NodePath } from '../../shared/index.js'
import { createActivitiesEngine } from '../../sync-server/engines/activities/index.js'
import { MuxClient, api, createSpace, removeDir, errorCode, expectStatus, grantRole, nodeUrlPath, signup, startTestServer, stockProvider, waitFor, type TestServer, type TestUser } from '../helpers/index.js'
import { createCode, run, terminal, waitForStatus } from './activities-helpers.js'

/**
 * Issue 15, findings 1–4 ("borrowed authority"), over the public API of a real server. Each test
 * failed on the code before the fix: the run acted as its CreatedBy with the Code node's current
 * Source, runCode granted the caller Editor on the activity, routing compared first segments only,
 * Admin/Partition/{name} granted everything on its subtree, and LastActivityPath told everyone.
 */

let ts: TestServer
let alice: TestUser // Admin of the space S
let bob: TestUser // Editor of S
let carol: TestUser // Viewer of S
let space: string
let secret: string // carol/private: only Carol reads it

/** Reads the node at Inputs.Path as whoever the run acts as; `forbidden` when it may not. */
const READER = 'try { const n = await Mesh.get(Inputs.Path); return n ? n.content : null } catch (e) { return e.code }'

beforeAll(async () => {
  // SCRIPT_TIMEOUT_MS 60 s: no test here is about the deadline; at 5 s, short scripts failed with it on a loaded machine.
  ts = await startTestServer({ config: { engines: [createActivitiesEngine({ timeoutMs: 60_000, memoryMb: 16, cancelGraceMs: 300, spares: 2 })] } })
  ;[alice, bob, carol] = await Promise.all([signup(ts.url), signup(ts.url), signup(ts.url)])
  space = await createSpace(ts.url, alice.token)
  await grantRole(ts.url, alice.token, space, bob.userId, 'Editor')
  await grantRole(ts.url, alice.token, space, carol.userId, 'Viewer')
  secret = `${carol.userId}/private`
  expectStatus(await api(ts.url, carol.token).putNode(secret, 'Document', { Diary: 'carol only' }), 201)
})
afterAll(() => ts.cleanup())

async function node(path: string, token = alice.token): Promise<MeshNode> {
  return expectStatus(await api(ts.url, token).getNode(path), 200).body as MeshNode
}

async function reader(name: string): Promise<string> {
  return createCode(ts.url, alice.token, `${space}/${name}`, READER, { Inputs: { Path: { Type: 'node' } } })
}

describe('[ACT17] finding 1: a run acts as whoever started it, on the code it was made with', () => {
  it('Bob starts Carol\'s draft after pointing its Inputs at her private node: the run reads as Bob (forbidden), StartedBy is Bob', async () => {
    const draft = await run(ts.url, carol.token, await reader('reader'), { start: false })
    expectStatus(await api(ts.url, bob.token).patchNode(draft, { Inputs: { Path: secret } }), 200)
    expectStatus(await api(ts.url, bob.token).patchNode(draft, { RequestedStatus: 'Running' }), 200)
    const done = await waitForStatus(ts.url, bob.token, draft, terminal)
    expect(done.content).toMatchObject({ CreatedBy: carol.userId, StartedBy: bob.userId, Status: 'Succeeded', ReturnValue: 'forbidden' })
    expect(JSON.stringify(done.content)).not.toContain('carol only')
  })

  it('the start request records its writer over PUT, /sync and /mux alike; Carol starting her own draft reads as Carol', async () => {
    const code = await reader('reader-transports')
    const draft = () => run(ts.url, carol.token, code, { start: false, inputs: { Path: secret } })

    const byPut = await draft()
    const current = await node(byPut, bob.token)
    expectStatus(await api(ts.url, bob.token).putNode(byPut, 'ActivityLog', { ...current.content, RequestedStatus: 'Running' }, current.name), 200)

    const bySync = await draft()
    const p = stockProvider(ts.url, bySync, bob.token)
    await p.synced()
    p.content.set('RequestedStatus', 'Running')

    const byMux = await draft()
    const m = await MuxClient.connect(ts.url, bob.token)
    expect(await m.join(byMux)).toMatchObject({ ok: true })
    expect(await m.patch(byMux, { RequestedStatus: 'Running' })).toMatchObject({ ok: true })

    for (const path of [byPut, bySync, byMux]) {
      const done = await waitForStatus(ts.url, bob.token, path, terminal)
      expect(done.content, path).toMatchObject({ CreatedBy: carol.userId, StartedBy: bob.userId, ReturnValue: 'forbidden' })
    }
    // The client that asked sees who started it: StartedBy is relayed to the room.
    await waitFor(() => p.json().StartedBy === bob.userId)
    p.destroy()

    // Positive control: Carol (a Viewer, no role on the run) fills in and starts her own draft over /mux.
    const own = await run(ts.url, carol.token, code, { start: false })
    const cm = await MuxClient.connect(ts.url, carol.token)
    expect(await cm.join(own)).toMatchObject({ ok: true })
    expect(await cm.patch(own, { Inputs: { Path: secret } })).toMatchObject({ ok: true })
    expect(await cm.patch(own, { Category: 'mine' })).toMatchObject({ ok: false, code: 'forbidden' })
    const cm2 = await MuxClient.connect(ts.url, carol.token)
    expect(await cm2.join(own)).toMatchObject({ ok: true })
    expect(await cm2.patch(own, { RequestedStatus: 'Running' })).toMatchObject({ ok: true })
    await cm2.close()
    const mine = await waitForStatus(ts.url, carol.token, own, terminal)
    expect(mine.content).toMatchObject({ StartedBy: carol.userId, ReturnValue: { Diary: 'carol only' } })
    await m.close()
    await cm.close()
  })

  it('Bob edits the Code node\'s Source to write into Carol\'s home, then starts her older draft: it runs the Source it was made with, as Bob', async () => {
    const code = await createCode(ts.url, alice.token, `${space}/harmless`, 'return "harmless"')
    const older = await run(ts.url, carol.token, code, { start: false })
    const evil = `try { await Mesh.put(${JSON.stringify(`${carol.userId}/pwned`)}, { nodeType: 'Document', content: { By: 'bob' } }); return 'wrote' } catch (e) { return e.code }`
    expectStatus(await api(ts.url, bob.token).patchNode(code, { Source: evil }), 200)
    expect((await node(older)).content.Source).toBe('return "harmless"')
    expectStatus(await api(ts.url, bob.token).patchNode(older, { RequestedStatus: 'Running' }), 200)
    const done = await waitForStatus(ts.url, bob.token, older, terminal)
    expect(done.content).toMatchObject({ StartedBy: bob.userId, Status: 'Succeeded', ReturnValue: 'harmless' })
    // A draft of Carol's made after the edit carries the new Source, and still runs as Bob.
    const newer = await run(ts.url, carol.token, code, { start: false })
    expectStatus(await api(ts.url, bob.token).patchNode(newer, { RequestedStatus: 'Running' }), 200)
    const after = await waitForStatus(ts.url, bob.token, newer, terminal)
    expect(after.content).toMatchObject({ StartedBy: bob.userId, Status: 'Succeeded', ReturnValue: 'forbidden' })
    expect((await api(ts.url, carol.token).getNode(`${carol.userId}/pwned`)).status).toBe(404)
  })

  it('a start request needs Execute on the Code node at that moment: refused with forbidden over HTTP and /mux, nothing written', async () => {
    const dave = await signup(ts.url)
    await grantRole(ts.url, alice.token, space, dave.userId, 'Editor')
    const tools = `${space}/locked`
    expectStatus(await api(ts.url, alice.token).putNode(tools, 'Document', {}), 201)
    const code = await createCode(ts.url, alice.token, `${tools}/tool`, 'return 1', { ActivityParentPath: space })
    await grantRole(ts.url, alice.token, tools, dave.userId, 'Viewer', true)
    const draft = await run(ts.url, carol.token, code, { start: false })
    const before = await node(draft)
    const res = await api(ts.url, dave.token).patchNode(draft, { RequestedStatus: 'Running' })
    expect(res.status).toBe(403)
    expect(errorCode(res)).toBe('forbidden')
    const m = await MuxClient.connect(ts.url, dave.token)
    expect(await m.join(draft)).toMatchObject({ ok: true })
    expect(await m.patch(draft, { RequestedStatus: 'Running' })).toMatchObject({ ok: false, code: 'forbidden' })
    await m.close()
    const after = await node(draft)
    expect(after.version).toBe(before.version)
    expect(after.content.RequestedStatus).toBeUndefined()
    expect(after.content.StartedBy).toBeUndefined()
  })

  it('Source, Language, CodePath, StartedBy and CreatedBy are system-only on an ActivityLog, on patch and on create', async () => {
    const draft = await run(ts.url, carol.token, await createCode(ts.url, alice.token, `${space}/fixed`, 'return 1'), { start: false })
    const patches: JsonObject[] = [{ Source: 'return 2' }, { Language: 'typescript' }, { CodePath: `${space}/other` }, { StartedBy: carol.userId }, { CreatedBy: bob.userId }]
    for (const patch of patches) {
      for (const who of [bob, carol, alice]) {
        const res = await api(ts.url, who.token).patchNode(draft, patch)
        expect(res.status, JSON.stringify(patch)).toBe(403)
      }
      const res = await api(ts.url, bob.token).putNode(`${space}/_Activity/forged-${Object.keys(patch)[0]}`, 'ActivityLog', { Category: 'x', ...patch })
      expect(errorCode(res), JSON.stringify(patch)).toBe('forbidden_field')
    }
    // The creator steers RequestedStatus and a draft's Inputs, nothing else (no role on the run).
    expect(errorCode(await api(ts.url, carol.token).patchNode(draft, { Category: 'mine' }))).toBe('forbidden')
    expectStatus(await api(ts.url, carol.token).patchNode(draft, { Inputs: { x: 1 } }), 200)
  })
})

describe('[ACT17] the starter is re-checked when the run launches', () => {
  it('a pending start whose starter lost Execute ends Failed; one naming no starter never runs as its creator', async () => {
    const quiet = await startTestServer({ config: { engines: [] } })
    const dir = quiet.dataDir
    try {
      const owner = await signup(quiet.url)
      const dan = await signup(quiet.url)
      const lab = await createSpace(quiet.url, owner.token)
      const grant = await grantRole(quiet.url, owner.token, lab, dan.userId, 'Viewer')
      const code = await createCode(quiet.url, owner.token, `${lab}/tool`, 'return "ran"')
      const log = (id: string, fields: JsonObject) =>
        quiet.server.nodes.create(SYSTEM, `${lab}/_Activity/${id}` as NodePath, { nodeType: 'ActivityLog', content: { Category: 'Script', CodePath: code, Source: 'return "ran"', Language: 'javascript', Inputs: {}, Messages: [], RequestedStatus: 'Running', ...fields } }, 'engine')
      // Asked while Dan could execute; his role is gone before the run launches.
      await log('revoked', { CreatedBy: dan.userId, StartedBy: dan.userId })
      expectStatus(await api(quiet.url, owner.token).deleteNode(grant), 204)
      // Made before runs recorded their starter: its creator may execute, but nobody asked as them.
      await log('nobody', { CreatedBy: owner.userId })
      await log('control', { CreatedBy: owner.userId, StartedBy: owner.userId })
      await quiet.server.close()
      const live = await startTestServer({ dataDir: dir, config: { engines: [createActivitiesEngine({ timeoutMs: 60_000, spares: 1, seedTemplates: false })] } })
      try {
        const revoked = await waitForStatus(live.url, owner.token, `${lab}/_Activity/revoked`, terminal)
        expect(revoked.content.Status).toBe('Failed')
        expect(String(revoked.content.Error)).toContain('may no longer execute')
        const nobody = await waitForStatus(live.url, owner.token, `${lab}/_Activity/nobody`, terminal)
        expect(nobody.content).toMatchObject({ Status: 'Failed' })
        expect(nobody.content.ReturnValue).toBeUndefined()
        expect(String(nobody.content.Error)).toContain('StartedBy')
        expect((await waitForStatus(live.url, owner.token, `${lab}/_Activity/control`, terminal)).content).toMatchObject({ Status: 'Succeeded', ReturnValue: 'ran' })
      } finally {
        await live.cleanup()
      }
    } finally {
      await quiet.cleanup()
      await removeDir(dir)
    }
  })
})

describe('[ACT17] finding 2: running code grants no role', () => {
  it('a Viewer who ran a Code node cannot PUT Documents or Code nodes under the activity; no assignment is made', async () => {
    const path = await run(ts.url, carol.token, await createCode(ts.url, alice.token, `${space}/any`, 'return 1'), { start: false })
    const doc = await api(ts.url, carol.token).putNode(`${path}/note`, 'Document', { A: 1 })
    expect(doc.status).toBe(403)
    const code = await api(ts.url, carol.token).putNode(`${path}/tool`, 'Code', { Language: 'javascript', Source: 'return 1' })
    expect(code.status).toBe(403)
    expect((await api(ts.url, alice.token).getNode(`${path}/note`)).status).toBe(404)
    expect((await api(ts.url, alice.token).getNode(`${path}/tool`)).status).toBe(404)
    expect((await api(ts.url, alice.token).getNode(`${path}/_Access/${carol.userId}_Access`)).status).toBe(404)
    // She still steers her run: start and cancel.
    expectStatus(await api(ts.url, carol.token).patchNode(path, { RequestedStatus: 'Running' }), 200)
    expect((await waitForStatus(ts.url, carol.token, path, terminal)).content.Status).toBe('Succeeded')
  })
})

describe('[ACT6] finding 3: runs land only where their caller could', () => {
  it('a run routed into a subtree its caller is Denied is refused (forbidden) and nothing is created', async () => {
    const hidden = `${space}/hidden`
    expectStatus(await api(ts.url, alice.token).putNode(hidden, 'Document', {}), 201)
    await grantRole(ts.url, alice.token, hidden, carol.userId, 'Viewer', true)
    const code = await createCode(ts.url, alice.token, `${space}/into-hidden`, 'return 1', { ActivityParentPath: hidden })
    const res = await api(ts.url, carol.token).post(`/api/nodes/${nodeUrlPath(code)}/run`, {})
    expect(res.status).toBe(403)
    expect(errorCode(res)).toBe('forbidden')
    expect((await api(ts.url, alice.token).queryNodes({ parent: `${hidden}/_Activity` })).body.items).toEqual([])
    // Alice, who reads it, lands there.
    expect((await run(ts.url, alice.token, code)).startsWith(`${hidden}/_Activity/`)).toBe(true)
  })

  it('a run routed under a parent that does not exist is refused (not_found): no orphan', async () => {
    const code = await createCode(ts.url, alice.token, `${space}/into-nowhere`, 'return 1', { ActivityParentPath: `${space}/nowhere` })
    const res = await api(ts.url, carol.token).post(`/api/nodes/${nodeUrlPath(code)}/run`, {})
    expect(res.status).toBe(404)
    expect(errorCode(res)).toBe('not_found')
    expect((await ts.server.nodes.query(SYSTEM, { parent: `${space}/nowhere/_Activity` as NodePath })).length).toBe(0)
  })

  it('no Code node under Admin/Partition/{home}: nothing can be created below a partition definition, and no run lands in Admin/Operations', async () => {
    const code = { Language: 'javascript', Source: 'return 1', ActivityParentPath: 'Admin/Operations' }
    // Not at the definition's own path: only a Partition lives there.
    expect(errorCode(await api(ts.url, carol.token).putNode(`Admin/Partition/${carol.userId}`, 'Code', code))).toBe('invalid_path')
    // Her own partition's definition is hers to write, and nothing goes below it.
    expectStatus(await api(ts.url, carol.token).putNode(`Admin/Partition/${carol.userId}`, 'Partition', { Namespace: carol.userId }), 201)
    const evil = `Admin/Partition/${carol.userId}/evil`
    expect(errorCode(await api(ts.url, carol.token).putNode(evil, 'Code', code))).toBe('invalid_path')
    expect(await ts.server.nodes.get(SYSTEM, evil as NodePath)).toBeNull()
    expect((await ts.server.nodes.query(SYSTEM, { parent: 'Admin/Operations/_Activity' as NodePath })).length).toBe(0)
  })

  it('[ACT11] Admin/Partition/{name} is a leaf whose {name} is an existing top-level node other than Admin (invalid_path), even for an Admin of Admin', async () => {
    const op = await signup(ts.url)
    await ts.server.nodes.put(SYSTEM, `Admin/_Access/${op.userId}_Access` as NodePath, { nodeType: 'AccessAssignment', content: { Subject: op.userId, Role: 'Admin' } }, 'system')
    const http = api(ts.url, op.token)
    expectStatus(await http.putNode(`Admin/Partition/${space}`, 'Partition', { Namespace: space }), 201)
    for (const [path, nodeType] of [
      ['Admin/Partition/Admin', 'Partition'],
      ['Admin/Partition/no-such-space', 'Partition'],
      [`Admin/Partition/${space}/child`, 'Partition'],
      [`Admin/Partition/${space}/child`, 'Document'],
      [`${op.userId}/not-a-catalog`, 'Partition'],
    ] as const) {
      const res = await http.putNode(path, nodeType, {})
      expect(errorCode(res), `${nodeType} at ${path}`).toBe('invalid_path')
    }
    expectStatus(await http.deleteNode(`Admin/Partition/${space}`), 204)
  })
})

describe('[ACT1] finding 4: a shared operation does not tell one user who else ran it', () => {
  it('a run of Admin/Operations/* leaves no LastActivityPath; one an earlier build left is cleared at boot, and the template follows the build', async () => {
    const ran = await run(ts.url, carol.token, 'Admin/Operations/ExportJson', { inputs: { Root: secret } })
    await waitForStatus(ts.url, carol.token, ran, terminal)
    const template = await node('Admin/Operations/ExportJson', bob.token)
    expect(template.content.LastActivityPath).toBeUndefined()
    expect(JSON.stringify(template)).not.toContain(carol.userId)
    // What an earlier build wrote is gone after a restart.
    const seeded = (await node('Admin/Operations/ExportMarkdown', bob.token)).content
    await ts.server.nodes.patch(SYSTEM, 'Admin/Operations/ExportMarkdown' as NodePath, { LastActivityPath: ran, Source: 'return "an earlier build"' }, 'engine')
    await ts.restart()
    const upgraded = (await node('Admin/Operations/ExportMarkdown', bob.token)).content
    expect(upgraded.LastActivityPath).toBeUndefined()
    // [ACT14] A seeded template follows the build: the earlier build's Source is replaced.
    expect(upgraded.Source).toBe(seeded.Source)
  })
})
