import fc from 'fast-check'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { SYSTEM, type JsonObject, type NodePath } from '../../shared/index.js'
import { createActivitiesEngine } from '../../sync-server/engines/activities/index.js'
import { api, errorCode, nodeUrlPath, signup, startTestServer, type TestServer, type TestUser } from '../helpers/index.js'
import { terminal, waitForStatus } from './activities-helpers.js'

/**
 * [ACT22] As a property: a run of a Code node whose `node` input `Requires: "Export"` is made,
 * and starts, exactly when its starter holds Export at the node the input names, by a model of the
 * role table that never asks the server (DESIGN.md "Identity and access": the assignment nearest
 * the path decides a subject's role there, a Denied one gives nothing; Editor and Admin hold
 * Export, Viewer and Commenter do not). Each case: random roles at random scopes of a small tree
 * (a space, a folder, a doc in it), a random Root, started at once or made as a draft whose
 * starter's role is changed before the start. Deterministic per seed (`WEFT_FC_SEED`).
 */
const SEED = process.env.WEFT_FC_SEED ? Number(process.env.WEFT_FC_SEED) : 20_261_207
const RUNS = Number(process.env.WEFT_INPUT_RIGHTS_RUNS ?? 40)
const CODE = 'Admin/Operations/NeedsExport' as NodePath

type Role = 'none' | 'Viewer' | 'Commenter' | 'Editor' | 'Admin' | 'Denied'
const SCOPES = ['', '/folder', '/folder/doc'] as const
const EXPORTS: Readonly<Record<Role, boolean>> = { none: false, Viewer: false, Commenter: false, Editor: true, Admin: true, Denied: false }

let ts: TestServer
let user: TestUser
/** Each space's Admin (a space keeps one: the user's own role there changes freely). */
let owner: TestUser
let caseNo = 0
const seen = { made: 0, refused: 0, draftFailed: 0, draftRan: 0 }

beforeAll(async () => {
  ts = await startTestServer({ config: { engines: [createActivitiesEngine({ timeoutMs: 20_000, spares: 1 })] } })
  user = await signup(ts.url)
  owner = await signup(ts.url)
  await ts.server.nodes.put(SYSTEM, CODE, {
    nodeType: 'Code',
    content: {
      Language: 'javascript',
      IsExecutable: true,
      ActivityParentPath: '{viewer}',
      Inputs: { Root: { Type: 'node', Required: true, Requires: 'Export' } },
      Source: 'return Inputs.Root',
    },
  }, 'system')
}, 120_000)
afterAll(() => ts.cleanup())

/** The model: the role of the assignment nearest `path` (scopes are the space and below). */
function exportsAt(roles: readonly Role[], path: string, space: string): boolean {
  let role: Role = 'none'
  for (const [i, scope] of SCOPES.entries()) {
    const at = `${space}${scope}`
    if ((path === at || path.startsWith(`${at}/`)) && roles[i] !== 'none') role = roles[i]!
  }
  return EXPORTS[role]
}

async function assign(scope: string, role: Role): Promise<void> {
  const path = `${scope}/_Access/${user.userId}_Access` as NodePath
  if (role === 'none') {
    if (await ts.server.nodes.get(SYSTEM, path)) await ts.server.nodes.delete(SYSTEM, path)
    return
  }
  const content: JsonObject = role === 'Denied' ? { Subject: user.userId, Role: 'Viewer', Denied: true } : { Subject: user.userId, Role: role }
  await ts.server.nodes.put(SYSTEM, path, { nodeType: 'AccessAssignment', content }, 'system')
}

const role = fc.constantFrom<Role>('none', 'Viewer', 'Commenter', 'Editor', 'Admin', 'Denied')
const scenario = fc.record({
  roles: fc.tuple(role, role, role),
  later: fc.tuple(role, role, role),
  root: fc.constantFrom(...SCOPES),
  asDraft: fc.boolean(),
})

it('[ACT22] a run requiring Export is made and starts exactly when its starter holds Export at its Root (seeded property)', async () => {
  await fc.assert(
    fc.asyncProperty(scenario, async (s) => {
      const space = `Rights${++caseNo}`
      await ts.server.nodes.put(SYSTEM, space as NodePath, { nodeType: 'Space', content: {} }, 'system')
      await ts.server.nodes.put(SYSTEM, `${space}/_Access/${owner.userId}_Access` as NodePath, { nodeType: 'AccessAssignment', content: { Subject: owner.userId, Role: 'Admin' } }, 'system')
      await ts.server.nodes.put(SYSTEM, `${space}/folder` as NodePath, { nodeType: 'Document', content: {} }, 'system')
      await ts.server.nodes.put(SYSTEM, `${space}/folder/doc` as NodePath, { nodeType: 'Document', content: {} }, 'system')
      for (const [i, scope] of SCOPES.entries()) await assign(`${space}${scope}`, s.roles[i]!)
      const root = `${space}${s.root}`
      const res = await api(ts.url, user.token).post<{ path: string }>(`/api/nodes/${nodeUrlPath(CODE)}/run`, { inputs: { Root: root }, start: !s.asDraft })
      if (!s.asDraft) {
        if (exportsAt(s.roles, root, space)) {
          expect(res.status, `${root} ${s.roles}`).toBe(201)
          seen.made++
        } else {
          expect(res.status, `${root} ${s.roles}`).toBe(403)
          expect(errorCode(res)).toBe('forbidden')
          expect(JSON.stringify(res.body)).toContain(`needs Export on ${root}`)
          seen.refused++
        }
        return
      }
      // A draft is made whatever the role (it runs nothing); the role changes, then the start is checked again.
      expect(res.status).toBe(201)
      for (const [i, scope] of SCOPES.entries()) await assign(`${space}${scope}`, s.later[i]!)
      expect((await api(ts.url, user.token).patchNode(res.body.path, { RequestedStatus: 'Running' })).status).toBe(200)
      const done = await waitForStatus(ts.url, user.token, res.body.path, terminal, 30_000)
      if (exportsAt(s.later, root, space)) {
        expect(done.content.Status, `${root} ${s.later}`).toBe('Succeeded')
        expect(done.content.ReturnValue).toBe(root)
        seen.draftRan++
      } else {
        expect(done.content.Status, `${root} ${s.later}`).toBe('Failed')
        expect(JSON.stringify(done.content.Messages)).toContain(`needs Export on ${root}`)
        seen.draftFailed++
      }
    }),
    { seed: SEED, numRuns: RUNS, endOnFailure: true },
  )
  // The seed reached every side of the decision.
  expect(seen).toEqual({ made: expect.any(Number), refused: expect.any(Number), draftFailed: expect.any(Number), draftRan: expect.any(Number) })
  for (const [k, v] of Object.entries(seen)) expect(v, k).toBeGreaterThan(0)
}, 240_000)
