import { describe, expect, it } from 'vitest'
import type { JsonObject, MeshNode, NodePath } from '../../shared/index.js'
import { classifySubscription, isResting, triggerSignature } from '../../sync-server/engines/subscriptions/model.js'
import { ContinuationRegistry } from '../../sync-server/engines/subscriptions/continuation-registry.js'
import { splitEmails } from '../../sync-server/engines/subscriptions/invites.js'
import { toSubscriptionContent } from '../../sync-server/engines/subscriptions/legacy-migration.js'
import { requestersOf } from '../../sync-server/engines/subscriptions/requester.js'

function node(id: string, content: JsonObject, path = `Admin/EventSubscription/${id}`): MeshNode {
  const at = '2026-01-01T00:00:00.000Z'
  return { path: path as NodePath, nodeType: 'EventSubscription', name: id, content, createdBy: 'system', createdAt: at, updatedAt: at, version: 1, state: 'Active' }
}

describe('classifySubscription', () => {
  it('reads a NodeChange invite; TriggerKind defaults to Created', () => {
    const c = classifySubscription(node('g', { TriggerType: 'NodeChange', TriggerNodeType: 'User', MatchField: 'email', MatchValue: 'a@b.c', ContinuationType: 'GrantSpaceAccess', Status: 'Pending' }))
    expect(c).toMatchObject({ state: 'pending', entry: { id: 'g', trigger: { type: 'NodeChange', nodeType: 'User', kind: 'Created', field: 'email', value: 'a@b.c' } } })
  })
  it('accepts enum numbers and a missing Status as Pending', () => {
    const c = classifySubscription(node('t', { TriggerType: 1, FireAt: '2030-01-01T00:00:00Z', ContinuationType: 0 }))
    expect(c).toMatchObject({ state: 'pending', entry: { trigger: { type: 'Timer', fireAt: Date.parse('2030-01-01T00:00:00Z') } } })
  })
  it('terminal statuses are not routed', () => {
    for (const Status of ['Fired', 'Failed', 'Cancelled']) {
      expect(classifySubscription(node('x', { TriggerType: 'Timer', FireAt: '2030-01-01', ContinuationType: 'GrantSpaceAccess', Status }))).toEqual({ state: 'terminal' })
    }
  })
  it('an unknown trigger or status is invalid, with the value named', () => {
    const a = classifySubscription(node('x', { TriggerType: 'Lunar', ContinuationType: 'GrantSpaceAccess', Status: 'Pending' }))
    expect(a.state === 'invalid' && a.reason).toContain('EventTriggerType "Lunar"')
    const b = classifySubscription(node('x', { TriggerType: 'Timer', ContinuationType: 'GrantSpaceAccess', Status: 'Sleeping' }))
    expect(b.state === 'invalid' && b.reason).toContain('EventSubscriptionStatus "Sleeping"')
  })
  it('names missing trigger fields', () => {
    const c = classifySubscription(node('x', { TriggerType: 'NodeStatus', ContinuationType: 'PostThreadMessage', RestingValues: ['Idle'] }))
    expect(c.state === 'invalid' && c.reason).toContain('WatchPath')
    const t = classifySubscription(node('x', { TriggerType: 'Timer', FireAt: 'soon', ContinuationType: 'GrantSpaceAccess' }))
    expect(t.state === 'invalid' && t.reason).toContain('FireAt')
  })
  it('NodeStatus: status field defaults to Status; ObservedActiveAt carries RequireActiveFirst across restarts', () => {
    const c = classifySubscription(node('s', { TriggerType: 'NodeStatus', WatchPath: 'a/b', RestingValues: ['Idle'], RequireActiveFirst: true, ObservedActiveAt: '2026-01-01T00:00:00Z', ContinuationType: 'PostThreadMessage' }))
    expect(c).toMatchObject({ state: 'pending', entry: { trigger: { statusField: 'Status', requireActiveFirst: true, observedActive: true } } })
  })
  it('[THR23] NodeStatus HoldField/HoldValues: a content field name with values; absent = no hold (old subscriptions unchanged)', () => {
    const base = { TriggerType: 'NodeStatus', WatchPath: 'a/b', RestingValues: ['Idle'], ContinuationType: 'PostThreadMessage' }
    expect(classifySubscription(node('s', base))).toMatchObject({ state: 'pending', entry: { trigger: { holdField: null, holdValues: [] } } })
    const held = classifySubscription(node('s', { ...base, HoldField: 'Disposition', HoldValues: ['AwaitingInput'] }))
    expect(held).toMatchObject({ state: 'pending', entry: { trigger: { holdField: 'Disposition', holdValues: ['AwaitingInput'] } } })
    const bad = classifySubscription(node('s', { ...base, HoldField: 'a.b', HoldValues: ['x'] }))
    expect(bad.state === 'invalid' && bad.reason).toContain('HoldField "a.b"')
    const none = classifySubscription(node('s', { ...base, HoldField: 'Disposition' }))
    expect(none.state === 'invalid' && none.reason).toContain('needs HoldValues')
    const plain = classifySubscription(node('s', base))
    if (plain.state !== 'pending' || held.state !== 'pending') throw new Error('expected pending')
    expect(triggerSignature(plain.entry.trigger)).not.toBe(triggerSignature(held.entry.trigger))
  })
  it('the trigger signature ignores non-trigger fields', () => {
    const a = classifySubscription(node('s', { TriggerType: 'Timer', FireAt: '2030-01-01', ContinuationType: 'GrantSpaceAccess' }))
    const b = classifySubscription(node('s', { TriggerType: 'Timer', FireAt: '2030-01-01', ContinuationType: 'AddToGroup', Role: 'Admin' }))
    if (a.state !== 'pending' || b.state !== 'pending') throw new Error('expected pending')
    expect(triggerSignature(a.entry.trigger)).toBe(triggerSignature(b.entry.trigger))
  })
})

