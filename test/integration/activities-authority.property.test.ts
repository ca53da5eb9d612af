import fc from 'fast-check'
import { Subscription } from 'rxjs'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { SYSTEM, topLevel, userPrincipal, type JsonObject, type MeshNode, type NodePath, type Permission, type UserId } from '../../shared/index.js'
import { createActivitiesEngine } from '../../sync-server/engines/activities/index.js'
import { MuxClient, api, nodeUrlPath, signup, startTestServer, type TestServer, type TestUser } from '../helpers/index.js'
import { terminal, waitForStatus } from './activities-helpers.js'

/**
 * [ACT17] The authority model as a property: random principals × roles (none, Viewer, Editor,
 * Admin, Denied) × who drafts a run / edits its Inputs / edits the Code node's Source / starts it
 * (HTTP or /mux) / where it is routed (the space, a Denied subtree, a missing parent, another
 * space, a home, Admin/…). The script tries Mesh.get, Mesh.put (a child) and Mesh.patch on a set
 * of probe paths and returns what succeeded.
 *
 * Invariants:
 *  - no run reads or writes anything its starter could not: each probe succeeded exactly when the
 *    access service gives the STARTER (StartedBy, the principal who asked to start) the right;
 *  - a run executes the Source its activity was made with, never a later edit of the Code node;
 *  - a refused draft creates nothing; a refused start writes nothing; every refusal and every
 *    success is the one the contract predicts (Execute on the Code node, the owner field rule,
 *    routing to an existing parent the caller reads, in the Code node's partition or their home).
 *
 * Deterministic per seed (each case has a space of its own on one shared server); the seed is
 * printed, `WEFT_FC_SEED` replays it and `WEFT_AUTHORITY_RUNS` sets the number of cases.
 */
const RUNS = Number(process.env.WEFT_AUTHORITY_RUNS ?? 80)
const SEED = process.env.WEFT_FC_SEED ? Number(process.env.WEFT_FC_SEED) : 20_261_203

type RoleChoice = 'none' | 'Viewer' | 'Editor' | 'Admin' | 'Denied'
const PLACES = ['default', '{viewer}', 'vault', 'missing', 'doc', 'other', 'otherDoc', 'operations', 'admin', 'home0'] as const
type Place = (typeof PLACES)[number]

/** The probe script: for each path, whether get, put of a child and patch succeeded. */
const PROBE = `
const out = {};
for (const p of Inputs.Probes) {
  try { await Mesh.get(p); out['get ' + p] = true } catch (e) { out['get ' + p] = false }
  try { await Mesh.put(p + '/w-' + Inputs.Tag, { nodeType: 'Document', content: { By: 'probe' } }); out['put ' + p] = true } catch (e) { out['put ' + p] = false }
  try { await Mesh.patch(p, { Touched: Inputs.Tag }); out['patch ' + p] = true } catch (e) { out['patch ' + p] = false }
}
return out;
`

let ts: TestServer
let users: TestUser[]
let other: string
const created: string[] = []
const feed = new Subscription()
let caseNo = 0
/** What the cases exercised: the generator must reach both sides of every decision. */
const seen = { draftRefused: 0, startRefused: 0, ran: 0, byOther: 0, probesDenied: 0, probesAllowed: 0 }

async function sys(path: string, nodeType: string, content: JsonObject): Promise<void> {
  await ts.server.nodes.put(SYSTEM, path as NodePath, { nodeType, content }, 'system')
}

async function assign(scope: string, user: TestUser, role: RoleChoice): Promise<void> {
  if (role === 'none') return
  const content: JsonObject = role === 'Denied' ? { Subject: user.userId, Role: 'Viewer', Denied: true } : { Subject: user.userId, Role: role }
  await sys(`${scope}/_Access/${user.userId}_Access`, 'AccessAssignment', content)
}

function can(user: TestUser, path: string, permission: Permission): boolean {
  return ts.server.nodes.permissions(userPrincipal(user.userId as UserId), path as NodePath).has(permission)
}

async function exists(path: string): Promise<boolean> {
  return (await ts.server.nodes.get(SYSTEM, path as NodePath)) !== null
}

