import { describe, expect, it } from 'vitest'
import {
  EventContinuationType,
  EventSubscriptionContent,
  EventSubscriptionStatus,
  EventTriggerType,
  MeshChangeKind,
  groupInviteSubscriptionId,
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

describe('[SUB4] deterministic invite ids', () => {
  it('slug the email and the space', () => {
    expect(slug(' Ann.Lee+x@Example.COM ')).toBe('ann_lee_x_example_com')
    expect(spaceInviteSubscriptionId('Ann@Example.com', 'Acme')).toBe('grant_ann_example_com_acme')
    expect(groupInviteSubscriptionId('ann@example.com', 'Acme/Team-A')).toBe('addgroup_ann_example_com_acme_team_a')
  })
  it('a re-invite with a different case maps to the same subscription', () => {
    expect(spaceInviteSubscriptionId('ANN@example.com', 'acme')).toBe(spaceInviteSubscriptionId('ann@example.com', 'ACME'))
  })
})
