import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { SYSTEM, type MeshNode, type NodePath } from '../../shared/index.js'
import { createActivitiesEngine, checkPathOf, sourceHash } from '../../sync-server/engines/activities/index.js'
import { api, createSpace, errorCode, grantRole, signup, startTestServer, stockProvider, waitFor, type TestServer, type TestUser } from '../helpers/index.js'
import { createCode } from './activities-helpers.js'

/**
 * [ACT16] The Code node's syntax check on a real server: what needs the transports (a person's
 * edit over HTTP checked; nobody but the engine writes the check, over HTTP or /sync). Its timing
 * (the debounce), the boot re-request after a crash, the compare-and-set and the delete are tested
 * on virtual time in test/sim/code-check.sim.test.ts; no assertion here is about time.
 */
let ts: TestServer
let alice: TestUser
let editor: TestUser
let space: string


beforeAll(async () => {
  ts = await startTestServer({ config: { engines: [createActivitiesEngine({ spares: 0, seedTemplates: false, checkDebounceMs: 20 })] } })
  alice = await signup(ts.url)
  editor = await signup(ts.url)
  space = await createSpace(ts.url, alice.token)
  await grantRole(ts.url, alice.token, space, editor.userId, 'Editor')
})
afterAll(() => ts.cleanup())

async function checkOf(code: string, pred: (n: MeshNode) => boolean, token = alice.token): Promise<MeshNode> {
  return waitFor(
    async () => {
      const r = await api(ts.url, token).getNode(checkPathOf(code as NodePath))
      return r.status === 200 && pred(r.body as MeshNode) ? (r.body as MeshNode) : null
    },
    { timeoutMs: 10_000, description: `${code} check` },
  )
}

const settled = (n: MeshNode) => n.content.Status === 'Passed' || n.content.Status === 'Failed'

describe('the Code check [ACT16]', () => {
  it('a syntax error fails with its line and column; an Editor\'s fix over HTTP passes', async () => {
    const code = await createCode(ts.url, alice.token, `${space}/broken`, 'Log.info("a")\nconst x = ;\nreturn x')
    const failed = await checkOf(code, settled)
    expect(failed.content.Status).toBe('Failed')
    const errors = failed.content.Errors as { Line: number; Column: number; Text: string }[]
    expect(errors[0]).toMatchObject({ Line: 2, Column: 11 })
    expect(errors[0]!.Text).toMatch(/Unexpected/)
    expect(failed.createdBy).toBe('system')

    // An Editor fixes it: the check follows the new Source.
    await api(ts.url, editor.token).patchNode(code, { Source: 'Log.info("a")\nconst x = 1\nreturn x' })
    const passed = await checkOf(code, (n) => n.content.Status === 'Passed', editor.token)
    expect(passed.content.Errors).toEqual([])
    expect(passed.content.SourceHash).toBe(sourceHash('javascript\nLog.info("a")\nconst x = 1\nreturn x'))

  })

  it('nobody but the engine writes the check: not an Editor over HTTP (patch, replace, create) nor over /sync', async () => {
    const code = await createCode(ts.url, alice.token, `${space}/guarded`, 'return 1')
    const check = checkPathOf(code as NodePath)
    await checkOf(code, settled)
    const http = api(ts.url, editor.token)
    const patched = await http.patchNode(check, { Status: 'Failed', Errors: [{ Line: 1, Column: 1, Text: 'forged' }] })
    expect(patched.status).toBe(403)
    expect(errorCode(patched)).toBe('forbidden_field')
    const replaced = await http.putNode(check, 'CodeCheck', { Status: 'Pending' })
    expect(replaced.status).toBe(403)
    // Creating one: `_` segments are the system's.
    await createCode(ts.url, alice.token, `${space}/unchecked`, 'return 2')
    const created = await http.putNode(`${space}/unchecked/_Check2`, 'CodeCheck', { Status: 'Passed' })
    expect(created.status).toBeGreaterThanOrEqual(400)
    expect(created.status).toBeLessThan(500)

    // A stock provider: its forged Status never reaches the server.
    const client = stockProvider(ts.url, check, editor.token)
    await client.synced()
    client.doc.transact(() => client.content.set('Status', 'Pending'))
    await waitFor(() => client.denied.length > 0 || client.closes.length > 0, 5_000)
    client.destroy()
    const stored = await ts.server.nodes.get(SYSTEM, check)
    expect(stored?.content.Status).toBe('Passed')
  })
})
