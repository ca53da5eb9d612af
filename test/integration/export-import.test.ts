import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { fieldRule, knownNodeTypes } from '../../shared/node-types.js'
import { subscriptionsEngine } from '../../sync-server/engines/subscriptions/index.js'
import { createActivitiesEngine } from '../../sync-server/engines/activities/index.js'
import { engineWritten } from '../../sync-server/engines/activities/templates.js'
import { api, createSpace, errorCode, expectStatus, grantRole, signup, startTestServer, waitFor, type TestServer, type TestUser } from '../helpers/index.js'
import { createCode, run, terminal, waitForStatus } from './activities-helpers.js'

let ts: TestServer
let alice: TestUser
let viewer: TestUser

beforeAll(async () => {
  ts = await startTestServer({ config: { engines: [subscriptionsEngine, createActivitiesEngine({ timeoutMs: 30_000, spares: 1 })] } })
  alice = await signup(ts.url)
  viewer = await signup(ts.url)
})
afterAll(() => ts.cleanup())

interface Bundle {
  Nodes: { path: string; nodeType: string; content: Record<string, unknown> }[]
}

describe('[XFER1] export / import round trip of a whole space', () => {
  it('[XFER1] the engine-written table is the field rules: every system field of every type, and the types only system writes', () => {
    const { fields, types } = engineWritten()
    for (const type of knownNodeTypes()) {
      if (types.includes(type)) continue
      for (const f of fields[type] ?? []) expect(fieldRule(type, f)).toBe('system')
    }
    expect(fields.Code).toContain('LastActivityPath')
    expect(fields.ActivityLog).toEqual(expect.arrayContaining(['Status', 'Messages', 'CreatedBy']))
    expect(types).toEqual(expect.arrayContaining(['User', 'CodeCheck']))
  })

  it('[XFER1] a space with Code that has run, its runs, access and a subscription: exported without what only the system writes, imported "N of N", nothing refused', async () => {
    const src = await createSpace(ts.url, alice.token)
    await grantRole(ts.url, alice.token, src, viewer.userId, 'Viewer')
    expectStatus(await api(ts.url, alice.token).putNode(`${src}/notes`, 'Document', { Title: 'Notes', Body: 'line one\nline two' }), 201)
    const tool = await createCode(ts.url, alice.token, `${src}/tool`, 'Log.info("ran"); return 1')
    expectStatus(await api(ts.url, alice.token).putNode(`${src}/reminder`, 'EventSubscription', { TriggerType: 'Timer', ContinuationType: 'PostThreadMessage', Status: 'Pending' }), 201)
    // The Code node has run (by Alice and by the Viewer): it carries LastActivityPath, its space hosts the runs.
    await waitForStatus(ts.url, alice.token, await run(ts.url, alice.token, tool), terminal)
    await waitForStatus(ts.url, viewer.token, await run(ts.url, viewer.token, tool), terminal)
    await waitFor(async () => typeof (await api(ts.url, alice.token).getNode(tool)).body.content.LastActivityPath === 'string')

    const exported = await waitForStatus(ts.url, alice.token, await run(ts.url, alice.token, 'Admin/Operations/ExportJson', { inputs: { Root: src } }), terminal, 30_000)
    expect(exported.content.Status).toBe('Succeeded')
    const bundle = exported.content.ReturnValue as unknown as Bundle
    const paths = bundle.Nodes.map((n) => n.path)
    expect(paths).toEqual(expect.arrayContaining([src, `${src}/notes`, tool, `${src}/reminder`, `${src}/_Access/${viewer.userId}_Access`]))
    // Runs and checks are engine state; no field only the system writes is in the bundle.
    expect(paths.some((p) => p.includes('/_Activity') || p.endsWith('/_Check'))).toBe(false)
    for (const n of bundle.Nodes) for (const f of Object.keys(n.content)) expect(fieldRule(n.nodeType, f)).not.toBe('system')
    expect(bundle.Nodes.find((n) => n.path === tool)!.content).not.toHaveProperty('LastActivityPath')

    const dst = await createSpace(ts.url, alice.token)
    const imported = await waitForStatus(ts.url, alice.token, await run(ts.url, alice.token, 'Admin/Operations/ImportJson', { inputs: { Bundle: bundle as never, Target: dst } }), terminal, 30_000)
    const n = bundle.Nodes.length
    expect(imported.content).toMatchObject({ Status: 'Succeeded', ReturnValue: { Imported: n, Refused: [] } })
    expect(((imported.content.Messages ?? []) as { Text: string }[]).map((m) => m.Text)).toContain(`Imported ${n} of ${n} nodes into ${dst}.`)
    const copy = (await api(ts.url, alice.token).getNode(`${dst}/${src}/tool`)).body
    expect(copy.content).toMatchObject({ Source: 'Log.info("ran"); return 1', Language: 'javascript' })
    expect(copy.content).not.toHaveProperty('LastActivityPath')
    expect((await api(ts.url, alice.token).getNode(`${dst}/${src}/_Access/${viewer.userId}_Access`)).body.content).toMatchObject({ Role: 'Viewer' })
    expect((await api(ts.url, alice.token).getNode(`${dst}/${src}/notes`)).body.content.Body).toBe('line one\nline two')
  }, 180_000)

  it('[XFER1] an older bundle that still carries system fields imports without them, nothing refused', async () => {
    const dst = await createSpace(ts.url, alice.token)
    const bundle = {
      Format: 'weft-bundle/1',
      Root: 'Old',
      Nodes: [
        { path: 'Old', nodeType: 'Space', name: 'Old', content: {} },
        { path: 'Old/tool', nodeType: 'Code', name: 'tool', content: { Language: 'javascript', Source: 'return 2', LastActivityPath: `${alice.userId}/_Activity/x` } },
      ],
    }
    const imported = await waitForStatus(ts.url, alice.token, await run(ts.url, alice.token, 'Admin/Operations/ImportJson', { inputs: { Bundle: bundle as never, Target: dst } }), terminal, 30_000)
    expect(imported.content).toMatchObject({ Status: 'Succeeded', ReturnValue: { Imported: 2, Refused: [] } })
    expect((await api(ts.url, alice.token).getNode(`${dst}/Old/tool`)).body.content).toEqual({ Language: 'javascript', Source: 'return 2' })
  }, 180_000)

  it('[ACT22] exporting takes Export on the Root (an Editor\'s or an Admin\'s): a Viewer, who reads the space, is refused with a reason and no run is made; a role lowered before a draft starts fails it; crafted Roots get invalid_request', async () => {
    const space = await createSpace(ts.url, alice.token)
    expectStatus(await api(ts.url, alice.token).putNode(`${space}/notes`, 'Document', { Body: 'only for Editors to take away' }), 201)
    const reader = await signup(ts.url)
    await grantRole(ts.url, alice.token, space, reader.userId, 'Viewer')
    expectStatus(await api(ts.url, reader.token).getNode(`${space}/notes`), 200)
    for (const op of ['ExportJson', 'ExportMarkdown']) {
      const res = await api(ts.url, reader.token).post(`/api/nodes/Admin/Operations/${op}/run`, { inputs: { Root: space } })
      expect(res.status, op).toBe(403)
      expect(errorCode(res)).toBe('forbidden')
      expect(JSON.stringify(res.body)).toContain(`needs Export on ${space} (its input Root), and you lack it there`)
    }
    // No run was made for the refused requests.
    const runs = await api(ts.url, reader.token).queryNodes({ parent: `${reader.userId}/_Activity` })
    expect(runs.status).toBe(200)
    expect(runs.body.items).toEqual([])
    // An Editor may; made a draft, then lowered to Viewer, her start fails naming Export, nothing exported.
    await grantRole(ts.url, alice.token, space, reader.userId, 'Editor')
    const draft = await run(ts.url, reader.token, 'Admin/Operations/ExportJson', { inputs: { Root: space }, start: false })
    await grantRole(ts.url, alice.token, space, reader.userId, 'Viewer')
    expectStatus(await api(ts.url, reader.token).patchNode(draft, { RequestedStatus: 'Running' }), 200)
    const failed = await waitForStatus(ts.url, reader.token, draft, terminal, 30_000)
    expect(failed.content.Status).toBe('Failed')
    expect(JSON.stringify(failed.content.Messages)).toContain(`needs Export on ${space} (its input Root), and the person who started it lacks it there`)
    expect(failed.content.ReturnValue ?? null).toBeNull()
    // Crafted Roots: not a node path is a clear invalid_request, for the owner too.
    for (const Root of [42, '../x', { path: space }, ['a'], 'a//b']) {
      const res = await api(ts.url, alice.token).post('/api/nodes/Admin/Operations/ExportJson/run', { inputs: { Root } })
      expect(res.status, JSON.stringify(Root)).toBe(400)
      expect(errorCode(res)).toBe('invalid_request')
    }
    // The owner (Admin of the space) exports as before.
    const ok = await waitForStatus(ts.url, alice.token, await run(ts.url, alice.token, 'Admin/Operations/ExportJson', { inputs: { Root: space } }), terminal, 30_000)
    expect(ok.content.Status).toBe('Succeeded')
  }, 180_000)
})