beforeAll(async () => {
  ts = await startTestServer({ config: { engines: [createActivitiesEngine({ timeoutMs: 20_000, memoryMb: 32, spares: 2 })] } })
  users = await Promise.all([0, 1, 2].map(() => signup(ts.url)))
  for (const u of users) await sys(`${u.userId}/probe`, 'Document', { Owner: u.userId })
  // Another space, with fixed roles.
  other = 'Other'
  await sys(other, 'Space', {})
  await sys(`${other}/doc`, 'Document', {})
  await assign(other, users[0]!, 'Editor')
  await assign(other, users[1]!, 'Viewer')
  await assign(other, users[2]!, 'Denied')
  feed.add(ts.server.nodes.changes$.subscribe((c) => c.nodeType === 'ActivityLog' && c.kind === 'Created' && created.push(c.path)))
  console.info(`[ACT17] authority property: seed ${SEED}, ${RUNS} cases (WEFT_FC_SEED, WEFT_AUTHORITY_RUNS)`)
}, 180_000)
afterAll(async () => {
  feed.unsubscribe()
  await ts.cleanup()
})

const who = fc.integer({ min: 0, max: 2 })
/** Weighted so that most cases get past the draft and reach a start and a run. */
const weighted = <T,>(pairs: [T, number][]): fc.Arbitrary<T> => fc.oneof(...pairs.map(([v, weight]) => ({ arbitrary: fc.constant(v), weight })))
const role = weighted<RoleChoice>([['none', 1], ['Viewer', 3], ['Editor', 3], ['Admin', 2], ['Denied', 1]])
const place = weighted<Place>(PLACES.map((p): [Place, number] => [p, p === 'default' ? 6 : p === '{viewer}' ? 4 : 1]))
const scenario = fc.record({
  roles: fc.tuple(role, role, role),
  vaultDenied: fc.tuple(fc.boolean(), fc.boolean(), fc.boolean()),
  place,
  drafter: who,
  startAtOnce: fc.boolean(),
  inputsEditor: fc.option(who, { nil: null }),
  probeSubset: fc.array(fc.boolean(), { minLength: 9, maxLength: 9 }),
  sourceEditor: fc.option(who, { nil: null }),
  starter: who,
  overMux: fc.boolean(),
})

