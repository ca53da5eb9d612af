import { describe, expect, it, vi } from 'vitest'
import { MatchIndex } from '../../sync-server/engines/subscriptions/match-index.js'

describe('[SUB5] NodeChange matching is indexed by (type, kind, field, value)', () => {
  it('matches field names and values case-insensitively', () => {
    const index = new MatchIndex()
    index.add('a', { nodeType: 'User', kind: 'Created', field: 'email', value: 'Ann@Example.com' })
    expect(index.candidates('User', 'Created', { Email: 'ann@example.COM' })).toEqual(['a'])
    expect(index.candidates('User', 'Created', { Email: 'bob@example.com' })).toEqual([])
  })
  it('node type is exact and kind must match', () => {
    const index = new MatchIndex()
    index.add('a', { nodeType: 'User', kind: 'Created', field: 'Email', value: 'a@x.io' })
    expect(index.candidates('user', 'Created', { Email: 'a@x.io' })).toEqual([])
    expect(index.candidates('User', 'Updated', { Email: 'a@x.io' })).toEqual([])
  })
  it('no MatchField means any node of the type, including a deletion', () => {
    const index = new MatchIndex()
    index.add('any', { nodeType: 'Doc', kind: 'Deleted', field: null, value: null })
    index.add('f', { nodeType: 'Doc', kind: 'Deleted', field: 'Title', value: 'x' })
    expect(index.candidates('Doc', 'Deleted', null)).toEqual(['any'])
  })
  it('numbers and booleans match by their string form; objects never match', () => {
    const index = new MatchIndex()
    index.add('n', { nodeType: 'T', kind: 'Updated', field: 'Count', value: '3' })
    index.add('b', { nodeType: 'T', kind: 'Updated', field: 'Done', value: 'TRUE' })
    index.add('o', { nodeType: 'T', kind: 'Updated', field: 'Obj', value: '[object Object]' })
    expect(index.candidates('T', 'Updated', { Count: 3, Done: true, Obj: { a: 1 } }).sort()).toEqual(['b', 'n'])
  })
  it('remove and re-add under a new key moves the entry', () => {
    const index = new MatchIndex()
    index.add('a', { nodeType: 'User', kind: 'Created', field: 'Email', value: 'one@x.io' })
    index.add('a', { nodeType: 'User', kind: 'Created', field: 'Email', value: 'two@x.io' })
    expect(index.size).toBe(1)
    expect(index.candidates('User', 'Created', { Email: 'one@x.io' })).toEqual([])
    expect(index.candidates('User', 'Created', { Email: 'two@x.io' })).toEqual(['a'])
    expect(index.remove('a')).toBe(true)
    expect(index.size).toBe(0)
    expect(index.nodeTypesFor('Created')).toEqual([])
  })
  it('a lookup does the same work with 100,000 entries as with 10 (no scan)', () => {
    // Work counted, not timed (a timed test fails on a slow machine): every Map read and every
    // step of a Map or Set iterator that one lookup makes.
    const mapIterator = Object.getPrototypeOf(new Map().keys()) as { next: () => unknown }
    const setIterator = Object.getPrototypeOf(new Set().values()) as { next: () => unknown }
    const workOf = (entries: number): number => {
      const index = new MatchIndex()
      for (let i = 0; i < entries; i++) index.add(`s${i}`, { nodeType: 'User', kind: 'Created', field: 'Email', value: `u${i}@x.io` })
      const spies = [
        vi.spyOn(Map.prototype, 'get'),
        vi.spyOn(Map.prototype, 'has'),
        vi.spyOn(Map.prototype, 'forEach'),
        vi.spyOn(mapIterator, 'next'),
        vi.spyOn(setIterator, 'next'),
      ]
      try {
        expect(index.candidates('User', 'Created', { Email: `u${entries - 1}@x.io`, FullName: 'x', PinnedPaths: [] })).toEqual([`s${entries - 1}`])
        return spies.reduce((n, s) => n + s.mock.calls.length, 0)
      } finally {
        for (const s of spies) s.mockRestore()
      }
    }
    const small = workOf(10)
    expect(small).toBeGreaterThan(0)
    expect(workOf(100_000)).toBe(small)
  })
})

describe('several subscriptions on one key', () => {
  it('all match, and removing one keeps the others', () => {
    const index = new MatchIndex()
    index.add('space-a', { nodeType: 'User', kind: 'Created', field: 'Email', value: 'ann@x.io' })
    index.add('space-b', { nodeType: 'User', kind: 'Created', field: 'email', value: 'ANN@x.io' })
    index.add('group-c', { nodeType: 'User', kind: 'Created', field: 'Email', value: 'ann@x.io' })
    expect(index.candidates('User', 'Created', { Email: 'ann@x.io' }).sort()).toEqual(['group-c', 'space-a', 'space-b'])
    index.remove('space-b')
    index.remove('group-c')
    expect(index.candidates('User', 'Created', { Email: 'ann@x.io' })).toEqual(['space-a'])
    index.remove('space-a')
    expect(index.candidates('User', 'Created', { Email: 'ann@x.io' })).toEqual([])
  })
})
