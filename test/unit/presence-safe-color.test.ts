import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { isSafeColor } from '../../shared/presence.js'

describe('[SYNC5] isSafeColor', () => {
  it('takes the colours editors publish', () => {
    for (const c of ['#30bced', '#30bced33', '#fff', 'teal', 'rebeccapurple', 'rgb(1, 2, 3)', 'rgba(1,2,3,0.5)', 'hsl(120 50% 50% / 0.3)']) expect(isSafeColor(c)).toBe(true)
  })

  it('refuses what would add CSS or leave the attribute', () => {
    for (const c of ['red; background: url(x)', 'url(https://e.example/p)', 'var(--x)', 'expression(alert(1))', 'red" onclick="x', "red'", 'rgb(1,2,3); top:0', 'calc(1px)', '', 42, null, { color: 'red' }]) {
      expect(isSafeColor(c)).toBe(false)
    }
  })

  it('whatever it takes is one colour value: no declaration, quote, bracket or function other than rgb/hsl (seeded)', () => {
    const chars = fc.constantFrom(...'#abcdefABCDEF0123456789rgbhslau(),.%/ ;:"\'<>{}\\-_'.split(''))
    fc.assert(
      fc.property(fc.oneof(fc.string(), fc.string({ unit: chars, maxLength: 40 }), fc.constantFrom('rgb(', 'hsl(', 'url(', '#').chain((p) => fc.string({ unit: chars, maxLength: 30 }).map((t) => p + t))), (s) => {
        if (!isSafeColor(s)) return
        expect(s).not.toMatch(/[;:"'<>{}\\]/)
        const fn = /^([a-z]+)\(/.exec(s)?.[1]
        if (fn) expect(['rgb', 'rgba', 'hsl', 'hsla']).toContain(fn)
        expect((s.match(/\(/g) ?? []).length).toBeLessThanOrEqual(1)
      }),
      { seed: 17, numRuns: 2000 },
    )
  })
})
