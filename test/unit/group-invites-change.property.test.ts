import fc from 'fast-check'
import { expect, it } from 'vitest'
import { ROLE_PERMISSIONS, Role, SYSTEM, groupInviteSubscriptionId, type NodePath } from '../../shared/index.js'
import { api, createDocument, createGroup, createSpace, errorCode, grantRole, uniqueEmail } from '../helpers/index.js'
import { serverWithUsers } from '../helpers/server-with-users.js'

/**
 * [ACC41] As a property: random sequences of group invites (single, a list, a pasted block with
 * repeats and other case; with a role or none; by the space's Admin, by users whose roles are
 * random, of members, non-members, the caller and addresses without an account), role changes and
 * Denied assignments on the space and on the group, removals and memberships ended, on a group at
 * a random depth of a space that holds a random role on it, against a real server on loopback with
 * SQLite. After every step what each user may do on the group and on the space
 * (`GET /api/permissions`), the group's members and its assignments equal a model's that never
 * asks the server (DESIGN.md "Identity and access": for each subject the closest assignment wins,
 * a user's and their groups' add up, a user's own Denied blocks what their groups inherit from
 * above it), and each result says exactly what happened: `added` when a membership or a role was
 * given, `already_member` when nothing changed, `self` for the caller's own address that changed
 * nothing. An invite never lowers what someone may do on the group ([ACC42]: a role asked below
 * the one they inherit from the space is not written over it); anyone without ManageAccess on the
 * group is refused `forbidden`, and a Denied invitee `conflict` ([ACC43]), each with nothing
 * written. Deterministic per seed (`WEFT_FC_SEED`; fast-check prints the seed and the failing case).
 */
const SEED = process.env.WEFT_FC_SEED ? Number(process.env.WEFT_FC_SEED) : 20_261_207
const RUNS = Number(process.env.WEFT_GROUP_INVITE_RUNS ?? 30)
const USERS = 4

type Direct = { role: Role; denied: boolean }
type Target = number | 'new'
type Step =
  | { kind: 'invite'; by: number; targets: Target[]; role: Role | null; as: 'email' | 'list' | 'paste' }
  | { kind: 'set'; at: 'space' | 'group'; target: number; role: Role; denied: boolean }
  | { kind: 'remove'; at: 'space' | 'group'; target: number }
  | { kind: 'leave'; target: number }

const role = fc.constantFrom<Role>(...Role.members)
const other = fc.integer({ min: 1, max: USERS - 1 })
const target = fc.oneof({ weight: 5, arbitrary: fc.integer({ min: 0, max: USERS - 1 }) }, { weight: 1, arbitrary: fc.constant('new' as const) })
const at = fc.constantFrom('space' as const, 'group' as const)
const step: fc.Arbitrary<Step> = fc.oneof(
  {
    weight: 5,
    arbitrary: fc.record({
      kind: fc.constant('invite' as const),
      by: fc.oneof({ weight: 3, arbitrary: fc.constant(0) }, { weight: 2, arbitrary: other }),
      targets: fc.array(target, { minLength: 1, maxLength: 3 }),
      role: fc.option(role, { nil: null }),
      as: fc.constantFrom('email' as const, 'list' as const, 'paste' as const),
    }),
  },
  { weight: 3, arbitrary: fc.record({ kind: fc.constant('set' as const), at, target: other, role, denied: fc.boolean() }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('remove' as const), at, target: other }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('leave' as const), target: fc.integer({ min: 0, max: USERS - 1 }) }) },
)
const scenario = fc.record({ groupRole: fc.option(role, { nil: null }), nested: fc.boolean(), steps: fc.array(step, { minLength: 6, maxLength: 18 }) })

const higher = (a: Role, b: Role): Role => (Role.number[a] >= Role.number[b] ? a : b)

const env = serverWithUsers(USERS)
let caseNo = 0
const seen = { added: 0, addedRole: 0, kept: 0, already_member: 0, self: 0, invited: 0, forbidden: 0, conflict: 0 }

type Scenario = { groupRole: Role | null; nested: boolean; steps: Step[] }

