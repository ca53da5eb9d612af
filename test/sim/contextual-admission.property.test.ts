import { afterEach, describe, expect, it } from 'vitest'
import { SYSTEM, type NodePath } from '../../shared/index.js'
import { Harness, USER, withHarness } from './contextual-harness.js'
import { MY_GRANT, OTHER, admissionRounds } from './contextual-admission.js'
import { forEachSeed, seeds } from './rng.js'

let h: Harness | null = null
afterEach(async () => {
  await h?.close()
  h = null
})

describe('[CTX25] a reaction admitted under the authority it was offered under (seeded)', () => {
  it('commits exactly when nothing touching the caller landed between its checks and its commit (SQLite)', { timeout: 300_000 }, async () => {
    await forEachSeed('contextual admission', seeds(8, 4200), (seed) => withHarness(() => Harness.sqlite(), (h) => admissionRounds(h, seed)))
  })

  it('the capability revision is a digest of the caller\'s grants: the same on every instance, changed only by what touches them', async () => {
    h = await Harness.sqlite()
    await h.nodes.put(SYSTEM, 'P' as NodePath, { nodeType: 'Space', content: {} })
    await h.nodes.put(SYSTEM, MY_GRANT, { nodeType: 'AccessAssignment', content: { Subject: USER, Role: 'Editor' } })
    const first = h.access.capabilityRevision(USER)
    await h.nodes.put(SYSTEM, 'P/_Access/u2_Access' as NodePath, { nodeType: 'AccessAssignment', content: { Subject: OTHER, Role: 'Admin' } })
    expect(h.access.capabilityRevision(USER), 'a grant to someone else').toBe(first)
    await h.nodes.put(SYSTEM, 'P/team' as NodePath, { nodeType: 'Group', content: {} })
    await h.nodes.put(SYSTEM, `P/team/${USER}_Membership` as NodePath, { nodeType: 'Membership', content: {} })
    const inGroup = h.access.capabilityRevision(USER)
    expect(inGroup, 'joining a group').not.toBe(first)
    await h.nodes.put(SYSTEM, 'P/_Access/P.team_Access' as NodePath, { nodeType: 'AccessAssignment', content: { Subject: 'P/team', Role: 'Viewer' } })
    expect(h.access.capabilityRevision(USER), "a grant to one's group").not.toBe(inGroup)
    const withGroupGrant = h.access.capabilityRevision(USER)
    // Boot again over the same storage: the revision is derived from the nodes, not from a counter.
    await h.crash()
    expect(h.access.capabilityRevision(USER)).toBe(withGroupGrant)
    expect(h.access.capabilityRevision(OTHER)).not.toBe(withGroupGrant)
  })
})