describe('helpers', () => {
  it('resting values compare case-insensitively', () => {
    expect(isResting('idle', ['Idle', 'Done'])).toBe(true)
    expect(isResting('Executing', ['Idle', 'Done'])).toBe(false)
    expect(isResting(undefined, ['Idle'])).toBe(false)
  })
  it('bulk paste splits on commas, semicolons and white space, without duplicates', () => {
    expect(splitEmails('a@x.io, b@x.io;c@x.io\nA@x.io  d@x.io')).toEqual(['a@x.io', 'b@x.io', 'c@x.io', 'd@x.io'])
  })
  it('legacy ScheduledAction content maps to an EventSubscription with the same fields, enums by name', () => {
    const legacy = node('old', { TriggerNodeType: 'User', TriggerKind: 0, MatchField: 'email', MatchValue: 'a@b.c', ContinuationType: 0, TargetPath: 'S', Role: 'Editor' }, 'Admin/ScheduledAction/old')
    expect(toSubscriptionContent('old', legacy)).toMatchObject({
      Id: 'old', TriggerType: 'NodeChange', TriggerKind: 'Created', ContinuationType: 'GrantSpaceAccess', Status: 'Pending', TargetPath: 'S', MigratedFrom: 'Admin/ScheduledAction/old',
    })
  })
})

describe('[SUB6] continuation registry: exactly one claimant per type', () => {
  it('a second claim is an error naming both claimants', () => {
    const r = new ContinuationRegistry()
    r.claim('PublishSocialPost', 'social', async () => {})
    expect(() => r.claim('PublishSocialPost', 'other-module', async () => {})).toThrow(/PublishSocialPost.*social.*other-module/)
    expect(r.ownerOf('PublishSocialPost')).toBe('social')
    expect(r.resolve('Teleport')).toBeUndefined()
  })
})

describe('MatchField must be a queryable field name', () => {
  it('is invalid, named, otherwise', () => {
    const c = classifySubscription(node('x', { TriggerType: 'NodeChange', TriggerNodeType: 'User', MatchField: 'e-mail', MatchValue: 'a@b.c', ContinuationType: 'GrantSpaceAccess' }))
    expect(c.state === 'invalid' && c.reason).toContain('"e-mail"')
  })
})

describe('[SUB13] requestersOf', () => {
  const made = (createdBy: string, content: JsonObject): MeshNode => ({ ...node('r', content), createdBy })
  it('the system\'s own subscription (made by system, naming nobody) has no requester', () => {
    expect(requestersOf(made('system', {}))).toEqual([])
    expect(requestersOf(made('system', { CreatedBy: null }))).toEqual([])
  })
  it('CreatedBy names a user, "system" included; the system never comes from content', () => {
    expect(requestersOf(made('system', { CreatedBy: 'ann' }))).toEqual(['ann'])
    expect(requestersOf(made('system', { CreatedBy: 'system' }))).toEqual(['system'])
  })
  it('a node a person made acts for that person too, whatever its content says (or leaves out)', () => {
    expect(requestersOf(made('mallory', {}))).toEqual(['mallory'])
    expect(requestersOf(made('mallory', { CreatedBy: 'ann' }))).toEqual(['ann', 'mallory'])
    expect(requestersOf(made('ann', { CreatedBy: 'ann' }))).toEqual(['ann'])
  })
})