/** One case: a fresh space and group, the steps, and after each the server against the model. */
async function runCase({ groupRole, nested, steps }: Scenario): Promise<void> {
  const { ts, users } = env
  caseNo++
  const owner = users[0]!
  const space = await createSpace(ts.url, owner.token, `GInv${caseNo}x${SEED % 1000}`)
  if (nested) await createDocument(ts.url, owner.token, `${space}/Dept`)
  const group = await createGroup(ts.url, owner.token, nested ? `${space}/Dept/Team` : `${space}/Team`)
  if (groupRole) await grantRole(ts.url, owner.token, space, group, groupRole)
  // The model: each user's own assignments on the space and on the group, the group's members.
  const onSpace = new Map<number, Direct>([[0, { role: 'Admin', denied: false }]])
  const onGroup = new Map<number, Direct>()
  const members = new Set<number>()
  const own = (i: number, scope: 'space' | 'group'): Direct | undefined => (scope === 'group' ? (onGroup.get(i) ?? onSpace.get(i)) : onSpace.get(i))
  const perms = (i: number, scope: 'space' | 'group'): Set<string> => {
    const out = new Set<string>()
    const d = own(i, scope)
    if (d && !d.denied) for (const p of ROLE_PERMISSIONS[d.role]) out.add(p)
    // [ACC3] The user's own Denied on the group is a barrier to what the group inherits from the space.
    const barrier = scope === 'group' && onGroup.get(i)?.denied === true
    if (members.has(i) && groupRole && !barrier) for (const p of ROLE_PERMISSIONS[groupRole]) out.add(p)
    return out
  }
  const assignment = (scope: 'space' | 'group', i: number) => `${scope === 'space' ? space : group}/_Access/${users[i]!.userId}_Access`
  const footprint = async (emails: string[]): Promise<string> => {
    const rows = (await Promise.all([group, `${group}/_Access`, `${space}/_Access`].map((parent) => ts.server.nodes.query(SYSTEM, { parent: parent as NodePath, limit: 100 })))).flat()
    const subs = await Promise.all(emails.map((e) => ts.server.nodes.get(SYSTEM, `Admin/EventSubscription/${groupInviteSubscriptionId(e, group)}` as NodePath)))
    return JSON.stringify([rows.map((n) => [n.path, n.version]).sort(), subs.map((n) => n && n.version)])
  }

  for (const [n, s] of steps.entries()) {
    const where = `case ${caseNo} (${group}, group role ${groupRole}) step ${n} ${JSON.stringify(s)}`
    if (s.kind === 'invite') {
      const by = users[s.by]!
      const emails = s.targets.map((t) => (t === 'new' ? uniqueEmail('gprop') : users[t]!.email))
      // A pasted block repeats an address in other case: it is one invite.
      const body = s.as === 'email' ? { email: emails[0], role: s.role } : s.as === 'list' ? { emails, role: s.role } : { emails: `${emails.join(', ')};\n${emails[0]!.toUpperCase()}`, role: s.role }
      const sent = s.as === 'email' ? emails.slice(0, 1) : emails
      const targets = s.as === 'email' ? s.targets.slice(0, 1) : s.targets
      const before = await footprint(sent)
      const res = await api(ts.url, by.token).post<{ results: Record<string, unknown>[] }>(`/api/groups/${group}/invites`, body)
      const refused = async (status: number, code: string) => {
        expect([res.status, errorCode(res)], where).toEqual([status, code])
        expect(await footprint(sent), `${where}: nothing written`).toBe(before)
      }
      const unique = [...new Map(sent.map((e, k) => [e.toLowerCase(), targets[k]!])).entries()]
      if (!perms(s.by, 'group').has('ManageAccess')) {
        await refused(403, 'forbidden')
        seen.forbidden++
      } else if (s.role && unique.some(([, t]) => t !== 'new' && onGroup.get(t)?.denied)) {
        // [ACC43] Refused before anything is written, whichever address it is.
        await refused(409, 'conflict')
        seen.conflict++
      } else {
        const want: Record<string, unknown>[] = []
        for (const [email, t] of unique) {
          if (t === 'new') {
            want.push({ email, status: 'Invited', subscriptionId: groupInviteSubscriptionId(email, group) })
            seen.invited++
            continue
          }
          const joined = !members.has(t)
          members.add(t)
          let granted = false
          if (s.role) {
            // [ACC42] What they hold on the group: their assignment there, else the one they inherit from the space.
            const direct = onGroup.get(t)
            const inherited = onSpace.get(t)
            const held = direct ? direct.role : inherited && !inherited.denied ? inherited.role : null
            const next = held ? higher(held, s.role) : s.role
            if (next !== held) {
              onGroup.set(t, { role: next, denied: false })
              granted = true
              seen.addedRole++
            } else if (!direct) seen.kept++
          }
          const change = joined || granted ? 'added' : t === s.by ? 'self' : 'already_member'
          seen[change]++
          want.push({ email, status: 'Granted', userId: users[t]!.userId, change })
        }
        expect([res.status, res.body.results], where).toEqual([200, want])
      }
    } else if (s.kind === 'set') {
      expect((await api(ts.url, owner.token).putNode(assignment(s.at, s.target), 'AccessAssignment', { Subject: users[s.target]!.userId, Role: s.role, Denied: s.denied })).status, where).toBeLessThan(300)
      ;(s.at === 'space' ? onSpace : onGroup).set(s.target, { role: s.role, denied: s.denied })
    } else if (s.kind === 'remove') {
      const map = s.at === 'space' ? onSpace : onGroup
      expect((await api(ts.url, owner.token).deleteNode(assignment(s.at, s.target))).status, where).toBe(map.has(s.target) ? 204 : 404)
      map.delete(s.target)
    } else {
      expect((await api(ts.url, owner.token).deleteNode(`${group}/${users[s.target]!.userId}_Membership`)).status, where).toBe(members.has(s.target) ? 204 : 404)
      members.delete(s.target)
    }

    // What the server enforces and reports equals the model's, for everyone, on the group and the space.
    for (let i = 0; i < USERS; i++) {
      for (const scope of ['group', 'space'] as const) {
        const p = await api(ts.url, users[i]!.token).get<{ permissions: string[] }>(`/api/permissions/${scope === 'group' ? group : space}`)
        const want = [...perms(i, scope)].sort()
        if (want.includes('Read')) expect([p.status, [...p.body.permissions].sort()], `${where}: user ${i} on the ${scope}`).toEqual([200, want])
        else expect(p.status, `${where}: user ${i} on the ${scope}`).toBe(403)
      }
    }
    const rows = await ts.server.nodes.query(SYSTEM, { parent: `${group}/_Access` as NodePath, limit: 100 })
    expect(rows.map((r) => [r.content.Subject, r.content.Role, r.content.Denied === true]).sort(), `${where}: group assignments`).toEqual([...onGroup.entries()].map(([i, d]) => [users[i]!.userId, d.role, d.denied]).sort())
    const memberRows = await ts.server.nodes.query(SYSTEM, { parent: group as NodePath, nodeType: 'Membership', limit: 100 })
    expect(memberRows.map((r) => r.path).sort(), `${where}: members`).toEqual([...members].map((i) => `${group}/${users[i]!.userId}_Membership`).sort())
  }
}