describe('[ACT17] authority model (seeded property)', () => {
  it('no run reads or writes anything its starter could not; refusals create and write nothing', async () => {
    await fc.assert(
      fc.asyncProperty(scenario, async (s) => {
        const n = ++caseNo
        const space = `Auth${n}`
        await sys(space, 'Space', {})
        for (const [i, u] of users.entries()) await assign(space, u, s.roles[i]!)
        await sys(`${space}/doc`, 'Document', {})
        await sys(`${space}/vault`, 'Document', {})
        await sys(`${space}/vault/doc`, 'Document', {})
        for (const [i, u] of users.entries()) if (s.vaultDenied[i]) await assign(`${space}/vault`, u, 'Denied')
        const parentOf: Record<Place, string | undefined> = {
          default: undefined,
          '{viewer}': '{viewer}',
          vault: `${space}/vault`,
          missing: `${space}/missing`,
          doc: `${space}/doc`,
          other,
          otherDoc: `${other}/doc`,
          operations: 'Admin/Operations',
          admin: 'Admin',
          home0: users[0]!.userId,
        }
        const probes = [`${space}/doc`, `${space}/vault/doc`, `${space}/missing`, `${other}/doc`, ...users.map((u) => `${u.userId}/probe`), 'Admin/Operations/ExportJson', space]
        const code = `${space}/code`
        const codeContent: JsonObject = { Language: 'javascript', Source: PROBE, IsExecutable: true, Inputs: { Probes: { Type: 'json', Default: probes }, Tag: { Type: 'string', Default: `c${n}` } } }
        const ap = parentOf[s.place]
        if (ap !== undefined) codeContent.ActivityParentPath = ap
        await sys(code, 'Code', codeContent)

        // Draft (or start at once).
        const drafter = users[s.drafter]!
        const before = created.length
        const res = await api(ts.url, drafter.token).post<{ path: string }>(`/api/nodes/${nodeUrlPath(code)}/run`, { start: s.startAtOnce })
        const parent = ap === undefined ? space : ap.replace('{viewer}', drafter.userId)
        const mayRoute = can(drafter, code, 'Execute') && [space, drafter.userId].includes(topLevel(parent as NodePath)) && can(drafter, parent, 'Read') && (await exists(parent))
        expect(res.status === 201, `draft by user${s.drafter} to ${parent}: ${res.status} ${JSON.stringify(res.body)}`).toBe(mayRoute)
        if (res.status !== 201) {
          expect(created.length, 'a refused run created an activity').toBe(before)
          seen.draftRefused++
          return
        }
        const activity = res.body.path
        expect(activity.startsWith(`${parent}/_Activity/`)).toBe(true)

        let starter = drafter
        if (!s.startAtOnce) {
          // Someone edits the draft's Inputs: its creator, or anyone with Update on it.
          if (s.inputsEditor !== null) {
            const editor = users[s.inputsEditor]!
            const subset = probes.filter((_, i) => s.probeSubset[i])
            const r = await api(ts.url, editor.token).patchNode(activity, { Inputs: { Probes: subset } })
            expect(r.status === 200, `Inputs edit by user${s.inputsEditor}: ${r.status}`).toBe(editor === drafter || can(editor, activity, 'Update'))
          }
          // Someone edits the Code node's Source: the draft keeps the one it was made with.
          if (s.sourceEditor !== null) await api(ts.url, users[s.sourceEditor]!.token).patchNode(code, { Source: 'return "edited"' })
          // Someone starts it.
          starter = users[s.starter]!
          const mayStart = (starter === drafter || can(starter, activity, 'Update')) && can(starter, code, 'Execute')
          const draftBefore = (await ts.server.nodes.get(SYSTEM, activity as NodePath))!
          let ok: boolean
          if (s.overMux) {
            const m = await MuxClient.connect(ts.url, starter.token)
            const joined = await m.join(activity)
            ok = joined.ok && (await m.patch(activity, { RequestedStatus: 'Running' })).ok
            await m.close()
          } else {
            ok = (await api(ts.url, starter.token).patchNode(activity, { RequestedStatus: 'Running' })).status === 200
          }
          expect(ok, `start by user${s.starter} over ${s.overMux ? '/mux' : 'HTTP'}`).toBe(mayStart)
          if (!ok) {
            const after = (await ts.server.nodes.get(SYSTEM, activity as NodePath))!
            expect(after.version, 'a refused start wrote something').toBe(draftBefore.version)
            expect(after.content.Status).toBeUndefined()
            seen.startRefused++
            return
          }
        }

        const done = (await waitForStatus(ts.url, starter.token, activity, terminal, 30_000)) as MeshNode
        expect(done.content.StartedBy).toBe(starter.userId)
        expect(done.content.Source).toBe(PROBE)
        expect(done.content.Status, String(done.content.Error)).toBe('Succeeded')
        seen.ran++
        if (starter !== drafter) seen.byOther++
        const got = done.content.ReturnValue as Record<string, boolean>
        for (const v of Object.values(got)) {
          if (v) seen.probesAllowed++
          else seen.probesDenied++
        }
        const ran = (done.content.Inputs as { Probes: string[] }).Probes
        for (const p of ran) {
          // The run acted as its starter, exactly: each call succeeded when, and only when, they could make it.
          const present = await exists(p)
          expect(got[`get ${p}`], `get ${p} as user${users.indexOf(starter)}`).toBe(can(starter, p, 'Read'))
          expect(got[`put ${p}`], `put under ${p} as user${users.indexOf(starter)}`).toBe(present && can(starter, `${p}/w-c${n}`, 'Create') && can(starter, p, 'Read'))
          expect(got[`patch ${p}`], `patch ${p} as user${users.indexOf(starter)}`).toBe(present && can(starter, p, 'Update'))
        }
      }),
      { numRuns: RUNS, seed: SEED, endOnFailure: true },
    )
    console.info(`[ACT17] authority property: ${JSON.stringify(seen)}`)
    if (RUNS >= 40) {
      for (const [k, v] of Object.entries(seen)) expect(v, `no case exercised ${k}`).toBeGreaterThan(0)
    }
  }, 600_000)
})
