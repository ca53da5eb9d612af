import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import fc from 'fast-check'
import { SYSTEM, type MeshNode, type NodePath } from '../../shared/index.js'
import { createActivitiesEngine, checkPathOf, checkSource, reRequestInterrupted, sourceHash, type ActivitiesEngine } from '../../sync-server/engines/activities/index.js'
import { api, createSpace, errorCode, grantRole, signup, startTestServer, stockProvider, waitFor, type TestServer, type TestUser } from '../helpers/index.js'
import { createCode } from './activities-helpers.js'
import pino from 'pino'

/**
 * [ACT16] The owner-state re-request, used by the Code node's syntax check: the owner state is
 * `{code}/_Check` (written by the engine only), the executor is esbuild's service.
 */
let ts: TestServer
let alice: TestUser
let editor: TestUser
let space: string

const checks = () => (ts.server.engines.find((e) => e.name === 'activities') as ActivitiesEngine).checks

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
  it('a syntax error fails with its line and column, a fix passes; the check follows the Source and the language', async () => {
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

    // Types are an error in JavaScript and fine in TypeScript.
    await api(ts.url, alice.token).patchNode(code, { Source: 'const n: number = 1\nreturn n' })
    expect((await checkOf(code, (n) => n.content.Status === 'Failed')).content.Errors).toHaveLength(1)
    await api(ts.url, alice.token).patchNode(code, { Language: 'typescript' })
    await checkOf(code, (n) => n.content.Status === 'Passed')
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

  it('a check left Checking by a dead process is re-requested at boot and dispatched again', async () => {
    const code = await createCode(ts.url, alice.token, `${space}/interrupted`, 'return 40 + 2')
    const check = checkPathOf(code as NodePath)
    const first = await checkOf(code, settled)
    await checks().settled()
    // What a crash in the middle of a check leaves behind: Checking, with no result.
    await ts.server.nodes.update(SYSTEM, check, (cur) => ({ nodeType: 'CodeCheck', name: cur!.name, content: { Status: 'Checking', SourceHash: first.content.SourceHash as string, Errors: [], CheckedAt: null } }), 'engine')
    await ts.restart()
    const again = await checkOf(code, (n) => n.content.Status === 'Passed')
    expect(typeof again.content.CheckedAt).toBe('string')
    expect(again.version).toBeGreaterThan(first.version + 1) // Checking → Pending → Checking → Passed
  })

  it('the re-request reads the owner state and flips only what is still in progress (compare-and-set)', async () => {
    const nodes = ts.server.nodes
    const base = `${space}/owners`
    await nodes.put(SYSTEM, base as NodePath, { nodeType: 'Document', content: {} })
    const mk = (name: string, status: string) => nodes.put(SYSTEM, `${base}/${name}` as NodePath, { nodeType: 'BuildOwner', content: { BuildStatus: status } })
    await mk('a', 'Building')
    await mk('b', 'Built')
    await mk('c', 'Building')
    // c moves on between the query and the flip: it must be left alone.
    const racing = {
      query: async (...args: Parameters<typeof nodes.query>) => {
        const found = await nodes.query(...args)
        await nodes.patch(SYSTEM, `${base}/c` as NodePath, { BuildStatus: 'Built' })
        return found
      },
      update: nodes.update.bind(nodes),
    }
    const flipped = await reRequestInterrupted(racing, { nodeType: 'BuildOwner', field: 'BuildStatus', inProgress: 'Building', requested: 'Pending' }, { log: pino({ level: 'silent' }) })
    expect(flipped).toEqual([`${base}/a`])
    const status = async (n: string) => (await nodes.get(SYSTEM, `${base}/${n}` as NodePath))?.content.BuildStatus
    expect([await status('a'), await status('b'), await status('c')]).toEqual(['Pending', 'Built', 'Built'])
  })

  it('deleting the Code node takes its check with it; a check never outlives its Code node', async () => {
    const code = await createCode(ts.url, alice.token, `${space}/doomed`, 'return 1')
    await checkOf(code, settled)
    const res = await api(ts.url, alice.token).deleteNode(code)
    expect(res.status).toBeLessThan(300)
    await checks().settled()
    expect(await ts.server.nodes.get(SYSTEM, checkPathOf(code as NodePath))).toBeNull()
  })

  it('checkSource never throws and reports lines inside the source, whatever the text (property, seeded)', async () => {
    await fc.assert(
      fc.asyncProperty(fc.string({ maxLength: 200 }), fc.constantFrom('javascript' as const, 'typescript' as const), async (src, lang) => {
        const errors = await checkSource(src, lang)
        const lines = src.split('\n').length
        for (const e of errors) {
          expect(e.Line).toBeGreaterThanOrEqual(1)
          // An error at the end of the body may point at the wrapper's closing line.
          expect(e.Line).toBeLessThanOrEqual(lines + 1)
          expect(typeof e.Text).toBe('string')
        }
      }),
      { numRuns: 200, seed: Number(process.env.WEFT_FC_SEED ?? 20261203) },
    )
  })
})
