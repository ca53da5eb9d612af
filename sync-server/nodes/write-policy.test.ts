import { describe, expect, it } from 'vitest'
import { SYSTEM, WeftError, userPrincipal, type MeshNode, type NodePath, type UserId } from '../../shared/index.js'
import { WriteRules, changedFields } from './write-policy.js'

describe('write policy', () => {
  it('one write rule per node type; it runs for users only, and empty additions are none', () => {
    const rules = new WriteRules()
    const calls: string[] = []
    rules.register('Thing', ({ after }) => {
      calls.push(String(after.X))
      if (after.X === 'bad') throw new WeftError('conflict', 'no')
      return after.X === 'add' ? { Added: true } : ({} as Record<string, never>)
    })
    expect(() => rules.register('Thing', () => undefined)).toThrow(/already registered/)
    const alice = userPrincipal('alice' as UserId)
    expect(rules.fields(alice, 'Thing', 'S/x' as NodePath, null, { X: 'add' }, 'http')).toEqual({ Added: true })
    expect(rules.fields(alice, 'Thing', 'S/x' as NodePath, null, { X: 'plain' }, 'http')).toBeUndefined()
    expect(() => rules.fields(alice, 'Thing', 'S/x' as NodePath, null, { X: 'bad' }, 'http')).toThrow(WeftError)
    expect(rules.fields(SYSTEM, 'Thing', 'S/x' as NodePath, null, { X: 'bad' }, 'http')).toBeUndefined()
    expect(rules.fields(alice, 'Other', 'S/x' as NodePath, {} as MeshNode, { X: 'bad' }, 'http')).toBeUndefined()
    expect(calls).toEqual(['add', 'plain', 'bad'])
  })

  it('changedFields: a member set to null differs from an absent one; equal values do not count', () => {
    expect(changedFields({ a: 1, b: { c: 2 } }, { a: 1, b: { c: 2 } })).toEqual([])
    expect(changedFields({ a: 1 }, { a: 1, n: null })).toEqual(['n'])
    expect(changedFields({ a: 1, b: [1] }, { b: [1, 2] }).sort()).toEqual(['a', 'b'])
  })
})
