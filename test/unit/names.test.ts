import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { isValidSegment } from '../../shared/path.js'
import { segmentForName } from '../../web/components/names.js'

describe('[WEB10] a name in any language gets a path segment', () => {
  it('[WEB10] readable where it can be, a short id where it cannot', () => {
    expect(segmentForName('Über uns')).toBe('Uber-uns')
    expect(segmentForName('Café ☕ notes?')).toBe('Cafe-notes')
    expect(segmentForName('Straße')).toBe('Strasse')
    expect(segmentForName('Week 1')).toBe('Week-1')
    expect(segmentForName('Week?1')).toBe('Week-1')
    for (const name of ['日本語のメモ', '한국어 메모', '🚀', '_', '..', '   ']) expect(segmentForName(name)).toMatch(/^n-[0-9a-z]{6}$/)
    expect(segmentForName('日本語のメモ')).not.toBe(segmentForName('한국어 메모'))
  })

  it('[WEB10] property: any Unicode name gives a valid segment, never reserved (_), the same for the same name', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'grapheme', maxLength: 80 }), (name) => {
        const s = segmentForName(name)
        expect(isValidSegment(s)).toBe(true)
        expect(s.startsWith('_')).toBe(false)
        expect(s.length).toBeLessThanOrEqual(60)
        expect(segmentForName(name)).toBe(s)
      }),
      { seed: 1516, numRuns: 500 },
    )
  })
})
