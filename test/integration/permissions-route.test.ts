import fc from 'fast-check'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { api, createSpace, errorCode, expectStatus, grantRole, signup, startTestServer, type TestServer, type TestUser } from '../helpers/index.js'

interface Capabilities {
  path: string
  nodeType: string
  permissions: string[]
  fields: Record<string, boolean>
  newFields: boolean
  canDelete: boolean
  canCreate: boolean
}

const SEED = Number(process.env.WEFT_FC_SEED ?? 1616)
const ROLES = ['Viewer', 'Commenter', 'Editor', 'Admin'] as const
const RUNS = Number(process.env.WEFT_PERMISSIONS_RUNS ?? 40)

/**
 * [WEB15] `GET /api/permissions/{path}` says what the caller may do on a node, by the checks its
 * writes meet; the web app offers only what it allows, so it must agree with the writes.
 */
describe('[WEB15] GET /api/permissions/{path}', () => {
  let ts: TestServer
  let ann: TestUser
  let space: string
  let runPath: string

  beforeAll(async () => {
    ts = await startTestServer()
    ann = await signup(ts.url)
    space = await createSpace(ts.url, ann.token)
    expectStatus(await api(ts.url, ann.token).putNode(`${space}/Doc`, 'Document', { Body: 'x', Tags: ['a'] }), 201)
    expectStatus(await api(ts.url, ann.token).putNode(`${space}/Code`, 'Code', { Language: 'javascript', Source: 'return 1', IsExecutable: true }), 201)
    runPath = expectStatus(await api(ts.url, ann.token).post<{ path: string }>(`/api/nodes/${space}/Code/run`, { start: false }), 201).body.path
  })
  afterAll(() => ts.cleanup())

  /** A user of each role on the space, new for each property. */
  const roleUsers = async (): Promise<Record<string, TestUser>> => {
    const users: Record<string, TestUser> = {}
    for (const r of ROLES) {
      users[r] = await signup(ts.url)
      await grantRole(ts.url, ann.token, space, users[r].userId, r)
    }
    return users
  }
  const caps = async (user: TestUser, path: string) => expectStatus(await api(ts.url, user.token).get<Capabilities>(`/api/permissions/${path}`), 200).body

  it('[WEB15] a profile: Email is the system\'s and the node cannot be deleted, other fields are the user\'s', async () => {
    const me = await caps(ann, ann.userId)
    expect(me.nodeType).toBe('User')
    expect(me.fields.Email).toBe(false)
    expect(me.fields.FullName).toBe(true)
    expect(me.newFields).toBe(true)
    expect(me.canDelete).toBe(false)
    expect(errorCode(await api(ts.url, ann.token).deleteNode(ann.userId))).toMatch(/^forbidden/)
  })

  it('[WEB15] a Viewer may write nothing, delete nothing, create nothing; a Code node\'s LastActivityPath and a run\'s Status are nobody\'s', async () => {
    const vic = await signup(ts.url)
    await grantRole(ts.url, ann.token, space, vic.userId, 'Viewer')
    const doc = await caps(vic, `${space}/Doc`)
    expect(doc.permissions.sort()).toEqual(['Execute', 'Read'])
    expect(doc).toMatchObject({ fields: { Body: false, Tags: false }, newFields: false, canDelete: false, canCreate: false })
    const admin = await caps(ann, `${space}/Code`)
    expect(admin.fields.LastActivityPath).toBe(false)
    expect(admin.fields.Source).toBe(true)
    const run = await caps(ann, runPath)
    expect(run.fields.Status).toBe(false)
    expect(run.fields.RequestedStatus).toBe(true)
  })

  it('[WEB15] an unreadable node is 403 forbidden, an absent one 404 not_found, a bad path 400', async () => {
    const eve = await signup(ts.url)
    expect(errorCode(await api(ts.url, eve.token).get(`/api/permissions/${space}/Doc`))).toBe('forbidden')
    expect(errorCode(await api(ts.url, ann.token).get(`/api/permissions/${space}/Nope`))).toBe('not_found')
    const bad = await api(ts.url, ann.token).get(`/api/permissions/${space}/%00..`)
    expect(bad.status).toBe(400)
  })

  it('[WEB15] seeded property: for any role, node and field, the answer is what a PATCH meets (refused with forbidden* exactly when it says no)', async () => {
    const users = await roleUsers()
    const targets = [`${space}/Doc`, `${space}/Code`, runPath, ann.userId]
    const fieldNames = ['Body', 'Tags', 'Email', 'FullName', 'LastActivityPath', 'Source', 'Status', 'RequestedStatus', 'Inputs', 'Messages', 'CreatedBy', 'Fresh', 'constructor', '__proto__']
    let caseNo = 0
    console.info(`[WEB15] permissions property: seed ${SEED}, ${RUNS} cases (WEFT_FC_SEED, WEFT_PERMISSIONS_RUNS)`)
    await fc.assert(
      fc.asyncProperty(fc.constantFrom('owner', ...ROLES), fc.constantFrom(...targets), fc.constantFrom(...fieldNames), async (who, target, field) => {
        const user = who === 'owner' ? ann : users[who]!
        const res = await api(ts.url, user.token).get<Capabilities>(`/api/permissions/${target}`)
        if (res.status !== 200) {
          // Not readable: the node is not theirs to know about, and any write is refused too.
          expect(errorCode(res)).toBe('forbidden')
          expect(errorCode(await api(ts.url, user.token).patchNode(target, { [field]: 'x' }))).toMatch(/^(forbidden|not_found)/)
          return
        }
        const c = res.body
        const allowed = Object.prototype.hasOwnProperty.call(c.fields, field) ? c.fields[field] : c.newFields
        // A value of the field's shape where the type declares one, so only access can refuse,
        // and never the value it holds (a value other than the current one: the patch is a change).
        const n = ++caseNo
        const current = (await api(ts.url, ann.token).getNode(target)).body.content?.[field]
        const either = (a: string, b: string) => (current === a ? b : a)
        const value =
          field === 'Email' ? `new${n}@example.com`
          : field === 'Status' ? either('Succeeded', 'Failed')
          : field === 'RequestedStatus' ? either('Cancelled', 'Running')
          : field === 'Tags' || field === 'Messages' ? [`t${n}`]
          : field === 'Inputs' ? { n }
          : `v${n}`
        const patch = await api(ts.url, user.token).patchNode(target, { [field]: value })
        const refused = /^forbidden/.test(errorCode(patch) ?? '')
        expect(refused, `${who} ${field} on ${target}: ${patch.status} ${JSON.stringify(patch.body).slice(0, 200)}`).toBe(!allowed)
      }),
      { numRuns: RUNS, seed: SEED, endOnFailure: true },
    )
  })

  it('[ACC6] seeded property: a write that changes nothing (fields named at their values, or none) is answered exactly when the answer allows one of them (none named: Update), and changes nothing', async () => {
    const users = await roleUsers()
    const targets = [`${space}/Doc`, `${space}/Code`, runPath, ann.userId]
    console.info(`[ACC6] no-op property: seed ${SEED}, ${RUNS} cases (WEFT_FC_SEED, WEFT_PERMISSIONS_RUNS)`)
    await fc.assert(
      fc.asyncProperty(fc.constantFrom('owner', ...ROLES), fc.constantFrom(...targets), fc.array(fc.nat(), { maxLength: 3 }), fc.boolean(), async (who, target, picks, asPut) => {
        const user = who === 'owner' ? ann : users[who]!
        const res = await api(ts.url, user.token).get<Capabilities>(`/api/permissions/${target}`)
        if (res.status !== 200) return
        const c = res.body
        const before = (await api(ts.url, ann.token).getNode(target)).body
        const held = Object.keys(before.content)
        const named = asPut ? held : [...new Set(picks.map((p) => held[p % Math.max(1, held.length)]!).filter((f) => f !== undefined))]
        const allowed = named.length === 0 ? c.permissions.includes('Update') : named.some((f) => c.fields[f] === true)
        const write = asPut
          ? await api(ts.url, user.token).putNode(target, before.nodeType, before.content, before.name)
          : await api(ts.url, user.token).patchNode(target, Object.fromEntries(named.map((f) => [f, before.content[f]])))
        expect(write.status < 300, `${who} ${asPut ? 'PUT' : 'PATCH'} ${named.join(',')} on ${target}: ${write.status} ${JSON.stringify(write.body).slice(0, 200)}`).toBe(allowed)
        if (!allowed) expect(errorCode(write)).toMatch(/^forbidden/)
        const after = (await api(ts.url, ann.token).getNode(target)).body
        expect(after.content).toEqual(before.content)
        expect(after.version).toBe(before.version)
      }),
      { numRuns: RUNS, seed: SEED, endOnFailure: true },
    )
  })
})
