import { describe, expect, it } from 'vitest'
import {
  EventContinuationType,
  EventSubscriptionContent,
  EventSubscriptionStatus,
  EventTriggerType,
  MeshChangeKind,
  groupInviteSubscriptionId,
  legacyInviteSubscriptionIds,
  readChangeKind,
  readContinuationType,
  readSubscriptionStatus,
  readTriggerType,
  slug,
  spaceInviteSubscriptionId,
} from '../../shared/index.js'

describe('[SUB1] persisted enum numbers never change (new members are appended)', () => {
  it('EventTriggerType', () => {
    expect(EventTriggerType.number).toEqual({ NodeChange: 0, Timer: 1, NodeStatus: 2 })
  })
  it('EventContinuationType', () => {
    expect(EventContinuationType.number).toEqual({
      GrantSpaceAccess: 0,
      PostThreadMessage: 1,
      AddToGroup: 2,
      DeliverToNode: 3,
      PublishSocialPost: 4,
    })
  })
  it('EventSubscriptionStatus', () => {
    expect(EventSubscriptionStatus.number).toEqual({ Pending: 0, Fired: 1, Failed: 2, Cancelled: 3 })
  })
  it('MeshChangeKind', () => {
    expect(MeshChangeKind.number).toEqual({ Created: 0, Updated: 1, Deleted: 2 })
  })
})

describe('[SUB2] reading persisted enum values', () => {
  it('reads names, stable numbers and their decimal strings', () => {
    expect(readContinuationType('DeliverToNode')).toEqual({ known: true, value: 'DeliverToNode' })
    expect(readContinuationType(3)).toEqual({ known: true, value: 'DeliverToNode' })
    expect(readContinuationType('4')).toEqual({ known: true, value: 'PublishSocialPost' })
    expect(readTriggerType(2)).toEqual({ known: true, value: 'NodeStatus' })
    expect(readSubscriptionStatus('Cancelled')).toEqual({ known: true, value: 'Cancelled' })
    expect(readChangeKind(1)).toEqual({ known: true, value: 'Updated' })
  })
  it('names an unknown value, by name or by number', () => {
    expect(readContinuationType('Teleport')).toEqual({ known: false, described: 'EventContinuationType "Teleport"' })
    expect(readContinuationType(99)).toEqual({ known: false, described: 'EventContinuationType 99' })
    expect(readTriggerType('Lunar')).toEqual({ known: false, described: 'EventTriggerType "Lunar"' })
    expect(readSubscriptionStatus('Sleeping').known).toBe(false)
    // Names are case-sensitive as persisted: a different spelling is a different (unknown) value.
    expect(readContinuationType('deliverToNode').known).toBe(false)
  })
  it('an unknown value survives a schema round trip untouched', () => {
    const content = { Id: 'x', TriggerType: 'Lunar', ContinuationType: 99, Status: 'Pending', Future: { a: 1 } }
    const parsed = EventSubscriptionContent.parse(content)
    expect(JSON.parse(JSON.stringify(parsed))).toEqual(content)
  })
})

describe('[SUB4] [SUB15] deterministic invite ids', () => {
  it('a hash of the address and the exact path: fixed length, whatever the path', () => {
    expect(slug(' Ann.Lee+x@Example.COM ')).toBe('ann_lee_x_example_com')
    expect(spaceInviteSubscriptionId('ann@example.com', 'Acme')).toMatch(/^grant_[0-9a-f]{32}$/)
    expect(groupInviteSubscriptionId('ann@example.com', 'Acme/Team-A')).toMatch(/^addgroup_[0-9a-f]{32}$/)
    expect(spaceInviteSubscriptionId('ann@example.com', 'x'.repeat(1000))).toHaveLength('grant_'.length + 32)
    expect(spaceInviteSubscriptionId('ann@example.com', 'Acme')).toBe(spaceInviteSubscriptionId('ann@example.com', 'Acme'))
  })
  it('a re-invite with the address in another case maps to the same subscription', () => {
    expect(spaceInviteSubscriptionId('ANN@example.com', 'acme')).toBe(spaceInviteSubscriptionId('ann@example.com', 'acme'))
  })
  it('[SUB15] spaces that differ in case, and addresses that differ in punctuation, are different invites', () => {
    expect(spaceInviteSubscriptionId('ann@example.com', 'TeamX')).not.toBe(spaceInviteSubscriptionId('ann@example.com', 'teamX'))
    expect(spaceInviteSubscriptionId('ann.lee@example.com', 'acme')).not.toBe(spaceInviteSubscriptionId('ann_lee@example.com', 'acme'))
    expect(groupInviteSubscriptionId('ann@example.com', 'Acme/Team-A')).not.toBe(groupInviteSubscriptionId('ann@example.com', 'Acme/Team_A'))
  })
  it('the ids of invites made before [SUB15] are still known', () => {
    expect(legacyInviteSubscriptionIds('Ann@Example.com', 'Acme')).toEqual({ space: 'grant_ann_example_com_acme', group: 'addgroup_ann_example_com_acme' })
  })
})