it('[ACC41] a group invite says exactly what it did, never lowers a role, and is refused with nothing written (seeded property)', async () => {
  await fc.assert(fc.asyncProperty(scenario, runCase), { seed: SEED, numRuns: RUNS, endOnFailure: true })
  console.log(`[ACC41] seed ${SEED}: ${JSON.stringify(seen)}`)
  // The seed reached every answer.
  for (const [k, v] of Object.entries(seen)) expect(v, k).toBeGreaterThan(0)
}, 240_000)

// The seed's first failing cases, kept as they were found (fixed input, no generator).
it('[ACC42] an Admin of the space inviting themselves to a group inside it with a lower role keeps Admin there (seed 20261207, case 1, step 2: the owner with a Denied user)', async () => {
  await runCase({ groupRole: null, nested: true, steps: [{ kind: 'invite', by: 0, targets: [0], role: 'Viewer', as: 'email' }, { kind: 'invite', by: 0, targets: [1], role: 'Editor', as: 'list' }] })
})

it('[ACC43] a group invite with a Denied address after another is refused with nothing written, the first address included (seed 20261207, case 1)', async () => {
  await runCase({ groupRole: 'Admin', nested: true, steps: [{ kind: 'set', at: 'group', target: 3, role: 'Editor', denied: true }, { kind: 'invite', by: 0, targets: [1, 3], role: 'Editor', as: 'list' }, { kind: 'invite', by: 0, targets: [1], role: null, as: 'list' }] })
})
